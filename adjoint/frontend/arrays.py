"""Whole-array NumPy code -> maps of tasklets over transient containers.

Expressions on arrays (slices, broadcasting, ufuncs, masks, reductions, ``.T``) are
evaluated to :class:`~.array_shapes.ArrayExpr` values: a shape and the sympy
expression of any one element. A statement that stores an array becomes one map
whose single tasklet computes the whole right-hand side for one element; only
reductions, temporaries bound to names and overlapping in-place updates get
transient arrays of their own (see ``array_stores``). Reverse mode and codegen see
nothing new: maps, tasklets, memlets, ``wcr="sum"`` and loops.

Hooks used by the rest of the frontend:

- :func:`assign` lowers an assignment involving arrays (None: a scalar statement);
- :func:`is_array_subscript` / :func:`is_array_call` say when a subscript or call in a
  scalar expression belongs here, and :func:`scalar_value` evaluates it.
"""
import ast
from collections import Counter
from dataclasses import replace

import numpy as np
import sympy as sp

from .array_shapes import (AXES, ONE, ArrayExpr, MaskValue, View, ViewValue, broadcast_to, constant,
                           fmt_shape, number, remap, same_size, slice_axis, subscript, transpose,
                           truth)
from ..sdfg import arithmetic as fp
from ..sdfg.arithmetic import UNARY
from ..sdfg.nodes import index_load
from .expressions import BITS, COMPARE, DataValue, ExpressionBuilder, IntValue, real
from .functions import floordiv, python_mod

ARITHMETIC = {ast.Add: fp.add, ast.Sub: fp.sub, ast.Mult: fp.mul, ast.Div: fp.div,
              ast.Pow: lambda a, b: fp.power(a, b, array=True),
              ast.FloorDiv: lambda a, b: floordiv(a, b) if _integers(a, b) else fp.py_floordiv(a, b),
              ast.Mod: lambda a, b: python_mod(a, b) if _integers(a, b) else fp.py_mod(a, b)}
LOGICAL = {ast.BitAnd: fp.logical(sp.And), ast.BitOr: fp.logical(sp.Or),
           ast.BitXor: fp.logical(sp.Xor)}


class ArrayState:
    """What the array lowering keeps across the statements of one kernel."""

    def __init__(self, tree):
        self.assignments = Counter()
        self.count(tree)
        self.assumptions = []       # (condition on sizes, line, message): checked per call
        self.decisions = []         # conditions on sizes the call's values decided (unit)
        self._count = 0

    def count(self, tree):
        """Count the plain assignments to each name in ``tree`` (an inlined callee too)."""
        self.assignments.update(t.id for node in ast.walk(tree)
                                for t in _plain_targets(node) if isinstance(t, ast.Name))

    def fresh(self, prefix, n):
        self._count += 1
        return tuple(sp.Symbol(f"__{prefix}{self._count}_{k}", integer=True) for k in range(n))


def _plain_targets(node):
    if isinstance(node, ast.Assign):
        return [e for t in node.targets
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    return [node.target] if isinstance(node, ast.AnnAssign) else []


# ---- hooks --------------------------------------------------------------------------------
def assign(kernel, stmt, target, value, op):
    """Regions for an assignment that involves arrays; None for a scalar assignment."""
    from .array_stores import assign_name, assign_subscript
    ab = ArrayBuilder(ExpressionBuilder(kernel, kernel.scope))
    if isinstance(target, ast.Subscript) and is_array_subscript(kernel.scope, target):
        return assign_subscript(ab, stmt, target, value, op)
    if isinstance(target, ast.Name):
        return assign_name(ab, stmt, target, value, op)
    return None


def is_array_subscript(scope, node):
    """Whether a subscript slices, adds axes, masks, or indexes a view or an expression."""
    base = node.value
    if isinstance(base, ast.Attribute) and base.attr == "shape":
        return False
    binding = scope.get(base.id) if isinstance(base, ast.Name) else None
    if not isinstance(base, ast.Name) or isinstance(binding, ViewValue):
        return True
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if isinstance(binding, DataValue) and len(items) < len(binding.container.shape):
        return True                     # A[i] of a matrix: a row
    return any(_is_array_item(scope, item) for item in items)


def _of_dtype(value, dtype):
    """An element of a new array (``np.zeros(N)``, ``np.linspace``) as an array of the
    float dtype it was made in, not the Python number its elements are built from
    (``np.linspace(0.0, 1.0, N) * x32`` is float64 in NumPy; dtypes.py reads the cast)."""
    if dtype is None or dtype.kind not in "fc" or any(not s.is_integer for s in
                                                       getattr(value, "free_symbols", ())):
        return value
    cast = fp.COMPLEX_CASTS[dtype.name] if dtype.kind == "c" else \
        fp.as_float32 if dtype == np.float32 else fp.as_float64
    return cast(value, evaluate=False)


def _no_negative_shift(src, node, op, count):
    if op in (ast.LShift, ast.RShift) and count.rank == 0:
        value = count.at(())
        if getattr(value, "is_Integer", False) and value < 0:
            raise src.error(node, f"`{ast.unparse(node)}` shifts by a negative count (NumPy "
                                  "gives 0 or -1 there, Python raises)")


def _is_array_item(scope, item):
    if isinstance(item, (ast.Slice, ast.Compare)):
        return True
    if isinstance(item, ast.Constant):
        return item.value is None or item.value is Ellipsis
    if isinstance(item, ast.Attribute):
        return item.attr == "newaxis"
    if isinstance(item, ast.UnaryOp):
        return isinstance(item.op, ast.Invert)
    if isinstance(item, ast.BinOp):
        return type(item.op) in LOGICAL
    if isinstance(item, ast.Name):
        binding = scope.get(item.id)
        if isinstance(binding, ViewValue):
            return binding.boolean
        return isinstance(binding, DataValue) and not binding.container.is_scalar and \
            _is_mask(binding)
    return False


def _integer_array(binding):
    if isinstance(binding, ViewValue):
        return binding.view.container.dtype.kind in "iu"
    return isinstance(binding, DataValue) and not binding.container.is_scalar and \
        binding.container.dtype.kind in "iu"


def _is_mask(binding):
    """A mask in a temporary (0.0 / 1.0) or a boolean array argument."""
    return isinstance(binding, MaskValue) or binding.container.dtype == np.bool_


class ArrayLowering:
    """The kernel builder's part from this module (``statements.KernelBuilder`` composes
    it): the array expressions met inside the scalar expressions of expressions.py, which
    reach them through ``ex.kernel``."""

    def is_array_subscript(self, scope, node):
        return is_array_subscript(scope, node)

    def is_array_call(self, ex, node):
        """An array function (``np.sum``, ``np.where``) or a ufunc that the array builder
        evaluates even on numbers (array_calls.on_numbers)."""
        from .array_calls import on_numbers
        return is_array_call(ex, node) or on_numbers(ex, node.func)

    def scalar_value(self, ex, node):
        return scalar_value(ex, node)

    def array_shape(self, ex, node):
        return ArrayBuilder(ex).expr(node).shape


def is_array_call(ex, node):
    """Whether a call in a scalar expression is an array function (reductions, where, ...)."""
    from .array_calls import METHODS, NUMPY, NUMPY_TUPLES, SCIPY_ARRAYS, scipy_name
    func = node.func
    if scipy_name(ex, func) in SCIPY_ARRAYS:         # erf(x[i]), scipy.special.expit(v)
        return True
    if not isinstance(func, ast.Attribute):
        return False
    module = ex._module(func.value)
    if module is np:
        return func.attr in NUMPY or func.attr in NUMPY_TUPLES
    return module is None and func.attr in METHODS


def scalar_value(ex, node):
    """The number an array expression of rank 0 stands for (``np.sum(A)``, ``A[1:][0]``)."""
    e = ArrayBuilder(ex).expr(node)
    if e.rank:
        raise ex.src.error(node, f"`{ast.unparse(node)}` is an array of shape "
                                 f"{fmt_shape(e.shape)} where a single number is needed; "
                                 "index it or reduce it (np.sum, np.max, ...)")
    return number(e.at(()))


# ---- evaluation ---------------------------------------------------------------------------
class ArrayBuilder:
    """Evaluates the expressions of one statement to ArrayExprs."""

    def __init__(self, ex):
        self.ex, self.src, self.kernel = ex, ex.src, ex.kernel
        self.state = ex.kernel.arrays
        self.indexing = 0           # > 0 while an index array's element is built

    def line(self, node):
        return node.lineno + self.src.first_line - 1

    def expr(self, node) -> ArrayExpr:
        method = getattr(self, "_expr_" + type(node).__name__, None)
        return self.scalar(node) if method is None else method(node)

    def sequence(self, node):
        """A tuple or list of numbers and arrays as the array NumPy makes of it."""
        from .array_calls import literal
        return literal(self, node, node)

    def scalar(self, node):
        """Anything else is a scalar expression for the scalar builder (read lazily)."""
        return ArrayExpr((), lambda index: self.ex.value(node))

    def load(self, view, shape, boolean=False):
        """Reads of ``view``'s elements, registered with the statement being built (an
        integer array's inside an index array, ``_computed_index``: index loads)."""
        def at(index):
            if self.indexing and view.container.dtype.kind in "iu":
                return index_load(view.container.name, view.element(index))
            v = self.ex._read(view.container.name, view.element(index))
            return sp.Ne(v, 0) if boolean else v
        return ArrayExpr(tuple(shape), at, boolean, view)

    def container(self, c, boolean=False):
        return self.load(View(c, AXES[:len(c.shape)]), c.shape, boolean)

    # ---- leaves ------------------------------------------------------------------------
    def _expr_Constant(self, node):
        if isinstance(node.value, bool):
            return constant(sp.true if node.value else sp.false, boolean=True)
        return self.scalar(node)

    def _expr_Name(self, node):
        binding = self.ex.scope.get(node.id)
        if isinstance(binding, ViewValue):
            self._check_in_scope(node, binding)
            return self.load(binding.view, binding.shape, binding.boolean)
        if isinstance(binding, DataValue) and not binding.container.is_scalar:
            return self.container(binding.container, _is_mask(binding))
        return self.scalar(node)

    def _check_in_scope(self, node, binding):
        """A view indexed by a loop variable is only usable inside that loop."""
        active = [id(f) for f in getattr(self.kernel, "loops", ())]
        bound = set(self.kernel.symbols) | {b.expr for b in self.ex.scope.values()
                                            if isinstance(b, IntValue)}
        if any(id(f) not in active for f in binding.loops):
            bound = set(self.kernel.symbols)            # its loop has ended
        free = set().union(*(sp.sympify(s).free_symbols for s in binding.view.subset))
        free -= set(AXES)
        if not free <= bound:
            names = ", ".join(sorted(str(s) for s in free - bound))
            raise self.src.error(node, f"{node.id!r} is a view that depends on {names}, which "
                                       "is not defined here (a loop variable used after its "
                                       "loop?)")

    def _expr_Attribute(self, node):
        if node.attr == "T":
            base = self.expr(node.value)
            return transpose(base, list(range(base.rank))[::-1])
        if node.attr in ("real", "imag") and self.ex._module(node.value) is None:
            return self.combine(node, UNARY[node.attr], [node.value])   # read, not a view
        if node.attr == "shape" and self.ex._module(node.value) is None:
            raise self.src.error(node, f"`{ast.unparse(node)}` is a tuple; index it "
                                       f"({ast.unparse(node)}[0]) to get a size")
        return self.scalar(node)

    def _expr_IfExp(self, node):
        """``A if c else B`` with a number or integer condition ``c``: one array of the
        branches' common shape (a decided condition picks one; NumPy's shapes may differ
        there)."""
        from .array_stores import tasklet_body
        reads, cond = tasklet_body(self.ex, lambda: self.ex.condition(node.test))
        if not reads and cond in (sp.true, sp.false):
            return self.expr(node.body if cond is sp.true else node.orelse)
        a, c = self.expr(node.body), self.expr(node.orelse)
        if a.rank != c.rank:
            raise self.src.error(node, f"the branches of `{_short(node)}` have shapes "
                                       f"{fmt_shape(a.shape)} and {fmt_shape(c.shape)}: the "
                                       "kernel needs one shape; write an if statement")
        for n, m in zip(a.shape, c.shape):
            self.agree(node, n, m, a.shape, c.shape, "branches")
        # The condition is read again in each tasklet that uses an element (its reads are
        # that tasklet's connectors).
        return ArrayExpr(a.shape, lambda p: fp.select(a.at(p), self.ex.condition(node.test),
                                                      c.at(p)), a.boolean and c.boolean)

    # ---- subscripts ----------------------------------------------------------------------
    def _expr_Subscript(self, node):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            return constant(self.ex.index(node))
        from .array_calls import element_of_call, grid
        element = element_of_call(self, node)       # lapack.dgtsv(...)[3], np.histogram
        if element is not None:
            return element
        base = grid(self, node)                     # np.mgrid[0:n, 0:m]
        if isinstance(base, list):
            raise self.src.error(node, f"`{ast.unparse(node)}` is a tuple of arrays; index "
                                       "it or unpack it (`I, J = ...`)")
        if base is not None:
            return base
        base = self.sequence(node.value) if isinstance(node.value, (ast.Tuple, ast.List)) \
            else self.expr(node.value)              # W[k], W a tuple from outside
        if base.rank == 0 and isinstance(node.value, ast.Call):
            raise self.src.error(node, f"`{ast.unparse(node)}`: `{ast.unparse(node.value.func)}`"
                                       " gives no array the kernel knows here (an "
                                       "unsupported function, or one returning a number)")
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(items) == 1 and self._is_mask(items[0]):
            raise self.src.error(node, f"`{ast.unparse(node)}`: reading with a boolean mask "
                                       "makes an array whose size depends on the data; use "
                                       "np.where(mask, A, 0.0) instead")
        return subscript(base, self.items(node, base, items))

    def _is_mask(self, item):
        if isinstance(item, (ast.Slice, ast.Constant)):
            return False
        return _is_array_item(self.ex.scope, item) and self.expr(item).boolean

    def items(self, node, base, items):
        """Normalised subscript items (see array_shapes.subscript), one per axis."""
        real = [i for i in items if not _is_new_axis(self.ex, i) and not _is_ellipsis(i)]
        if sum(_is_ellipsis(i) for i in items) > 1 or len(real) > base.rank:
            raise self.src.error(node, f"`{ast.unparse(node)}` has {len(real)} indices for "
                                       f"an array of {base.rank} dimensions")
        out, axis, narrowed = [], 0, _narrowed_axes(base)
        for item in items:
            if _is_new_axis(self.ex, item):
                out.append(("new",))
            elif _is_ellipsis(item):
                for _ in range(base.rank - len(real)):
                    out.append(self._full(base.shape[axis]))
                    axis += 1
            else:
                out.append(self._item(item, base.shape[axis]))
                if out[-1][0] == "index" and axis in narrowed:
                    self._check_index(item, out[-1][1], base.shape[axis])
                axis += 1
        out += [self._full(n) for n in base.shape[axis:]]
        gathers = [k for k, item in enumerate(out) if item[0] == "gather"]
        if len(gathers) > 1:                # NumPy broadcasts them together: one set of axes
            shape = self.broadcast_shape(node, [out[k][1] for k in gathers])
            for k in gathers:
                at = broadcast_to(ArrayExpr(out[k][1], out[k][2]), shape).at
                out[k] = ("gather", shape, at)
        return out

    def _check_index(self, node, i, size):
        """``0 <= i < size`` for an index into a slice or a computed array (``x[:k][j]``),
        which the bounds analysis of the memory behind it cannot see: NumPy raises
        IndexError where it fails. Proven over the loops around it, else checked per call
        where it depends on sizes only, else refused."""
        from ..analysis.bounds import minimum
        loops = [f.region for f in self.kernel.loops if getattr(f, "region", None) is not None]
        for low in (i, size - 1 - i):
            low = sp.expand(low)
            if not low.free_symbols <= set(self.kernel.symbols):
                low = minimum(low, loops)
            if low is not None and low.is_nonnegative:
                continue
            if low is not None and (low.is_negative or low.is_number):
                raise self.src.error(node, f"index `{ast.unparse(node)}` is outside the axis "
                                           f"of length {size} it indexes (NumPy raises "
                                           "IndexError)")
            if low is None or not low.free_symbols <= set(self.kernel.symbols):
                raise self.src.error(node, f"cannot show that index `{ast.unparse(node)}` "
                                           f"lies in the axis of length {size} it indexes (a "
                                           "slice or a computed array, where NumPy would "
                                           "raise IndexError); index the array itself")
            self.assume(node, sp.Ge(low, 0), f"index `{ast.unparse(node)}` is outside the "
                                             f"axis of length {size} it indexes")

    @staticmethod
    def _full(size):
        return ("slice", sp.Integer(0), 1, size)

    def _item(self, item, size):
        gather = self._index_array(item)
        if gather is not None:
            return gather
        if not isinstance(item, ast.Slice):
            i = self.ex.index(item)
            return ("index", i + size if i.is_number and i < 0 else i)
        step = 1 if item.step is None else self.ex.index(item.step, "a slice step")
        if not (isinstance(step, int) or step.is_Integer):
            raise self.src.error(item, f"slice step `{ast.unparse(item.step)}` must be a "
                                       "constant integer; write the loop explicitly")
        if step == 0:
            raise self.src.error(item, "slice step must not be zero")
        lower, upper = (self.ex.slice_bound(b) for b in (item.lower, item.upper))
        for bound, node in ((lower, item.lower), (upper, item.upper)):
            if bound is not None and not bound.is_number and not bound.is_nonnegative \
                    and bound.free_symbols <= set(self.kernel.symbols):
                self.assume(node, sp.Ge(bound, 0), f"slice bound `{ast.unparse(node)}` is "
                            "negative; bounds that are not constants are positions from the "
                            "start (write N - k rather than -k)")
        return ("slice",) + slice_axis(size, lower, upper, int(step))

    def _index_array(self, item):
        """``("gather", shape, at)`` for an integer array used as an index (``x[idx]``,
        ``U[..., self.iiU]``): element ``q`` of the result reads the element the index
        array's element ``q`` names (an index load, bounds-checked by its values)."""
        binding = self.ex.scope.get(item.id) if isinstance(item, ast.Name) else None
        if isinstance(binding, ViewValue):
            view, shape = binding.view, binding.shape
        elif isinstance(binding, DataValue) and not binding.container.is_scalar:
            view = View(binding.container, AXES[:len(binding.container.shape)])
            shape = binding.container.shape
        else:
            return self._computed_index(item)
        if view.container.dtype.kind not in "iu":
            return None
        return ("gather", tuple(shape),
                lambda q: index_load(view.container.name, view.element(q)))

    def _computed_index(self, item):
        """``("gather", shape, at)`` for an integer array expression used as an index
        (``x[idx + 1]``, ``x[(idx + 1) % n]``, ``A[idx[:, 0], idx[:, 1]]``), else None: its
        integer arrays' elements are read as index loads, so each element is an integer
        expression the bounds analysis proves or checks."""
        if isinstance(item, ast.Slice) or not any(
                isinstance(n, ast.Name) and _integer_array(self.ex.scope.get(n.id)) or
                isinstance(n, ast.Call) and is_array_call(self.ex, n) for n in ast.walk(item)):
            return None
        value = self.expr(item)                 # lazy: nothing is read yet
        if not value.rank or value.boolean:
            return None

        from .array_stores import tasklet_body

        def at(q):
            self.indexing += 1
            try:
                inputs, element = tasklet_body(self.ex, lambda: value.at(tuple(q)))
            finally:
                self.indexing -= 1
            if inputs or not element.is_integer:
                raise self.src.error(item, f"`{ast.unparse(item)}` is used as an index but "
                                           "its elements are not integers (index arrays are "
                                           "integer arrays and integer arithmetic on them)")
            return element
        return ("gather", tuple(value.shape), at)

    # ---- operators -----------------------------------------------------------------------
    def _expr_BinOp(self, node):
        op = type(node.op)
        if op is ast.MatMult:
            from .array_matmul import product
            return product(self, node)
        if op in LOGICAL or op in BITS:
            a, b = self.expr(node.left), self.expr(node.right)
            if op in LOGICAL and a.boolean and b.boolean:     # masks: (x > 0) & (x < 1)
                return self.combine(node, LOGICAL[op], [a, b], truth, True)
            if a.rank == b.rank == 0:
                return self.scalar(node)
            _no_negative_shift(self.src, node, op, b)
            return self.combine(node, lambda x, y: fp.bits(BITS[op], x, y), [a, b])
        if op not in ARITHMETIC:
            return self.scalar(node)
        fn = ARITHMETIC[op]
        if op in (ast.FloorDiv, ast.Mod):           # integer divisors must not be zero
            return self.combine(node, lambda a, b: fn(a, self.ex._divisor(node, b)
                                                      if _integers(a, b) else b),
                                [node.left, node.right])
        return self.combine(node, fn, [node.left, node.right])

    def _expr_UnaryOp(self, node):
        if isinstance(node.op, ast.Invert):
            a = self.expr(node.operand)
            if not a.boolean:                   # an integer array's bits
                return self.combine(node, lambda x: fp.bits(fp.bit_not, x), [a])
            return self.combine(node, fp.logical(sp.Not), [a], truth, True)
        if isinstance(node.op, ast.USub):
            return self.combine(node, fp.neg, [node.operand])
        if isinstance(node.op, ast.UAdd):
            return self.expr(node.operand)
        return self.scalar(node)

    def _expr_Compare(self, node):
        if any(type(op) not in COMPARE for op in node.ops):
            return self.scalar(node)
        ops = [COMPARE[type(op)] for op in node.ops]

        def chain(*vals):
            return fp.logical(sp.And)(*(f(a, b) for f, a, b in zip(ops, vals, vals[1:])))
        return self.combine(node, chain, [node.left] + list(node.comparators), number, True)

    def _expr_Call(self, node):
        from .array_calls import call
        if self.kernel.callee_of(node) is not None:       # another kernel: inlined (calls.py)
            return self.kernel.call_expr(self, node)
        out = call(self, node)
        return self.scalar(node) if out is None else out

    # ---- elementwise -----------------------------------------------------------------------
    def combine(self, node, fn, operands, convert=number, boolean=False):
        """``fn`` applied elementwise to the broadcast operands (AST nodes or ArrayExprs),
        each element passed through ``convert`` first."""
        args = [a if isinstance(a, ArrayExpr) else self.expr(a) for a in operands]
        named = [a.dtype if a.view is None else None for a in args]
        shape, args = self.broadcast(node, args)

        def at(index):
            values = [_of_dtype(convert(a.at(index)), d) for a, d in zip(args, named)]
            return real(self.src, node, fn(*values))
        return ArrayExpr(shape, at, boolean)

    def broadcast(self, node, operands):
        """(shape, the ArrayExprs ``operands`` broadcast to it), by NumPy's rules."""
        operands = self.units(node, operands)
        shape = self.broadcast_shape(node, [a.shape for a in operands])
        return shape, [broadcast_to(a, shape) for a in operands]

    def units(self, node, operands, against=()):
        """``operands`` with each extent that is 1 at the call's sizes, where it meets an
        extent of another operand (or of a shape in ``against``) not shown equal to it,
        made the constant 1, so that it broadcasts as NumPy's does (``x = pos[:, 0:1]``
        has ``Min(1, pos.shape[1])`` columns; ``x.T - x`` is a matrix). A size-1 axis of
        an argument is 1 the same way; here the call's values decide (``unit``)."""
        shapes = [a.shape for a in operands] + [tuple(s) for s in against]

        def meets(n, k):            # axis k from the right
            return any(len(s) >= k and s[-k] != ONE and same_size(n, s[-k]) is not True
                       for s in shapes)
        out = []
        for a in operands:
            ones = {j for j, n in enumerate(a.shape)
                    if n != ONE and meets(n, a.rank - j) and self.unit(node, n)}
            if ones:
                shape = tuple(ONE if j in ones else n for j, n in enumerate(a.shape))
                a = replace(remap(a, shape, lambda q, ones=ones: tuple(
                    sp.Integer(0) if j in ones else i for j, i in enumerate(q))),
                    dtype=a.dtype)
            out.append(a)
        return out

    def unit(self, node, n):
        """Whether extent ``n`` is 1 at the sizes of the call being compiled (``at_call``).
        Sizes of unannotated arguments are never 1 here (their size-1 axes are the
        constant 1)."""
        if n.is_number or (n.is_Symbol and n.name.startswith("__")):
            return n == ONE
        return self.ex.at_call(node, sp.Eq(n, ONE), lambda one: (
            f"the extent {n} is {'' if one else 'not '}1 at these sizes, as it was where "
            "this specialisation was compiled")) is sp.true

    def broadcast_shape(self, node, shapes):
        out = ()
        for shape in shapes:
            out = self._broadcast_pair(node, out, tuple(shape))
        return out

    def _broadcast_pair(self, node, a, b):
        n = max(len(a), len(b))
        out = []
        for x, y in zip((ONE,) * (n - len(a)) + a, (ONE,) * (n - len(b)) + b):
            if x == ONE or y == ONE:
                out.append(y if x == ONE else x)
            else:
                self.agree(node, x, y, a, b)
                out.append(x)
        return tuple(out)

    def agree(self, node, x, y, shape_a, shape_b, what="operands"):
        """Sizes ``x`` and ``y`` must be equal: proven, checked at call time, or an error."""
        same = same_size(x, y)
        if same:
            return
        message = (f"shapes {fmt_shape(shape_a)} and {fmt_shape(shape_b)} of the {what} of "
                   f"`{_short(node)}` do not match")
        if same is False:
            raise self.src.error(node, message)
        condition = sp.Eq(sp.powsimp(sp.expand(x - y)), 0)   # loop variables may cancel (N - i)
        if not condition.free_symbols <= set(self.kernel.symbols):
            raise self.src.error(node, message.replace("do not match", "cannot be shown to "
                                                       "match") + "; use the same sizes")
        self.assume(node, condition, message)

    def assume(self, node, condition, message):
        """``condition`` on the kernel's sizes, checked once per call before the kernel runs."""
        self.ex.assume(node, condition, message)


def _narrowed_axes(base):
    """Axes of ``base`` whose indices the bounds analysis does not check: those of a
    computed array, and those of a view shorter than the container axis they map to."""
    if base.view is None:
        return set(range(base.rank))
    out = set()
    for a in range(base.rank):
        owners = [c for c, e in enumerate(base.view.subset)
                  if AXES[a] in sp.sympify(e).free_symbols]
        if len(owners) != 1 or sp.sympify(base.view.subset[owners[0]]) != AXES[a] or \
                same_size(base.shape[a], base.view.container.shape[owners[0]]) is not True:
            out.add(a)
    return out


def _is_new_axis(ex, item):
    if isinstance(item, ast.Constant) and item.value is None:
        return True
    return isinstance(item, ast.Attribute) and item.attr == "newaxis" \
        and ex._module(item.value) is np


def _integers(a, b):
    return bool(a.is_integer and b.is_integer)


def _is_ellipsis(item):
    return isinstance(item, ast.Constant) and item.value is Ellipsis


def _short(node):
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
