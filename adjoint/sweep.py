"""One differentiated call: the forward sweep and the reverse sweep, region by region,
following a store/recompute plan, with every engine allocation on a ledger.

Buffers are reused across calls: a call takes its buffers (argument copies, adjoints,
transients, tapes, snapshots) from its specialisation's pool (``runtime/memory.py``),
keeps what it releases on the way as spares for its own later needs, and a finished
non-reusable call hands the adjoints it returns to the user as they are (no copy) and
gives every other buffer back to the pool. The ledger is kept as before: spares are held
only while the bytes on the ledger plus the spares stay within the ledger's peak, so
the measured peak is still what the engine holds at most; idle pooled buffers between
calls (at most those of the last finished call per specialisation) are on no ledger."""
import numpy as np

from .analysis.activity import accessed_containers
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
        spec.verify(bwd.module, self.syms)          # the counts below are only right then
        _, counts = bwd.module.check(self.syms)
        self.counts = counts.reshape(-1, COUNTS)
        self.ledger = Ledger()
        # NumPy buffers from the specialisation's pool, or GPU arrays for a CUDA module
        self.mem = memory_for(bwd.module, getattr(spec, "pool", None))
        self.released, self._result = False, None
        self._table_for = self._table = None      # see _buffers
        # Tape lengths that sufficed for while loops (whose trips sc_check cannot count)
        # in earlier calls at these sizes: each overflow restarts the forward sweep.
        self.hints = spec.tape_sizes.setdefault((id(bwd), self.syms[:-2].tobytes()), {})
        self.primal = {c.name for c in spec.forward.layout.containers}
        self._start()
        self.adjoints = {c.name: self._hold(self._adjoint(c))
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
        if reusable:
            self._pin()

    # ---- setup -------------------------------------------------------------------------
    def _start(self):
        """Fresh buffers with the arguments' values; the caller's arrays are never written."""
        for array in getattr(self, "_owned", ()):
            self._free(array)
        for tape, _ in getattr(self, "tapes", {}).values():
            self._free(tape)
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
        self.state = {c.name: values[c.name] if c.name in values else self._own(self._new(c))
                      for c in self.containers if c.name in self.primal}
        self.tapes, self.snapshots = {}, {}

    def _pin(self):
        """A reusable sweep's pullbacks run later, and the caller may change its arrays
        in between: the arguments they read that are not copies yet are copied now (the
        pullback of ``vjp`` is the derivative at the call's values)."""
        kinds = tuple(option.kind for option in self.plan.choices)
        key = (id(self.bwd), kinds)
        if key not in self.spec.pullback_reads:
            read = set()
            for r, kind in zip(self.adj.regions, kinds):
                read |= accessed_containers(r.reverse)
                if kind != "store":             # re-run from a snapshot, then reversed
                    read |= accessed_containers(r.record) | accessed_containers(r.forward)
            self.spec.pullback_reads[key] = frozenset(read)
        read = self.spec.pullback_reads[key]
        pinned = {n: self._own(self.mem.copy(v)) for n, v in self.arguments.items()
                  if n in read and self.state[n] is v}
        if pinned:
            self.state = {**self.state, **pinned}   # a new dict: _buffers builds its table

    def _adjoint(self, c):
        """An adjoint buffer: zeros, but where the reverse sweep assigns a box of it first
        (autodiff/first_touch.py), zeros only around that box."""
        size = self.spec.volume(c, self.syms)
        box = self.adj.assigned_first.get(c.name)
        if box is None or c.dtype != np.float64:
            return self.mem.zeros(size, c.dtype)
        shape, outside = self.spec.outside(c, box, self.syms)
        if outside and not self.mem.slices:     # GPU arrays: whole-array clears only
            return self.mem.zeros(size, c.dtype)
        buffer = self.mem.empty(size)
        if outside:
            shaped = buffer.reshape(shape)
            for part in outside:
                shaped[part] = 0
        return buffer

    def _new(self, c):
        """A buffer for the transient ``c``: zeros, unless the program fills it first."""
        size = self.spec.volume(c, self.syms)
        if c.name in self.spec.filled_first and c.dtype == np.float64:
            return self.mem.empty(size)
        return self.mem.zeros(size, c.dtype)

    def _own(self, array):
        self._owned.append(self._hold(array))
        return array

    def _hold(self, array):
        """Put a buffer the memory object gave this call on the ledger. Spares are dropped
        as far as needed for the ledger's peak to cover them too."""
        self.ledger.take(array)
        self.mem.trim(self.ledger.peak - self.ledger.current)
        return array

    def _free(self, array):
        """Take a buffer of this call off the ledger; it stays a spare of the call."""
        self.ledger.give(array)
        self.mem.release(array)

    def _bytes(self, names):
        return sum(self.state[n].nbytes for n in names)

    def _plan(self, budget, policy, snapshots):
        budget = parse_bytes(options.memory_budget if budget is None else budget)
        policy = policy or options.memory_policy
        snapshots = snapshots or options.revolve_snapshots
        regions = self.adj.regions
        cache = self.spec.plans.setdefault(id(self.bwd), {})
        key = (self.syms[:-2].tobytes(), budget, policy, snapshots, self.reusable)
        if key not in cache:
            candidates = []
            for r, (pushes, work, per_iteration, trips) in zip(regions, self.counts):
                candidates.append(Candidate(
                    r.name, 8 * int(pushes), self._bytes(r.inputs), float(work),
                    int(trips) if r.segmented else 0, self._bytes(r.writes & self.primal),
                    8 * int(per_iteration)))
            base = self.ledger.current + (self._bytes(self._written()) if self.reusable else 0)
            cache[key] = solve(candidates, base, budget, self.reusable, policy, snapshots)
        return cache[key]

    def _written(self):
        return {n for r in self.adj.regions for n in r.writes} & self.primal

    # ---- running entries ---------------------------------------------------------------
    def _run(self, region, kind, tape=None, position=0, segment=(0, 0), state=None):
        state = state or self.state
        syms = self.syms.copy()
        syms[-2:] = segment
        return self.spec.run(self.bwd.module, 3 * region + kind, syms, self._buffers(state),
                             tape, position)

    def _buffers(self, state):
        """The entries' buffers with the primal ones of ``state``: built once per state
        (a dict never changed once made; the table holds it, so its id stays its own)."""
        if self._table_for is not state:
            self._table = self.bwd.module.table(
                [state[c.name] if c.name in state else self.adjoints[c.name]
                 for c in self.containers])
            self._table_for = state
        return self._table

    def _segment(self, i):
        return (0, int(self.counts[i][3])) if self.adj.regions[i].segmented else (0, 0)

    def _tape(self, i, pushes):
        return self._hold(self.mem.empty(max(int(pushes), self.hints.get(i, 0))))

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
                self.snapshots[i] = self._save(self.adj.regions[i].inputs)
                self._run(i, FORWARD, segment=self._segment(i))

    def result(self):
        if self.released:
            return self._result
        return float(self.value(RESULT)[0]) if RESULT in self.state else None

    def value(self, name):
        """A container's contents after the forward sweep, as a NumPy array (on the CPU
        the buffer itself)."""
        if self.released:
            raise AdjointError(f"{self.spec.sdfg.name}(): this differentiated call is over; "
                               "its buffers went back to the pool")
        return self.mem.value(self.state[name])

    def _save(self, names, state=None):
        state = state or self.state
        return {n: self._hold(self.mem.copy(state[n])) for n in names}

    def _restore(self, saved, state):
        for n, v in saved.items():
            self.mem.copyto(state[n], v)

    def _drop(self, saved):
        for v in saved.values():
            self._free(v)

    # ---- reverse sweep -----------------------------------------------------------------
    def reverse(self, cotangents, wanted=None):
        """Cotangents at entry of every floating argument (of those named in ``wanted``,
        when given), given those of the outputs.

        A non-reusable sweep runs its reverse once: the adjoints it returns are its own
        buffers, handed over, and its other buffers go back to the pool (``result()``
        still answers; ``value()`` no longer does). A reusable sweep (``vjp``) returns
        copies and keeps everything for the next call."""
        if self.released:
            raise AdjointError(f"{self.spec.sdfg.name}(): the reverse sweep of a "
                               "non-reusable call runs once")
        if self.reusable:
            state = {n: (self._hold(self.mem.copy(v)) if n in self._written() else v)
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
                    self._free(v)
            return self._cotangents(wanted)
        out = self._cotangents(wanted)
        self._release()
        return out

    def _reverse_region(self, i, option, state):
        if option.kind == "store":
            take = self.tapes.get if self.reusable else self.tapes.pop
            tape, end = take(i, (None, 0))      # no tape: nothing was recorded
            self._run(i, REVERSE, tape, end, self._segment(i), state)
            if tape is not None and not self.reusable:
                self._free(tape)
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
            self._free(tape)                # a while loop ran longer: more tape, run again
            self._grow(i)
            self._restore(self.snapshots[i], state)
        self._run(i, REVERSE, tape, end, segment, state)
        self._free(tape)

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
        self._free(tape)

    def _save_into(self, copies, names, state):
        for n in names:
            self.mem.copyto(copies[n], state[n])
        return copies

    def _cotangents(self, wanted=None):
        out = {}
        for a in self.spec.sdfg.arguments:
            if a.name not in self.spec.floating or (wanted is not None and a.name not in wanted):
                continue
            name = adjoint_name(a.name)
            g = self.adjoints.get(name)
            value = self.state[a.name]
            if g is None:
                g = np.zeros(value.shape, value.dtype)
            elif a.kind == "float":
                g = self.mem.value(g)
            elif self.reusable:
                g = self.mem.copy_out(g)        # the next pullback overwrites the buffer
            else:
                self.ledger.give(g)             # the user's now: never pooled
                del self.adjoints[name]
                g = self.mem.hand_out(g)
            out[a.name] = float(g[0]) if a.kind == "float" else g.reshape(value.shape)
        return out

    def _release(self):
        """The call is over: its remaining buffers go back to the pool (on the CPU) and
        the sweep keeps no reference to them (``spec.last_sweep`` holds only the plan and
        the ledger)."""
        self._result = self.result()
        held = list(self._owned) + list(self.adjoints.values())
        held += [tape for tape, _ in self.tapes.values()]
        held += [v for saved in self.snapshots.values() for v in saved.values()]
        for array in held:
            self.ledger.give(array)
        self.released = True
        self.mem.close(held)
        self.state, self.adjoints, self.tapes, self.snapshots, self._owned = {}, {}, {}, {}, []
        self._table_for = self._table = None
