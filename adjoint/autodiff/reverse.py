"""Reverse mode: an SDFG -> (recording forward SDFG, reverse-sweep SDFG).

Every statement instance ``x[w] = f(x[r1], ...)`` is visited backwards:

1. restore: if ``x``'s values are needed by some partial derivative, the
   recording forward pushed the element before overwriting it; pop it back,
   so memory holds exactly what the forward instance saw;
2. propagate: ``g = xb[w]; xb[w] = g * df/dx[w]; xb[r_k] += g * df/dx[r_k]``,
   taking ``g`` first so self-references and repeated reads stay exact.

Containers whose values no partial needs are never recorded (linear updates
such as seidel-2d record nothing). Loops run backwards, conditions on integers
are re-evaluated, loop variables are recomputed, never stored.
"""
import itertools
from dataclasses import dataclass, field, replace

import sympy as sp

from ..analysis.activity import active_containers, written_containers
from ..analysis.bounds import apart, minimum
from ..analysis.dependence import countable, counted, injective, private_scalar
from ..sdfg.arithmetic import ADJOINT
from ..library.base import Rules
from ..schedule.tape import as_loops
from ..sdfg.nodes import (SDFG, ConditionalRegion, Container, Guard, LibraryNode, LoopRegion,
                          MapScope, Memlet, Pop, Push, Sequence, State, Tasklet,
                          condition_containers, every_element, guarded_branches, index_loads,
                          library_nodes, loops, self_update, tasklets, walk)
from ..sdfg.visit import leaves
from .first_touch import assign_first
from .gather import gather
from .partials import partial, times
from .remat import Rematerialised, rematerialise

G = sp.Symbol("__g", real=True)


def adjoint_name(name):
    return ADJOINT + name


@dataclass(frozen=True)
class Region:
    """One top-level region of the kernel: the unit the store/recompute plan decides on.

    ``forward`` runs it, ``record`` runs it pushing what its reverse restores,
    ``reverse`` is its reverse sweep. A counted top-level loop is a *segment* loop:
    its entries run the iterations ``[__k0, __k1)`` only (checkpointing)."""
    name: str
    forward: SDFG
    record: SDFG
    reverse: SDFG
    reads: frozenset
    writes: frozenset
    segmented: bool
    inputs: frozenset = frozenset()     # what a snapshot taken before it must save


@dataclass(frozen=True)
class Adjoint:
    """What reverse mode produced for one (kernel, wrt, outputs) triple."""
    regions: tuple          # Regions in forward order
    containers: dict        # primal containers, then one adjoint per active container
    active: frozenset       # containers with adjoints
    recorded: frozenset     # containers whose overwritten values are pushed
    needs_forward: bool     # False when the reverse sweep reads no value the forward changes
    assigned_first: dict = field(default_factory=dict)    # {adjoint: box it assigns first}


def differentiate(sdfg, wrt, outputs, device) -> Adjoint:
    """The reverse mode of ``sdfg`` for ``device`` ("cpu" or "cuda": how gather/
    arranges stencil adjoints). A container is recorded in a region when that region
    writes it and its values are needed by the reverse sweep of that region or of an
    earlier one; values needed only after a container's last write are read from memory
    as the forward left it. Within a region read only there, writes before its first
    reader keep their values too."""
    active = active_containers(sdfg, wrt, outputs)
    containers = dict(sdfg.containers)
    for name in sorted(active):
        c = sdfg.containers[name]
        containers[adjoint_name(name)] = Container(adjoint_name(name), c.dtype, c.shape)
    parts = _partition(sdfg.body)
    readers_by = [_readers(Sequence(p), sdfg.containers, active) for p in parts]
    written = written_containers(sdfg)
    accesses = [_accesses(Sequence(p), sdfg.containers) for p in parts]
    first = _first_writes(sdfg)
    regions, readers, recorded_any = [], {}, set()
    for k, part in enumerate(parts):
        body = Sequence(part)
        mk = lambda b: sdfg.replace(body=b, containers=containers)   # noqa: E731
        reads, writes = accesses[k]
        read_elsewhere = set().union(*(r for j, (r, _) in enumerate(accesses) if j != k))
        elsewhere = read_elsewhere.union(*(w for j, (_, w) in enumerate(accesses) if j != k))
        earlier = set(readers)
        _add_readers(readers, readers_by[k])
        claims = _claims(body, active, readers_by[k], earlier, sdfg.containers)
        pushed = _pushed(body, readers_by[k], readers, earlier, writes, claims)
        remat = rematerialise(body, readers_by[k], earlier, elsewhere, sdfg.containers,
                              set(pushed) | (set(sdfg.containers) - written))
        if remat.names:         # the re-runs read more: record what they need
            readers_by[k] = _readers(body, sdfg.containers, active, remat.reads)
            _add_readers(readers, readers_by[k])
            claims = _claims(body, active, readers_by[k], earlier, sdfg.containers)
            pushed = _pushed(body, readers_by[k], readers, earlier, writes, claims)
        recorded = _Recorded({n: o for n, o in pushed.items() if n not in remat.names},
                             claims, recompute=remat)
        recorded = _snapshots(body, _after_full_writes(body, recorded, sdfg.containers, active),
                              sdfg.containers, active)
        recorded = _per_iteration(body, recorded, sdfg.containers, read_elsewhere)
        recorded_any |= recorded.names
        reverser = _Reverser(active, recorded, containers, first)
        regions.append(Region(_describe(part, k), mk(body),
                              mk(_record(body, recorded, containers)),
                              mk(reverser.region(body)),
                              reads,
                              writes, _segmented(part)))
    later = frozenset()         # a region's inputs: what it or a later region overwrites
    for k in range(len(regions) - 1, -1, -1):
        r = regions[k]
        later |= r.writes
        regions[k] = replace(r, inputs=(r.reads | r.writes) & later)
    needed = set().union(*readers_by)
    regions, assigned = assign_first(regions, {adjoint_name(n) for n in active},
                                     {adjoint_name(n) for n in outputs})
    regions = tuple(replace(r, reverse=r.reverse.replace(body=gather(r.reverse.body, device)))
                    for r in regions)
    return Adjoint(regions, containers, active, frozenset(recorded_any),
                   bool(needed & written_containers(sdfg)), assigned)


def _first_writes(sdfg):
    """The tasklets outside loops that assign a transient before anything else
    touches it (in a map, each point its own element). No later step of the reverse
    sweep reads the adjoint such a write leaves, so it need not be zeroed there (the
    sweep's adjoint buffers start at zero): the reverse of ``lap = np.zeros(...)``
    is then nothing at all."""
    kept = {a.name for a in sdfg.arguments} | set(sdfg.returns)
    seen, first = set(), set()
    for node, context in walk(sdfg.body):
        in_loop = any(isinstance(c, LoopRegion) for c in context)
        params = node.params if isinstance(node, MapScope) else ()
        for leaf in node.body if isinstance(node, MapScope) else (node,):
            touched = _touched(leaf, sdfg.containers)
            if isinstance(leaf, Tasklet) and not in_loop and len(leaf.outputs) == 1:
                (out, _), = leaf.outputs
                if out.data not in kept | seen and not out.wcr and \
                        out.data not in {m.data for _, m in leaf.inputs} and \
                        (not params or injective(out.subset, params)):
                    first.add(leaf)
            seen |= touched
    return frozenset(first)


def _add_readers(readers, own):
    """Merge one region's readers (see _readers) into the nodes reading each container."""
    for name, rs in own.items():
        readers.setdefault(name, set()).update(node for node, _ in rs)


def _pushed(body, own, readers, earlier, writes, claims):
    """_Recorded.by_name for one region: the containers it writes that some reverse partial
    reads, each with None (every write pushes) or the writing nodes that must.
    Max/min reductions (``claims``) never push: their reverse reads the final value."""
    by_name = {}
    for name in readers.keys() & writes:
        only = None
        if _self_covered(name, readers[name]):
            only = frozenset(readers[name])
        writers = list(_writers(body, name))
        if name not in earlier:         # the reverse restores back to the first reader only
            first = min(key for _, key in own[name])
            late = frozenset(node for node, key in writers if key >= first)
            only = late if only is None else only & late
        if only is None and any(node in claims for node, _ in writers):
            only = frozenset(node for node, _ in writers)
        if only is not None:
            only -= claims
        if only is None or only:
            by_name[name] = only
    return by_name


def _claims(body, active, own, earlier, containers):
    """The max/min reductions of ``body`` reversed without a record: ``acc =
    max(acc, v)`` where nothing else in the loop nest around it touches ``acc`` and no
    reverse partial needs ``acc`` from before it (``own``, ``earlier``: see _pushed).
    Run after run on one element, the final ``acc`` is the largest ``v``; its adjoint
    goes to the first ``v`` met in the reverse that equals the ``acc`` in memory (then
    zero: later equal values get nothing), else stays ``acc``'s. Memory holds the final
    ``acc`` there, or a larger value only once the adjoint is already zero."""
    groups = {}
    for node, key in _ordered(body):
        groups.setdefault(key, []).append(node)
    verdict = {}
    for key, members in groups.items():
        for t in members:
            if isinstance(t, Tasklet) and _reduction_operand(t) is not None:
                acc = t.outputs[0][0].data
                ok = acc in active and acc not in earlier and min(
                    (k for _, k in own.get(acc, ())), default=key) == key and not any(
                    u is not t and acc in _touched(u, containers) for u in members)
                verdict[t] = verdict.get(t, True) and ok
    return frozenset(k for k, ok in verdict.items() if ok)


def _reduction_operand(t):
    """For ``acc = max(acc, v)`` / ``min``: (the connector reading ``acc``, ``v``); else None."""
    update = self_update(t)
    return update[1:] if update is not None and update[0] != "sum" else None


def _touched(node, containers):
    """The containers a node of _ordered reads or writes (a guard: its condition reads)."""
    if isinstance(node, Tasklet):
        return {m.data for _, m in node.inputs} | {m.data for m, _ in node.outputs}
    if isinstance(node, Guard):
        return set(condition_containers(node.condition, containers))
    return set(node.reads()) | set(node.writes())


def _partition(body):
    """Top-level regions: each loop alone, consecutive other regions together."""
    parts, run = [], []
    for element in body.elements:
        if isinstance(element, LoopRegion):
            if run:
                parts.append(tuple(run))
                run = []
            parts.append((replace(element, segment=True) if _checkpointable(element)
                          else element,))
        else:
            run.append(element)
    if run:
        parts.append(tuple(run))
    return parts


def _checkpointable(loop):
    """A counted loop without while loops inside: it can be checkpointed by iterations."""
    if not (counted(loop) and countable(loop)):
        return False
    return all(countable(r) for _, context in walk(loop.body) for r in context
               if isinstance(r, LoopRegion))


def _segmented(part):
    return len(part) == 1 and isinstance(part[0], LoopRegion) and part[0].segment


def _describe(part, k):
    if len(part) == 1 and isinstance(part[0], LoopRegion):
        return f"loop over {part[0].var} (line {part[0].line})"
    return f"statements #{k}"


def _accesses(region, containers):
    reads, writes = set(), set()
    for t, _, _ in tasklets(region):
        reads |= {m.data for _, m in t.inputs}
        writes |= {m.data for m, _ in t.outputs}
    for node in library_nodes(region):
        reads |= set(node.reads())
        writes |= set(node.writes())
    for _, context in walk(region):
        for r in context:
            if isinstance(r, Guard):
                reads |= condition_containers(r.condition, containers)
    return frozenset(reads), frozenset(writes)


def _ordered(body):
    """(node, key) for every tasklet and library node of ``body``, maps' included, and
    (Guard, key) for every branch condition, in program order. Keys grow with program
    order; everything inside one loop shares its loop's key (each iteration's nodes run
    after the previous one's). A map's tasklets keep their order: each point runs them in
    order, reads only what it writes itself, and is reversed on its own."""
    counter = itertools.count()

    def visit(region, key):
        if isinstance(region, State):
            for node in region.nodes:
                for leaf in node.body if isinstance(node, MapScope) else (node,):
                    yield leaf, next(counter) if key is None else key
        elif isinstance(region, Sequence):
            for element in region.elements:
                yield from visit(element, key)
        elif isinstance(region, LoopRegion):
            yield from visit(region.body, next(counter) if key is None else key)
        else:
            for guard, branch in guarded_branches(region):
                yield guard, next(counter) if key is None else key
                yield from visit(branch, key)
    yield from visit(body, None)


def _readers(body, containers, active, rerun=None):
    """Containers whose values the reverse sweep of ``body`` reads, each with what reads
    them and where (see _ordered): the active tasklets some partial of which reads the
    container, or None for a decision on data or a library node (its ``reverse_reads``),
    and the tasklets the reverse re-runs (``rerun``: id -> what they read, see remat)."""
    readers = {}
    repeated = {node for node, context in walk(body)
                if any(isinstance(r, LoopRegion) for r in context)}
    for node, key in _ordered(body):
        for name in (rerun or {}).get(node, ()):
            readers.setdefault(name, set()).add((node, key))
        if isinstance(node, Guard):
            for name in condition_containers(node.condition, containers):
                readers.setdefault(name, set()).add((None, key))
        elif isinstance(node, LibraryNode):
            for name in node.reverse_reads(active):
                # what it wrote itself it reads as it left it: after its write (no loop
                # runs it again before its reverse), so that write needs no record
                after = name in node.writes() and node not in repeated
                readers.setdefault(name, set()).add((None, key + 0.5 if after else key))
        else:
            for name in _partial_reads(node, active):
                readers.setdefault(name, set()).add((node, key))
    return readers


def _partial_reads(t, active):
    """Containers some partial derivative of the active tasklet ``t`` reads."""
    return (m.data for m in _partial_memlets(t, active))


def _partial_memlets(t, active):
    """The memlets (elements) some partial derivative of the active tasklet ``t`` reads."""
    conns = t.connector_memlets()
    for memlet, expr in t.outputs:
        if memlet.data not in active:
            continue
        for conn in expr.free_symbols & conns.keys():
            if conns[conn].data in active:
                for s in partial(expr, conn).free_symbols & conns.keys():
                    yield conns[s]


def _writers(body, name):
    """(node, key) for every node of ``body`` that writes ``name``."""
    for node, key in _ordered(body):
        if isinstance(node, LibraryNode) and name in node.writes() or \
                isinstance(node, Tasklet) and any(m.data == name for m, _ in node.outputs):
            yield node, key


def _self_covered(name, readers):
    """Whether every reader of ``name`` reads it only at the element it overwrites
    (``C[i, j] *= beta``). Recording those writes alone then restores every value a
    reverse partial reads: the first write after each read is the reader's own."""
    for t in readers:
        if t is None or len(t.outputs) != 1:
            return False
        out = t.outputs[0][0]
        if out.data != name or out.wcr or any(m.data == name and m != out for _, m in t.inputs):
            return False
    return True


@dataclass(frozen=True)
class _Recorded:
    """Which writes push the element they overwrite: for each recorded container, None
    (every write) or the nodes whose writes alone need it (see _pushed);
    ``claims``: the max/min reductions reversed without a record (see _claims);
    ``snapshots``: a loop -> containers pushed whole (or elements, as Memlets) before it
    instead of by its writes, ``per_iteration``: a loop -> scalars pushed at the end of each
    iteration instead, ``zeroed``: a loop -> those scalars, of it or of a loop in
    it (see _per_iteration), ``covered``: the writes either replaces,
    as (node, container); ``recompute``: temporaries re-run in the reverse
    instead (see remat)."""
    by_name: dict
    claims: frozenset = frozenset()
    snapshots: dict = field(default_factory=dict)
    per_iteration: dict = field(default_factory=dict)
    zeroed: dict = field(default_factory=dict)
    covered: frozenset = frozenset()
    recompute: Rematerialised = Rematerialised()

    @property
    def names(self):
        return frozenset(self.by_name)

    def pushes(self, node, memlet):
        only = self.by_name.get(memlet.data, ())
        return memlet.data in self.by_name and (only is None or node in only) and (
            node, memlet.data) not in self.covered


def _after_full_writes(body, recorded, containers, active):
    """Writes that need no push because a pushing write of the whole container came
    before them and no reverse partial read it in between (``lap = np.zeros_like(u)``
    then ``lap[1:-1] = ...``): nothing needs the values they overwrite, and popping the
    whole-container write, later in the reverse, restores what came before it."""
    covered = set()

    def reads(region):
        return set(_readers(region, containers, active, recorded.recompute.reads))

    def visit(elements, fresh):
        for element in elements:
            if isinstance(element, State):
                for node in element.nodes:
                    fresh -= reads(State((node,)))
                    for t in node.body if isinstance(node, MapScope) else (node,):
                        for name in _written(t) & fresh:
                            covered.add((t, name))
                    fresh |= {name for name in _written(node) if _pushes_whole(
                        node, name, containers[name], recorded, active)}
            else:           # a loop, a condition or a sequence: new writes may not run
                fresh -= reads(element)
                for inner in _inner_bodies(element):
                    visit(inner.elements if isinstance(inner, Sequence) else (inner,),
                          set(fresh))
    visit(body.elements, set())
    return replace(recorded, covered=recorded.covered | frozenset(covered))


def _inner_bodies(region):
    if isinstance(region, ConditionalRegion):
        return [branch for _, branch in region.branches]
    return [region.body] if isinstance(region, LoopRegion) else [region]


def _written(node):
    if isinstance(node, LibraryNode):
        return set(node.writes())
    nodes = node.body if isinstance(node, MapScope) else (node,)
    return {m.data for t in nodes if isinstance(t, Tasklet) for m, _ in t.outputs}


def _pushes_whole(node, name, container, recorded, active):
    """Whether ``node`` pushes, then writes, every element of ``name``, no partial of it
    reading the values written: a scalar, or a map over exactly the container's index
    space with a tasklet writing element (i, j, ...) at point (i, j, ...)."""
    if isinstance(node, LibraryNode):
        return False
    if isinstance(node, Tasklet):
        return not container.shape and recorded.pushes(node, Memlet(name)) and any(
            m.data == name for m, _ in node.outputs)
    if tuple(node.ranges) != tuple((sp.Integer(0), n, sp.Integer(1)) for n in container.shape):
        return False
    for k, t in enumerate(node.body):
        if isinstance(t, Tasklet) and recorded.pushes(t, Memlet(name)) and any(
                m == Memlet(name, node.params) for m, _ in t.outputs):
            return not any(name in set(_partial_reads(u, active)) for u in node.body[k + 1:]
                           if isinstance(u, Tasklet))
    return False


def _snapshots(body, recorded, containers, active):
    """Containers to push whole before a nested loop rather than at each write inside it:
    those the loop overwrites again and again (a pressure solve's ``p`` every inner
    iteration) and no reverse partial inside it reads; and single elements so (see
    _element_snapshots: trmm's ``B[i, j]`` over k). Its reverse then needs none of their
    values; popping the snapshot after it restores them. Loops directly in the region
    are left alone (the store/recompute plan runs those in segments)."""
    snapshots, covered = {}, set()

    def visit(region, depth, taken, outer):
        if isinstance(region, Sequence):
            for element in region.elements:
                visit(element, depth, taken, outer)
        elif isinstance(region, ConditionalRegion):
            for _, branch in region.branches:
                visit(branch, depth, taken, outer)
        elif isinstance(region, LoopRegion):
            names = () if depth == 0 else _snapshot_names(region, recorded, containers,
                                                          active, taken)
            taken = taken | set(names)
            elements = () if depth == 0 else _element_snapshots(
                region, recorded, containers, active, taken, outer)
            if names or elements:
                snapshots[region] = names + elements
                covered.update((t, n) for n in names + tuple(m.data for m in elements)
                               for t, _ in _writers(region.body, n))
            visit(region.body, depth + 1, taken | {m.data for m in elements},
                  outer + (region,))
    visit(body, 0, frozenset(), ())
    return replace(recorded, snapshots=snapshots, covered=recorded.covered | covered)


def _snapshot_names(loop, recorded, containers, active, taken):
    read = _readers(loop.body, containers, active, recorded.recompute.reads)
    names = []
    for name in sorted(recorded.names - taken - read.keys()):
        writes = [t for t, _ in _writers(loop.body, name) if recorded.pushes(t, Memlet(name))]
        if writes and _rewrites(loop, writes, name, containers[name]):
            names.append(name)
    return tuple(names)


def _element_snapshots(loop, recorded, containers, active, taken, outer):
    """Elements (Memlets) of recorded arrays to push once before ``loop`` (inside the
    ``outer`` loops): an array every write of which in the loop, by tasklets outside
    maps, names one element at an address the loop's variables do not move (an element
    accumulated: ``B[i, j] += A[k, i] * B[k, j]`` over k), and no reverse partial or
    decision inside the loop reads that element: each read of the array by a partial
    differs from it in some index by at least one over the loops' ranges
    (``bounds.apart``; ``B[k, j]`` with k > i). The element is read where the loop may
    run no iteration: only one proven in bounds over the ``outer`` loops."""
    inner = {loop.var} | {r.var for _, context in walk(loop.body) for r in context
                          if isinstance(r, LoopRegion)} | \
        {p for node, _ in walk(loop.body) if isinstance(node, MapScope) for p in node.params}
    readers = _readers(loop.body, containers, active, recorded.recompute.reads)
    found = []
    for name in sorted(recorded.names - taken):
        if containers[name].is_scalar or any(
                t is None or name in recorded.recompute.reads.get(t, ())
                for t, _ in readers.get(name, ())):
            continue
        writes, whole = set(), False      # whole: a library node's or a map's writes
        for node, _ in walk(loop.body):
            for _, leaf in leaves(node):
                if isinstance(leaf, LibraryNode) and name in leaf.writes():
                    whole = True
                elif isinstance(leaf, Tasklet):
                    for m, _ in leaf.outputs:
                        if m.data == name:
                            writes.add(m.subset)
                            whole |= isinstance(node, MapScope)
        if whole or len(writes) != 1:
            continue
        element, = writes
        if any(index_loads(e) or sp.sympify(e).free_symbols & inner for e in element) or \
                not _in_bounds(element, containers[name].shape, outer):
            continue
        if not any(recorded.pushes(t, Memlet(name, element))
                   for t, _ in _writers(loop.body, name)):
            continue
        if all(apart(element, m.subset, tuple(outer) + (loop,) + tuple(
                r for r in context if isinstance(r, LoopRegion)) + around)
               for node, context in walk(loop.body) for around, leaf in leaves(node)
               if isinstance(leaf, Tasklet)
               for m in _partial_memlets(leaf, active) if m.data == name):
            found.append(Memlet(name, element))
    return tuple(found)


def _in_bounds(subset, shape, loops):
    """Whether ``subset`` is proven inside ``shape`` at every point of the ``loops``."""
    for e, n in zip(subset, shape):
        for bound in (sp.expand(e), sp.expand(n - 1 - e)):
            low = minimum(bound, loops)
            if low is None or not low.is_nonnegative:
                return False
    return True


def _rewrites(loop, writes, name, container):
    """Whether ``loop``'s iterations overwrite the same elements of ``name``, a block of
    its full rank each (or the scalar): then one snapshot costs no more than a trip."""
    inner = {loop.var} | {v for node, context in walk(loop.body) for v in
                          [r.var for r in context if isinstance(r, LoopRegion)] +
                          list(node.params if isinstance(node, MapScope) else ())}
    spans = []
    for t in writes:
        if isinstance(t, LibraryNode):        # it writes whole containers
            spans.append(len(container.shape))
            continue
        for m, _ in t.outputs:
            if m.data == name:
                used = set().union(*(e.free_symbols for e in m.subset)) & inner
                if loop.var in used:
                    return False
                spans.append(len(used))
    return max(spans) == len(container.shape)


def _per_iteration(body, recorded, containers, read_elsewhere):
    """Recorded scalars private to the iterations of a loop of ``body`` (a decision on
    data inside a loop: ``if flx[i, j] > 0``; conv2d's sum ``s``): one tasklet at the top
    of the loop body writes them before any read, every iteration, and is the only write
    there that pushes (see _sole_writer), and no other region reads them
    (``read_elsewhere``). Their value at the end of each iteration is pushed, and popped
    at the start of the reversed one, instead of pushing the previous iteration's value
    before the write: no iteration's record or reverse then reads another's, so both
    loops can run on threads with their tape in slots. Their adjoints are then zero
    whenever an iteration of that loop, or of a loop around it, starts or ends: the
    reverse of the first write zeroes it last, and nothing outside the loop touches it
    (``zeroed``: each thread's copy may start from zero)."""
    per_loop, covered, zeroed = {}, set(), {}
    for loop in loops(body):
        names = []
        for name in sorted(recorded.names - read_elsewhere):
            writer = _sole_writer(loop, name, recorded, containers)
            if writer is not None and containers[name].is_scalar and \
                    private_scalar(name, loop, body, containers):
                names.append(name)
                covered.add((writer, name))
        if names:
            per_loop[loop] = tuple(names)
            for outer in loops(body):   # this loop and those around it
                if any(inner is loop for inner in loops(outer)):
                    zeroed[outer] = zeroed.get(outer, ()) + tuple(names)
    return replace(recorded, per_iteration=per_loop, zeroed=zeroed,
                   covered=recorded.covered | covered)


def _sole_writer(loop, name, recorded, containers):
    """The tasklet writing ``name`` that pushes, when it is the only node of ``loop`` that
    does, runs in every iteration (directly in the body, not under a condition or in a
    map) and is the iteration's first access to ``name``. Writers that push nothing may
    follow it (conv2d's ``s = bias[f]``, then ``s += w * x`` over the stencil): no reverse
    partial needs a value they overwrite."""
    writers = [node for node, _ in _writers(loop.body, name)
               if recorded.pushes(node, Memlet(name))]
    top = [node for e in loop.body.elements if isinstance(e, State) for node in e.nodes]
    first = next((node for node, _ in _ordered(loop.body)
                  if name in _touched(node, containers)), None)
    if len(writers) == 1 and writers[0] is first and any(node is first for node in top):
        return first
    return None


# ---- recording forward -----------------------------------------------------------------
def _record(region, recorded, containers):
    if isinstance(region, Sequence):
        return Sequence(tuple(_record(e, recorded, containers) for e in region.elements))
    if isinstance(region, LoopRegion):
        body = _record(region.body, recorded, containers)
        ends = recorded.per_iteration.get(region, ())
        if ends:
            body = Sequence(body.elements + (State(tuple(Push(Memlet(n), region.line)
                                                         for n in ends)),))
        loop = replace(region, body=body, tape_trips=region.exit is not None)
        names = recorded.snapshots.get(region, ())
        if not names:
            return loop
        pushes = [n for name in names for n in (
            (Push(name, region.line),) if isinstance(name, Memlet)
            else _push_all(containers[name], region.line))]
        return Sequence((State(tuple(pushes)), loop))
    if isinstance(region, ConditionalRegion):
        return ConditionalRegion(tuple((c, _record(b, recorded, containers))
                                       for c, b in region.branches), region.line)
    return State(_record_nodes(region.nodes, recorded, containers), region.label)


def _push_all(container, line):
    """Nodes pushing every element of ``container`` (_Reverser.restore pops them back)."""
    return every_element(container, lambda m: (Push(m, line),), line)


def _record_nodes(nodes, recorded, containers):
    out = []
    for node in nodes:
        if isinstance(node, MapScope):
            out.append(MapScope(node.params, node.ranges,
                                _record_nodes(node.body, recorded, containers), node.line))
            continue
        if isinstance(node, LibraryNode):         # it writes whole containers
            for name in node.writes():
                if recorded.pushes(node, Memlet(name)):
                    out += _push_all(containers[name], node.line)
        else:
            out += [Push(m, node.line) for m, _ in node.outputs if recorded.pushes(node, m)]
        out.append(node)
    return tuple(out)


# ---- reverse sweep ---------------------------------------------------------------------
class _Reverser:
    def __init__(self, active, recorded, containers, first_writes=frozenset()):
        self.active, self.recorded, self.containers = active, recorded, containers
        self.first_writes = first_writes    # their adjoints need no zeros (_first_writes)

    def region(self, region):
        if isinstance(region, Sequence):
            parts = [self.region(e) for e in reversed(region.elements)]
            return Sequence(tuple(p for p in parts if not _empty(p)))
        if isinstance(region, LoopRegion):
            body = self.region(region.body)
            starts = self.recorded.per_iteration.get(region, ())
            if starts:
                body = Sequence((State(tuple(Pop(Memlet(n), region.line)
                                             for n in reversed(starts))),) + body.elements)
            zeroed = tuple(adjoint_name(n) for n in self.recorded.zeroed.get(region, ())
                           if n in self.active)
            loop = replace(region, body=body, reverse=not region.reverse, tape_trips=False,
                           zeroed=zeroed)
            names = self.recorded.snapshots.get(region, ())
            return Sequence((loop, *(State((Pop(n, region.line),)) if isinstance(n, Memlet)
                                     else self.restore(self.containers[n], region.line)
                                     for n in reversed(names)))) if names else loop
        if isinstance(region, ConditionalRegion):
            return ConditionalRegion(tuple((c, self.region(b)) for c, b in region.branches),
                                     region.line)
        return self.state(region)

    def state(self, state):
        """A state's nodes backwards; maps that restore values become reversed loops."""
        elements, pending = [], []
        for node in reversed(state.nodes):
            rerun = self.recorded.recompute.before.get(node)
            if rerun:
                elements += [State(tuple(pending), state.label)] if pending else []
                elements.append(State(rerun, state.label))
                pending = []
            if isinstance(node, MapScope) and any(self.recorded.pushes(t, m)
                                                  for t in node.body for m, _ in t.outputs):
                if pending:
                    elements.append(State(tuple(pending), state.label))
                    pending = []
                elements.append(self._map_as_loops(node))
            elif isinstance(node, MapScope):        # each point's tasklets backwards
                body = tuple(n for t in reversed(node.body) for n in self.tasklet(t))
                if body:
                    body = self.recorded.recompute.points.get(node, ()) + body
                    pending.append(MapScope(node.params, node.ranges, body, node.line))
            elif isinstance(node, LibraryNode):
                restores = [self.restore(self.containers[n], node.line)      # pops backwards
                            for n in reversed(node.writes())
                            if self.recorded.pushes(node, Memlet(n))]
                # the adjoint reads what the node wrote only before the restore undoes it
                late = bool(set(node.reverse_reads(self.active)) & set(node.writes()))
                if late:
                    pending += self.library_rule(node)
                if restores:
                    if pending:
                        elements.append(State(tuple(pending), state.label))
                        pending = []
                    elements += restores
                if not late:
                    pending += self.library_rule(node)
            else:
                pending += self.tasklet(node)
        if pending:
            elements.append(State(tuple(pending), state.label))
        return elements[0] if len(elements) == 1 else Sequence(tuple(elements))

    def restore(self, container, line):
        """Pop every element of ``container``, in the reverse of _push_all's order."""
        pops = every_element(container, lambda m: (Pop(m, line),), line)
        return self._map_as_loops(pops[0]) if isinstance(pops[0], MapScope) else State(pops)

    def library_rule(self, node):
        """A library node's reverse rule (its ``vjp``), then the adjoints of what it
        assigned set to zero (the values before it did not reach its outputs)."""
        if not any(n in self.active for n in node.writes()):
            return []
        nodes = list(node.vjp(Rules(self.active, ADJOINT, self.containers)))
        for name in node.overwrites():
            if name in self.active:
                zero = self.containers[adjoint_name(name)]
                nodes += every_element(zero, lambda m: (Tasklet((), ((m, sp.Integer(0)),),
                                                                node.line),), node.line)
        return nodes

    def _map_as_loops(self, node):
        """The reverse of a map that records (or of pops of a product): the loops its
        record runs as, backwards (schedule.tape.as_loops), so both place its tape values
        alike."""
        if not all(isinstance(t, Tasklet) for t in node.body):      # pops of a product
            nodes = tuple(reversed(node.body))
        else:
            nodes = self.recorded.recompute.points.get(node, ()) + \
                tuple(n for t in reversed(node.body) for n in self.tasklet(t))
        return as_loops(node.params, node.ranges, nodes, node.line, reverse=True)

    def tasklet(self, t):
        """Restore, then propagate, for one forward tasklet (single output)."""
        if t in self.recorded.claims:
            return self.claim(t)
        (out, expr), = t.outputs
        nodes = [Pop(out, t.line)] if self.recorded.pushes(t, out) else []
        if out.data not in self.active:
            return nodes
        conns = t.connector_memlets()
        inputs = {G: Memlet(adjoint_name(out.data), out.subset)}
        self_coeff = sp.Integer(1) if out.wcr else sp.Integer(0)
        writes = []
        for conn in sorted(expr.free_symbols & conns.keys(), key=str):
            m = conns[conn]
            if m.data not in self.active:
                continue
            d = partial(expr, conn)
            for s in sorted(d.free_symbols & conns.keys(), key=str):   # stable C source
                inputs[s] = conns[s]
            if m.data == out.data and m.subset == out.subset:
                self_coeff += d
            elif d != 0:
                writes.append((Memlet(adjoint_name(m.data), m.subset, "sum"), times(G, d)))
        if self_coeff != 1 and not (self_coeff == 0 and t in self.first_writes):
            writes.insert(0, (Memlet(adjoint_name(out.data), out.subset), G * self_coeff))
        if writes:
            nodes.append(Tasklet(tuple(inputs.items()), tuple(writes), t.line))
        return nodes

    def claim(self, t):
        """``acc = max(acc, v)`` backwards (see _claims): where ``v`` equals ``acc``, ``v``'s
        inputs take ``acc``'s adjoint and ``acc``'s becomes zero."""
        (out, _), = t.outputs
        own, value = _reduction_operand(t)
        conns = t.connector_memlets()
        hit = sp.Eq(value, own)
        inputs = {G: Memlet(adjoint_name(out.data), out.subset), own: out}
        writes = [(Memlet(adjoint_name(out.data), out.subset),
                   sp.Piecewise((0, hit), (G, True)))]
        for conn in sorted(value.free_symbols & conns.keys(), key=str):
            m = conns[conn]
            inputs[conn] = m
            d = partial(value, conn)
            if m.data in self.active and d != 0:
                writes.append((Memlet(adjoint_name(m.data), m.subset, "sum"),
                               sp.Piecewise((times(G, d), hit), (0, True))))
        return [Tasklet(tuple(inputs.items()), tuple(writes), t.line)]


def _empty(region):
    if isinstance(region, State):
        return not region.nodes
    if isinstance(region, Sequence):
        return all(_empty(e) for e in region.elements)
    return False
