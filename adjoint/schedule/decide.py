"""The scheduling pass: how each loop, map and branch of an entry runs, decided once and
recorded on the IR (``schedule.decisions``) for the printers to read.

On the CPU (C with OpenMP) it marks what may run on threads (``analysis.parallel``),
turns each map that pushes or pops into its loops (``tape.as_loops``, as reverse mode
builds them), and records per loop: threads and how they share it out (the cost model,
``cost``), the tape's slots and the places its threads' values go (``tape``), SIMD sums
(``simd``), a parallel loop's pieces run with it innermost (``interchange``), the
elements a sequential one keeps in locals (``promote``) and whether it polls for
Ctrl-C; per map: threads, per-thread copies and partial sums, SIMD sums; per branch:
whether its writes are selects. On the GPU it marks the kernels (``analysis.device``)
and records each one's grid (``Kernel``, ``MapKernel``), polls and selects; kernels have
no SIMD sums, slots or OpenMP threads (their tape positions are their own).
"""
from dataclasses import replace

from ..analysis.dependence import countable, counted
from ..analysis.device import (device_parallelize, distributed, kernel_nest, map_atomics,
                               map_pushes)
from ..analysis.parallel import parallelize, shared_across_rows, shared_sums, tape_per_iteration
from ..sdfg.nodes import (LibraryNode, LoopRegion, MapScope, Pop, Push, Sequence, State,
                          Tasklet, divides, walk)
from ..sdfg.visit import Transformer, tasklets_only
from .cost import loop_threads, map_threads
from .decisions import (BranchSchedule, Kernel, LoopSchedule, MapKernel, MapSchedule,
                        Reduction, TapeShare, Threading)
from .interchange import interchange
from .promote import promoted
from .simd import as_access, simd_reduction
from .tape import as_loops, records, slot_layout, uses_tape


def schedule(sdfg, device="cpu"):
    """The SDFG (an entry point) with every loop, map and branch scheduled for ``device``
    ("cpu": C with OpenMP; "cuda": kernels, codegen/cuda.py)."""
    marked = device_parallelize(sdfg) if device == "cuda" else parallelize(sdfg)
    scheduled = marked.replace(body=_Scheduler(marked, device == "cpu").region(marked.body))
    if device != "cuda":
        return scheduled
    return scheduled.replace(body=_Kernels(scheduled).region(scheduled.body))


class _Scheduler(Transformer):
    def __init__(self, sdfg, cpu):
        super().__init__()
        self.containers, self.cpu = sdfg.containers, cpu

    def elements(self, elements):
        # On the CPU a state's maps that record run as their loops, spliced in between
        # the state's other nodes (reverse mode builds their reverse so)
        if not self.cpu:
            return super().elements(elements)
        split = []
        for e in elements:
            split.extend(_recording_maps_as_loops(e, self.containers, bool(self.loops))
                         if isinstance(e, State) else [e])
        return super().elements(split)

    def state(self, state):
        if self.cpu and any(records(n) for n in state.nodes):   # a body that is one state
            return Sequence(tuple(self.elements([state])))
        return super().state(state)

    def loop(self, loop):
        loop = super().loop(loop)
        return replace(loop, schedule=self._loop(loop))

    def conditional(self, region):
        region = super().conditional(region)
        return replace(region, schedule=BranchSchedule(self._selects(region)))

    def node(self, node):
        if isinstance(node, MapScope):
            return replace(node, schedule=self._map(node))
        return node

    # ---- loops ------------------------------------------------------------------------
    def _loop(self, loop):
        nested = bool(self.loops) and not loop.segment
        polls = not (counted(loop) and countable(loop)) or _holds_nest(loop.body)
        if not self.cpu:
            return LoopSchedule(polls=polls)
        threads = loop_threads(loop) if loop.parallel else None
        tape = TapeShare(*tape_per_iteration(loop)) if threads and uses_tape(loop.body) \
            else None
        threading = None
        if threads and tape:     # sums into scalars only: partial sums of shares, SIMD's
            threading = Threading.SHARED if nested or _scalars_only(loop.sums, self.containers) \
                else Threading.SUMMED if loop.sums else Threading.ROWS
        elif threads:
            threading = Threading.SUMMED if loop.sums else \
                Threading.SHARED if nested else Threading.ROWS
        pieces = interchange(loop, self.containers)
        if pieces and threading is Threading.ROWS:  # each share's pieces in turn
            threading = Threading.SHARED
        slots = slot_layout(loop)
        # independent iterations, nothing inside but tasklets: SIMD's as well (GCC does
        # not see past the pointers OpenMP hands the loop's outlined function)
        simd = threading is Threading.ROWS and \
            tasklets_only(loop.body, allow=(Push, Pop)) is not None
        reduction = self._reduction(loop)
        slot_reduction = self._slot_reduction(loop) if slots else None
        # elements in locals where no SIMD sums take them
        kept = promoted(loop, self.containers, self.loops) \
            if not (reduction or slot_reduction) else ()
        return LoopSchedule(threads, threading, tape, reduction, slots, slot_reduction, polls,
                            simd=simd, interchange=pieces, promoted=kept)

    def _reduction(self, loop):
        """SIMD sums of the loop run in order (as it is, or as the one-thread copy of a
        loop with per-thread copies; never the share of a thread)."""
        if not (counted(loop) and loop.step.is_number) or loop.segment:
            return None
        return simd_reduction(loop.var, tasklets_only(loop.body), self.containers,
                              _upward(loop))

    def _slot_reduction(self, loop):
        """SIMD sums of a slotted loop, its pushes and pops reading and writing their
        elements; the body with them, in order."""
        nodes = tasklets_only(loop.body, allow=(Push, Pop))
        if not nodes or not loop.step.is_number:
            return None
        found = simd_reduction(loop.var, [as_access(n) for n in nodes], self.containers,
                               _upward(loop))
        if found is None:
            return None
        return Reduction(found.sums, tuple(n if isinstance(n, (Push, Pop)) else t
                                           for n, t in zip(nodes, found.body)))

    # ---- maps -------------------------------------------------------------------------
    def _map(self, node):
        """Sums several points share: within a row the row's thread adds them alone,
        across rows through per-thread copies (a top-level map only: atomics, on a few
        CPU cores, cost more than the extra cores give)."""
        if not self.cpu:
            return MapSchedule()
        a, b, s = node.ranges[-1]
        reduction = simd_reduction(node.params[-1], node.body, self.containers,
                                   private=node.private) if s.is_number else None
        if not node.parallel or shared_sums(node) and (self.loops or not _sums_only(node)):
            return MapSchedule(reduction=reduction)
        sums = _scalar_sums(node, self.containers)
        copies = () if self.loops else tuple(sorted(shared_across_rows(node)))
        # a one-axis map summing into scalars: a function over each thread's share, whose
        # sums are SIMD's (an `omp for` over the axis would add in order)
        shared = bool(self.loops) or bool(sums and reduction and len(node.params) == 1
                                          and not copies)
        return MapSchedule(map_threads(node), shared, copies, sums, reduction)

    # ---- branches ---------------------------------------------------------------------
    def _selects(self, region):
        """A decision on data inside a loop whose branches only assign elements, each
        write as ``x = taken ? value : x``: no branch, and no store that only some lanes
        make (GCC's masked stores, then reloaded, cost more than the branch). Every
        access in such a branch is in bounds whether taken or not (analysis.bounds does
        not look at conditions), and nothing it computes can trap but integer division."""
        if not self.loops or not all(c is None or _on_data(c, self.containers)
                                     for c, _ in region.branches):
            return False
        bodies = [tasklets_only(body) for _, body in region.branches]
        return not any(b is None or any(divides(t) for t in b) for b in bodies)


class _Kernels(Transformer):
    """On the GPU, the kernel of each marked loop and map (the outermost only)."""

    def __init__(self, sdfg):
        super().__init__()
        self.sdfg = sdfg

    def loop(self, loop):
        if not loop.parallel:
            return super().loop(loop)
        return replace(loop, schedule=replace(loop.schedule, kernel=_kernel(self.sdfg, loop)))

    def node(self, node):
        if not (isinstance(node, MapScope) and node.parallel):
            return node
        sums = tuple(sorted({m.data for t in node.body if isinstance(t, Tasklet)
                             for m, _ in t.outputs
                             if m.wcr and self.sdfg.containers[m.data].is_scalar}))
        kernel = MapKernel(map_atomics(node), map_pushes(node), sums)
        return replace(node, schedule=replace(node.schedule, kernel=kernel))


def _kernel(sdfg, loop):
    """A marked loop's Kernel: distributed into pieces where that gives deeper grids
    (``analysis.device.distributed``), else its nest."""
    pieces = distributed(sdfg, loop)
    if not pieces:
        return Kernel(kernel_nest(sdfg, loop))
    return Kernel(pieces=tuple(
        replace(p, schedule=replace(p.schedule or LoopSchedule(), kernel=_kernel(sdfg, p)))
        for p in pieces))


def _recording_maps_as_loops(state, containers, nested):
    """The state, with each map that pushes or pops as its loops (the outermost on
    threads where the map may, as _map decides), between states of its other nodes.
    The outermost loop's ``sums`` are the map's: its scalars' partial sums, and the
    arrays its rows all add into (per-thread copies, at the top of the entry only)."""
    if not any(records(n) for n in state.nodes):
        return [state]
    out, pending = [], []
    for n in state.nodes:
        if records(n):
            if pending:
                out.append(State(tuple(pending), state.label))
                pending = []
            outermost = as_loops(n.params, n.ranges, n.body, n.line).elements[0]
            parallel = n.parallel and not (shared_sums(n) and (nested or not _sums_only(n)))
            sums = _scalar_sums(n, containers) + tuple(sorted(shared_across_rows(n)))
            out.append(replace(outermost, parallel=parallel, sums=sums if parallel else ()))
        else:
            pending.append(n)
    if pending:
        out.append(State(tuple(pending), state.label))
    return out


def _scalar_sums(node, containers):
    """The scalars a map's points add into (sorted names; not its points' own)."""
    return tuple(sorted({m.data for t in node.body if isinstance(t, Tasklet)
                         for m, _ in t.outputs if m.wcr and containers[m.data].is_scalar
                         and m.data not in node.private}))


def _scalars_only(names, containers):
    """Whether ``names`` (a loop's sums) are some scalars and nothing else."""
    return bool(names) and all(containers[n].is_scalar for n in names)


def _sums_only(node):
    """Whether the containers several points of the map add into are only added into
    there (never read or assigned), so that per-thread copies can take the sums."""
    shared = shared_sums(node)
    body = [t for t in node.body if isinstance(t, Tasklet)]
    return not any(m.data in shared for t in body for _, m in t.inputs) and all(
        m.wcr == "sum" for t in body for m, _ in t.outputs if m.data in shared)


def _upward(loop):
    """Whether the loop's iterations run in increasing order of its variable."""
    return not loop.reverse and loop.step.is_number and loop.step > 0


def _on_data(condition, containers):
    """Whether a branch condition reads flags (containers) and nothing else."""
    names = {s.name for s in condition.free_symbols}
    return bool(names) and names <= set(containers)


def _holds_nest(region):
    """Whether a region holds a loop, a map or a library node."""
    return any(isinstance(node, (MapScope, LibraryNode)) or
               any(isinstance(r, LoopRegion) for r in context) for node, context in walk(region))
