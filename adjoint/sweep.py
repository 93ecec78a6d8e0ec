"""One differentiated call: the forward sweep and the reverse sweep, region by region,
following a store/recompute plan, with every engine allocation on a ledger."""
import numpy as np

from .autodiff import adjoint_name
from .autodiff.plan import Candidate, parse_bytes, solve
from .autodiff.revolve import schedule
from .codegen import COUNTS
from .errors import AdjointError
from .frontend import RESULT
from .options import options
from .runtime.arguments import bind
from .runtime.memory import memory_for

FORWARD, RECORD, REVERSE = 0, 1, 2


class Ledger:
    """Bytes the engine holds for one call (buffers, tapes, snapshots) and their peak."""

    def __init__(self):
        self.current = self.peak = 0

    def take(self, array):
        self.current += array.nbytes
        self.peak = max(self.peak, self.current)
        return array

    def give(self, array):
        self.current -= array.nbytes


class _TapeOverflow(Exception):
    """A while loop recorded more than its region's tape holds."""
    def __init__(self, region):
        self.region = region


class Sweep:
    """Buffers after the forward sweep, tapes and snapshots, and the reverse sweep."""

    def __init__(self, spec, bwd, args, run_forward=True, reusable=False, budget=None,
                 policy=None, snapshots=None):
        self.spec, self.bwd, self.reusable = spec, bwd, reusable
        self.adj = bwd.adjoint
        self.containers = bwd.layout.containers
        self.syms, self.arguments = bind(spec.sdfg, args)
        _, counts = bwd.module.check(self.syms)
        self.counts = counts.reshape(-1, COUNTS)
        self.ledger = Ledger()
        self.mem = memory_for(bwd.module)       # NumPy, or GPU arrays for a CUDA module
        self.hints = {}
        self.primal = {c.name for c in spec.forward.layout.containers}
        self._start()
        self.adjoints = {c.name: self.ledger.take(self.mem.zeros(spec.volume(c, self.syms),
                                                                 c.dtype))
                         for c in self.containers if c.name not in self.primal}
        runs_forward = run_forward or self.adj.needs_forward
        # Without a forward sweep nothing is recorded or snapshotted: every region "stores"
        # its empty tape.
        self.plan = self._plan(budget, policy if runs_forward else "store_all", snapshots)
        if runs_forward:
            while True:
                try:
                    self._forward()
                    break
                except _TapeOverflow as overflow:
                    self._grow(overflow.region)
                    self._start()

    # ---- setup -------------------------------------------------------------------------
    def _start(self):
        """Fresh buffers with the arguments' values; the caller's arrays are never written."""
        for array in getattr(self, "_owned", ()):
            self.ledger.give(array)
        for tape, _ in getattr(self, "tapes", {}).values():
            self.ledger.give(tape)
        for saved in getattr(self, "snapshots", {}).values():
            self._drop(saved)
        spec = self.spec
        values = dict(self.arguments)
        self._owned = []
        copied = set(spec.written_arrays) | {a.name for a in spec.sdfg.arguments
                                             if a.kind == "float"}
        for name in values:
            if name in copied or self.mem.copies_arguments:
                values[name] = self._own(self.mem.copy(values[name]))
        self.state = {c.name: values[c.name] if c.name in values
                      else self._own(self.mem.zeros(spec.volume(c, self.syms), c.dtype))
                      for c in self.containers if c.name in self.primal}
        self.tapes, self.snapshots = {}, {}

    def _own(self, array):
        self._owned.append(self.ledger.take(array))
        return array

    def _bytes(self, names):
        return sum(self.state[n].nbytes for n in names)

    def _plan(self, budget, policy, snapshots):
        budget = parse_bytes(options.memory_budget if budget is None else budget)
        policy = policy or options.memory_policy
        snapshots = snapshots or options.revolve_snapshots
        regions = self.adj.regions
        later = [frozenset().union(*(r.writes for r in regions[i:])) for i in range(len(regions))]
        self.inputs = [(r.reads | r.writes) & later[i] & self.primal
                       for i, r in enumerate(regions)]
        candidates = []
        for r, inputs, (pushes, work, per_iteration, trips) in zip(regions, self.inputs,
                                                                     self.counts):
            candidates.append(Candidate(
                r.name, 8 * int(pushes), self._bytes(inputs), float(work),
                int(trips) if r.segmented else 0, self._bytes(r.writes & self.primal),
                8 * int(per_iteration)))
        base = self.ledger.current + (self._bytes(self._written()) if self.reusable else 0)
        key = (self.syms[:-2].tobytes(), budget, policy, snapshots, self.reusable)
        cache = self.spec.plans.setdefault(id(self.bwd), {})
        if key not in cache:
            cache[key] = solve(candidates, base, budget, self.reusable, policy, snapshots)
        return cache[key]

    def _written(self):
        return {n for r in self.adj.regions for n in r.writes} & self.primal

    # ---- running entries ---------------------------------------------------------------
    def _run(self, region, kind, tape=None, position=0, segment=(0, 0), state=None):
        state = state or self.state
        syms = self.syms.copy()
        syms[-2:] = segment
        buffers = [state[c.name] if c.name in state else self.adjoints[c.name]
                   for c in self.containers]
        return self.spec.run(self.bwd.module, 3 * region + kind, syms, buffers, tape, position)

    def _segment(self, i):
        return (0, int(self.counts[i][3])) if self.adj.regions[i].segmented else (0, 0)

    def _tape(self, i, pushes):
        return self.ledger.take(self.mem.empty(max(int(pushes), self.hints.get(i, 0))))

    def _grow(self, i):
        size = max(2 * self.hints.get(i, int(self.counts[i][0])), 1024)
        if size * 8 > options.tape_limit_bytes:
            raise AdjointError(f"{self.spec.sdfg.name}(): the tape outgrew "
                               f"{options.tape_limit_bytes / 2**30:.1f} GiB while recording; "
                               "does every while loop terminate? (engine option tape_limit_bytes)")
        self.hints[i] = size

    # ---- forward sweep -----------------------------------------------------------------
    def _forward(self):
        for i, option in enumerate(self.plan.choices):
            if option.kind == "store":
                tape = self._tape(i, self.counts[i][0])
                end = self._run(i, RECORD, tape, 0, self._segment(i))
                if end < 0:
                    raise _TapeOverflow(i)
                self.tapes[i] = (tape, end)
            else:
                self.snapshots[i] = self._save(self.inputs[i])
                self._run(i, FORWARD, segment=self._segment(i))

    def result(self):
        return float(self.value(RESULT)[0]) if RESULT in self.state else None

    def value(self, name):
        """A container's contents after the forward sweep, as a NumPy array (on the CPU
        the buffer itself)."""
        return self.mem.value(self.state[name])

    def _save(self, names, state=None):
        state = state or self.state
        return {n: self.ledger.take(state[n].copy()) for n in names}

    def _restore(self, saved, state):
        for n, v in saved.items():
            self.mem.copyto(state[n], v)

    def _drop(self, saved):
        for v in saved.values():
            self.ledger.give(v)

    # ---- reverse sweep -----------------------------------------------------------------
    def reverse(self, cotangents):
        """Cotangents at entry of every floating argument, given those of the outputs."""
        if self.reusable:
            state = {n: (self.ledger.take(v.copy()) if n in self._written() else v)
                     for n, v in self.state.items()}
            for g in self.adjoints.values():
                g[...] = 0
        else:
            state = self.state
        for name, cot in cotangents.items():
            g = self.adjoints.get(adjoint_name(name))
            if g is not None:
                g[...] = np.asarray(cot, dtype=g.dtype).reshape(-1)
        for i in reversed(range(len(self.plan.choices))):
            self._reverse_region(i, self.plan.choices[i], state)
        if self.reusable:
            for n, v in state.items():
                if v is not self.state[n]:
                    self.ledger.give(v)
        return self._cotangents()

    def _reverse_region(self, i, option, state):
        if option.kind == "store":
            take = self.tapes.get if self.reusable else self.tapes.pop
            tape, end = take(i, (None, 0))      # no tape: nothing was recorded
            self._run(i, REVERSE, tape, end, self._segment(i), state)
            if tape is not None and not self.reusable:
                self.ledger.give(tape)
            return
        self._restore(self.snapshots[i], state)
        if option.kind == "recompute":
            self._record_and_reverse(i, self.counts[i][0], self._segment(i), state)
        else:
            self._revolve(i, option.snapshots, state)
        if not self.reusable:
            self._drop(self.snapshots.pop(i))

    def _record_and_reverse(self, i, pushes, segment, state):
        while True:
            tape = self._tape(i, pushes)
            end = self._run(i, RECORD, tape, 0, segment, state)
            if end >= 0:
                break
            self.ledger.give(tape)          # a while loop ran longer: more tape, run again
            self._grow(i)
            self._restore(self.snapshots[i], state)
        self._run(i, REVERSE, tape, end, segment, state)
        self.ledger.give(tape)

    def _revolve(self, i, snapshots, state):
        """Run the binomial schedule. One iteration tape and the snapshot copies are
        allocated once and reused (allocation, not recomputation, dominated otherwise);
        the plan counts them as held throughout, so the peak is unchanged."""
        writes = self.adj.regions[i].writes & self.primal
        tape = self._tape(i, self.counts[i][2])
        saved, spare = {}, []
        for action in schedule(int(self.counts[i][3]), snapshots):
            kind, k = action[0], action[1]
            if kind == "advance":
                self._run(i, FORWARD, segment=(k, action[2]), state=state)
            elif kind == "snapshot":
                saved[k] = self._save_into(spare.pop(), writes, state) if spare \
                    else self._save(writes, state)
            elif kind == "restore":
                self._restore(saved[k] if k else self.snapshots[i], state)
            elif kind == "free":
                spare.append(saved.pop(k))
            else:
                end = self._run(i, RECORD, tape, 0, (k, k + 1), state)
                self._run(i, REVERSE, tape, end, (k, k + 1), state)
        for copies in spare + list(saved.values()):
            self._drop(copies)
        self.ledger.give(tape)

    def _save_into(self, copies, names, state):
        for n in names:
            self.mem.copyto(copies[n], state[n])
        return copies

    def _cotangents(self):
        out = {}
        for a in self.spec.sdfg.arguments:
            if a.name not in self.spec.floating:
                continue
            g = self.adjoints.get(adjoint_name(a.name))
            value = self.state[a.name]
            g = np.zeros(value.shape, value.dtype) if g is None else self.mem.copy_out(g)
            out[a.name] = float(g[0]) if a.kind == "float" else g.reshape(value.shape)
        return out
