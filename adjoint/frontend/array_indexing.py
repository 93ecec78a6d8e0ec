"""Grids, counts and filters as index maps: ``np.mgrid``/``ogrid``/``meshgrid``/``indices``,
``np.histogram``/``bincount``, ``scipy.ndimage``'s ``correlate``/``convolve`` (and their
``1d`` forms).

Each registers into ``array_calls``'s tables (``NUMPY``, ``NUMPY_TUPLES``,
``NUMPY_GRIDS``, ``SCIPY_ARRAYS``), which that module dispatches through, and
``frontend/__init__.py`` imports this module once for them. A grid's element is its
index (scaled and shifted), a filter's a sum of weighted neighbours whose indices fold
the boundary mode in (no padded copy). A histogram of equal bins computes each value's
bin as NumPy does and adds its one (weight) in, one value after the other, as
``bincount``; of given edges, a count is a sum of the values' tests against them. Counts
have no derivative with respect to the data, the weights' goes to their bins, as in
NumPy and JAX.
"""
import ast
import dataclasses
import itertools

import numpy as np
import sympy as sp

from .array_calls import (NUMPY, NUMPY_GRIDS, NUMPY_TUPLES, SCIPY_ARRAYS, UFUNCS, _check_dtype,
                          _constant_int, _converted, _flag, _float_constant, _flat, _gradients,
                          _required, _split,
                          _scalar, _shape, bind, linspace_values)
from .array_reductions import reduction
from .array_shapes import ArrayExpr, constant, number, subscript
from .array_stores import fit, store, temporary
from .dtypes import FLOAT64
from .functions import floordiv, python_mod
from ..sdfg import LoopRegion, Sequence
from ..sdfg.nodes import index_load
from ..sdfg import arithmetic as fp

INT64 = np.dtype(np.int64)


# ---- grids ----------------------------------------------------------------------------------
def _grid_axis(b, node, item):
    """(length, element of index i, whether float) of one slice of ``np.mgrid[...]``: NumPy's
    ``i * step + start`` (a complex step ``num * 1j``: ``num`` points from start to stop)."""
    if not isinstance(item, ast.Slice):
        raise b.src.error(node, f"`{ast.unparse(node)}`: a grid takes slices (`0:n`, "
                                "`-1.0:1.0:50j`)")
    step = _imaginary(item.step)
    if step is not None:                                # num points, stop included
        num = int(abs(step))
        lo, hi = (_scalar(b, n) if n is not None else constant(sp.Integer(0))
                  for n in (item.lower, item.upper))
        start, stop = number(lo.at(())), number(hi.at(()))
        delta = sp.Integer(1) if num == 1 else \
            fp.div(fp.sub(stop, start), sp.Float(num - 1))
        return sp.Integer(num), lambda i: fp.add(fp.mul(i, delta), start), True
    values = [_float_constant(n) if n is not None else d
              for n, d in ((item.lower, 0), (item.upper, None), (item.step, 1))]
    if any(isinstance(v, float) for v in values):
        if any(v is None for v in values):
            raise b.src.error(node, f"`{ast.unparse(node)}`: with float bounds the length "
                                    "depends on their values, so they must be constants; "
                                    "use integer bounds or a complex step (`a:b:50j`)")
        start, stop, step = (float(v) for v in values)
        length = int(np.ceil((stop - start) / step))
        return sp.Integer(max(length, 0)), \
            lambda i: fp.add(fp.mul(i, sp.Float(step)), sp.Float(start)), True
    start = sp.Integer(0) if item.lower is None else b.ex.index(item.lower, "a grid bound")
    stop = b.ex.index(_required_bound(b, node, item.upper), "a grid bound")
    step = sp.Integer(1) if item.step is None else b.ex.index(item.step, "a grid step")
    if not step.is_Integer or step == 0:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the step must be a constant integer "
                                "other than zero, or a complex number of points (`50j`)")
    length = floordiv(stop - start + step - (1 if step > 0 else -1), step)
    length = sp.Max(0, length) if not length.is_number else sp.Integer(max(0, int(length)))
    return length, lambda i: start + step * i, False


def _required_bound(b, node, bound):
    if bound is None:
        raise b.src.error(node, f"`{ast.unparse(node)}`: a grid's slices need their stop")
    return bound


def _imaginary(node):
    """The number of points of a complex step (``50j``), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, complex):
        return node.value.imag
    return None


def _grid(b, node, sparse):
    """``np.mgrid[s0, s1, ...]`` (one array, the axes' grids stacked) or ``np.ogrid[...]``
    (a tuple of arrays, each varying along its own axis); one slice: that axis alone."""
    key = node.slice
    items = key.elts if isinstance(key, ast.Tuple) else [key]
    axes = [_grid_axis(b, node, item) for item in items]
    is_float = any(f for _, _, f in axes)
    shape = tuple(n for n, _, _ in axes)

    def element(k, i):
        value = axes[k][1](i)
        return fp.as_float64(value, evaluate=False) if is_float and value.is_integer else value
    dtype = FLOAT64 if is_float else INT64      # a temporary holding it indexes (x[I])
    if not isinstance(key, ast.Tuple):
        return ArrayExpr(shape, lambda q: element(0, q[0]), dtype=dtype)
    if sparse:
        return [lambda k=k: ArrayExpr(tuple(n if j == k else sp.Integer(1)
                                            for j, n in enumerate(shape)),
                                      lambda q, k=k: element(k, q[k]), dtype=dtype)
                for k in range(len(axes))]
    return ArrayExpr((sp.Integer(len(axes)),) + shape,
                     lambda q: _pick(q[0], [element(k, q[1 + k]) for k in range(len(axes))]),
                     dtype=dtype)


def _pick(k, values):
    """``values[k]`` for an index ``k`` that may be symbolic (a map over the stacked axis)."""
    if k.is_Integer:
        return values[int(k)]
    out = values[-1]
    for j in reversed(range(len(values) - 1)):
        out = fp.select(values[j], sp.Eq(k, j), out)
    return out


def _indices(b, node, args):
    """``np.indices(dimensions)``: ``np.mgrid`` over ``0:n`` for each dimension."""
    if _flag(b, args, "sparse"):
        raise b.src.error(node, f"`{ast.unparse(node)}`: sparse=True returns a tuple; use "
                                "np.ogrid")
    shape = tuple(_shape(b, _required(b, node, args, "dimensions")))
    grid = ArrayExpr((sp.Integer(len(shape)),) + shape,
                     lambda q: _pick(q[0], list(q[1:])), dtype=INT64)
    return _converted(grid, _check_dtype(b, args, None))


def _meshgrid(b, node, args):
    """``np.meshgrid(x1, x2, ..., indexing='xy', sparse=False)``: array ``k`` is ``x_k``
    along axis k ('ij'; 'xy' swaps the first two axes), repeated along the others (size 1
    there when sparse); each an index map of its vector."""
    vectors = [_flat(b, node, b.expr(args[k])) for k in sorted(args) if k.startswith("_")]
    indexing = args.get("indexing")
    indexing = "xy" if indexing is None else getattr(indexing, "value", None)
    if indexing not in ("xy", "ij"):
        raise b.src.error(node, f"`{ast.unparse(node)}`: indexing= must be 'xy' or 'ij'")
    sparse = _flag(b, args, "sparse")
    axis = list(range(len(vectors)))
    if indexing == "xy" and len(vectors) > 1:
        axis[0], axis[1] = 1, 0
    full = [None] * len(vectors)
    for k, v in enumerate(vectors):
        full[axis[k]] = v.shape[0]

    def one(k):
        shape = tuple(n if j == axis[k] or not sparse else sp.Integer(1)
                      for j, n in enumerate(full))
        return ArrayExpr(shape, lambda q: number(vectors[k].at((q[axis[k]],))))
    return [lambda k=k: one(k) for k in range(len(vectors))]


# ---- counts ---------------------------------------------------------------------------------
def _histogram(b, node, args):
    """``np.histogram(a, bins=10, range=None, weights=None)``: (counts, edges). Equal bins
    span ``range`` or the data's extremes (widened by 0.5 where they are equal), edges as
    NumPy's linspace; each value's bin is computed directly as NumPy computes it and its
    one (weight) added in, one value after the other (``_bin_indices``, ``_fill_counts``).
    Given edges: counts sum ``edges[k] <= v < edges[k + 1]`` (the last bin closed) over
    the values."""
    if _flag(b, args, "density"):
        raise b.src.error(node, f"`{ast.unparse(node)}`: density=True is not supported; "
                                "divide the counts by their sum times the bin widths")
    a = _flat(b, node, b.expr(_required(b, node, args, "a")))
    bins = args.get("bins", ast.Constant(10))
    edges_given = b.expr(bins) if not isinstance(bins, ast.Constant) else None
    weights = args.get("weights")
    w = None if weights is None or isinstance(weights, ast.Constant) and \
        weights.value is None else _flat(b, node, b.expr(weights))
    if w is not None:
        b.agree(node, w.shape[0], a.shape[0], w.shape, a.shape, "weights and values")
    if edges_given is None or edges_given.rank != 1:
        nbins = b.ex.index(bins, "a number of bins")
        end = _stored(b, node, _outer_edges(b, node, a, args.get("range")))
        edges = ArrayExpr((nbins + 1,), linspace_values(lambda: end(0), lambda: end(1),
                                                        nbins + 1, True), dtype=FLOAT64)
        # one more bin, never returned, takes the values outside the range
        counts = _counts(b, node, nbins + 1, a.shape[0],
                         lambda: _bin_indices(b, node, a, end, nbins), w)
        return [lambda: ArrayExpr((nbins,), counts.at, dtype=counts.dtype), lambda: edges]
    edges = edges_given
    nbins = edges.shape[0] - 1
    last = nbins - 1

    def hit(q):
        k, v = q[0], number(a.at((q[1],)))
        below = fp.relation(sp.Lt)(v, number(edges.at((k + 1,))))
        upper = fp.logical(sp.Or)(below, sp.And(sp.Eq(k, last),
                                                fp.relation(sp.Le)(v, number(edges.at((k + 1,))))))
        inside = fp.logical(sp.And)(fp.relation(sp.Le)(number(edges.at((k,))), v), upper)
        return fp.select(sp.Integer(1) if w is None else number(w.at((q[1],))), inside,
                         sp.Integer(0))
    counts = reduction(b, node, "sum", ArrayExpr((nbins, a.shape[0]), hit), (1,), False)
    return [lambda: counts, lambda: edges]


def _bin_indices(b, node, a, end, nbins):
    """Each value's bin among ``nbins`` equal ones from ``end(0)`` to ``end(1)``, ``nbins``
    for a value outside them (or nan), as NumPy's ``histogram`` computes it: ``(v -
    first) / (last - first) * nbins`` truncated, the last edge in the last bin; then one
    down where ``v`` lies below its bin's lower edge and one up where at or above its
    upper edge (rounding near the edges). Two passes, as NumPy's: the correction reads
    the edges at the first guess, an index array."""
    lt, ge, both = fp.relation(sp.Lt), fp.relation(sp.Ge), fp.logical(sp.And)

    def guess(p):       # clamped, whatever the cast of a nan (a degenerate range) gives
        v, first = number(a.at((p[0],))), end(0)
        k = fp.truncated(fp.mul(fp.div(fp.sub(v, first), fp.sub(end(1), first)), nbins),
                         evaluate=False)
        return fp.select(nbins - 1, sp.Ge(k, nbins, evaluate=False),
                         fp.select(sp.Integer(0), sp.Lt(k, 0, evaluate=False), k))
    first_guess = _index_temporary(b, node, a.shape, guess, nbins - 1)

    def edge(k):        # NumPy's linspace below the last edge (which no test here needs)
        first = end(0)
        return fp.add(fp.mul(k, fp.div(fp.sub(end(1), first), nbins)), first)

    def corrected(p):
        v, k = number(a.at((p[0],))), first_guess(p)
        down = both(lt(v, edge(k)), sp.Ne(k, 0))
        up = both(ge(v, edge(k + 1)), sp.Ne(k, nbins - 1))
        inside = both(ge(v, end(0)), fp.relation(sp.Le)(v, end(1)))
        return fp.select(fp.select(k - 1, down, fp.select(k + 1, up, k)), inside, nbins)
    return _index_temporary(b, node, a.shape, corrected, nbins)


def _stored(b, node, end):
    """``end`` read from two scalars set where first read: a comparison with a choice
    inside (the widened extremes) would be folded by sympy into cases, reordering the
    operations."""
    names = []

    def read(k):
        if not names:
            for j in (0, 1):
                c = temporary(b, node, (), "__edge")
                b.ex.prelude += store(b, b.container(c), lambda p, old, j=j: end(j),
                                      b.line(node))
                names.append(c.name)
        return b.ex._read(names[k], ())
    return read


def _index_temporary(b, node, shape, value, top):
    """An integer temporary set to ``value(p)``, each in ``[0, top]`` (what its writes
    keep to), which indices may load (``Container.values``): a function of the index."""
    c = temporary(b, node, shape, "__bins", dtype=INT64)
    c = b.kernel.containers[c.name] = dataclasses.replace(c, values=(sp.Integer(0), top))
    b.ex.prelude += store(b, b.container(c), lambda p, old: value(p), b.line(node))
    return lambda q: index_load(c.name, tuple(q))


def _outer_edges(b, node, a, given):
    """NumPy's first and last edge of equal bins (``end(0)``, ``end(1)``, read in the
    tasklet that uses them): ``range`` or the data's extremes, widened by 0.5 where they
    are equal."""
    if given is None or isinstance(given, ast.Constant) and given.value is None:
        ends = [reduction(b, node, kind, a, (0,), False) for kind in ("min", "max")]
    elif isinstance(given, (ast.Tuple, ast.List)) and len(given.elts) == 2:
        ends = [_scalar(b, e) for e in given.elts]
    else:
        raise b.src.error(node, f"`{ast.unparse(node)}`: range= must be written as a pair "
                                "`(lo, hi)`")

    def end(k):
        first, last = (number(e.at(())) for e in ends)
        same = fp.relation(sp.Eq)(first, last)
        return fp.select(fp.sub(first, sp.Float(0.5)), same, first) if k == 0 else \
            fp.select(fp.add(last, sp.Float(0.5)), same, last)
    return end


def _bincount(b, node, args):
    """``np.bincount(x, weights=None, minlength=n)``: the counts (sums of weights) of each
    value in ``range(n)``, added one value after the other as NumPy adds them. The length
    is ``minlength`` (NumPy's depends on the data): a value outside it is an index error
    when the kernel runs."""
    if "minlength" not in args:
        raise b.src.error(node, f"`{ast.unparse(node)}`: give minlength= (the number of "
                                "bins; NumPy's length depends on the largest value)")
    length = b.ex.index(args["minlength"], "a number of bins")
    gather = b._index_array(_required(b, node, args, "x"))
    if gather is None or len(gather[1]) != 1:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the values must be a 1-D integer "
                                "array")
    (n,), value_of = gather[1], gather[2]
    weights = args.get("weights")
    w = None if weights is None or isinstance(weights, ast.Constant) and \
        weights.value is None else _flat(b, node, b.expr(weights))
    if w is not None:
        b.agree(node, w.shape[0], n, w.shape, (n,), "weights and values")
    return _counts(b, node, length, n, lambda: value_of, w)


def _counts(b, node, length, n, indices, w):
    """The ``length`` counts (sums of ``w``) of the ``n`` values whose bins ``indices()``
    gives (a function of ``(k,)``), filled in the kernel's prelude where first read."""
    filled = []

    def at(index):
        if not filled:
            filled.append(_fill_counts(b, node, length, n, indices(), w))
        return b.ex._read(filled[0].name, tuple(index))
    return ArrayExpr((length,), at, dtype=FLOAT64 if w is not None else INT64)


def _fill_counts(b, node, length, n, value_of, w):
    line = b.line(node)
    out = b.container(temporary(b, node, (length,), "__counts",
                                dtype=FLOAT64 if w is not None else INT64))
    (k,) = b.state.fresh("c", 1)
    zero = store(b, out, lambda p, old: sp.Integer(0), line)
    add = store(b, subscript(out, [("index", value_of((k,)))]),
                lambda p, old: fp.add(old(), sp.Integer(1) if w is None else number(w.at((k,)))),
                line)
    b.ex.prelude += zero + [Sequence((LoopRegion(k, sp.Integer(0), n, sp.Integer(1),
                                                 Sequence(tuple(add)), line),))]
    return out.view.container


def scatter_at(b, stmt):
    """``np.add.at(a, idx, v)`` (any binary ufunc's ``.at``): ``a[idx[k]] = op(a[idx[k]],
    v[k])`` for each ``k`` in turn, so a repeated index takes each of its values (where
    ``a[idx] += v`` takes one), as the bins of ``bincount`` do."""
    node = stmt.value
    name, line = node.func.value.attr, b.line(node)
    if name not in UFUNCS or UFUNCS[name][2]:
        raise b.src.error(node, f"`np.{name}.at` is not supported; .at works for the "
                                "arithmetic ufuncs (np.add.at, np.subtract.at, np.multiply.at, "
                                "np.maximum.at, ...)")
    args = bind(b, node, node.args, ("a", "indices", "b"))
    dest = b.expr(_required(b, node, args, "a"))
    gather = b._index_array(_required(b, node, args, "indices"))
    if dest.view is None or not dest.rank or gather is None or len(gather[1]) != 1:
        raise b.src.error(node, f"`{ast.unparse(node)}`: np.{name}.at takes an array (memory, "
                                "such as acc[:, 0]) and one 1-D integer array of indices along "
                                "its first axis; for other indices write the loop")
    (n,), value_of = gather[1], gather[2]
    rest = tuple(dest.shape[1:])
    v = fit(b, stmt, b.expr(_required(b, node, args, "b")), (n,) + rest)
    (k,) = b.state.fresh("c", 1)
    target = subscript(dest, [("index", value_of((k,)))] +
                       [("slice", sp.Integer(0), sp.Integer(1), m) for m in rest])
    fn = UFUNCS[name][0]
    body = store(b, target, lambda p, old: fn(old(), number(v.at((k,) + tuple(p)))), line)
    return b.ex.prelude + [Sequence((LoopRegion(k, sp.Integer(0), n, sp.Integer(1),
                                                Sequence(tuple(body)), line),))]


# ---- filters --------------------------------------------------------------------------------
MODES = ("reflect", "constant", "nearest", "mirror", "wrap")


def _fold(mode, k, n):
    """Where index ``k`` (at most one length outside ``[0, n)``) reads in ``mode``."""
    if mode == "wrap":
        return python_mod(k, n)
    if mode in ("nearest", "constant"):
        return sp.Min(sp.Max(k, 0), n - 1)
    if mode == "reflect":                                   # d c b a | a b c d | d c b a
        m = sp.Max(k, -1 - k)
        return sp.Min(m, 2 * n - 1 - m)
    m = sp.Max(k, -k)                                       # mirror: d c b | a b c d | c b a
    return sp.Min(m, 2 * n - 2 - m)


def _filter(convolve, one_axis):
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "input"))
        weights = _required(b, node, args, "weights")
        w = b.sequence(weights) if isinstance(weights, (ast.Tuple, ast.List)) else \
            b.expr(weights)
        mode = args.get("mode", ast.Constant("reflect"))
        mode = getattr(mode, "value", None)
        if mode not in MODES:
            raise b.src.error(node, f"`{ast.unparse(node)}`: mode= must be one of "
                                    f"{', '.join(repr(m) for m in MODES)} (a constant)")
        cval = number(_scalar(b, args["cval"]).at(())) if "cval" in args else sp.Float(0.0)
        if one_axis:
            if w.rank != 1:
                raise b.src.error(node, f"`{ast.unparse(node)}`: the weights must be 1-D")
            axis = _constant_int(b, args["axis"]) if "axis" in args else -1
            if not -a.rank <= axis < a.rank:
                raise b.src.error(node, f"axis {axis} is out of range for an array of "
                                        f"{a.rank} dimensions")
            axes = [axis % a.rank]
        else:
            if w.rank != a.rank:
                raise b.src.error(node, f"`{ast.unparse(node)}`: the weights need the "
                                        "input's number of dimensions")
            axes = list(range(a.rank))
        origin = _constant_int(b, args["origin"]) if "origin" in args else 0
        for n in w.shape:
            if n.is_Integer and not -(n // 2) <= origin <= (n - 1) // 2:
                raise b.src.error(node, f"`{ast.unparse(node)}`: the origin must lie in "
                                        f"[-{n // 2}, {(n - 1) // 2}] (SciPy raises)")
        term = _weighted(a, w, axes, mode, cval, origin, convolve)
        if all(n.is_Integer for n in w.shape):          # few weights: one sum per element
            def at(q):
                terms = [term(q, tuple(map(sp.Integer, j)))
                         for j in itertools.product(*(range(int(n)) for n in w.shape))]
                total = terms[0]
                for t in terms[1:]:
                    total = fp.add(total, t)
                return total
            return ArrayExpr(a.shape, at)
        terms = ArrayExpr(a.shape + w.shape, lambda q: term(q[:a.rank], q[a.rank:]))
        return reduction(b, node, "sum", terms, tuple(range(a.rank, a.rank + w.rank)), False)
    return handler


def _weighted(a, w, axes, mode, cval, origin, convolve):
    """The term ``w[j] * a[fold(q + j - L // 2 - origin)]`` of ``out[q]``, along ``axes``
    (convolve: the weights reversed and the origin mirrored, SciPy's definition)."""
    def term(q, j):
        index, inside, taken = list(q), [], []
        for axis, i, size in zip(axes, j, w.shape):
            o = -origin - (1 - python_mod(size, 2)) if convolve else origin
            taken.append(size - 1 - i if convolve else i)
            k, n = q[axis] + i - floordiv(size, 2) - o, a.shape[axis]
            index[axis] = _fold(mode, k, n)
            inside.append(sp.And(sp.Ge(k, 0), sp.Lt(k, n)))
        value = number(a.at(tuple(index)))
        if mode == "constant":
            value = fp.select(value, sp.And(*inside), cval)
        return fp.mul(number(w.at(tuple(taken))), value)
    return term


def _sort(b, node, args):
    raise b.src.error(node, f"`{ast.unparse(node)}`: sorting is not supported (its order "
                            "depends on the data); pass the order in as an integer array "
                            "computed outside the kernel")


NUMPY.update({
    "indices": (_indices, ("dimensions", "dtype", "sparse"), ()),
    "argsort": (_sort, ("a", "axis"), ("kind",)),
    "sort": (_sort, ("a", "axis"), ("kind",)),
})
NUMPY_TUPLES.update({
    "histogram": (_histogram, ("a", "bins", "range", "density", "weights"), ()),
    "meshgrid": (_meshgrid, tuple(f"_{k}" for k in range(8)), ("indexing", "sparse", "copy")),
    "gradient": (_gradients, ("f",) + tuple(f"_{k}" for k in range(8)), ("axis", "edge_order")),
    "split": (_split(False), ("ary", "indices_or_sections", "axis"), ()),
    "array_split": (_split(True), ("ary", "indices_or_sections", "axis"), ()),
})
NUMPY.update({"bincount": (_bincount, ("x", "weights", "minlength"), ())})
NUMPY_GRIDS.update({"mgrid": lambda b, node: _grid(b, node, False),
                    "ogrid": lambda b, node: _grid(b, node, True)})
FILTER_ARGS = ("input", "weights")
FILTER_KEYWORDS = ("mode", "cval", "origin")
SCIPY_ARRAYS.update({
    "scipy.ndimage.correlate1d": (_filter(False, True), FILTER_ARGS + ("axis",),
                                  FILTER_KEYWORDS),
    "scipy.ndimage.convolve1d": (_filter(True, True), FILTER_ARGS + ("axis",),
                                 FILTER_KEYWORDS),
    "scipy.ndimage.correlate": (_filter(False, False), FILTER_ARGS, FILTER_KEYWORDS),
    "scipy.ndimage.convolve": (_filter(True, False), FILTER_ARGS, FILTER_KEYWORDS),
})
