"""The terms' ranges differ by their offsets. Over the *core* of the outer dimensions,
where every term's range covers them, each row is cut at every ``lo + o`` and
``hi + o`` of the innermost dimension and runs its pieces one after another (short
edge pieces, then the long middle that vectorises), each with the terms that apply
there: every element is visited once and rows stay contiguous. Around that core, on
the thin edges of each outer dimension, each row tests which terms apply to it and
runs each of those over its stretch of the row (on the GPU every element tests each
term: a thread per element). Every element read is one
the scatter read. The cuts are in this order when every range is at least as long as
the spread of the offsets; a nest shorter than that (checked once, before it runs)
keeps the original scatter.
"""
import sympy as sp

from ...sdfg.nodes import ConditionalRegion, LoopRegion, Memlet, Sequence, State, Tasklet
from .distribution import _back, _target_key


def _emit(band, nest, line, cpu):
    """Loop nests running the band's terms, each term over its own (shifted) range:
    over the core of the outer dimensions, rows cut along the innermost one; around
    that core, one thin edge per side and outer dimension, testing per row which terms
    apply there (see _edge_row). The rows are independent (see _bands), so edges may
    run after the core."""
    if not band.gathered:
        return [_loops(nest.vars, nest.bounds, tuple(_tasklet(u, ()) for u in band.units),
                       line)]
    terms, (*outer, inner) = band.terms(), range(len(nest.vars))
    bounds = _oriented(nest.bounds, terms[0].sign)
    spans = {id(t): [(lo + o, hi + o) for (lo, hi), o in zip(bounds, t.shift)] for t in terms}
    core = [(max(spans[id(t)][d][0] for t in terms), min(spans[id(t)][d][1] for t in terms))
            for d in range(len(nest.vars))]
    rows = []
    for piece in _intervals(sorted({t.shift[inner] for t in terms})):
        tasklets = _piece(band, piece, nest.vars)
        if tasklets:
            rows.append(_loops(nest.vars[inner:], [_range(piece, bounds[inner])], tasklets,
                               line))
    out = [_loops(nest.vars[:inner], core[:inner], None, line, Sequence(tuple(rows)))]
    union = [(min(spans[id(t)][d][0] for t in terms), max(spans[id(t)][d][1] for t in terms))
             for d in range(len(nest.vars))]
    depth = inner if cpu else len(nest.vars)     # the slabs' loops around their body
    for d in outer:
        body = Sequence(tuple(_edge_row(t, spans[id(t)], union, nest.vars, d, line) if cpu
                              else _when(_inside(spans[id(t)], union, nest.vars, d),
                                         State((_tasklet([t], nest.vars),)), line)
                              for t in terms))
        low, high = (union[d][0], core[d][0]), (core[d][1], union[d][1])
        edges = [e for e in (low, high) if sp.expand(e[1] - e[0]) != 0]
        if len(edges) == 2 and sp.expand(low[1] - low[0] - high[1] + high[0]) == 0 and cpu:
            out.append(_both_edges(nest, d, core, union, low, high, body, line))
            continue
        for edge in edges:
            out.append(_loops(nest.vars[:depth], (core[:d] + [edge] + union[d + 1:])[:depth],
                              None, line, body))
    return out


def _edge_row(term, span, union, variables, first, line):
    """The term over its stretch of a row of an edge slab, the outer dimensions from
    ``first`` on tested once per row: a unit-stride loop without tests (testing every
    element for every term cost heat-3d's gradient at N=40 a fifth of its time). On
    the GPU, where each element is a thread, the edges test per element."""
    row = _loops(variables[-1:], span[-1:], (_tasklet([term], variables),), line)
    return _when(_inside(span[:-1], union[:-1], variables[:-1], first), row, line)


def _piece(band, piece, variables):
    """The tasklets of a piece of a row: per unit, one adding up its terms that apply
    there."""
    units = ([t for t in unit if _applies(t.shift[-1], piece)] for unit in band.units)
    return tuple(_tasklet(terms, variables) for terms in units if terms)


def _oriented(bounds, sign):
    """The bounds of ``sign*v`` for each variable v in ``bounds``."""
    return [(lo, hi) if s > 0 else (1 - hi, 1 - lo) for (lo, hi), s in zip(bounds, sign)]


def _both_edges(nest, d, core, union, low, high, body, line):
    """The edges ``low`` and ``high`` of dimension ``d``, of one width, as one nest: a
    loop over the side ``s`` (0, 1) moves dimension d's range from one to the other.
    One copy of the edge code instead of two for the C compiler: its tests make it the
    costliest code to compile per line, and it runs on a few rows only. ``body`` is the
    code of one row (see _edge_row).
    (Not for CUDA: device analysis would see both sides write the same elements and
    make the edge kernels atomic.)"""
    v = nest.vars[d]
    s = sp.Symbol(f"__side_{v.name}", integer=True)
    edge = (low[0] + s * (high[0] - low[0]), low[1] + s * (high[1] - low[1]))
    inner = _loops(nest.vars[d:-1], [edge] + union[d + 1:-1], None, line, body)
    sides = LoopRegion(s, sp.Integer(0), sp.Integer(2), sp.Integer(1), Sequence((inner,)), line)
    return _loops(nest.vars[:d], core[:d], None, line, Sequence((sides,)))


def _inside(span, union, variables, first):
    """The condition that the variables from dimension ``first`` on lie in ``span``
    (bounds that the union's already imply left out)."""
    parts = []
    for (lo, hi), (ulo, uhi), v in list(zip(span, union, variables))[first:]:
        if sp.expand(lo - ulo) != 0:
            parts.append(sp.Ge(v, lo))
        if sp.expand(uhi - hi) != 0:
            parts.append(sp.Lt(v, hi))
    return sp.And(*parts)


def _when(condition, body, line):
    if condition == sp.true:
        return body
    return ConditionalRegion(((condition, Sequence((body,))),), line)


def _loops(variables, bounds, tasklets, line, body=None):
    """The nest of counted loops over ``bounds`` around ``tasklets`` (or ``body``)."""
    body = body if body is not None else Sequence((State(tasklets),))
    for v, (lo, hi) in reversed(list(zip(variables, bounds))):
        body = Sequence((LoopRegion(v, lo, hi, sp.Integer(1), body, line),))
    return body.elements[0] if len(body.elements) == 1 else body


def _intervals(offsets):
    """Consecutive cuts ``lo + o`` (for every offset), then ``hi + o``, as pairs of
    (side, offset): in this order when ``hi - lo >= max(o) - min(o)``."""
    cuts = [("lo", o) for o in offsets] + [("hi", o) for o in offsets]
    return list(zip(cuts, cuts[1:]))


def _applies(offset, piece):
    """Whether the term with ``offset`` runs on the whole piece: it starts at ``lo +
    offset`` and stops at ``hi + offset``."""
    (start_side, a), (stop_side, b) = piece
    return (start_side == "hi" or a >= offset) and (stop_side == "lo" or b <= offset)


def _range(piece, bounds):
    lo, hi = bounds
    return tuple((lo if side == "lo" else hi) + o for side, o in piece)


def _tasklet(terms, variables):
    """One tasklet adding up ``terms`` (gathered when ``variables``: the target's index
    becomes the loop variables, each term's inputs move back to its iteration)."""
    inputs, total = [], sp.Integer(0)
    for term in terms:
        back = _back(term, variables) if variables else {}
        rename = {}
        for conn, m in term.inputs:
            fresh = sp.Symbol(f"__in{len(inputs)}", real=True)
            rename[conn] = fresh
            inputs.append((fresh, Memlet(m.data, tuple(sp.expand(e.xreplace(back))
                                                       for e in m.subset))))
        total += term.expr.xreplace({**rename, **back})
    first = terms[0].out
    subset = _target_key(terms[0], variables)[1] if variables else first.subset
    return Tasklet(tuple(inputs), ((Memlet(first.data, subset, first.wcr), total),),
                   terms[0].line)
