"""Python expressions -> sympy: values (tasklet bodies), indices and integer conditions."""
import ast
import builtins
import copy
import math

import numpy as np
import sympy as sp

from ..errors import KernelSyntaxError
from ..sdfg import Container
from ..sdfg import arithmetic as fp
from ..sdfg.arithmetic import BINARY, BUILTIN, UNARY
from ..sdfg.nodes import index_load, index_loads
from .functions import floordiv, python_mod

CONSTANTS = {"pi": sp.pi, "e": sp.E}
ARITHMETIC = {ast.Add: fp.add, ast.Sub: fp.sub, ast.Mult: fp.mul, ast.Div: fp.div,
              ast.Pow: fp.power}
COMPARE = {ast.Lt: fp.relation(sp.Lt), ast.LtE: fp.relation(sp.Le),
           ast.Gt: fp.relation(sp.Gt), ast.GtE: fp.relation(sp.Ge),
           ast.Eq: fp.relation(sp.Eq), ast.NotEq: fp.relation(sp.Ne)}
RESULT = "__return"         # the container of what a kernel returns (or __return0, ...)


def number_of(cond):
    """A condition as the number NumPy's bool is in arithmetic: 1 or 0."""
    return fp.select(sp.Integer(1), cond, sp.Integer(0))


class IntValue:
    """Binding of a name to an integer expression (size, int argument, loop variable)."""
    def __init__(self, expr):
        self.expr = expr


class AfterLoop(IntValue):
    """An integer alias of a loop's variable (``j = i + 1``, ``j = idx[i]``) named after
    its loop: Python reads the last iteration's value there, which the alias, an
    expression of ``i``, cannot say."""
    def __init__(self, name, var, error):
        self.message = (f"{name!r} is computed from the loop variable {var!r}, and used "
                        "after its loop; compute it again after the loop "
                        f"(from {var}'s last value)")
        self._error = error

    @property
    def expr(self):
        raise self._error(self.message)


class DataValue:
    """Binding of a name to a container (an array or a floating-point scalar)."""
    def __init__(self, container: Container):
        self.container = container


LOGICAL = {ast.BitAnd: sp.And, ast.BitOr: sp.Or, ast.BitXor: sp.Xor}     # on bools
BITS = {ast.BitAnd: fp.bit_and, ast.BitOr: fp.bit_or, ast.BitXor: fp.bit_xor,
        ast.LShift: fp.shift_left, ast.RShift: fp.shift_right}      # on integers


class ExpressionBuilder:
    """Converts the expressions of one statement, collecting the memlets they read."""

    def __init__(self, kernel, scope):
        self.kernel, self.src, self.scope = kernel, kernel.src, scope
        self.reads = {}          # (data, subset) -> connector symbol
        self.prelude = []        # states that must run before the statement (reductions)

    # ---- public entry points -------------------------------------------------------
    def value(self, node):
        """A floating-point value: a sympy expression over connectors and integers."""
        return self._value(node, elementwise=None)

    def index(self, node, what="an index"):
        """An integer expression of sizes, int arguments and loop variables."""
        method = getattr(self, "_index_" + type(node).__name__, None)
        if method is None:
            raise self.src.error(node, f"{what} must be an integer expression of sizes, int "
                                       f"arguments and loop variables; got `{ast.unparse(node)}`")
        return method(node, what)

    def slice_bound(self, node, what="a slice bound"):
        """A slice bound: None (``x[a:None]``, and ``b or None`` where ``b`` is zero) or an
        integer expression; ``b or None`` must be decidable when compiling."""
        if node is None or isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            for k, item in enumerate(node.values):      # Python's: the first true, or the last
                value = self.slice_bound(item, what)
                if k == len(node.values) - 1 or value is not None and value.is_zero is False:
                    return value
                if value is not None and not value.is_zero:
                    raise self.src.error(node, f"`{ast.unparse(node)}`: cannot tell whether "
                                               f"{value} is zero when compiling; write the "
                                               "bound without `or`")
        return self.index(node, what)

    def condition(self, node):
        """A boolean over integers and, where it reads them, data values (as connectors)."""
        if isinstance(node, ast.Compare):
            decided = self.kernel.static_comparison(self, node)    # `x is None`, `grid == "u"`
            if decided is not None:
                return decided
            left, parts = self.value(node.left), []
            for op, right in zip(node.ops, node.comparators):
                if type(op) not in COMPARE:
                    raise self.src.error(node, f"comparison `{type(op).__name__}` is not "
                                               "supported; use <, <=, >, >=, == or !=")
                r = self.value(right)
                parts.append(COMPARE[type(op)](left, r))
                left = r
            return fp.logical(sp.And)(*parts)
        if isinstance(node, ast.BoolOp):
            parts = [self.condition(v) for v in node.values]
            return fp.logical(sp.And if isinstance(node.op, ast.And) else sp.Or)(*parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return fp.logical(sp.Not)(self.condition(node.operand))
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return sp.true if node.value else sp.false
        if isinstance(node, ast.Call) and self._function_name(node.func) == "isscalar" and \
                self._module(node.func.value) is np and len(node.args) == 1:
            shape = self.kernel.array_shape(self, node.args[0])   # np.isscalar(F)
            return sp.false if len(shape) else sp.true
        if self.is_logical(node) and isinstance(node, ast.BinOp):     # (a < b) & m[i]
            return fp.logical(LOGICAL[type(node.op)])(self.condition(node.left),
                                                      self.condition(node.right))
        if self.is_logical(node) and isinstance(node, ast.UnaryOp):   # ~m[i]
            return fp.logical(sp.Not)(self.condition(node.operand))
        return fp.nonzero(self.value(node))

    def is_logical(self, node):
        """Whether ``node`` is a Python or NumPy bool as its syntax and containers show:
        a comparison, ``not``, True/False, an element of a bool array, and ``&``, ``|``,
        ``^``, ``~`` of those (logical there, bitwise on integers)."""
        if isinstance(node, ast.Compare) or isinstance(node, ast.UnaryOp) and \
                isinstance(node.op, ast.Not):
            return True
        if isinstance(node, ast.Constant):
            return isinstance(node.value, bool)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self.is_logical(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in LOGICAL:
            return self.is_logical(node.left) and self.is_logical(node.right)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            binding = self.scope.get(node.value.id)
            return isinstance(binding, DataValue) and binding.container.dtype.kind == "b"
        return False

    def memlet_for(self, target: ast.Subscript):
        """The element a subscript names: (container, subset)."""
        container = self._array(target.value)
        return container, self._subset(container, target)

    # ---- integers --------------------------------------------------------------------
    def _index_Constant(self, node, what):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise self.src.error(node, f"{what} must be an integer, got {node.value!r}")
        return sp.Integer(node.value)

    def _index_Name(self, node, what):
        binding = self.scope.get(node.id)
        if isinstance(binding, AfterLoop):
            raise self.src.error(node, binding.message)
        if isinstance(binding, IntValue):
            return binding.expr
        if binding is None and isinstance(self._global_number(node), sp.Integer):
            return self._global_number(node)
        if binding is None and self._global_number(node) is not None:
            raise self.src.error(node, f"{what} must be an integer expression; {node.id!r} is "
                                       f"the float {self.src.globals[node.id]!r} from outside "
                                       "the kernel")
        if binding is None:
            raise self.src.error(node, f"name {node.id!r} is not defined before this use")
        if isinstance(binding, DataValue) and not binding.container.is_scalar:
            raise self.src.error(node, f"{what} must be an integer expression; {node.id!r} is "
                                       "an array: an integer array as a whole index reads "
                                       "(x[idx] gathers); to write through one, loop over "
                                       f"its elements ({node.id}[k]) — NumPy's x[idx] += v "
                                       "adds once per distinct index, the loop once per k")
        raise self.src.error(node, f"{what} must be an integer expression; {node.id!r} is "
                                   "floating-point data")

    def _index_UnaryOp(self, node, what):
        if isinstance(node.op, ast.USub):
            return -self.index(node.operand, what)
        if isinstance(node.op, ast.UAdd):
            return self.index(node.operand, what)
        raise self.src.error(node, f"operator {type(node.op).__name__} in {what}")

    def _index_BinOp(self, node, what):
        a, b = self.index(node.left, what), self.index(node.right, what)
        op = type(node.op)
        if op is ast.Add:
            return a + b
        if op is ast.Sub:
            return a - b
        if op is ast.Mult:
            return a * b
        if op is ast.FloorDiv:
            return floordiv(a, self._divisor(node, b))
        if op is ast.Mod:
            return python_mod(a, self._divisor(node, b))
        if op is ast.Pow and not (b.is_Integer and b < 0):      # R ** K, K an int argument
            if not b.is_Integer:
                self.nonnegative(node, b, f"cannot show that the exponent of "
                                          f"`{ast.unparse(node)}` in {what} is not negative",
                                 f"the exponent of `{ast.unparse(node)}` in {what} is "
                                 "negative (an integer power of integers must not be)")
            return a ** b
        hint = "; use // for integer division" if op is ast.Div else ""
        raise self.src.error(node, f"operator `{ast.unparse(node)}` in {what}{hint}")

    def _divisor(self, node, b):
        """An integer divisor must not be zero (C would stop the process): a constant is
        checked now, one of the sizes once per call."""
        if b.is_zero:
            raise self.src.error(node, f"`{ast.unparse(node)}` divides by zero")
        if b.is_number or b.is_nonzero:
            return b
        if not b.free_symbols <= set(self.kernel.symbols):
            raise self.src.error(node, f"the divisor of `{ast.unparse(node)}` depends on loop "
                                       "variables and may be zero; divide by constants and "
                                       "sizes only")
        self.assume(node, sp.Ne(b, 0), f"the divisor {b} of `{ast.unparse(node)}` is zero")
        return b

    def nonnegative(self, node, e, refused, message):
        """``e >= 0``: proven over the loops around ``node``, else checked per call where
        its lowest value depends on sizes only (``message``), else refused (``refused``,
        a KernelSyntaxError)."""
        from ..analysis.bounds import minimum
        loops = [f.region for f in self.kernel.loops if getattr(f, "region", None) is not None]
        bound = None if index_loads(e) else minimum(sp.expand(e), loops)
        if bound is not None and bound.is_nonnegative:
            return
        if bound is None or not bound.free_symbols <= set(self.kernel.symbols):
            raise self.src.error(node, refused)
        self.assume(node, sp.Ge(bound, 0), message)

    def assume(self, node, condition, message):
        """``condition`` on the kernel's sizes, checked once per call before it runs."""
        entry = (condition, node.lineno + self.src.first_line - 1, message)
        if entry not in self.kernel.arrays.assumptions:
            self.kernel.arrays.assumptions.append(entry)

    def call_value(self, e):
        """``e`` (of sizes) at the sizes of the call being compiled, or None."""
        sizes, free = self.kernel.sizes, e.free_symbols
        if not free or any(s.name not in sizes for s in free):
            return None
        return e.xreplace({s: sp.Integer(sizes[s.name]) for s in free})

    def at_call(self, node, condition, message):
        """``condition`` on sizes as the sizes of the call being compiled decide it
        (sp.true or sp.false), or None where they do not (a loop variable, no sizes).
        What the call decides is part of what the specialisation holds for
        (``SDFG.decisions``: a call where it does not gets another), and is checked before
        each call too (``message(decided)`` where it fails)."""
        value = self.call_value(condition)
        if value not in (sp.true, sp.false):
            return None
        decision = condition if value is sp.true else sp.Not(condition)
        if decision not in self.kernel.arrays.decisions:
            self.kernel.arrays.decisions.append(decision)
            self.assume(node, decision, message(value is sp.true))
        return value

    def _index_IfExp(self, node, what):
        """``a if c else b`` of integers: the branch a decided ``c`` picks, else both as a
        Piecewise (``c`` an integer condition: an index never depends on data)."""
        reads = len(self.reads)
        cond = self.condition(node.test)
        if cond in (sp.true, sp.false):
            return self.index(node.body if cond is sp.true else node.orelse, what)
        if len(self.reads) > reads:
            raise self.src.error(node, f"{what}: the condition of `{ast.unparse(node)}` "
                                       "reads floating-point data; an index's condition must "
                                       "be on integers")
        return sp.Piecewise((self.index(node.body, what), cond),
                            (self.index(node.orelse, what), True))

    def _index_Attribute(self, node, what):
        """``A.size`` (the number of elements) and ``A.ndim``."""
        if node.attr in ("size", "ndim") and self._module(node.value) is None:
            shape = self._shape_of(node.value)
            return sp.Integer(len(shape)) if node.attr == "ndim" else sp.Mul(*shape)
        raise self.src.error(node, f"{what} must be an integer expression of sizes, int "
                                   f"arguments and loop variables; got `{ast.unparse(node)}`")

    def _index_Subscript(self, node, what):
        # A.shape[k]
        if (isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
                and isinstance(node.slice, (ast.Constant, ast.UnaryOp))):
            shape = self._shape_of(node.value.value)
            k = self.index(node.slice, "an axis")
            if not (k.is_Integer and -len(shape) <= k < len(shape)):
                raise self.src.error(node, f"{ast.unparse(node)}: "
                                           f"{ast.unparse(node.value.value)} has "
                                           f"{len(shape)} dimensions")
            return shape[int(k)]
        if isinstance(node.value, (ast.Tuple, ast.List)) and \
                not isinstance(node.slice, (ast.Slice, ast.Tuple)):  # (1, 0, -1)[k]: from outside
            return self._tuple_item(node, [self.index(e, what) for e in node.value.elts])
        container = self._array(node.value)
        if not hasattr(container, "dtype") or container.dtype.kind not in "iu":   # a view
            raise self.src.error(node, f"{what} cannot use floating-point data "
                                       f"(`{ast.unparse(node)}`); index with an integer array")
        return index_load(container.name, self._subset(container, node))

    def _index_Call(self, node, what):
        if self.kernel.callee_of(node) is not None:        # md(i + 1): an integer function
            return self.kernel.call_index(self, node, what)
        if self._function_name(node.func) in ("mod", "remainder", "floor_divide") and \
                isinstance(node.func, ast.Attribute) and len(node.args) == 2:   # np.mod
            a, b = (self.index(x, what) for x in node.args)
            divisor = self._divisor(node, b)
            return floordiv(a, divisor) if node.func.attr == "floor_divide" else \
                python_mod(a, divisor)
        name = self._builtin_name(node.func)
        if name == "len" and len(node.args) == 1:
            arg = node.args[0]
            if isinstance(arg, ast.Attribute) and arg.attr == "shape":    # len(B.shape)
                return sp.Integer(len(self._shape_of(arg.value)))
            shape = self._shape_of(arg)
            if not shape:
                raise self.src.error(node, "len() of a scalar")
            return shape[0]
        if name in ("min", "max") and len(node.args) >= 2 and not node.keywords:
            args = [self.index(a, what) for a in node.args]
            return sp.Min(*args) if name == "min" else sp.Max(*args)
        if name in ("int", "round") and len(node.args) == 1 or \
                self._module(getattr(node.func, "value", None)) is math and \
                node.func.attr in ("ceil", "floor"):
            try:
                return self.index(node.args[0], what) if name == "int" else \
                    self._python_integer(node, what)
            except KernelSyntaxError:          # int(np.ceil(a * (n - 1) / 2)): via floats
                return self._python_integer(node, what)
        raise self.src.error(node, f"call `{ast.unparse(node)}` in {what}")

    def _data_read(self, node):
        """The names of data (arrays, floats) ``node`` reads values of, in source order:
        not ``A.shape``, ``A.size``, ``A.ndim`` or ``len(A)``, which are sizes."""
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "size", "ndim"):
            return []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id == "len":
            return []
        if isinstance(node, ast.Name):
            return [node.id] if isinstance(self.scope.get(node.id), DataValue) else []
        found = []
        for child in ast.iter_child_nodes(node):
            found += [n for n in self._data_read(child) if n not in found]
        return found

    def _python_integer(self, node, what):
        """An integer Python computes from sizes through floats (``int(n / 2)``,
        ``int(np.ceil(a * (n - 1) / 2))``, ``round(0.1 * n)``): evaluated as Python does at
        the sizes of the call being compiled, the specialisation holding for those sizes
        only (``at_call``)."""
        sizes = []
        data = self._data_read(node)
        if data:
            raise self.src.error(node, f"`{ast.unparse(node)}` in {what} computes an integer "
                                       f"from the data {', '.join(data)}; kernels compute "
                                       "sizes, trip counts and indices from integers only: "
                                       "compute it outside and pass it in, as an int or (for "
                                       "indices) an integer array, `j = (pos / dx)"
                                       ".astype(np.int64)`")

        def known(sub):
            try:
                value = self.index(sub, what)
            except KernelSyntaxError:
                return None
            at_call = self.call_value(value)
            if at_call is None:
                raise self.src.error(node, f"`{ast.unparse(node)}` in {what} computes an "
                                           "integer through floats from loop variables or "
                                           "int arguments; write integer arithmetic (//)")
            sizes.extend(value.free_symbols)
            return ast.copy_location(ast.Constant(int(at_call)), sub)

        class Known(ast.NodeTransformer):
            def generic_visit(self, sub):
                if isinstance(sub, (ast.Name, ast.Attribute, ast.Subscript, ast.BinOp)) \
                        and sub is not node:
                    replaced = known(sub)
                    if replaced is not None:
                        return replaced
                return super().generic_visit(sub)
        written = ast.fix_missing_locations(Known().visit(copy.deepcopy(node)))
        try:
            value = eval(compile(ast.Expression(written), self.src.filename, "eval"),  # noqa: S307
                         dict(self.src.globals))
        except Exception as exc:
            raise self.src.error(node, f"`{ast.unparse(node)}` in {what}: an integer through "
                                       "floats is computed from sizes and constants only "
                                       f"({exc})") from None
        for size in sorted(set(sizes), key=str):
            self.at_call(node, sp.Eq(size, self.call_value(size)),
                         lambda _: f"`{ast.unparse(node)}` was compiled for {size} = "
                                   f"{self.call_value(size)}")
        return sp.Integer(int(value))

    # ---- floating-point values -------------------------------------------------------
    def _value(self, node, elementwise):
        method = getattr(self, "_value_" + type(node).__name__, None)
        if method is None:
            hint = "; for numbers, make the array NumPy makes of it: np.array([...])" \
                if isinstance(node, (ast.List, ast.Tuple)) else ""
            raise self.src.error(node, f"`{ast.unparse(node)}`: {_describe(node)} is not "
                                       "supported in kernels" + hint)
        return real(self.src, node, method(node, elementwise))

    def _value_IfExp(self, node, elementwise):
        """``a if c else b``: the value C's ``c ? a : b`` picks. Both are lowered (indices in
        either are checked as if it were taken); a decided condition picks one."""
        cond = self.condition(node.test)
        if cond in (sp.true, sp.false):
            return self._value(node.body if cond is sp.true else node.orelse, elementwise)
        return fp.select(self._value(node.body, elementwise), cond,
                         self._value(node.orelse, elementwise))

    def _value_Constant(self, node, elementwise):
        v = node.value
        if isinstance(v, complex):                  # parts: frontend/complexes.py
            imaginary = sp.Mul(sp.Float(v.imag), sp.I, evaluate=False)
            return imaginary if v.real == 0 else sp.Add(sp.Float(v.real), imaginary,
                                                        evaluate=False)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.src.error(node, f"constant {v!r} is not a number")
        return sp.Integer(v) if isinstance(v, int) else sp.Float(v)

    def _value_Name(self, node, elementwise):
        binding = self.scope.get(node.id)
        if isinstance(binding, AfterLoop):
            raise self.src.error(node, binding.message)
        if isinstance(binding, IntValue):
            return binding.expr
        if isinstance(binding, DataValue):
            c = binding.container
            if c.is_scalar:
                return self._read(c.name, ())
            raise self.src.error(node, f"whole-array use of {node.id!r}; index it "
                                       f"({node.id}[i, ...]) or reduce it with np.sum")
        if node.id in ("True", "False", "None"):
            raise self.src.error(node, f"{node.id} is not a number")
        if binding is None and self._global_number(node) is not None:
            return self._global_number(node)
        raise self.src.error(node, f"name {node.id!r} is not defined before this use")

    def _value_Subscript(self, node, elementwise):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return self.index(node)
        if self.kernel.is_array_subscript(self.scope, node):   # slices, views, masks: arrays.py
            return self.kernel.scalar_value(self, node)
        container, subset = self.memlet_for(node)
        return self._read(container.name, subset)

    def _value_UnaryOp(self, node, elementwise):
        v = self._value(node.operand, elementwise)
        if isinstance(node.op, ast.USub):
            return fp.neg(v)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.Invert):
            return number_of(self.condition(node)) if self.is_logical(node) else \
                fp.bits(fp.bit_not, v)
        raise self.src.error(node, f"operator `{ast.unparse(node)}` is not supported on numbers")

    def _value_BinOp(self, node, elementwise):
        if isinstance(node.op, ast.MatMult):            # vector @ vector: a number
            return self.kernel.scalar_value(self, node)
        if self.is_logical(node):                      # m[i] & (x[i] > 0) as a number
            return number_of(self.condition(node))
        a, b = self._value(node.left, elementwise), self._value(node.right, elementwise)
        op = type(node.op)
        if op in ARITHMETIC:
            return ARITHMETIC[op](a, b)
        if op is ast.FloorDiv:
            return fp.py_floordiv(a, b) if not (a.is_integer and b.is_integer) else \
                floordiv(a, self._divisor(node, b))
        if op is ast.Mod:
            return fp.py_mod(a, b) if not (a.is_integer and b.is_integer) \
                else python_mod(a, self._divisor(node, b))
        if op in BITS:
            if op in (ast.LShift, ast.RShift) and b.is_Integer and b < 0:
                raise self.src.error(node, f"`{ast.unparse(node)}` shifts by a negative count "
                                           "(Python raises ValueError)")
            return fp.bits(BITS[op], a, b)
        raise self.src.error(node, f"operator `{ast.unparse(node)}` is not supported")

    def _value_Attribute(self, node, elementwise):
        module = self._module(node.value)
        if module is not None and node.attr in CONSTANTS:
            return CONSTANTS[node.attr]
        if module is None and node.attr in ("size", "ndim"):
            return self.index(node)
        if module is None and node.attr in ("real", "imag"):
            return UNARY[node.attr](self._value(node.value, elementwise))
        raise self.src.error(node, f"attribute `{ast.unparse(node)}` is not supported; only "
                                   "A.shape[k], math.pi/np.pi and math.e are")

    def _value_Call(self, node, elementwise):
        if self.kernel.is_array_call(self, node):       # np.where, np.sum, ...: arrays.py
            return self.kernel.scalar_value(self, node)
        if self.kernel.callee_of(node) is not None:   # another kernel: inlined (calls.py)
            return self.kernel.call_value(self, node)
        if node.keywords:
            raise self.src.error(node, f"keyword arguments in `{ast.unparse(node)}` are "
                                       "not supported")
        name = self._function_name(node.func)
        args = node.args
        if name in ("sum", "min", "max") and len(args) == 1 and self._builtin_name(node.func) \
                and self.kernel.array_shape(self, args[0]):     # max(x): over its elements
            return self.kernel.scalar_value(self, node)
        if name in ("min", "max") and len(args) >= 2 and self._builtin_name(node.func):
            return BUILTIN[name](*(self._value(a, elementwise) for a in args))
        if name == "float" and len(args) == 1:
            return self._value(args[0], elementwise)
        if name == "complex" and len(args) in (1, 2):     # a + b*1j, its parts exact
            parts = [self._value(a, elementwise) for a in args]
            z = fp.as_complex128(parts[0], evaluate=False)
            return fp.add(z, fp.mul(parts[1], sp.I)) if len(parts) == 2 else z
        if name in ("len", "int", "round") and len(args) == 1:    # sizes as numbers: s / len(x)
            return self.index(node, f"`{ast.unparse(node)}`")
        if name in UNARY and len(args) == 1:
            return UNARY[name](self._value(args[0], elementwise))
        if name in fp.FLOAT_CLASSES and len(args) == 1:          # math.isnan(v)
            return fp.FLOAT_CLASSES[name](self._value(args[0], elementwise))
        if name in BINARY and len(args) == 2:
            return BINARY[name](*(self._value(a, elementwise) for a in args))
        raise self.src.error(node, f"call `{ast.unparse(node)}` is not supported: kernels can "
                                   "call abs/min/max, the math/NumPy scalar functions "
                                   f"({', '.join(sorted(UNARY))}, ...) and other kernels"
                                   + self.kernel.plain_function_hint(node))

    # ---- helpers ---------------------------------------------------------------------
    def _global_number(self, node):
        """A module-level (or enclosing function's) int or float the function reads and
        never assigns: a constant of the specialisation, its value when first compiled."""
        value = self.src.globals.get(node.id)
        if isinstance(value, (bool, np.bool_)) or \
                not isinstance(value, (int, float, np.integer, np.floating)) or \
                any(isinstance(n, ast.Name) and n.id == node.id and not isinstance(n.ctx, ast.Load)
                    for n in ast.walk(self.src.tree)):
            return None
        return sp.Integer(int(value)) if isinstance(value, (int, np.integer)) else \
            sp.Float(float(value))

    def _shape_of(self, node):
        """The shape of an array, a view of one (``U = x[..., :n]``) or an array
        expression: what ``.shape``, ``len`` and ``.size`` read."""
        binding = self.scope.get(node.id) if isinstance(node, ast.Name) else None
        if isinstance(binding, DataValue):
            return binding.container.shape
        return self.kernel.array_shape(self, node)

    def _read(self, data, subset):
        key = (data, tuple(subset))
        if key not in self.reads:
            self.reads[key] = sp.Symbol(f"__in{len(self.reads)}", real=True)
        return self.reads[key]

    def _array(self, node) -> Container:
        if isinstance(node, ast.Name):
            binding = self.scope.get(node.id)
            if isinstance(binding, DataValue):
                return binding.container
            if binding is None:
                raise self.src.error(node, f"name {node.id!r} is not defined before this use")
        raise self.src.error(node, f"`{ast.unparse(node)}` is not an array")

    def _subset(self, container, node: ast.Subscript):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if container.is_scalar:
            raise self.src.error(node, f"{container.name!r} is a scalar and cannot be indexed")
        if any(isinstance(i, ast.Slice) for i in items):
            raise self.src.error(node, f"slice `{ast.unparse(node)}`: only single elements can "
                                       "be indexed; write the loop explicitly")
        if len(items) != len(container.shape):
            raise self.src.error(node, f"`{ast.unparse(node)}` gives {len(items)} indices for "
                                       f"the {len(container.shape)}-d array {container.name!r}")
        return tuple(self._from_the_end(item, self.index(item), size)
                     for item, size in zip(items, container.shape))

    def _tuple_item(self, node, items):
        """Item ``k`` of a tuple of integers (a constant from outside, ``CX[k]`` in a loop):
        the item itself for a constant ``k``, else the choice among them, ``k`` shown (or
        checked per call) to lie in the tuple as Python requires."""
        size = sp.Integer(len(items))
        i = self._from_the_end(node.slice, self.index(node.slice), size)
        if i.is_Integer:
            if not 0 <= i < size:
                raise self.src.error(node, f"`{ast.unparse(node)}`: index out of range (the "
                                           f"tuple has {size} items)")
            return items[int(i)]
        for low in (i, size - 1 - i):
            self.nonnegative(node, low, f"cannot show that `{ast.unparse(node)}` lies in the "
                                        f"tuple of {size} items; loop over the tuple (`for c "
                                        "in C`) instead",
                             f"`{ast.unparse(node)}` is outside the tuple")
        return sp.Piecewise(*[(v, sp.Eq(i, k)) for k, v in enumerate(items[:-1])],
                            (items[-1], True))

    def _from_the_end(self, node, i, size):
        """Python's negative indices count from the end: a constant one, and one the loops
        around it make negative (``x[i - 1]`` from ``i = 0``: periodic neighbours), which
        wraps as Python wraps it where it stays within ``[-size, size)`` (proven, or checked
        per call on the sizes; elsewhere the bounds analysis reports it)."""
        from ..analysis.bounds import minimum
        if i.is_Integer:
            return i + size if i < 0 else i
        loops = [f.region for f in self.kernel.loops if getattr(f, "region", None) is not None]
        low = None if index_loads(i) else minimum(sp.expand(i), loops)
        if low is None or not low.is_number or low >= 0:
            return i
        high = minimum(sp.expand(size - 1 - i), loops)           # size - 1 - max(i)
        if high is None or not high.free_symbols <= set(self.kernel.symbols):
            return i
        for bound in (size + low, high):
            if not bound.is_nonnegative:
                self.assume(node, sp.Ge(bound, 0), f"index `{ast.unparse(node)}` is outside "
                                                    "its axis (NumPy raises IndexError)")
        return python_mod(i, size)

    def _builtin_name(self, func):
        if isinstance(func, ast.Name) and func.id not in self.scope \
                and func.id not in self.src.globals and hasattr(builtins, func.id):
            return func.id
        return None

    def _function_name(self, func):
        if isinstance(func, ast.Attribute) and self._module(func.value) is not None:
            return func.attr
        return self._builtin_name(func)

    def _module(self, node):
        if isinstance(node, ast.Name) and node.id not in self.scope:
            mod = self.src.globals.get(node.id)
            if mod is math or mod is np:
                return mod
        return None


def real(src, node, value):
    """``value``, unless a constant in it is not a real double (``x / 0.0``, ``0.0 / 0.0``,
    ``(-1.0) ** 0.5``, ``2 ** 1024``: Python raises, C has no such constant)."""
    if isinstance(value, sp.Basic) and _not_a_double(value):
        raise src.error(node, f"`{ast.unparse(node)}` is not a real number: a division by "
                              "zero, a square root, log or power outside its domain, or a "
                              "number too large for a float")
    return value


def _not_a_double(value):
    """Whether a constant folds to no double (its own value: a division by a constant
    zero anywhere is ``zoo``, which statements.py reports for the whole tasklet)."""
    if not value.is_number:
        return False
    folded = fp.evaluated(value)
    return bool(folded.has(sp.zoo, sp.nan, sp.oo, -sp.oo)
                or folded.has(sp.I) and not value.has(sp.I)      # (-1.0) ** 0.5
                or folded.is_Integer and abs(folded) >= 2 ** 1024)


def _describe(node):
    return {"ListComp": "a list comprehension", "Lambda": "a lambda", "List": "a list",
            "Tuple": "a tuple", "Dict": "a dict", "IfExp": "a conditional expression",
            "Compare": "a comparison", "BoolOp": "a boolean operator",
            "JoinedStr": "an f-string"}.get(type(node).__name__, type(node).__name__)
