"""Activity analysis: which containers carry derivatives.

A container is *varied* if its value depends on a ``wrt`` input and *useful*
if it influences an output; only containers that are both (active) get
adjoints. Container-level and flow-insensitive: sound, and exact for the
kernels where it matters (parameters, states, losses).
"""
from ..sdfg.nodes import MapScope, State, library_nodes, regions, tasklets
from .dependence import READ, accesses, node_accesses, own_accesses


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
    for node in library_nodes(sdfg.body):
        deps += [(name, set(node.reads())) for name in node.writes()]
    return deps


def varied_containers(sdfg, wrt):
    """The containers whose values depend on ``wrt``; bool containers (masks) carry no
    derivative, so nothing is varied through them."""
    deps = [(o, ins) for o, ins in dependencies(sdfg) if sdfg.containers[o].dtype.kind != "b"]
    return frozenset(closure(set(wrt), deps))


def active_containers(sdfg, wrt, outputs):
    deps = dependencies(sdfg)
    varied = varied_containers(sdfg, wrt)
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
    return frozenset(a.data for a in accesses(sdfg.body) if a.kind != READ)


def accessed_containers(sdfg):
    """Every container ``sdfg`` may read or write, in indices, loop bounds and branch
    conditions too."""
    return frozenset(a.data for a in accesses(sdfg.body, sdfg.containers))


def filled_first(sdfg):
    """Arrays whose first access, at the top level of the program, is a map assigning
    every element (``lap = np.zeros((N, M))``, an array expression's temporary, hdiff's
    ``out_field[:, :, :] = ...``): whatever a buffer for them holds at the start is
    never read."""
    seen, filled = set(), set()
    for region, context in regions(sdfg.body):
        if not (isinstance(region, State) and not context):
            seen |= {a.data for a in own_accesses(region, context, sdfg.containers)}
            continue
        for node in region.nodes:
            if isinstance(node, MapScope):
                filled |= _fills(node, sdfg.containers) - seen
            seen |= {a.data for a in node_accesses(node)}
    return frozenset(filled)


def _fills(node, containers):
    """Arrays the map assigns at every element before any read of them (a
    read in the map only of its own element, after the assignment: ``flx`` of
    ``flx = lap[1:] - lap[:-1]; flx = np.where(flx > 0, 0, flx)`` fused)."""
    out, read = set(), set()
    for t in node.body:
        read |= {m.data for _, m in t.inputs if m.data not in out or
                 m.subset != tuple(node.params)}
        for m, _ in t.outputs:
            c = containers[m.data]
            covers = len(c.shape) == len(node.params) and all(
                (lo, hi, step) == (0, size, 1) for (lo, hi, step), size in
                zip(node.ranges, c.shape))
            if covers and not m.wcr and m.subset == tuple(node.params) \
                    and m.data not in read:
                out.add(m.data)
    return out - read
