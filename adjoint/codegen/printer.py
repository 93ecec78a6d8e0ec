"""sympy -> C expressions: values in double precision, indices in int64_t."""
import sympy as sp
from sympy.printing.c import C99CodePrinter

from ..sdfg.nodes import THREADS, index_loads


def _may_be_integer(expr):
    """False where ``expr.is_integer`` cannot be True: a symbol not known to be an
    integer (a connector), or a sum, product or power with such an operand. Tested
    first, as asking sympy runs its assumption machinery for every subexpression
    printed (cavity_flow's reverse module: 0.8 of its 1.9 s of C generation)."""
    if isinstance(expr, sp.Symbol):
        return bool(expr.is_integer)
    if isinstance(expr, (sp.Add, sp.Mul, sp.Pow)):
        return all(_may_be_integer(a) for a in expr.args)
    return True


class CPrinter(C99CodePrinter):
    """Prints tasklet bodies (``index=False``) and index arithmetic (``index=True``).

    ``names`` maps the kernel's integer symbols (sizes, int arguments) to C names;
    other integer symbols are loop variables, real symbols are tasklet connectors.
    """

    def __init__(self, names, index=False, load=None):
        super().__init__({"strict": False})
        self.names, self.index, self.load = names, index, load
        self.late = set()       # connectors whose terms go last in a sum (recurrences)
        self._index_printer = self if index else CPrinter(names, index=True, load=load)

    def _print(self, expr, **kwargs):
        if (not self.index and isinstance(expr, sp.Expr) and not expr.is_Number
                and expr.free_symbols and _may_be_integer(expr) and expr.is_integer):
            return f"((double)({self._index_printer.doprint(expr)}))"
        return super()._print(expr, **kwargs)

    def _print_Add(self, expr, order=None):
        if not self.late:
            return super()._print_Add(expr, order)
        terms = self._as_ordered_terms(expr, order=order)
        early = [a for a in terms if not (a.free_symbols & self.late)]
        late = [a for a in terms if a.free_symbols & self.late]
        if not late or not early:
            return super()._print_Add(expr, order)
        out = self._print(sp.Add(*early, evaluate=False)) if len(early) > 1 else \
            self._print(early[0])
        for a in late:
            printed = self._print(a)
            out += f" - {printed[1:]}" if printed.startswith("-") else f" + {printed}"
        return out

    def _print_Function(self, expr):
        loads = index_loads(expr)
        if loads and loads[0][1] == expr:           # an element of an integer array
            return self.load(loads[0][0], expr.args)
        return super()._print_Function(expr)

    def _print_Symbol(self, expr):
        return c_name(expr, self.names)

    def _print_Pow(self, expr):
        base, exp = expr.args
        if exp.is_Integer and abs(int(exp)) <= 4 and exp != 0:
            b = self.parenthesize(base, 1000)   # atom or parenthesised
            prod = "*".join([b] * abs(int(exp)))
            if self.index:
                return f"({prod})"
            return f"({prod})" if exp > 0 else f"(1.0/({prod}))"
        if exp == sp.Rational(1, 2):
            return f"sqrt({self._print(base)})"
        if exp == -sp.Rational(1, 2):
            return f"(1.0/sqrt({self._print(base)}))"
        return f"pow({self._print(base)}, {self._print(exp)})"

    def _print_Heaviside(self, expr):
        return f"sc_heaviside({self._print(expr.args[0])})"

    def _print_sign(self, expr):
        return f"sc_sign({self._print(expr.args[0])})"

    def _print_floordiv(self, expr):
        a, b = (self._index_printer.doprint(x) for x in expr.args)
        return f"sc_floordiv({a}, {b})"

    def _print_python_mod(self, expr):
        a, b = (self._index_printer.doprint(x) for x in expr.args)
        return f"sc_mod({a}, {b})"

    def _print_trips(self, expr):
        return f"sc_trip({', '.join(self._index_printer.doprint(x) for x in expr.args)})"

    def _print_Min(self, expr):
        return self._minmax(expr, "sc_imin" if self.index else "sc_min")

    def _print_Max(self, expr):
        return self._minmax(expr, "sc_imax" if self.index else "sc_max")

    def _minmax(self, expr, fn):
        args = [self._print(a) for a in expr.args]
        out = args[0]
        for a in args[1:]:
            out = f"{fn}({out}, {a})"
        return out

    def _print_Piecewise(self, expr):
        """One line of nested ``?:`` (sympy's own spreads it over several lines)."""
        if expr.args[-1].cond != sp.true:
            raise ValueError(f"Piecewise without a default branch: {expr}")
        out = self._print(expr.args[-1].expr)
        for value, cond in reversed(expr.args[:-1]):
            out = f"(({self._print(cond)}) ? ({self._print(value)}) : ({out}))"
        return out

    def _print_BooleanTrue(self, expr):
        return "1"

    def _print_BooleanFalse(self, expr):
        return "0"


def c_name(symbol, names):
    """C identifier of a symbol: sizes and int arguments ``n_``, loop variables ``i_``,
    connectors and temporaries ``c_``. Python names are identifiers, so prefixes
    keep them clear of C keywords and of each other."""
    if symbol in names:
        return names[symbol]
    if symbol == THREADS:
        return "omp_get_max_threads()"
    if symbol.is_integer:
        return "i_" + symbol.name
    return "c_" + symbol.name.lstrip("_")
