"""Adjoints whose first touch in the reverse sweep assigns every element.

The sweep's adjoint buffers start at zero because the reverse sweep adds into them.
Where the first statement of the whole reverse sweep (in the order the regions' reverse
sweeps run) that touches an adjoint is a map over all of it that adds into each element
once, nothing has been added before: the sum is an assignment, and the buffer needs no
zeros. Vectorised kernels meet this for most temporaries (``flx = np.where(...)`` reads
its operand elementwise): hdiff-limiter's gradient spent an eighth of its time
zero-filling such buffers.
"""
from collections import Counter
from dataclasses import replace

import sympy as sp

from ..sdfg.nodes import MapScope, MatMul, Pop, Push, Sequence, State, Tasklet, walk


def assign_first(regions, adjoints, containers, seeded):
    """(``regions`` with those sums made assignments, the names of the adjoints they
    assign). ``adjoints``: the adjoint containers; ``seeded``: those the sweep sets
    before its reverse sweep runs (the outputs' cotangents)."""
    seen, assigned = set(seeded), set()
    out = []
    for region in reversed(regions):        # the order the reverse sweeps run in
        body = _top(region.reverse.body, adjoints, containers, seen, assigned)
        out.append(replace(region, reverse=region.reverse.replace(body=body)))
    return tuple(reversed(out)), frozenset(assigned)


def _top(region, adjoints, containers, seen, assigned):
    """The region with its top-level maps rewritten (statements in loops or branches may
    run more than once, or not at all: what they touch only counts as seen)."""
    if isinstance(region, Sequence):
        return Sequence(tuple(_top(e, adjoints, containers, seen, assigned)
                              for e in region.elements))
    if isinstance(region, State):
        nodes = []
        for node in region.nodes:
            if isinstance(node, MapScope):
                node = _assigning(node, adjoints, containers, seen, assigned)
            seen.update(_names(node))
            nodes.append(node)
        return replace(region, nodes=tuple(nodes))
    for node, _ in walk(region):
        seen.update(_names(node))
    return region


def _assigning(node, adjoints, containers, seen, assigned):
    """The map with each first sum into a whole adjoint made an assignment."""
    leaves = [t for t in node.body if isinstance(t, Tasklet)]
    reads = {m.data for t in leaves for _, m in t.inputs}
    reads |= {t.memlet.data for t in node.body if isinstance(t, (Push, Pop))}
    writes = Counter(m.data for t in leaves for m, _ in t.outputs)
    body = []
    for t in node.body:
        if isinstance(t, Tasklet):
            outputs = tuple((replace(m, wcr=None), e)
                            if m.wcr and m.data in adjoints and m.data not in seen | reads
                            and writes[m.data] == 1 and _covers(node, m, containers[m.data])
                            else (m, e) for m, e in t.outputs)
            assigned.update(m.data for (m, _), (n, _) in zip(t.outputs, outputs)
                            if m.wcr and not n.wcr)
            t = replace(t, outputs=outputs)
        body.append(t)
    return replace(node, body=tuple(body))


def _covers(node, memlet, container):
    """Whether the map's points are the container's elements, one each."""
    return tuple(memlet.subset) == tuple(node.params) and len(node.ranges) == len(
        container.shape) and all(sp.expand(a) == 0 and sp.expand(b - n) == 0 and s == 1
                                 for (a, b, s), n in zip(node.ranges, container.shape))


def _names(node):
    """The containers a dataflow node touches."""
    if isinstance(node, MapScope):
        return set().union(*(_names(t) for t in node.body))
    if isinstance(node, Tasklet):
        return {m.data for _, m in node.inputs} | {m.data for m, _ in node.outputs}
    if isinstance(node, (Push, Pop)):
        return {node.memlet.data}
    if isinstance(node, MatMul):
        return {node.out, node.a, node.b}
    return set()
