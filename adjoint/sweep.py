"""One differentiated call: the forward sweep and the reverse sweep, region by region,
following a store/recompute plan, with every engine allocation on a ledger.

Buffers are reused across calls: a call takes its buffers (argument copies, adjoints,
transients, tapes, snapshots) from its specialisation's pool (``runtime/memory.py``),
keeps what it releases on the way as spares for its own later needs, hands the
adjoints it returns to the user as they are (no copy; a reusable call's next pullback
takes new ones), and once finished gives every other buffer back to the pool. The
ledger is kept as before: spares are held
only while the bytes on the ledger plus the spares stay within the ledger's peak, so
the measured peak is still what the engine holds at most; idle pooled buffers between
calls (at most those of the last finished call per specialisation) are on no ledger.
A reusable call (vjp) gives its buffers back once its pullback is gone. A call whose
buffers (but tapes and snapshots) are small together takes them, with their pointer
table, as one Frame that the next call at its sizes reuses, and returns copies of its adjoints.
What the sizes alone decide is computed once per backward and sizes (``Setup``)."""
import math

import numpy as np

from .analysis.activity import accessed_containers, written_containers
from .autodiff import adjoint_name
from .autodiff.plan import Candidate, parse_bytes, solve
from .autodiff.revolve import schedule
from .codegen import COUNTS
from .codegen.c import FAILED
from .errors import AdjointError
from .frontend import RESULT
from .options import options
from .runtime.arguments import Binding, as_complex, as_parts
from .runtime.module import Batch
from .runtime.memory import FRAMED, SMALL, idle, memory_for, on_device

FORWARD, RECORD, REVERSE = 0, 1, 2
EVERY = -1      # the key in Sweep.tapes of one tape for every region (see Setup.batches)


class Ledger:
    """Bytes the engine holds for one call (buffers, tapes, snapshots) and their peak."""

    def __init__(self):
        self.current = self.peak = 0

    def take(self, array):
        self.current += array.nbytes
        if self.current > self.peak:
            self.peak = self.current
        return array

    def give(self, array):
        self.current -= array.nbytes


class _TapeOverflow(Exception):
    """A while loop recorded more than its region's tape holds."""
    def __init__(self, region):
        self.region = region


class Setup:
    """What the sweeps of one backward derive from the sizes alone, once per distinct
    sizes (the specialisation keeps them): the checked counts, how each buffer starts
    (an argument, its copy, a new transient, an adjoint zeroed where needed), each
    region's symbol values, the plans made, the tape lengths that sufficed for while
    loops (whose trips sc_check cannot count) in earlier calls (each overflow restarts
    the forward sweep), the entries a plan storing every region runs in one C call
    (``batches``), and whether the buffers a call makes are few enough bytes for a Frame
    (runtime/memory.py; the idle frames are the Binding's, whose number a kernel bounds)."""

    def __init__(self, spec, bwd, syms):
        spec.verify(bwd.module, syms)               # the counts below are only right then
        _, counts = bwd.module.check(syms)
        self.counts = counts.reshape(-1, COUNTS)
        self.hints, self.plans = {}, {}
        self.primal = {c.name for c in spec.forward.layout.containers}
        arguments = {a.name for a in spec.sdfg.arguments if a.kind != "int"}
        copied = set(spec.written_arrays) | {a.name for a in spec.sdfg.arguments
                                             if a.kind == "float"}
        self.buffers = [(c.name, _start(spec, c, syms, arguments, copied))
                        for c in bwd.layout.containers if c.name in self.primal]
        assigned = bwd.adjoint.assigned_first
        self.adjoints = [(c.name, _zeroed(spec, c, assigned.get(c.name), syms))
                         for c in bwd.layout.containers if c.name not in self.primal]
        self.syms = []                  # per region: its whole range as the segment
        for r, count in zip(bwd.adjoint.regions, self.counts):
            self.syms.append(syms.copy() if r.segmented else syms)
            if r.segmented:
                self.syms[-1][-2:] = (0, int(count[3]))
        self.slots = [_slot(spec, c, dict(self.buffers).get(c.name), syms)
                      for c in bwd.layout.containers]
        self.framed = not on_device(bwd.module) and sum(
            math.prod(shape) * dtype.itemsize for _, shape, dtype in self.slots
            if shape is not None) < FRAMED
        self.copies = [n for n, how in self.buffers if how == "copy"]
        self.cotangents = [(a.name, adjoint_name(a.name), a.kind == "float")
                           for a in spec.floating_arguments]
        self.written = {n for r in bwd.adjoint.regions for n in r.writes} & self.primal
        self.adjoint_names = [name for name, _ in self.adjoints]
        self.batched = not on_device(bwd.module)
        self._batches = None

    def batches(self):
        """(record, reverse, both) Batches (runtime/module.py) of a sweep whose regions all
        keep their tapes: the record entries in order, the reverse ones backwards, and the
        two in one (grad's: its cotangent is known first), every region's tape a part of
        one tape as long as ``Sweep._tape`` would take it. Made anew when the hints grow."""
        batches = self._batches
        if batches is None:
            n = len(self.counts)
            caps = [max(int(c[0]), self.hints.get(i, 0)) for i, c in enumerate(self.counts)]
            offsets = [sum(caps[:i]) for i in range(n)]
            forth, back = list(range(n)), list(range(n - 1, -1, -1))
            record = ([3 * i + RECORD for i in forth], self.syms, offsets, caps)
            reverse = ([3 * i + REVERSE for i in back], [self.syms[i] for i in back],
                       [offsets[i] for i in back], [caps[i] for i in back])
            batches = self._batches = (Batch(*record), Batch(*reverse), Batch(
                *(a + b for a, b in zip(record, reverse)), chained=[-1] * n + back))
        return batches

    def hint(self, i, size):
        """Region ``i``'s tape takes ``size`` values from now on."""
        self.hints[i] = size
        self._batches = None


def _slot(spec, c, how, syms):
    """(name, shape, dtype) of container ``c``'s buffer in a Frame: an argument's shape
    for its copy (or fresh buffer), flat for the others; (name, None, None) for an
    argument used in place."""
    if how == "argument":
        return c.name, None, None
    if how in ("copy", "fresh") and not c.is_scalar:
        return c.name, spec.shape(c, syms), np.dtype(c.dtype)
    return c.name, (spec.volume(c, syms),), np.dtype(c.dtype)


def _start(spec, c, syms, arguments, copied):
    """How the buffer of primal container ``c`` starts: ``"argument"`` (as given),
    ``"copy"`` (of the argument), ``"fresh"`` (the argument's shape, its values never
    read: the program fills it first, hdiff's ``out_field``), or (elements, dtype,
    whether the program fills it first) for a new one."""
    if c.name in arguments:
        if c.name not in copied:
            return "argument"
        return "fresh" if c.name in spec.filled_first and c.dtype == np.float64 else "copy"
    filled = c.name in spec.filled_first and c.dtype == np.float64
    return spec.volume(c, syms), np.dtype(c.dtype), filled


def _zeroed(spec, c, box, syms):
    """(elements, dtype, shape, the parts outside ``box``) of an adjoint buffer: zeros,
    but where the reverse sweep assigns a box of it first (autodiff/first_touch.py),
    zeros only around that box (shape and parts None: zeros throughout)."""
    size = spec.volume(c, syms)
    if box is None or c.dtype != np.float64:
        return size, np.dtype(c.dtype), None, None
    return (size, np.dtype(c.dtype)) + spec.outside(c, box, syms)


class Sweep:
    """Buffers after the forward sweep, tapes and snapshots, and the reverse sweep."""

    def __init__(self, spec, bwd, args, run_forward=True, reusable=False, budget=None,
                 policy=None, snapshots=None, binding=None, cotangents=None):
        """``binding``: the ``runtime.arguments.Binding`` of ``args`` (made here when
        not given): their checks ran once for all calls like this one. ``cotangents``:
        the outputs' cotangents where known before the forward sweep (grad's loss; not
        for a reusable sweep), which ``reverse`` then takes: a plan storing every region
        runs the reverse sweep in the forward sweep's C call (``reversed``)."""
        self.spec, self.bwd, self.reusable = spec, bwd, reusable
        self.seeds, self.reversed = None if reusable else cotangents, False
        self.adj, self.containers = bwd.adjoint, bwd.layout.containers
        binding = binding or Binding(spec.sdfg, args, spec.written_arrays)
        self.syms, self.arguments = binding.values(args)
        setup = self.setup = self._setup(binding)
        self.counts, self.hints, self.primal = setup.counts, setup.hints, setup.primal
        self.ledger = Ledger()
        # NumPy buffers from the specialisation's pool, or GPU arrays for a CUDA module
        self.mem = memory_for(bwd.module, getattr(spec, "pool", None))
        self.released, self._result = False, None
        self.pulled = False             # a reverse sweep ran: the adjoints hold its sums
        self._table_for = self._table = None      # see _buffers
        self._owned, self.tapes, self.snapshots = [], {}, {}
        if setup.framed:
            self.frame = self._frame()
            self.state = self._framed()
            self.adjoints = self.frame.adjoints
        else:
            self.frame = None
            self._start()
            self.adjoints = {name: self._hold(self._adjoint(*how))
                             for name, how in setup.adjoints}
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

    def close(self):
        """A reusable sweep (vjp's) is done once its pullback is gone (``api.vjp`` calls
        this then): its buffers are the next call's; nothing it handed out is one of them
        (outputs and cotangents are copies)."""
        if self.reusable and not self.released:
            try:
                self._release()
            except Exception:           # a sweep that failed half-way: its buffers go
                pass

    # ---- setup -------------------------------------------------------------------------
    def _start(self):
        """Fresh buffers with the arguments' values; the caller's arrays are never written."""
        for array in self._owned:
            self._free(array)
        for tape, _ in self.tapes.values():
            self._free(tape)
        for saved in self.snapshots.values():
            self._drop(saved)
        self._owned, state, mem = [], {}, self.mem
        self.tapes, self.snapshots = {}, {}
        if self.frame is not None:
            self.state = self._framed()
            return
        for name, how in self.setup.buffers:
            if how == "argument" and not mem.copies_arguments:
                state[name] = self.arguments[name]
            elif how == "fresh" and mem.slices:     # GPU buffers: copied as before
                state[name] = self._own(mem.empty(self.arguments[name].size).reshape(
                    self.arguments[name].shape))
            elif isinstance(how, str):
                state[name] = self._own(mem.copy(self.arguments[name]))
            else:               # a transient: zeros, unless the program fills it first
                size, dtype, filled = how
                self._own(mem.empty(size) if filled else mem.zeros(size, dtype))
                state[name] = self._owned[-1]
        self.state = state

    def _setup(self, binding):
        """The Setup of these sizes; the Binding's memo keeps it with the idle frames of
        its calls (``_frames``) unless index arrays' ranges, part of the sizes, vary."""
        bwd, spec = self.bwd, self.spec
        kept = binding.memo.get(id(bwd))
        if kept is not None and not binding.ranges:
            self._frames = kept[1]
            return kept[0]
        key = (id(bwd), self.syms[:-2].tobytes())
        setup = spec.setups.get(key) or spec.setups.setdefault(key, Setup(spec, bwd, self.syms))
        self._frames = (kept or binding.memo.setdefault(id(bwd), (setup, [])))[1]
        return setup

    def _frame(self):
        """An idle frame of these sizes, or a new one, on the ledger (all its buffers)."""
        setup = self.setup
        frame = idle(self._frames, self.bwd.module, setup.slots, setup.copies,
                     setup.adjoint_names)
        self.ledger.take(frame)
        return frame

    def _framed(self):
        """The primal buffers of a framed call: the frame's, zeroed, the copies filled,
        the arguments used in place pointed to by its table (which _buffers then uses)."""
        frame = self.frame
        frame.block.fill(0)
        state = dict(frame.primal)
        for k, name in frame.in_place:
            state[name] = self.arguments[name]
            frame.table.point(k, state[name])
        for name, view in frame.copies:
            np.copyto(view, self.arguments[name])
        self._table_for, self._table = state, frame.table
        return state

    def _pin(self):
        """A reusable sweep's pullbacks run later, and the caller may change its arrays
        in between: the arguments they read that are not copies yet are copied now (the
        pullback of ``vjp`` is the derivative at the call's values). Each pullback works
        on copies of the containers its entries write (``restored``: pops, snapshots
        restored and re-run), the others as the forward sweep left them (go_fast copied
        its 32 MB result per pullback, which no reverse entry touches)."""
        kinds = tuple(option.kind for option in self.plan.choices)
        key = (id(self.bwd), kinds)
        if key not in self.spec.pullbacks:
            read, written = set(), set()
            for r, kind in zip(self.adj.regions, kinds):
                read |= accessed_containers(r.reverse)
                written |= written_containers(r.reverse)
                if kind != "store":             # re-run from a snapshot, then reversed
                    read |= accessed_containers(r.record) | accessed_containers(r.forward)
                    written |= r.writes | r.inputs
            self.spec.pullbacks[key] = frozenset(read), frozenset(written & self.primal)
        self.touched, self.restored = self.spec.pullbacks[key]
        pinned = {n: self._own(self.mem.copy(v)) for n, v in self.arguments.items()
                  if n in self.touched and self.state[n] is v}
        if pinned:
            self.state = {**self.state, **pinned}   # a new dict: _buffers builds its table

    def _adjoint(self, size, dtype, shape, outside):
        """An adjoint buffer as ``Setup.adjoints`` says (see ``_zeroed``)."""
        if shape is None or (outside and not self.mem.slices):  # GPU: whole-array clears
            return self.mem.zeros(size, dtype)
        return self._clear(self.mem.empty(size), shape, outside)

    def _clear(self, buffer, shape, outside):
        """``buffer`` as the reverse sweep expects an adjoint: zeros, or with ``shape``
        zeros only in the parts ``outside`` the box it assigns first."""
        if shape is None or (outside and not self.mem.slices):
            self.mem.clear(buffer)
        elif outside:
            shaped = buffer.reshape(shape)
            for part in outside:
                shaped[part] = 0
        return buffer

    def _fresh_adjoints(self):
        """A reusable sweep's adjoints before a pullback after the first (which finds
        them as the sweep made them): those handed out as gradients anew, the others
        cleared as ``_adjoint`` leaves them (zeros only around a box assigned first)."""
        for name, how in self.setup.adjoints:
            g = self.adjoints.get(name)
            if g is None:
                self.adjoints[name] = self._hold(self._adjoint(*how))
            elif self.frame is not None:
                g[...] = 0
            else:
                self._clear(g, *how[2:])

    def _own(self, array):
        self._owned.append(self._hold(array))
        return array

    def _hold(self, array):
        """Put a buffer the memory object gave this call on the ledger. Spares are dropped
        as far as needed for the ledger's peak to cover them too."""
        self.ledger.take(array)
        if self.mem.spare_bytes:
            self.mem.trim(self.ledger.peak - self.ledger.current)
        return array

    def _free(self, array):
        """Take a buffer of this call off the ledger; it stays a spare of the call."""
        self.ledger.give(array)
        self.mem.release(array)

    def _bytes(self, names):
        return sum(self.state[n].nbytes for n in names)

    def _plan(self, budget, policy, snapshots):
        """The store/recompute plan, made once per sizes, settings and options."""
        key = (budget, policy, snapshots, self.reusable, options.memory_budget,
               options.memory_policy, options.revolve_snapshots)
        plan = self.setup.plans.get(key)
        if plan is None:
            plan = self.setup.plans.setdefault(key, self._solve(budget, policy, snapshots))
        return plan

    def _solve(self, budget, policy, snapshots):
        budget = parse_bytes(options.memory_budget if budget is None else budget)
        policy = policy or options.memory_policy
        snapshots = snapshots or options.revolve_snapshots
        candidates = []
        for r, (pushes, work, per_iteration, trips) in zip(self.adj.regions, self.counts):
            candidates.append(Candidate(
                r.name, 8 * int(pushes), self._bytes(r.inputs), float(work),
                int(trips) if r.segmented else 0, self._bytes(r.writes & self.primal),
                8 * int(per_iteration)))
        base = self.ledger.current + (self._bytes(self.setup.written) if self.reusable else 0)
        return solve(candidates, base, budget, self.reusable, policy, snapshots)

    # ---- running entries ---------------------------------------------------------------
    def _run(self, region, kind, tape=None, position=0, segment=None, state=None):
        """Entry point ``kind`` of ``region`` over the region's whole range, or over
        ``segment`` (revolve's steps); the sizes were checked by the Setup."""
        if segment is None:
            syms = self.setup.syms[region]
        else:
            syms = self.syms.copy()
            syms[-2:] = segment
        status = self.bwd.module.call(3 * region + kind, syms,
                                      self._buffers(state or self.state), tape, position)
        self._failed(status)
        return status

    def _buffers(self, state):
        """The entries' buffers with the primal ones of ``state``: built once per state
        (a dict never changed once made; the table holds it, so its id stays its own)."""
        if self._table_for is not state:
            self._table = self.bwd.module.table(
                [state[c.name] if c.name in state else self.adjoints[c.name]
                 for c in self.containers])
            self._table_for = state
        return self._table

    def _tape(self, i, pushes):
        return self._hold(self.mem.empty(max(int(pushes), self.hints.get(i, 0))))

    def _grow(self, i):
        size = max(2 * self.hints.get(i, int(self.counts[i][0])), 1024)
        if size * 8 > options.tape_limit_bytes:
            raise AdjointError(f"{self.spec.sdfg.name}(): the tape outgrew "
                               f"{options.tape_limit_bytes / 2**30:.1f} GiB while recording; "
                               "does every while loop terminate? (engine option tape_limit_bytes)")
        self.setup.hint(i, size)

    # ---- forward sweep -----------------------------------------------------------------
    def _forward(self):
        if self.setup.batched and all(option.kind == "store" for option in self.plan.choices):
            return self._record_all()
        for i, option in enumerate(self.plan.choices):
            if option.kind == "store":
                tape = self._tape(i, self.counts[i][0])
                end = self._run(i, RECORD, tape)
                if end < 0:
                    raise _TapeOverflow(i)
                self.tapes[i] = (tape, end)
            else:
                self.snapshots[i] = self._save(self.adj.regions[i].inputs)
                self._run(i, FORWARD)

    def _record_all(self):
        """Every region's record entry in one C call, each on its part of one tape; with
        the cotangents given first, the reverse entries after them in that call."""
        record, _, both = self.setup.batches()
        batch = record if self.seeds is None else both
        if self.seeds is not None:
            self._seed(self.seeds)          # again after a restart: _framed zeroed them
        tape = self._hold(self.mem.empty(batch.length))
        ends = np.zeros(batch.size, np.int64)
        self.tapes[EVERY] = (tape, ends)
        done = self.bwd.module.runs(batch, self._buffers(self.state), tape, ends)
        if done < batch.size:
            self._failed(int(ends[done]))
            raise _TapeOverflow(done)           # -1: a record entry's tape was too short
        self.reversed = batch is both

    def _reverse_all(self, state):
        """Every region's reverse entry, backwards, in one C call (after _record_all)."""
        reverse = self.setup.batches()[1]
        tape, ends = self.tapes[EVERY] if self.reusable else self.tapes.pop(EVERY)
        positions = ends[::-1].copy()
        done = self.bwd.module.runs(reverse, self._buffers(state), tape, positions)
        if done < reverse.size:
            self._failed(int(positions[done]))
        if not self.reusable:
            self._free(tape)

    def _failed(self, status):
        if status <= FAILED:                    # a library call failed (LinAlgError)
            raise self.spec.failed(FAILED - status)

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

    def output(self, name):
        """A container's contents after the forward sweep for vjp's caller to keep: the
        buffer itself, handed over, where no pullback touches it (go_fast's 32 MB result:
        a copy per call before); a copy otherwise."""
        buffer = self.state[name]
        if name not in self.touched and self.frame is None and not self.mem.copies_arguments:
            for k, owned in enumerate(self._owned):
                if owned is buffer and buffer.nbytes >= SMALL:
                    del self._owned[k]
                    self.ledger.give(buffer)
                    return self.mem.hand_out(buffer).reshape(buffer.shape)
        return self.mem.value(buffer).copy()

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
        if self.reusable:           # the pullback's own copies of what it writes
            restored = self.restored
            state = {n: (self._hold(self.mem.copy(v)) if n in restored else v)
                     for n, v in self.state.items()}
            if self.pulled:
                self._fresh_adjoints()
            self.pulled = True
        else:
            state = self.state
        choices = self.plan.choices
        if not self.reversed:           # else it ran with the forward sweep, from seeds
            self._seed(cotangents)
            if EVERY in self.tapes:
                self._reverse_all(state)
            else:
                for i in range(len(choices) - 1, -1, -1):
                    self._reverse_region(i, choices[i], state)
        if self.reusable:
            for n, v in state.items():
                if v is not self.state[n]:
                    self._free(v)
            return self._cotangents(wanted)
        out = self._cotangents(wanted)
        self._release()
        return out

    def _seed(self, cotangents):
        """The outputs' adjoints: their cotangents."""
        adjoints = self.adjoints
        for name, cot in cotangents.items():
            g = adjoints.get(adjoint_name(name))
            if g is None:
                continue
            if self.spec.sdfg.containers[name].complex:     # JAX's convention (api.py)
                cot = as_parts(np.conj(np.asarray(cot, np.result_type(g.dtype, 1j))))
            g[...] = cot if type(cot) is float else np.asarray(cot, g.dtype).reshape(-1)

    def _reverse_region(self, i, option, state):
        if option.kind == "store":
            take = self.tapes.get if self.reusable else self.tapes.pop
            tape, end = take(i, (None, 0))      # no tape: nothing was recorded
            self._run(i, REVERSE, tape, end, state=state)
            if tape is not None and not self.reusable:
                self._free(tape)
            return
        self._restore(self.snapshots[i], state)
        if option.kind == "recompute":
            self._record_and_reverse(i, self.counts[i][0], state)
        else:
            self._revolve(i, option.snapshots, state)
        if not self.reusable:
            self._drop(self.snapshots.pop(i))

    def _record_and_reverse(self, i, pushes, state):
        while True:
            tape = self._tape(i, pushes)
            end = self._run(i, RECORD, tape, state=state)
            if end >= 0:
                break
            self._free(tape)                # a while loop ran longer: more tape, run again
            self._grow(i)
            self._restore(self.snapshots[i], state)
        self._run(i, REVERSE, tape, end, state=state)
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
        out, adjoints = {}, self.adjoints
        copies = self.frame is not None
        for name, adjoint, number in self.setup.cotangents:
            if wanted is not None and name not in wanted:
                continue
            g = adjoints.get(adjoint)
            value = self.state[name]
            if g is None:
                g = np.zeros(value.shape, value.dtype)
            elif number:
                g = self.mem.value(g)
            elif copies:
                g = self.mem.copy_out(g)        # the next call at these sizes overwrites it
            else:
                # the user's now (a reusable sweep's next pullback takes a new buffer),
                # back to the pool once dropped
                self.ledger.give(g)
                del adjoints[adjoint]
                g = self.mem.hand_out(g)
            out[name] = float(g[0]) if number else g.reshape(value.shape)
            if self.spec.sdfg.containers[name].complex:     # JAX's convention (api.py)
                out[name] = np.conj(as_complex(out[name]))
        return out

    def _release(self):
        """The call is over: its remaining buffers go back to the pool (on the CPU) and
        the sweep keeps no reference to them (``spec.last_sweep`` holds only the plan and
        the ledger)."""
        state = self.state
        self._result = float(self.mem.value(state[RESULT])[0]) if RESULT in state else None
        held = self._owned + [tape for tape, _ in self.tapes.values()] if self.tapes else \
            self._owned
        for saved in self.snapshots.values():
            held += saved.values()
        frame, ledger = self.frame, self.ledger
        if frame is None:
            held += self.adjoints.values()
        else:                               # the next call at these sizes takes it
            ledger.give(frame)
            self._frames.append(frame)
            self.frame = None
        for array in held:
            ledger.give(array)
        self.released = True
        self.mem.close(held)
        self.state, self.adjoints, self.tapes, self.snapshots, self._owned = {}, {}, {}, {}, []
        self._table_for = self._table = None
