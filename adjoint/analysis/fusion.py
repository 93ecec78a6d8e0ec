"""Map fusion: consecutive maps over the same ranges become one map whose body runs both
bodies at each point, so a whole-array expression chain (``t = a * b; y = t + c``) passes
over memory once and the intermediate stays in registers.

Two maps fuse when every container both touch, and one of them writes, is accessed at a
single element per point in both (the same subset, one element per point): each point
then depends only on itself, so running the second body right after the first at each
point is what running the maps one after the other does. A scalar one map sums into
and the other reads, neighbour reads (stencils) and different ranges keep the maps
apart. Scalar statements between two maps that the first does not touch (the
``s = 0`` every sum starts with) move before the first, so that an element-wise chain
and the sum of its result (``np.sum(a * b + 1)``) are one map.
"""
from dataclasses import replace

import sympy as sp

from ..sdfg.nodes import MapScope, State, Tasklet, renamed
from ..sdfg.visit import Transformer
from .dependence import injective


def fuse(sdfg):
    """The SDFG with every fusable pair of consecutive maps fused."""
    return sdfg.replace(body=_Fusion(equal_sizes(sdfg.assumptions)).region(sdfg.body))


def equal_sizes(assumptions):
    """{size symbol: the one standing for it} for the sizes every call checks equal
    (``sa.shape[0] == ct.shape[0]`` where ``sa * ct`` broadcasts them), so that maps over
    ``sa``'s and over ``ct``'s ranges are maps over one range."""
    parent = {}

    def root(s):
        while parent.get(s, s) != s:
            s = parent[s]
        return s
    for condition, _, _ in assumptions:
        if not isinstance(condition, sp.Eq):
            continue
        terms = sp.Add.make_args(sp.expand(condition.lhs - condition.rhs))
        if len(terms) == 2 and all(t.is_Symbol or (-t).is_Symbol for t in terms) and \
                sum(t.is_Symbol for t in terms) == 1:
            a, b = sorted((root(t if t.is_Symbol else -t) for t in terms), key=str)
            if a != b:
                parent[b] = a
    return {s: root(s) for s in parent}


class _Fusion(Transformer):
    def __init__(self, equal=None):
        super().__init__()
        self.equal = equal or {}

    def elements(self, elements):
        return _across_states(super().elements(elements), self.equal)

    def state(self, state):
        nodes = []
        for node in state.nodes:
            fused = _fused(nodes[-1], node, self.equal) if nodes else None
            if fused is None:
                nodes.append(node)
            else:
                nodes[-1] = fused
        return State(tuple(nodes), state.label)


def _across_states(elements, equal):
    """Fuse the last map of a state with the first map of the state right after it
    (each statement is a state of its own), also across states of scalar work in
    between that the first map does not touch (a sum's ``s = 0`` before its map: it
    moves before the first map)."""
    out = []
    for e in elements:
        hoisted = _hoisted(out, e, equal)
        if hoisted:
            out, e = hoisted
        while isinstance(e, State) and e.nodes and out and isinstance(out[-1], State) \
                and out[-1].nodes:
            fused = _fused(out[-1].nodes[-1], e.nodes[0], equal)
            if fused is None:
                break
            out[-1] = replace(out[-1], nodes=out[-1].nodes[:-1] + (fused,))
            e = replace(e, nodes=e.nodes[1:])
        if not (isinstance(e, State) and not e.nodes):
            out.append(e)
    return tuple(out)


def _hoisted(out, e, equal):
    """(elements so far, e) with the scalar statements between the last map so far and
    e's first map (whole states, and e's own leading tasklets) moved before that map,
    when those maps then fuse; else None."""
    k = len(out) - 1
    while k >= 0 and _scalar_work(out[k]):
        k -= 1
    between = out[k + 1:]
    if not isinstance(e, State) or k < 0 or not isinstance(out[k], State) or \
            not out[k].nodes:
        return None
    lead = _leading_tasklets(e)
    if not (between or lead) or len(lead) == len(e.nodes):
        return None
    first, second = out[k].nodes[-1], e.nodes[len(lead)]
    moved = [t for s in between for t in s.nodes] + list(lead)
    if not isinstance(first, MapScope) or _meet(first.body, moved) or \
            _fused(first, second, equal) is None:
        return None
    before = [replace(out[k], nodes=out[k].nodes[:-1])] if out[k].nodes[:-1] else []
    lead_state = [State(lead, e.label)] if lead else []
    return (out[:k] + before + between + lead_state + [State((first,), out[k].label)],
            replace(e, nodes=e.nodes[len(lead):]))


def _leading_tasklets(state):
    k = 0
    while k < len(state.nodes) and isinstance(state.nodes[k], Tasklet):
        k += 1
    return state.nodes[:k]


def _scalar_work(element):
    """Whether ``element`` is a state of tasklets (scalar statements, no maps)."""
    return isinstance(element, State) and element.nodes and \
        all(isinstance(n, Tasklet) for n in element.nodes)


def _meet(body, tasklets):
    """Whether running ``tasklets`` before a map's ``body`` could change either's
    result: one writes a container the other accesses."""
    (r1, w1), (r2, w2) = _accesses(body), _accesses(tasklets)
    return bool(w1.keys() & (r2.keys() | w2.keys()) or w2.keys() & r1.keys())


def _fused(first, second, equal):
    """One map doing ``first`` then ``second`` at every point, or None (``equal``: sizes
    checked equal before each call, see equal_sizes)."""
    if not (isinstance(first, MapScope) and isinstance(second, MapScope)):
        return None
    if _sized(first.ranges, equal) != _sized(second.ranges, equal) or not all(
            isinstance(t, Tasklet) for t in first.body + second.body):
        return None
    rename = dict(zip(second.params, first.params))
    body = tuple(renamed(t, rename) for t in second.body)
    if not _pointwise(first.body, body, first.params):
        return None
    return replace(first, body=first.body + body)


def _sized(ranges, equal):
    return ranges if not equal else tuple(tuple(sp.sympify(e).xreplace(equal) for e in r)
                                          for r in ranges)


def _pointwise(first, second, params):
    """Whether every container both bodies touch and one writes is accessed at one
    subset, a different element for each point."""
    (r1, w1), (r2, w2) = _accesses(first), _accesses(second)
    shared = ((w1.keys() | r1.keys()) & w2.keys()) | (w1.keys() & r2.keys())
    for name in shared:
        subsets = set().union(*(d.get(name, set()) for d in (r1, w1, r2, w2)))
        if len(subsets) != 1 or not injective(next(iter(subsets)), params):
            return False
    return True


def _accesses(body):
    """({container: subsets read}, {container: subsets written}) of tasklets."""
    reads, writes = {}, {}
    for t in body:
        for _, m in t.inputs:
            reads.setdefault(m.data, set()).add(m.subset)
        for m, _ in t.outputs:
            writes.setdefault(m.data, set()).add(m.subset)
    return reads, writes
