"""sympy -> C expressions: values in double precision, indices in int64_t."""
import contextlib
import contextvars
import functools
import hashlib
import re

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef
from sympy.functions.elementary.piecewise import ExprCondPair
from sympy.logic.boolalg import BooleanAtom, BooleanFunction
from sympy.printing.c import C99CodePrinter
from sympy.printing.precedence import PRECEDENCE

from ..errors import AdjointError
from ..sdfg import arithmetic as fp
from ..sdfg.nodes import LOAD, THREADS

_VECTOR_MATH = contextvars.ContextVar("vector_math", default=False)


@contextlib.contextmanager
def vector_math(on):
    """Within the block, exp, expm1 and tanh print as the engine's own (``sc_exp``...,
    ``helpers.VECTOR_MATH``, in the preambles too) instead of the C library's: the engine
    option ``vector_math``, which ``pipeline.py`` sets around every stage."""
    token = _VECTOR_MATH.set(bool(on))
    try:
        yield
    finally:
        _VECTOR_MATH.reset(token)


def vectorised():
    """Whether values print with the engine's exp, expm1 and tanh (:func:`vector_math`)."""
    return _VECTOR_MATH.get()


def _may_be_integer(expr):
    """False where ``expr.is_integer`` cannot be True: a symbol not known to be an
    integer (a connector), or a sum, product or power with such an operand. Tested
    first, as asking sympy runs its assumption machinery for every subexpression
    printed (cavity_flow's reverse module: 0.8 of its 1.9 s of C generation). A select
    whose condition reads data or divides is printed as a value: the index printer would
    compare a connector in integer arithmetic or divide as C divides integers."""
    if isinstance(expr, sp.Symbol):
        return bool(expr.is_integer)
    if isinstance(expr, sp.Float):  # a float operand (linspace's 1.0 - 1*0.0, unevaluated,
        return False                # on which sympy's facts can even contradict themselves)
    if isinstance(expr, sp.Pow) and not (expr.exp.is_Integer and expr.exp >= 0):
        return False                # 1/n: Python's true division, never C's integer one
    if isinstance(expr, (sp.Add, sp.Mul, sp.Pow, sp.Piecewise, sp.core.relational.Relational,
                         BooleanFunction, ExprCondPair)):
        return all(_may_be_integer(a) for a in expr.args)     # a select's conditions too
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
        if not _printable(type(expr)):
            self._print_not_supported(expr)
        if (not self.index and isinstance(expr, sp.Expr) and not expr.is_Number
                and not isinstance(expr, fp.IntCast)        # in its dtype: C converts it
                and expr.free_symbols and _may_be_integer(expr) and expr.is_integer):
            return f"((double)({self._index_printer.doprint(expr)}))"
        return super()._print(expr, **kwargs)

    # Values: each node of a tasklet's value is one C operation, its operands in the
    # tree's order (see sdfg/arithmetic.py); C evaluates left to right and may not
    # reassociate, so the parentheses the tree implies are printed.
    def _print_Add(self, expr, order=None):
        if self.index:
            return super()._print_Add(expr, order)
        terms = list(expr.args)
        if self.late:           # a derivative (see c.py: _tasklet): recurrences last
            terms = sorted(terms, key=lambda a: bool(a.free_symbols & self.late))
        out = self.parenthesize(terms[0], PRECEDENCE["Add"], strict=True)
        for term in terms[1:]:
            negated = _negated(term)
            if negated is None:
                out += f" + {self.parenthesize(term, PRECEDENCE['Add'])}"
            else:
                out += f" - {self.parenthesize(negated, PRECEDENCE['Add'])}"
        return out

    def _print_Mul(self, expr):
        if self.index:
            return super()._print_Mul(expr)
        factors = list(expr.args)
        if len(factors) > 1 and factors[0] == -1:
            rest = factors[1] if len(factors) == 2 else sp.Mul(*factors[1:], evaluate=False)
            return "-" + self.parenthesize(rest, PRECEDENCE["Mul"])
        # The left operand needs parentheses only below a product's precedence; a right
        # operand at it too (``a * (b / c)`` is not ``a * b / c``).
        first = factors[0]
        out = (f"1.0/{self.parenthesize(first.base, PRECEDENCE['Mul'])}"
               if _reciprocal(first) else self.parenthesize(first, PRECEDENCE["Mul"], strict=True))
        for factor in factors[1:]:
            if _reciprocal(factor):
                out += f"/{self.parenthesize(factor.base, PRECEDENCE['Mul'])}"
            else:
                out += f"*{self.parenthesize(factor, PRECEDENCE['Mul'])}"
        return out

    def _print_Integer(self, expr):
        return super()._print_Integer(expr) if self.index else f"{int(expr)}.0"

    def _print_Rational(self, expr):
        if self.index:
            return super()._print_Rational(expr)
        return f"({expr.p}.0/{expr.q}.0)"

    def _print_Function(self, expr):
        if isinstance(expr, fp.IntCast):
            return self._int_cast(expr)
        if isinstance(expr, fp._Bits):              # of integers that are not data
            return self._integer(expr, 64)
        name = type(expr).__name__
        if name.startswith(LOAD):                   # an element of an integer array
            return self.load(name[len(LOAD):], expr.args)
        if type(expr) in HELPERS:
            return f"{HELPERS[type(expr)]}({', '.join(self._print(a) for a in expr.args)})"
        return super()._print_Function(expr)

    def _print_exp(self, expr):
        return self._math(expr, "exp")

    def _print_expm1(self, expr):
        return self._math(expr, "expm1")

    def _print_tanh(self, expr):
        return self._math(expr, "tanh")

    def _math(self, expr, name):
        """The C library's function, or the engine's where the option vector_math is on."""
        return f"{'sc_' if vectorised() else ''}{name}({self._print(expr.args[0])})"

    def _print_Symbol(self, expr):
        return c_name(expr, self.names)

    _print_Dummy = _print_Symbol

    def _print_not_supported(self, expr):
        """An error: sympy's fallback prints the expression as text, names and all."""
        what = "function" if isinstance(expr, AppliedUndef) else type(expr).__name__
        raise AdjointError(f"cannot generate C for the {what} {str(expr)[:80]!r}: array sizes "
                           "and indices are integers, symbols, + - * // %, min and max of them; "
                           "values use the functions docs/kernel-language.md lists")

    def _print_Pow(self, expr):
        base, exp = expr.args
        if exp == 1:                # cse's rewrite of 1/y as 1/y**1: y, as one operand
            return self.parenthesize(base, PRECEDENCE["Pow"])
        if exp.is_Float and float(exp) == 2.0:                # a derivative's x**2.0
            exp = sp.Integer(2)
        if exp.is_Integer and abs(int(exp)) <= 4 and exp != 0:
            b = self.parenthesize(base, 1000)   # atom or parenthesised
            prod = "*".join([b] * abs(int(exp)))
            if self.index:
                return f"({prod})"
            return f"({prod})" if exp > 0 else f"(1.0/({prod}))"
        if self.index and not (exp.is_Integer and 0 < exp <= 4):  # R ** K (frontend: K >= 0)
            return f"sc_ipow({self._print(base)}, {self._print(exp)})"
        if exp is sp.S.Half:
            return f"sqrt({self._print(base)})"
        if exp == -sp.S.Half:
            return f"(1.0/sqrt({self._print(base)}))"
        # C's pow, which GCC would turn into sqrt (-0.0 and -inf differ) or 1/x (rounded
        # differently) for these exponents unless called through a function it cannot see into
        fn = "sc_pow" if exp.is_Float and float(exp) in (0.5, -1.0) else "pow"
        return f"{fn}({self._print(base)}, {self._print(exp)})"

    def _print_as_float32(self, expr):
        """NumPy's float32 rounding of a value computed in double (frontend/dtypes.py)."""
        return f"((float)({self._print(expr.args[0])}))"

    def _print_as_float64(self, expr):
        return f"((double)({self._print(expr.args[0])}))"

    # Integers of data (frontend/dtypes.py): each operation inside a cast to its dtype,
    # computed in uint64_t (wrapping modulo 2**64, never C's undefined signed overflow)
    # and truncated to the dtype's width: NumPy's wrap-around.
    def _int_cast(self, expr):
        t = C_TYPES[expr.dtype]
        if isinstance(expr, fp.truncated):                  # a float, as C converts it
            value = self if not self.index else CPrinter(self.names, load=self.load)
            return f"(({t})({value.doprint(expr.args[0])}))"
        bits = 8 * np.dtype(expr.dtype).itemsize
        return f"(({t})({self._integer(expr.args[0], bits)}))"

    def _integer(self, e, bits):
        """``e`` (an operation on integers of one dtype, ``bits`` wide) as C."""
        op = self._int_operand
        if isinstance(e, sp.Add):
            out = f"(uint64_t){op(e.args[0])}"
            for term in e.args[1:]:
                negated = _negated(term)
                out += f" - (uint64_t){op(negated)}" if negated is not None else \
                    f" + (uint64_t){op(term)}"
            return out
        if isinstance(e, sp.Mul):
            if len(e.args) == 2 and e.args[0] == -1:
                return f"(uint64_t)0 - (uint64_t){op(e.args[1])}"
            return " * ".join(f"(uint64_t){op(a)}" for a in e.args)
        if isinstance(e, sp.Pow) and e.exp.is_Integer and 0 < int(e.exp) <= 4:
            return " * ".join([f"(uint64_t){op(e.base)}"] * int(e.exp))
        if isinstance(e, fp._Bits):
            args = [op(a) for a in e.args]
            if isinstance(e, fp.bit_not):
                return f"(~{args[0]})"
            if isinstance(e, fp.shift_left):
                return f"sc_shl({args[0]}, {args[1]}, {bits})"
            if isinstance(e, fp.shift_right):
                return f"sc_shr({args[0]}, {args[1]}, {bits})"
            return f"({args[0]} {e.c_op} {args[1]})"
        if isinstance(e, fp._Choice):
            return f"{'sc_imax' if e.largest else 'sc_imin'}({op(e.args[0])}, {op(e.args[1])})"
        if isinstance(e, (fp.py_floordiv, fp.py_mod)):
            fn = "sc_ipyfloordiv" if isinstance(e, fp.py_floordiv) else "sc_ipymod"
            return f"{fn}({op(e.args[0])}, {op(e.args[1])})"
        if isinstance(e, sp.Abs):
            a = op(e.args[0])
            return f"({a} < 0 ? (uint64_t)0 - (uint64_t){a} : (uint64_t){a})"
        if isinstance(e, sp.Piecewise):
            out = op(e.args[-1].expr)
            for value, cond in reversed(e.args[:-1]):
                out = f"(({self._print(cond)}) ? {op(value)} : {out})"
            return out
        return op(e)

    def _int_operand(self, e):
        """An operand of an integer operation, parenthesised: a connector (declared in its
        container's dtype), a cast, an integer constant or an index expression."""
        if isinstance(e, fp.IntCast):
            return self._int_cast(e)
        if isinstance(e, sp.Symbol) and not e.is_integer:
            return c_name(e, self.names)
        return f"({self._index_printer.doprint(e)})"

    def _print__FloatClass(self, expr):         # isnan(x), isinf(x), isfinite(x)
        return f"{type(expr).__name__[3:]}({self._print(expr.args[0])})"

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


# C types of the containers' dtypes (and of the integer casts)
C_TYPES = {"float64": "double", "float32": "float", "int64": "int64_t", "int32": "int32_t",
           "int16": "int16_t", "int8": "int8_t", "uint64": "uint64_t", "uint32": "uint32_t",
           "uint16": "uint16_t", "uint8": "uint8_t", "bool": "uint8_t"}

# Python's and NumPy's functions of sdfg/arithmetic.py: C helpers of both preambles.
HELPERS = {fp.py_max: "sc_pymax", fp.py_min: "sc_pymin", fp.np_maximum: "sc_max",
           fp.np_minimum: "sc_min", fp.np_fmax: "sc_fmax", fp.np_fmin: "sc_fmin",
           fp.np_power: "sc_nppow", fp.py_floordiv: "sc_pyfloordiv", fp.py_mod: "sc_pymod",
           fp.np_sign: "sc_npsign", fp.np_fmod: "fmod", fp.np_hypot: "hypot",
           fp.np_cbrt: "cbrt", fp.np_floor: "floor", fp.np_ceil: "ceil", fp.np_trunc: "trunc", fp.np_rint: "rint"}


def _negated(term):
    """``y`` for a term ``-y`` (a negation or a negative constant), else None."""
    if isinstance(term, sp.Mul) and len(term.args) >= 2 and term.args[0].is_Number \
            and term.args[0].is_negative:
        rest = list(term.args[1:]) if term.args[0] == -1 else [-term.args[0], *term.args[1:]]
        return rest[0] if len(rest) == 1 else sp.Mul(*rest, evaluate=False)
    if term.is_Number and term.is_negative:
        return -term
    return None


def _reciprocal(factor):
    """Whether a factor of a product is ``1/y``: the product divides by ``y``."""
    return isinstance(factor, sp.Pow) and factor.exp is sp.S.NegativeOne


# What generated C may contain: every name in it goes through c_name or is the engine's.
_PRINTABLE = (sp.Symbol, sp.Number, sp.NumberSymbol, sp.Add, sp.Mul, sp.Pow, sp.Function,
              sp.Max, sp.Min, sp.core.relational.Relational, BooleanFunction, BooleanAtom,
              ExprCondPair, sp.UnevaluatedExpr, int, float, str)


@functools.lru_cache(maxsize=None)
def _printable(kind):
    """Whether nodes of class ``kind`` may be printed: numbers, symbols, arithmetic,
    comparisons, logic and functions that C spells one fixed way. Others (functions the
    user named, matrix elements, wildcards...) would print a name the user chose as it is."""
    if issubclass(kind, AppliedUndef):
        return kind.__name__.startswith(LOAD)       # an element of an integer array
    return issubclass(kind, _PRINTABLE) and not issubclass(kind, sp.Wild)


def c_name(symbol, names):
    """C identifier of a symbol: sizes and int arguments ``n_``, loop variables ``i_``,
    connectors and temporaries ``c_`` (engine names: their leading ``__`` dropped)."""
    if symbol in names:
        return names[symbol]
    if symbol == THREADS:
        return "omp_get_max_threads()"
    if symbol.is_integer:
        return identifier("i_", symbol.name)
    return identifier("c_", symbol.name.lstrip("_"))


# A name generated source may spell as it is: an ASCII C identifier of bounded length.
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII)


@functools.lru_cache(maxsize=1 << 14)
def spelling(name):
    """How a user-derived name (a container, size, loop variable or kernel name) appears in
    generated source, identifiers and comments alike: the name itself when it is a short
    ASCII identifier, else a digit and 20 hex digits of its sha256 (no C identifier
    starts with a digit, so the two forms never meet). Every such name goes through
    here: sympy accepts any string as a symbol's name, and one holding a newline and a
    ``#define`` ran shell commands through the compiler. A function of the name alone,
    so that every generator of a module, and every process, agrees on it."""
    if _PLAIN.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return "0" + digest[:20]


def identifier(prefix, name):
    """The C identifier ``prefix`` (``v_`` containers, ``n_`` sizes, ``i_`` loop variables,
    ``c_`` connectors, or a helper's ``sc_..._``) + the name's :func:`spelling`. The
    prefixes keep names clear of C keywords, libc and each other."""
    return prefix + spelling(name)
