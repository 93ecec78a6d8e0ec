"""Rematerialisation: temporaries that a loop body fills again every iteration are
recomputed in the reverse sweep instead of recorded.

In a time loop ``dq = q[1:] - q[:-1]; r = f(dq); ...; q[2:-1] -= flux`` every step
overwrites ``dq`` and ``r``. Recording them costs a tape write and a tape read per
element and step: memory traffic that dwarfs the arithmetic of a stencil. Once the
reverse of the step has brought ``q`` back to that step's values (it restores ``q``
anyway), re-running the maps that fill ``dq`` and ``r`` gives the same values from
data already in cache.

A transient ``T`` is recomputed in loop ``L`` when, in ``L``'s body,

- every tasklet of the region writing ``T`` sits directly in a state of the body, is
  cheap (no transcendental functions), writes only recomputed temporaries, reads none
  of them at elements it writes, and writes elements that do not depend on ``L``'s
  variable (each iteration fills the same elements before reading them);
- every reverse partial reading ``T`` in the region is a tasklet there too, after all
  of ``T``'s writers, and no earlier region's reverse reads ``T``;
- every other value a writer reads is not written between that writer and the point
  of recomputation (the last reader): the reverse sweep must hold it as the writer saw
  it, so these reads count as reverse reads and get recorded where they are overwritten.
  Only values recorded anyway (or never written) qualify: recording ``u`` to recompute
  ``lap`` from it costs as much tape as recording ``lap``, plus the re-run.

The writers re-run, in program order, just before the reverse of the node holding the
last reader; nothing in the reverse needs ``T``'s older values after that.

The same holds point by point in a map. Vectorised code names its intermediate results
(``t1 = v45 * ct; t2 = 2 * t1; ...``); fused into one map, each is a scalar of a point
(analysis/contraction.py), but a value the reverse partials read stayed a whole array,
written by the forward and read back by the reverse map: Veros' equation of state wrote
and read about 80 of them, ten times the forward's time. A temporary ``T`` is recomputed
at each point of its map ``M`` when

- every access to ``T`` in the kernel is in ``M``'s tasklets at one subset naming a
  different element for each point, and one tasklet writes it (a plain write, before any
  read);
- ``M`` reads no container at two elements per point (a stencil, whose reverse
  autodiff/gather rewrites, tasklet by tasklet, into gathers);
- that tasklet reads only recomputed temporaries written before it and values ``M``
  does not write that are recorded anyway, never written (as above), or, for a map in
  no loop, written only before it in its region and touched by no other region.

Each point of ``M``'s reverse then re-runs those tasklets first (transcendental ones
included: at most the map's forward once more, against two memory round trips per
value), and contraction makes ``T`` a scalar of the point in both sweeps.
"""
from dataclasses import dataclass, field

import sympy as sp

from ..analysis.dependence import READ, accesses, injective, node_accesses
from ..sdfg.arithmetic import np_maximum, np_minimum
from ..sdfg.nodes import (LoopRegion, MapScope, State, Tasklet, index_loads, library_nodes, loops,
                          tasklets, walk)
from ..sdfg.visit import flattened

CHEAP = (np_maximum, np_minimum, sp.Max, sp.Min, sp.Abs, sp.sign, sp.Piecewise)


@dataclass(frozen=True)
class Rematerialised:
    names: frozenset = frozenset()          # containers recomputed, never recorded
    before: dict = field(default_factory=dict)   # a node -> nodes re-run before its reverse
    reads: dict = field(default_factory=dict)    # a re-run tasklet -> what else it reads
    points: dict = field(default_factory=dict)   # a map -> tasklets each point re-runs first


@dataclass(frozen=True)
class _Step:
    """One tasklet of a loop body (``node``: the state node holding it), or an opaque
    element (a nested loop, a condition, a matrix product) with ``tasklet=None``."""
    tasklet: object
    node: object
    writes: frozenset


def rematerialise(body, readers, earlier, elsewhere, containers, kept):
    """What to recompute in the loops and maps of one region (``readers``: see
    reverse._readers; ``earlier``: containers earlier regions' reverse sweeps read;
    ``elsewhere``: containers other regions access; ``kept``: containers recorded anyway
    or never written: a re-run reading anything else would add a record as large as the
    one it saves, and cost the re-run on top)."""
    writers = {}
    for t, _, _ in tasklets(body):
        for m, _ in t.outputs:
            writers.setdefault(m.data, []).append(t)
    for node in library_nodes(body):
        for name in node.writes():
            writers.setdefault(name, []).append(node)
    names, before, reads = set(), {}, {}
    for loop in loops(body):
        steps = _steps(loop.body)
        index = {s.tasklet: k for k, s in enumerate(steps) if s.tasklet is not None}
        chain = {name for name in readers if containers[name].transient
                 and name not in earlier and name in writers}
        while True:
            point = _point(steps, chain, readers)
            eligible = {name for name in chain if _eligible(
                name, steps, index, chain, readers, writers, loop, point, kept)}
            if eligible == chain:
                break
            chain = eligible
        if not chain:
            continue
        rerun = [s for s in steps if s.tasklet is not None and s.writes & chain]
        names |= chain
        before[steps[point].node] = _rerun_nodes(rerun)
        for s in rerun:
            reads[s.tasklet] = frozenset(m.data for _, m in s.tasklet.inputs) - chain
    points, last_write = {}, {}
    for k, (node, context) in enumerate(walk(body)):
        if isinstance(node, MapScope):
            # outside loops, what only earlier nodes write holds its values until here
            settled = set() if any(isinstance(c, LoopRegion) for c in context) else \
                {n for n, j in last_write.items() if j < k} - set(elsewhere)
            chain = _point_chain(node, body, readers, set(earlier) | set(elsewhere) | names,
                                 containers, set(kept) | settled)
            if chain:
                rerun = tuple(t for t in node.body if _outputs(t) & chain)
                points[node] = rerun
                names |= chain
                for t in rerun:
                    reads[t] = frozenset(m.data for _, m in t.inputs) - chain
        last_write.update((a.data, k) for a in node_accesses(node) if a.kind != READ)
    return Rematerialised(frozenset(names), before, reads, points)


def _point_chain(scope, body, readers, excluded, containers, kept):
    """The temporaries of map ``scope`` that each point of its reverse recomputes (see the
    module docstring): of the largest set closed under "its writer reads only members,
    values kept, or nothing the map writes", those the reverse partials read and what
    their writers read."""
    if not all(isinstance(t, Tasklet) for t in scope.body) or _stencil(scope):
        return set()
    order = {t: k for k, t in enumerate(scope.body)}
    writer, subset, first = {}, {}, {}
    for t in scope.body:
        for a in node_accesses(t):
            c = containers[a.data]
            if a.data in excluded or not c.transient or c.dtype.kind != "f":
                continue
            subset.setdefault(a.data, set()).add(a.subset)
            first.setdefault(a.data, a.kind)
            if a.kind != READ:
                writer.setdefault(a.data, []).append(t)
    outside = _accessed_outside(body, scope, containers)
    chain = {n for n, ts in writer.items()
             if len(ts) == 1 and first[n] != READ and n not in outside
             and len(subset[n]) == 1 and None not in subset[n]
             and injective(next(iter(subset[n])), scope.params)
             and not any(m.wcr or index_loads(i) for m, _ in ts[0].outputs for i in m.subset)
             and not any(index_loads(i) for _, m in ts[0].inputs for i in m.subset)}
    written = set().union(*(_outputs(t) for t in scope.body))
    while True:
        keep = {n for n in chain if all(
            m.data in chain and order[writer[m.data][0]] < order[writer[n][0]]
            or m.data not in chain and m.data not in written and m.data in kept
            for _, m in writer[n][0].inputs) and _outputs(writer[n][0]) <= chain}
        if keep == chain:
            break
        chain = keep
    needed = {n for n in chain if n in readers}        # and what their writers read
    for t in reversed(scope.body):
        if _outputs(t) & needed:
            needed |= {m.data for _, m in t.inputs} & chain
    return needed


def _stencil(scope):
    """Whether the map reads some container at two elements per point: its reverse
    scatters, and gather/ rewrites such maps' tasklets into gathers, which a re-run
    tasklet among them would stop (hdiff's gradient: 20% slower)."""
    read = {}
    for t in scope.body:
        for _, m in t.inputs:
            read.setdefault(m.data, set()).add(m.subset)
    return any(len(subsets) > 1 for subsets in read.values())


def _accessed_outside(body, scope, containers):
    """Containers ``body`` accesses anywhere but in the tasklets of map ``scope`` (loop
    bounds and branch conditions included)."""
    own = {id(t) for t in scope.body}
    return {a.data for a in accesses(body, containers) if id(a.node) not in own}


def _steps(body):
    steps = []
    for region in flattened(body):
        if not isinstance(region, State):
            steps.append(_Step(None, region, frozenset(a.data for a in accesses(region)
                                                       if a.kind != READ)))
            continue
        steps += [_Step(t, node, _outputs(t)) if isinstance(t, Tasklet) else
                  _Step(None, node, frozenset(node.writes()))
                  for node in region.nodes for t in _tasklets(node) or (node,)]
    return steps


def _tasklets(node):
    if isinstance(node, MapScope):
        return [t for t in node.body if isinstance(t, Tasklet)]
    return [node] if isinstance(node, Tasklet) else []


def _outputs(t):
    return frozenset(m.data for m, _ in t.outputs)


def _point(steps, chain, readers):
    """Index of the last step reading a chain member in a reverse partial (the re-run
    goes before the reverse of its node: the end of that node bounds the check)."""
    nodes = {node for name in chain for node, _ in readers[name]}
    last = max((k for k, s in enumerate(steps) if s.tasklet in nodes), default=0)
    while last + 1 < len(steps) and steps[last + 1].node is steps[last].node:
        last += 1
    return last


def _eligible(name, steps, index, chain, readers, writers, loop, point, kept):
    own = [index.get(t) for t in writers[name]]
    read = [None if node is None else index.get(node) for node, _ in readers[name]]
    if None in own or None in read or max(own) >= min(read):
        return False
    for k in own:
        t = steps[k].tasklet
        if not _cheap_rewrite(t, chain, loop) or isinstance(steps[k].node, MapScope) and \
                loop.var in _symbols([e for r in steps[k].node.ranges for e in r]):
            return False
        for _, m in t.inputs:
            if m.data in chain:
                if max(index.get(u, len(steps)) for u in writers[m.data]) >= k:
                    return False
            elif m.data not in kept or any(m.data in s.writes for s in steps[k + 1:point + 1]):
                return False
    return True


def _cheap_rewrite(t, chain, loop):
    """Whether re-running ``t`` rewrites only chain members, at elements fixed across
    ``loop``'s iterations, without reading what it writes, at a cost worth less than
    a tape round trip."""
    outputs = [m for m, _ in t.outputs]
    if any(m.wcr or m.data not in chain or loop.var in _symbols(m.subset) or
           any(index_loads(i) for i in m.subset) for m in outputs):
        return False
    if any(m.data in {o.data for o in outputs} or any(index_loads(i) for i in m.subset)
           for _, m in t.inputs):
        return False
    return all(_cheap(expr) for _, expr in t.outputs)


def _symbols(subset):
    return set().union(*(sp.sympify(i).free_symbols for i in subset)) if subset else set()


def _cheap(expr):
    if any(not isinstance(f, CHEAP) for f in expr.atoms(sp.Function)):
        return False
    return all(p.exp.is_integer for p in expr.atoms(sp.Pow))


def _rerun_nodes(steps):
    """The steps' tasklets as nodes: a map's together under a copy of its scope."""
    nodes, current = [], None
    for s in steps:
        if isinstance(s.node, MapScope):
            if current is not None and current[0] is s.node:
                current[1].append(s.tasklet)
                continue
            current = (s.node, [s.tasklet])
            nodes.append(current)
        else:
            current = None
            nodes.append(s.tasklet)
    return tuple(MapScope(n[0].params, n[0].ranges, tuple(n[1]), n[0].line)
                 if isinstance(n, tuple) else n for n in nodes)
