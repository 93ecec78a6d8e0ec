"""Stores of array values: assignments to slices, masks and names, and temporaries.

Every store is one map over the target's shape with a single tasklet
``target[W(p)] = new(p)``. NumPy evaluates the right-hand side before writing; the
map reproduces that unless some iteration reads an element another iteration
writes. Then (and only then) the new values go to a transient first: a read of the
target container at an index map other than ``W`` that is not provably disjoint
from it (by the ranges of the indices, or their parity) counts as an overlap.
"""
import ast

import numpy as np
import sympy as sp

from ..analysis.bounds import minimum
from ..analysis.dependence import other_lattice
from .extents import affine
from ..sdfg import arithmetic as fp
from ..sdfg import Container, LoopRegion, MapScope, Memlet, State, Tasklet
from .array_shapes import (ONE, MaskValue, ViewValue, broadcast_to, fmt_shape, number, remap,
                           subscript, truth)
from .expressions import RESULT, DataValue, IntValue
from .masks import mask_last, unmasked

FLOAT64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)


# ---- building blocks ----------------------------------------------------------------------
def map_ranges(shape):
    return tuple((sp.Integer(0), n, ONE) for n in shape)


def tasklet_body(ex, fn):
    """(inputs, expression) of ``fn()``, with the reads it makes registered afresh."""
    outer, ex.reads = ex.reads, {}
    try:
        expr = fn()
    finally:
        reads, ex.reads = ex.reads, outer
    return tuple((conn, Memlet(d, s)) for (d, s), conn in reads.items()), expr


def temporary(b, node, shape, prefix, name=None, dtype=None):
    """A new transient array: of ``dtype`` where the code names one (``np.zeros(N,
    dtype=np.float32)``), else of the dtype of what is stored into it
    (``frontend/dtypes.py``; float64 until then). An expression's temporary (not a name's array) may
    have sizes affine in loop variables (``data[:, i] @ data[:, i:]`` inside a loop):
    ``extents.largest_extents`` then allocates it at its largest size."""
    loose = set().union(*(sp.sympify(n).free_symbols for n in shape)) - set(b.kernel.symbols)
    named = name is not None and not name.startswith("__")
    if loose and (named or not all(affine(n, loose) for n in shape)):
        names = ", ".join(sorted(map(str, loose)))
        why = ("an array bound to a name must have sizes known on entry (only the "
               "temporaries of expressions may vary with the loop)") if named else \
            "sizes must be affine in the loop variables (as `a*i + b`)"
        error = b.src.error(node, f"`{_short(node)}` needs an array of shape "
                                  f"{fmt_shape(shape)}, which depends on {names}; {why}: "
                                  "use the expression where it is needed, or allocate the "
                                  "array before the loop at its largest size and use a "
                                  "slice of it")
        # Sizes not affine in the loop variables (R ** i: a loop of a few passes) have no
        # largest size to allocate: statements.parse unrolls those loops where the call
        # decides their trip counts
        if named and not all(affine(n, loose) for n in shape):
            error.unroll = frozenset(f.key for f in b.kernel.loops if f.region is not None
                                     and f.region.var in loose and f.key is not None)
        raise error
    name = name or b.kernel.new_transient(prefix).name
    c = Container(name, dtype or FLOAT64, tuple(shape), True)
    b.kernel.containers[name] = c
    if dtype is not None:
        b.kernel.typed.add(name)
    return c


def stored_dtype(value):
    """The dtype of a temporary holding ``value``: a mask's is bool (stored as uint8, as
    NumPy's), another's the one the code names (None: decided by ``frontend/dtypes.py``)."""
    return BOOL if value.boolean else value.dtype


def store(b, target, new, line):
    """Regions setting every element ``p`` of the view ``target`` to ``new(p, old)``,
    where ``old()`` reads the element's current value."""
    view, shape = target.view, target.shape
    name = view.container.name
    params = b.state.fresh("m", len(shape))
    written = view.element(params)

    def old():
        return b.ex._read(name, written)
    inputs, body = tasklet_body(b.ex, lambda: new(params, old))
    b.kernel.note_store(name, inputs, body)
    if _overlaps(name, written, inputs, params, shape):
        tmp = temporary(b, None, view.container.shape, "__copy")   # shape: kernel sizes
        b.ex.prelude += _node(Tasklet(inputs, ((Memlet(tmp.name, written), body),), line),
                              params, shape, line)
        inputs, body = tasklet_body(b.ex, lambda: b.ex._read(tmp.name, written))
    return _node(Tasklet(inputs, ((Memlet(name, written), body),), line), params, shape, line)


def _node(tasklet, params, shape, line):
    node = MapScope(params, map_ranges(shape), (tasklet,), line) if params else tasklet
    return [State((node,), f"line_{line}")]


def _overlaps(name, written, inputs, params, shape):
    loops = [LoopRegion(p, a, n, s, None) for p, (a, n, s) in zip(params, map_ranges(shape))]
    return any(m.data == name and m.subset != written
               and not _disjoint(written, m.subset, loops, params)
               for _, m in inputs)


def _disjoint(a, b, loops, params):
    """Whether no iteration's ``a`` can equal another iteration's ``b``."""
    return any(_apart(x, y, loops) or other_lattice(x, y, params) for x, y in zip(a, b))


def _apart(x, y, loops):
    lo_x, lo_y = minimum(x, loops), minimum(y, loops)
    hi_x, hi_y = minimum(-x, loops), minimum(-y, loops)
    if None in (lo_x, lo_y, hi_x, hi_y):
        return False
    return bool((lo_y + hi_x).is_positive) or bool((lo_x + hi_y).is_positive)


def fit(b, node, value, shape):
    """``value`` broadcast to the target ``shape`` (NumPy's rules for assignment)."""
    extra = value.rank - len(shape)
    if extra > 0:
        if any(n != ONE for n in value.shape[:extra]):
            raise b.src.error(node, f"cannot assign an array of shape "
                                    f"{fmt_shape(value.shape)} to a target of shape "
                                    f"{fmt_shape(shape)}")
        value = subscript(value, [("index", sp.Integer(0))] * extra +
                          [("slice", sp.Integer(0), 1, n) for n in value.shape[extra:]])
    value = b.units(node, [value], [shape])[0]
    for n, m in zip(shape[len(shape) - value.rank:], value.shape):
        if m != ONE:
            b.agree(node, n, m, shape, value.shape, "target and value")
    return broadcast_to(value, shape)


# ---- assignments ----------------------------------------------------------------------------
def assign_subscript(b, stmt, target, value, op):
    line = b.line(stmt)
    target, value = mask_last(b, target), mask_last(b, value)     # x[m, d]: x[:, d][m]
    items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
    if len(items) == 1 and b._is_mask(items[0]):
        return _assign_mask(b, stmt, target, value, op)
    if isinstance(target.value, ast.Attribute) and target.value.attr in ("real", "imag"):
        whole = f"{ast.unparse(target.value.value)}[{ast.unparse(target.slice)}]"
        other = "v + 1j * " + whole + ".imag" if target.value.attr == "real" else \
            whole + ".real + 1j * v"
        raise b.src.error(target, f"cannot assign to `{ast.unparse(target)}`: the parts of a "
                                  f"complex array are read-only in kernels; assign whole "
                                  f"elements, `{whole} = {other}`")
    dest = b.expr(target)
    if dest.view is None:
        raise b.src.error(target, f"cannot assign to `{ast.unparse(target)}`: it is a "
                                  "computed value, not memory")
    return assign_view(b, stmt, dest, stored_value(b, value), op, line)


def stored_value(b, value):
    """The value stored into elements: a tuple or list of numbers and arrays as NumPy
    converts it (``force[0] = 0, 0``: ``np.array((0, 0))``)."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return b.sequence(value)
    return b.expr(value)


def assign_view(b, stmt, dest, value, op, line):
    v = fit(b, stmt, value, dest.shape)

    def new(p, old):
        x = number(v.at(p))
        return x if op is None else op(old(), x)
    regions = store(b, dest, new, line)
    return b.ex.prelude + regions


def _assign_mask(b, stmt, target, value, op):
    """``A[mask] = v`` / ``A[mask] op= v``: each element keeps its value where mask is false."""
    dest = b.expr(target.value)
    if dest.view is None:
        raise b.src.error(target, f"cannot assign to `{ast.unparse(target)}`: "
                                  f"`{ast.unparse(target.value)}` is not memory")
    mask = b.expr(target.slice)
    if not 0 < mask.rank <= dest.rank:
        raise b.src.error(target, f"the mask of `{ast.unparse(target)}` has shape "
                                  f"{fmt_shape(mask.shape)}, the array {fmt_shape(dest.shape)}")
    for n, m in zip(dest.shape, mask.shape):
        b.agree(target, n, m, dest.shape, mask.shape, "array and mask")
    r = mask.rank                                    # a mask of rows selects whole rows
    mask = remap(mask, dest.shape, lambda p: p[:r], keep_view=False)
    elementwise = unmasked(target.slice, value,      # A[m] = B[m] * 2.0 + C[m]
                           lambda node: b.expr(node).rank > 0)
    if elementwise is not None:
        v = fit(b, stmt, b.expr(elementwise), dest.shape)
    else:
        v = b.expr(value)
        if v.rank:
            raise b.src.error(value, "assign a single number to a masked selection "
                                     f"(`{ast.unparse(target)} = 0.0`), an elementwise "
                                     "expression of the same mask of arrays (`A[m] = "
                                     "B[m] * 2.0`), or use np.where")
        v = broadcast_to(v, dest.shape)

    def new(p, old):
        x = number(v.at(p))
        return fp.select(x if op is None else op(old(), x), truth(mask.at(p)), old())
    regions = store(b, dest, new, b.line(stmt))
    return b.ex.prelude + regions


def assign_name(b, stmt, target, value, op):
    """``x = value`` binds the name ``x`` (Python's semantics, see :mod:`.bindings`);
    ``x op= array`` updates x's array in place."""
    name, binding = target.id, b.ex.scope.get(target.id)
    if isinstance(binding, IntValue):
        return None
    array = isinstance(binding, DataValue) and not binding.container.is_scalar
    if array and op is not None:
        return assign_view(b, stmt, b.expr(target), b.expr(value), op, b.line(stmt))
    v = b.expr(value)
    if not v.rank and not array:
        return None                                 # a number: statements' scalar path
    if binding is not None and b.kernel.binds.carried(name):
        return _store_carried(b, stmt, target, binding, v, array)
    return _bind(b, stmt, target, v, op, binding)


def _store_carried(b, stmt, target, binding, v, array):
    """A name bound outside this loop or branch, rebound inside (see :mod:`.bindings`)."""
    name, binds = target.id, b.kernel.binds
    if not array:
        raise b.src.error(target, f"{name!r} holds a single number before this loop or "
                                  "branch; use another name for the array")
    binding = binds.revert(b.kernel, name)         # a pending alias ends here
    dest = b.expr(target)
    if isinstance(binding, MaskValue) != v.boolean:
        raise b.src.error(target, f"{name!r} changes between a mask and numbers inside a loop "
                                  "or branch; use another name")
    if v.rank != len(dest.shape):
        what = "a number" if not v.rank else f"an array of shape {fmt_shape(v.shape)}"
        raise b.src.error(target, f"{name!r} is an array of shape {fmt_shape(dest.shape)} "
                                  f"before this loop or branch, and `{_short(stmt)}` would make "
                                  f"it {what}: a name keeps its shape through a loop or a "
                                  "branch; use another name")
    for n, m in zip(dest.shape, v.shape):
        b.agree(stmt, n, m, dest.shape, v.shape, "target and value")
    line = b.line(stmt)
    other = binds.named(b.ex.scope, v.view.container.name, name) if v.view is not None else None
    if other is not None:               # another name for that array, until the block ends
        binds.alias(b.kernel, name, ViewValue(name, v.view, v.shape, v.boolean,
                                              tuple(b.kernel.loops)), other, line)
        return b.ex.prelude
    before = binds.snapshot(b.kernel, name, binding.container, line)
    regions = store(b, dest, lambda p, old: number(v.at(p)), line)
    binds.stores.update(id(r) for r in regions)
    return b.ex.prelude + before + regions


def _bind(b, stmt, target, v, op, binding):
    """``name = v`` where the name is new or rebound in the region it was bound in."""
    name = target.id
    if name == RESULT:
        raise b.src.error(stmt, f"a kernel returns a single number, and this is an array of "
                                f"shape {fmt_shape(v.shape)}; reduce it (np.sum, ...)")
    if op is not None:
        raise b.src.error(target, f"{name!r} holds a single number before this line; use "
                                  "another name for the array")
    b.kernel._check_name(target, name)
    binds = b.kernel.binds
    fresh = binds.fresh(b.kernel.containers, name) if binding is not None else name
    if not v.rank:                                  # an array name rebound to a number
        c = Container(fresh, FLOAT64, (), True)
        b.kernel.containers[fresh] = c
        b.ex.scope[name] = DataValue(c)
        binds.bind(name, fresh)
        inputs, body = tasklet_body(b.ex, lambda: number(v.at(())))
        regions = _node(Tasklet(inputs, ((Memlet(fresh, ()), body),), b.line(stmt)), (), (),
                        b.line(stmt))
        binds.stores.update(id(r) for r in regions)
        return b.ex.prelude + regions
    if v.view is not None:                          # another name for that memory
        if binding is None:
            b.kernel.containers.pop(name, None)
        b.ex.scope[name] = ViewValue(name, v.view, v.shape, v.boolean,
                                     tuple(getattr(b.kernel, "loops", ())))
        binds.bind(name)
        return b.ex.prelude             # e.g. the product a view of its result names
    c = temporary(b, stmt.value, v.shape, None, fresh, stored_dtype(v))
    b.ex.scope[name] = (MaskValue if v.boolean else DataValue)(c)
    binds.bind(name, c.name)
    if v.empty:
        return b.ex.prelude
    regions = store(b, b.container(c, v.boolean), lambda p, old: number(v.at(p)), b.line(stmt))
    binds.stores.update(id(r) for r in regions)
    return b.ex.prelude + regions


def _short(node):
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
