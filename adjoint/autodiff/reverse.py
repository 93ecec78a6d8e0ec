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
from dataclasses import dataclass, replace

import sympy as sp

from ..analysis.activity import active_containers, written_containers
from ..sdfg.nodes import (SDFG, ConditionalRegion, Container, Guard, LoopRegion, MapScope,
                          MatMul, Memlet, Pop, Push, Sequence, State, Tasklet,
                          condition_containers, every_element, library_nodes, tasklets,
                          walk)
from ..codegen.c import counted_loop
from .gather import gather
from .partials import partial

G = sp.Symbol("__g", real=True)


def adjoint_name(name):
    return f"__g_{name}"


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


@dataclass(frozen=True)
class Adjoint:
    """What reverse mode produced for one (kernel, wrt, outputs) triple."""
    regions: tuple          # Regions in forward order
    containers: dict        # primal containers, then one adjoint per active container
    active: frozenset       # containers with adjoints
    recorded: frozenset     # containers whose overwritten values are pushed
    needs_forward: bool     # False when the reverse sweep reads no value the forward changes


def differentiate(sdfg, wrt, outputs) -> Adjoint:
    """A container is recorded in a region when that region writes it and its values are
    needed by the reverse sweep of that region or of an earlier one; values needed only
    after a container's last write are read from memory as the forward left it."""
    active = active_containers(sdfg, wrt, outputs)
    containers = dict(sdfg.containers)
    for name in sorted(active):
        c = sdfg.containers[name]
        containers[adjoint_name(name)] = Container(adjoint_name(name), c.dtype, c.shape)
    parts = _partition(sdfg.body)
    readers_by = [_readers(Sequence(p), sdfg.containers, active) for p in parts]
    regions, readers, recorded_any = [], {}, set()
    for k, part in enumerate(parts):
        body = Sequence(part)
        mk = lambda b: sdfg.replace(body=b, containers=containers)   # noqa: E731
        reads, writes = _accesses(body, sdfg.containers)
        for name, rs in readers_by[k].items():
            readers.setdefault(name, set()).update(rs)
        recorded = _Recorded({n: frozenset(readers[n]) if _self_covered(n, readers[n]) else None
                              for n in readers.keys() & writes})
        recorded_any |= recorded.names
        regions.append(Region(_describe(part, k), mk(body),
                              mk(_record(body, recorded, containers)),
                              mk(gather(_Reverser(active, recorded, containers).region(body))),
                              reads,
                              writes, _segmented(part)))
    needed = set().union(*readers_by)
    return Adjoint(tuple(regions), containers, active, frozenset(recorded_any),
                   bool(needed & written_containers(sdfg)))


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
    if loop.exit is not None or not counted_loop(loop):
        return False
    return all(counted_loop(r) for _, context in walk(loop.body) for r in context
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
    for mm in library_nodes(region):
        reads |= {mm.a, mm.b} | ({mm.out} if mm.accumulate else set())
        writes.add(mm.out)
    for _, context in walk(region):
        for r in context:
            if isinstance(r, Guard):
                reads |= condition_containers(r.condition, containers)
    return frozenset(reads), frozenset(writes)


def _readers(body, containers, active):
    """Containers whose values the reverse sweep of ``body`` reads, each with what reads
    them: the active tasklets some partial of which reads the container, or None for a
    decision on data or a matrix product (d(ab) = da b + a db)."""
    readers = {}
    for _, context in walk(body):
        for region in context:
            if isinstance(region, Guard):
                for name in condition_containers(region.condition, containers):
                    readers.setdefault(name, set()).add(None)
    for t, _, _ in tasklets(body):
        conns = t.connector_memlets()
        for memlet, expr in t.outputs:
            if memlet.data not in active:
                continue
            for conn in expr.free_symbols & conns.keys():
                if conns[conn].data in active:
                    d = partial(expr, conn)
                    for s in d.free_symbols & conns.keys():
                        readers.setdefault(conns[s].data, set()).add(t)
    for mm in library_nodes(body):
        if mm.out in active:
            for name in ({mm.b} if mm.a in active else set()) | ({mm.a} if mm.b in active
                                                                 else set()):
                readers.setdefault(name, set()).add(None)
    return readers


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
    (every write) or the tasklets whose writes alone need it (see _self_covered)."""
    by_name: dict

    @property
    def names(self):
        return frozenset(self.by_name)

    def pushes(self, node, memlet):
        only = self.by_name.get(memlet.data, ())
        return memlet.data in self.by_name and (only is None or node in only)


# ---- recording forward -----------------------------------------------------------------
def _record(region, recorded, containers):
    if isinstance(region, Sequence):
        return Sequence(tuple(_record(e, recorded, containers) for e in region.elements))
    if isinstance(region, LoopRegion):
        return replace(region, body=_record(region.body, recorded, containers),
                       tape_trips=region.exit is not None)
    if isinstance(region, ConditionalRegion):
        return ConditionalRegion(tuple((c, _record(b, recorded, containers))
                                       for c, b in region.branches), region.line)
    return State(_record_nodes(region.nodes, recorded, containers), region.label)


def _record_nodes(nodes, recorded, containers):
    out = []
    for node in nodes:
        if isinstance(node, MapScope):
            out.append(MapScope(node.params, node.ranges,
                                _record_nodes(node.body, recorded, containers), node.line))
            continue
        if isinstance(node, MatMul):
            if recorded.pushes(node, Memlet(node.out)):    # it overwrites the whole container
                out += every_element(containers[node.out], lambda m: (Push(m, node.line),),
                                     node.line)
        else:
            out += [Push(m, node.line) for m, _ in node.outputs if recorded.pushes(node, m)]
        out.append(node)
    return tuple(out)


# ---- reverse sweep ---------------------------------------------------------------------
class _Reverser:
    def __init__(self, active, recorded, containers):
        self.active, self.recorded, self.containers = active, recorded, containers

    def region(self, region):
        if isinstance(region, Sequence):
            parts = [self.region(e) for e in reversed(region.elements)]
            return Sequence(tuple(p for p in parts if not _empty(p)))
        if isinstance(region, LoopRegion):
            return replace(region, body=self.region(region.body), reverse=not region.reverse,
                           tape_trips=False)
        if isinstance(region, ConditionalRegion):
            return ConditionalRegion(tuple((c, self.region(b)) for c, b in region.branches),
                                     region.line)
        return self.state(region)

    def state(self, state):
        """A state's nodes backwards; maps that restore values become reversed loops."""
        elements, pending = [], []
        for node in reversed(state.nodes):
            if isinstance(node, MapScope) and any(self.recorded.pushes(t, m)
                                                  for t in node.body for m, _ in t.outputs):
                if pending:
                    elements.append(State(tuple(pending), state.label))
                    pending = []
                elements.append(self._map_as_loops(node))
            elif isinstance(node, MapScope):        # each point's tasklets backwards
                body = tuple(n for t in reversed(node.body) for n in self.tasklet(t))
                if body:
                    pending.append(MapScope(node.params, node.ranges, body, node.line))
            elif isinstance(node, MatMul):
                if self.recorded.pushes(node, Memlet(node.out)):
                    if pending:
                        elements.append(State(tuple(pending), state.label))
                        pending = []
                    restore = every_element(self.containers[node.out],
                                            lambda m: (Pop(m, node.line),), node.line)
                    elements.append(self._map_as_loops(restore[0]) if isinstance(
                        restore[0], MapScope) else State(restore))
                pending += self.matmul(node)
            else:
                pending += self.tasklet(node)
        if pending:
            elements.append(State(tuple(pending), state.label))
        return elements[0] if len(elements) == 1 else Sequence(tuple(elements))

    def matmul(self, mm):
        """out = op(a) op(b): a's adjoint += gout op(b)^T, b's += op(a)^T gout, then
        gout = 0 unless the product accumulated into out."""
        if mm.out not in self.active:
            return []
        g = adjoint_name(mm.out)
        nodes = []
        if mm.a in self.active:
            nodes.append(MatMul(adjoint_name(mm.a), mm.a_dims, mm.b, mm.b_dims, g, mm.out_dims,
                                mm.trans_b, True, True, mm.line) if mm.trans_a else
                         MatMul(adjoint_name(mm.a), mm.a_dims, g, mm.out_dims, mm.b, mm.b_dims,
                                False, not mm.trans_b, True, mm.line))
        if mm.b in self.active:
            nodes.append(MatMul(adjoint_name(mm.b), mm.b_dims, g, mm.out_dims, mm.a, mm.a_dims,
                                True, mm.trans_a, True, mm.line) if mm.trans_b else
                         MatMul(adjoint_name(mm.b), mm.b_dims, mm.a, mm.a_dims, g, mm.out_dims,
                                not mm.trans_a, False, True, mm.line))
        if not mm.accumulate:
            zero = self.containers[g]
            nodes += every_element(zero, lambda m: (Tasklet((), ((m, sp.Integer(0)),),
                                                            mm.line),), mm.line)
        return nodes

    def _map_as_loops(self, node):
        if not all(isinstance(t, Tasklet) for t in node.body):      # pops of a product
            body = Sequence((State(tuple(reversed(node.body))),))
            for p, (a, b, s) in reversed(list(zip(node.params, node.ranges))):
                body = Sequence((LoopRegion(p, a, b, s, body, node.line, True),))
            return body
        body = Sequence((State(tuple(n for t in reversed(node.body) for n in self.tasklet(t))),))
        for p, (a, b, s) in reversed(list(zip(node.params, node.ranges))):
            body = Sequence((LoopRegion(p, a, b, s, body, node.line, True),))
        return body

    def tasklet(self, t):
        """Restore, then propagate, for one forward tasklet (single output)."""
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
                writes.append((Memlet(adjoint_name(m.data), m.subset, "sum"), G * d))
        if self_coeff != 1:
            writes.insert(0, (Memlet(adjoint_name(out.data), out.subset), G * self_coeff))
        if writes:
            nodes.append(Tasklet(tuple(inputs.items()), tuple(writes), t.line))
        return nodes


def _empty(region):
    if isinstance(region, State):
        return not region.nodes
    if isinstance(region, Sequence):
        return all(_empty(e) for e in region.elements)
    return False
