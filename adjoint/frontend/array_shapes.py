"""Array values in the frontend: shapes, broadcasting, views and index maps.

An :class:`ArrayExpr` is a shape plus a function from an index (a tuple of sympy
integers) to that element's value as a sympy expression. Nothing is allocated: the
value is only built, element by element, inside the map that finally stores it, and
reading an element registers the memlets it needs at that moment. Slices, ``.T``,
flips, reshapes and broadcasting are compositions of index maps.

A :class:`View` says which container element each index names; an ArrayExpr that
carries one is memory (an argument, a temporary or a slice of them) and can be
written.
"""
import re
from dataclasses import dataclass
from typing import Callable, Optional

import sympy as sp

from ..sdfg import Container
from ..sdfg import arithmetic as fp
from .expressions import DataValue, number_of
from .functions import floordiv, python_mod

AXES = tuple(sp.Symbol(f"__a{k}", integer=True) for k in range(32))
ONE = sp.Integer(1)


@dataclass(frozen=True)
class View:
    """Container elements named by an index: ``subset`` is over ``AXES[:rank]``."""
    container: Container
    subset: tuple

    def element(self, index):
        env = dict(zip(AXES, index))
        return tuple(sp.expand(sp.sympify(s).subs(env, simultaneous=True))
                     for s in self.subset)

    def is_whole(self, shape):
        """Whether this is the whole container in its own order (C-contiguous)."""
        return self.subset == AXES[:len(shape)] and tuple(shape) == self.container.shape


@dataclass(frozen=True)
class ArrayExpr:
    """An array value: ``at(index)`` is the element's sympy expression (rank 0: ``at(())``)."""
    shape: tuple
    at: Callable
    boolean: bool = False          # elements are sympy conditions (a mask)
    view: Optional[View] = None    # set when the value is writable memory
    empty: bool = False            # np.empty: elements undefined, nothing to store
    dtype: Optional[object] = None  # the np.dtype a creation names (np.zeros(N): float64)

    @property
    def rank(self):
        return len(self.shape)


class ShapeOf:
    """What ``.shape``/``len()`` see of a view bound to a name (stands in for a container)."""
    is_scalar = False

    def __init__(self, name, shape):
        self.name, self.shape = name, shape


class MaskValue(DataValue):
    """A name bound to a temporary holding a mask (as 0.0 / 1.0): ``m = A > 0``."""


class ViewValue(DataValue):
    """A name bound to a view of a container (``row = A[i]``): reads and writes go through."""

    def __init__(self, name, view, shape, boolean, loops=()):
        super().__init__(ShapeOf(name, shape))
        self.view, self.shape, self.boolean = view, tuple(shape), boolean
        self.loops = loops          # the loops (frames) around the binding


def number(value):
    """Masks become 1 / 0 where they are used as numbers."""
    return number_of(value) if is_condition(value) else value


def truth(value):
    """Numbers become conditions (``x != 0``) where they are used as masks."""
    if is_condition(value):
        return value
    return fp.nonzero(value)


def is_condition(value):
    """Relations and their combinations (sympy symbols are Booleans too, but numbers here)."""
    return isinstance(value, sp.logic.boolalg.Boolean) and not isinstance(value, sp.Expr)


def constant(value, shape=(), boolean=False, empty=False, dtype=None):
    return ArrayExpr(tuple(shape), lambda index: value, boolean, None, empty, dtype)


def remap(expr, shape, old_index, keep_view=True):
    """``expr`` seen through an index map: element ``q`` is ``expr``'s ``old_index(q)``."""
    view = None
    if keep_view and expr.view is not None:
        view = View(expr.view.container, expr.view.element(old_index(AXES[:len(shape)])))
    return ArrayExpr(tuple(shape), lambda q: expr.at(old_index(q)), expr.boolean, view,
                     dtype=expr.dtype)      # a part of an int64 grid is int64


def without_view(expr):
    return ArrayExpr(expr.shape, expr.at, expr.boolean)


# ---- sizes -----------------------------------------------------------------------------
def same_size(a, b):
    """True / False when sympy decides ``a == b`` for every value of the sizes, else None."""
    d = sp.powsimp(sp.expand(sp.sympify(a) - sp.sympify(b)))     # R**i * R**(K - i): R**K
    if d == 0:
        return True
    if d.is_number:
        return False
    return None


def fmt_shape(shape):
    """A shape as messages show it: the sizes of an unannotated argument ``A`` (the
    engine's ``__A_0``) read ``A.shape[0]``."""
    inner = ", ".join(re.sub(r"__(\w+?)_(\d+)\b", r"\1.shape[\2]", str(s)) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def volume(shape):
    return sp.Mul(*shape) if shape else ONE


# ---- slicing ---------------------------------------------------------------------------
def slice_axis(size, lower, upper, step):
    """(offset, step, length) of ``[lower:upper:step]`` on an axis of ``size``.

    Constant negative bounds count from the end, and constant bounds are clamped to the
    axis as Python does (``x[:3]`` has ``min(3, N)`` elements; only where the clamp can
    matter: a length below zero is an empty slice anyway). Symbolic bounds are taken as
    they are (the bounds analysis proves or checks the indices they produce)."""
    if all(x is None or x.is_Integer for x in (size, lower, upper)):
        start, stop, st = slice(_int(lower), _int(upper), step).indices(int(size))
        return sp.Integer(start), step, sp.Integer(len(range(start, stop, st)))
    if step > 0:
        start = sp.Integer(0) if lower is None else _from_end(lower, size, sp.Max, 0)
        stop = size if upper is None else _from_end(upper, size, sp.Min, size)
        length = floordiv(stop - start + step - 1, step)
    else:
        start = size - 1 if lower is None else _from_end(lower, size, sp.Min, size - 1)
        stop = sp.Integer(-1) if upper is None else _from_end(upper, size, sp.Max, -1)
        length = floordiv(start - stop - step - 1, -step)
    return sp.expand(start), step, sp.expand(length)


def _int(x):
    return None if x is None else int(x)


def _from_end(bound, size, clamp, limit):
    """A bound as an index; a constant one clamped by ``clamp(index, limit)`` on the side
    where it can leave the axis (from the end when negative, from the start if not)."""
    if not bound.is_number:
        return bound
    index = bound + size if bound < 0 else bound
    return clamp(index, limit) if (bound < 0) == (clamp is sp.Max) else index


def subscript(expr, items):
    """``expr[items]`` for normalised items: ``("new",)``, ``("index", i)``,
    ``("slice", offset, step, length)`` or ``("gather", shape, at)`` (an integer array:
    ``at(q)`` is its element ``q``, an index load; several share one shape and one set of
    axes), one per axis of ``expr`` plus new axes. The index arrays' axes go where they
    stand, or first when integers and they are apart (``A[0, :, idx]``), as NumPy places
    advanced indices; the result is no view."""
    gathers = [k for k, it in enumerate(items) if it[0] == "gather"]
    advanced = [k for k, it in enumerate(items) if it[0] in ("gather", "index")]
    front = bool(gathers) and advanced != list(range(advanced[0], advanced[-1] + 1))
    start, shape = {}, []       # the result axis each item's first axis is
    for k in sorted(range(len(items)), key=lambda k: (not (front and k in gathers), k)):
        item, start[k] = items[k], len(shape)
        if item[0] == "new":
            shape.append(ONE)
        elif item[0] == "slice":
            shape.append(item[3])
        elif item[0] == "gather" and k != gathers[0]:   # index arrays broadcast together
            start[k] = start[gathers[0]]
        elif item[0] == "gather":
            shape.extend(item[1])

    def old_index(q):
        out = []
        for k, item in enumerate(items):
            if item[0] == "index":
                out.append(item[1])
            elif item[0] == "slice":
                out.append(item[1] + item[2] * q[start[k]])
            elif item[0] == "gather":
                out.append(item[2](tuple(q[start[k]:start[k] + len(item[1])])))
        return tuple(out)
    return remap(expr, shape, old_index, keep_view=not gathers)


def transpose(expr, perm):
    """Axis ``k`` of the result is axis ``perm[k]`` of ``expr``."""
    inverse = [perm.index(j) for j in range(len(perm))]
    shape = [expr.shape[j] for j in perm]
    return remap(expr, shape, lambda q: tuple(q[inverse[j]] for j in range(len(perm))))


def flip(expr, axes):
    def old_index(q):
        return tuple(n - 1 - i if k in axes else i
                     for k, (i, n) in enumerate(zip(q, expr.shape)))
    return remap(expr, expr.shape, old_index)


def reshape(expr, shape):
    """C-order reshape (``volume`` already checked); stays writable only for whole arrays.
    One that only adds or drops axes of size 1 maps indices without division: the other
    sizes pair up equal (one pair may be unproven, the equal volumes make it equal)."""
    keep = expr.view is not None and expr.view.is_whole(expr.shape)
    kept = [k for k, n in enumerate(shape) if n != ONE]
    same = [same_size(shape[k], n) for k, n in zip(kept, (n for n in expr.shape if n != ONE))]
    if len(same) == len(kept) == sum(n != ONE for n in expr.shape) and False not in same \
            and same.count(None) <= 1:
        def old_index(q):
            rest = iter(q[k] for k in kept)
            return tuple(sp.Integer(0) if n == ONE else next(rest) for n in expr.shape)
        return remap(expr, shape, old_index, keep_view=keep)
    new_strides, old_strides = _strides(shape), _strides(expr.shape)

    def old_index(q):
        flat = sum((i * s for i, s in zip(q, new_strides)), sp.Integer(0))
        out = []
        for k, (s, n) in enumerate(zip(old_strides, expr.shape)):
            i = floordiv(flat, s)
            out.append(i if k == 0 else python_mod(i, n))
        return tuple(out)
    return remap(expr, shape, old_index, keep_view=keep)


def _strides(shape):
    out, acc = [], ONE
    for n in reversed(shape):
        out.append(acc)
        acc = acc * n
    return tuple(reversed(out))


def broadcast_to(expr, shape):
    """``expr`` repeated along new leading axes and along its size-1 axes."""
    if tuple(expr.shape) == tuple(shape):
        return expr
    lead = len(shape) - expr.rank

    def old_index(p):
        return tuple(sp.Integer(0) if n == ONE and shape[lead + k] != ONE else p[lead + k]
                     for k, n in enumerate(expr.shape))
    return remap(expr, shape, old_index, keep_view=False)
