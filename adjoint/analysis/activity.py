"""Activity analysis: which containers carry derivatives.

A container is *varied* if its value depends on a ``wrt`` input and *useful*
if it influences an output; only containers that are both (active) get
adjoints. Container-level and flow-insensitive: sound, and exact for the
kernels where it matters (parameters, states, losses).
"""
from ..sdfg.nodes import library_nodes, tasklets


def dependencies(sdfg):
    """(output container, input containers) for every tasklet output."""
    deps = []
    for t, _, _ in tasklets(sdfg.body):
        conns = t.connector_memlets()
        for memlet, expr in t.outputs:
            used = {conns[s].data for s in expr.free_symbols if s in conns}
            if memlet.wcr:
                used.add(memlet.data)
            deps.append((memlet.data, used))
    for mm in library_nodes(sdfg.body):
        deps.append((mm.out, {mm.a, mm.b} | ({mm.out} if mm.accumulate else set())))
    return deps


def active_containers(sdfg, wrt, outputs):
    deps = dependencies(sdfg)
    varied = closure(set(wrt), deps)
    useful = closure(set(outputs), [(i, {o}) for o, ins in deps for i in ins])
    return frozenset(varied & useful)


def closure(start, edges):
    """Everything reachable from ``start`` along (target, sources) edges."""
    reached, changed = set(start), True
    while changed:
        changed = False
        for target, sources in edges:
            if target not in reached and sources & reached:
                reached.add(target)
                changed = True
    return reached


def written_containers(sdfg):
    return frozenset({m.data for t, _, _ in tasklets(sdfg.body) for m, _ in t.outputs}
                     | {mm.out for mm in library_nodes(sdfg.body)})
