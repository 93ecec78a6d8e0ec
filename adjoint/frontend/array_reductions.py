"""Reductions over axes: ``np.sum/prod/max/min/mean/var/std`` (and the methods).

A reduction is lazy: its ArrayExpr reads a transient filled the first time an
element is needed, by regions appended to the statement's prelude. ``sum`` is a map
accumulating with ``wcr="sum"`` (parallel; its adjoint is a broadcast). ``prod``,
``max`` and ``min`` are sequential loops ``R = op(R, x)``, whose adjoints replay the
loop backwards (``max`` splits the derivative equally between ties, as elsewhere).
``mean`` divides a sum by the count; ``var``/``std`` go through the mean.
"""
import sympy as sp

from ..sdfg import LoopRegion, MapScope, Memlet, Sequence, State, Tasklet
from ..sdfg import arithmetic as fp
from ..sdfg.arithmetic import BINARY
from .array_shapes import ONE, ArrayExpr, broadcast_to, number, volume
from .array_stores import map_ranges, tasklet_body, temporary

IDENTITY = {"sum": sp.Integer(0), "prod": sp.Integer(1), "max": -sp.oo, "min": sp.oo,
            "nanmax": -sp.oo, "nanmin": sp.oo,       # fmax(x, nan) is x
            "pysum": sp.Integer(0),                  # builtin sum(): a loop, in order
            "pymax": -sp.oo, "pymin": sp.oo}
COMBINE = {"prod": fp.mul, "pysum": fp.add, "pymax": fp.BUILTIN["max"],
           "pymin": fp.BUILTIN["min"], "max": BINARY["maximum"], "min": BINARY["minimum"],
           "nanmax": BINARY["fmax"], "nanmin": BINARY["fmin"]}


def reduction(b, node, kind, arg, axes, keepdims):
    """``kind`` (sum, prod, max, min) of ``arg`` over ``axes``."""
    if not axes:
        return ArrayExpr(arg.shape, lambda index: number(arg.at(index)))
    kept = [k for k in range(arg.rank) if k not in axes]
    filled = []

    def at(index):
        if not filled:
            filled.append(_fill(b, node, kind, arg, kept))
        picked = tuple(index[k] for k in kept) if keepdims else tuple(index)
        return b.ex._read(filled[0].name, picked)
    return ArrayExpr(_shape(arg, axes, keepdims), at)


def mean(b, node, arg, axes, keepdims):
    total = reduction(b, node, "sum", arg, axes, keepdims)
    count = volume([arg.shape[k] for k in axes])
    return ArrayExpr(total.shape, lambda index: fp.div(total.at(index), count))


def variance(b, node, arg, axes, keepdims, ddof=0):
    """sum((x - mean(x))**2) / (n - ddof), the mean broadcast back over ``axes`` (NumPy's
    order of operations)."""
    centre = broadcast_to(mean(b, node, arg, axes, True), arg.shape)
    square = ArrayExpr(arg.shape, lambda i: fp.power(fp.sub(number(arg.at(i)), centre.at(i)),
                                                     sp.Integer(2)))
    total = reduction(b, node, "sum", square, axes, keepdims)
    n = volume([arg.shape[k] for k in axes]) - ddof
    return ArrayExpr(total.shape, lambda index: fp.div(total.at(index), n))


def _shape(arg, axes, keepdims):
    if keepdims:
        return tuple(ONE if k in axes else n for k, n in enumerate(arg.shape))
    return tuple(n for k, n in enumerate(arg.shape) if k not in axes)


def _fill(b, node, kind, arg, kept):
    """Emit the regions computing the reduction into a new transient; return it."""
    line = b.line(node)
    out = temporary(b, node, tuple(arg.shape[k] for k in kept), f"__{kind}")
    init = _initialise(b, out, IDENTITY[kind], line)
    params = b.state.fresh("r", arg.rank)
    target = tuple(params[k] for k in kept)
    if kind == "sum":
        inputs, body = tasklet_body(b.ex, lambda: number(arg.at(params)))
        t = Tasklet(inputs, ((Memlet(out.name, target, "sum"), body),), line)
        b.ex.prelude.append(State((init, MapScope(params, map_ranges(arg.shape), (t,), line)),
                                  f"{kind}_{line}"))
        return out
    inputs, body = tasklet_body(b.ex, lambda: COMBINE[kind](b.ex._read(out.name, target),
                                                            number(arg.at(params))))
    nest = Sequence((State((Tasklet(inputs, ((Memlet(out.name, target), body),), line),),
                           f"{kind}_{line}"),))
    for p, (start, stop, step) in reversed(list(zip(params, map_ranges(arg.shape)))):
        nest = Sequence((LoopRegion(p, start, stop, step, nest, line),))
    b.ex.prelude += [State((init,), f"{kind}_init_{line}"), nest]
    return out


def _initialise(b, out, value, line):
    if not out.shape:
        return Tasklet((), ((Memlet(out.name), value),), line)
    params = b.state.fresh("m", len(out.shape))
    t = Tasklet((), ((Memlet(out.name, params), value),), line)
    return MapScope(params, map_ranges(out.shape), (t,), line)
