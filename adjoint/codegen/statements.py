"""Statements of generated C and CUDA: the printer base both backends derive from.

``StatementPrinter`` walks an entry's control-flow tree and prints its statements as
C99 (the CUDA backend's device and host code is C++ built on the same statements):
loops, branches, tasklets (values through ``printer.CPrinter``), tape pushes and pops,
maps as loops, and ``sc_check``. A backend derives from it and overrides its hooks:

- ``_loop(loop)``, ``map_scope(node)``: how a loop or map runs (C: on OpenMP threads
  where the schedule says so; the base runs them in order);
- ``_push(value)``, ``_pop_trips(name)``, ``_after_exit()``: where the tape is (CUDA
  keeps its position on the device);
- ``_may_leave()``, ``_leave()``: whether and how a loop returns on Ctrl-C;
- ``_write(memlet, value)``: how an element is written (CUDA's atomics);
- ``_private(loop)``: per-iteration copies of a loop's private scalars;
- ``fail(line)``: the statement ending an entry whose library call failed;
- ``access(memlet)``, ``pointer(name)``: how elements and containers are named.

Library nodes print themselves through ``pointer``, ``fail``, ``emit``, ``open`` and
``close`` (library/base.py).
"""
from dataclasses import replace

import sympy as sp
from sympy.printing.precedence import PRECEDENCE

from ..sdfg.nodes import (ConditionalRegion, Guard, LoopRegion, MapScope, Pop, Push, Sequence,
                          SEGMENT, LibraryNode, Memlet, State, Tasklet, condition_containers,
                          guarded_branches, index_loads, regions)
from ..sdfg.visit import leaves, tasklets_only
from ..schedule.decisions import STRIP, LoopSchedule
from ..analysis.dependence import countable
from ..sdfg.arithmetic import IntCast, common_subexpressions, evaluated, reassociable
from .printer import C_TYPES, CPrinter, c_name, identifier

CHECK_SIGNATURE = "int sc_check(const int64_t *restrict sc_syms, int64_t *restrict sc_count)"
REDUCTION_OPS = {"sum": "+", "max": "max", "min": "min"}     # wcr -> OpenMP reduction
COUNTS = 4      # per region in sc_check's output: pushes, work, most pushes per iteration, trips
INTERRUPTED = -4        # sc_run's status when Ctrl-C stopped the entry point
FAILED = -16            # ... and FAILED - line when a library call at that line failed

class CheckPrinter(CPrinter):
    """Integer expressions of ``sc_check`` in the CHECKED functions: a check is evaluated
    on exact values, and where they leave int64 it fails (through ``sc_o``)."""

    def __init__(self, names):
        super().__init__(names, index=True)

    @staticmethod
    def _call(fn, *args):
        return f"{fn}({', '.join(args)}, &sc_o)"

    def _print_Integer(self, expr):
        v = int(expr)
        if not -2 ** 63 <= v < 2 ** 63:
            return "(sc_o = 1, (int64_t)0)"
        if v == -2 ** 63:
            return "INT64_MIN"
        return f"{v}LL" if abs(v) >= 2 ** 31 else str(v)

    def _print_Add(self, expr, order=None):
        terms = self._as_ordered_terms(expr, order=order)
        out = self._print(terms[0])
        for t in terms[1:]:
            negative = t.as_coeff_Mul()[0].is_negative
            out = self._call("sc_csub" if negative else "sc_cadd", out,
                             self._print(-t if negative else t))
        return out

    def _print_Mul(self, expr):
        c, rest = expr.as_coeff_Mul()
        if not c.is_Integer:
            raise ValueError(f"a check computes {expr}, which is not an integer expression")
        if c == -1:
            return self._call("sc_cneg", self._print(rest))
        factors = ([c] if c != 1 else []) + list(sp.Mul.make_args(rest))
        out = self._print(factors[0])
        for f in factors[1:]:
            out = self._call("sc_cmul", out, self._print(f))
        return out

    def _print_Pow(self, expr):
        base, exp = expr.args
        if not exp.is_Integer:                  # R ** K: K >= 0 was checked before
            return self._call("sc_cpow", self._print(base), self._print(exp))
        if exp < 0:
            raise ValueError(f"a check computes {expr}, which is not an integer expression")
        if exp > 64:                          # beyond int64 unless |base| <= 1: fail
            return "(sc_o = 1, (int64_t)0)"
        out = b = self._print(base)
        for _ in range(int(exp) - 1):
            out = self._call("sc_cmul", out, b)
        return out if exp > 0 else "1"

    def _print_floordiv(self, expr):
        return self._call("sc_cfloordiv", *map(self._print, expr.args))

    def _print_python_mod(self, expr):
        return self._call("sc_cmod", *map(self._print, expr.args))

    def _print_trips(self, expr):
        return self._call("sc_ctrip", *map(self._print, expr.args))

    def _print_Fits(self, expr):
        return "(" + ", ".join(f"(void)({self._print(a)})" for a in expr.args) + ", 1)"


class StatementPrinter:
    def __init__(self, layout, unbounded=False, library=None):
        self.layout, self.unbounded, self.library = layout, unbounded, library
        self.names = layout.names()
        self.value = CPrinter(self.names, load=self._load)
        self.index = CPrinter(self.names, index=True, load=self._load)
        self.shapes = {c.name: c for c in layout.containers}
        self.lines, self.depth = [], 0
        self.loop_vars = []
        self.in_parallel, self.atomic = False, set()
        self.accumulators = {}      # memlet -> local accumulator of a vectorised sum
        self.functions = []         # shared loop nests of the entry being generated
        self.shared_count = 0
        self.printed = {}           # (container, subset) -> its C access
        self.hoisted = {}           # (container, subset) -> the local it was read into (_hoist)
        self.slots = None           # in a slotted loop: [trips, counter, next slot, step]
        self.guard = None           # the C condition of the branch whose writes are selects
        self.polling = self.polled = False      # loops may return INTERRUPTED (see _poll)
        self.polls = []             # per entry generated: whether it polls

    def emit(self, line):
        self.lines.append("    " * self.depth + line)

    def open(self, line):
        self.emit(line + " {")
        self.depth += 1

    def close(self):
        self.depth -= 1
        self.emit("}")

    # ---- entry points ---------------------------------------------------------------
    def check_entry(self, checks, counted):
        """``sc_check``: the number of the first check that fails, or overflows int64
        (``sc_o``, set by the checked arithmetic of CheckPrinter), then the counts."""
        self.lines, self.depth = [], 0
        self.checked = CheckPrinter(self.names)
        self.open(CHECK_SIGNATURE)
        for k, s in enumerate(self.layout.symbols):
            self.emit(f"const int64_t {self.names[s]} = sc_syms[{k}];")
        self.emit("int sc_o = 0;")
        for k, check in enumerate(checks):
            self._in_context(check.context, f"if (!({self.checked.doprint(check.condition)})"
                                            f" || sc_o) return {k + 1};")
            if check.context:       # a guard that overflowed, or a branch never taken
                self.emit(f"if (sc_o) return {k + 1};")
        self.emit("(void)sc_o;")
        for r, sdfg in enumerate(counted):
            self._count_region(sdfg.body, [f"sc_count[{COUNTS * r + k}]" for k in range(COUNTS)])
        self.emit("return 0;")
        self.close()
        return "\n".join(self.lines) + "\n"

    def _count_region(self, body, out):
        """Pushes and work of a region; for a segment loop also the most pushes of one
        iteration and the trip count."""
        pushes, work, per_iteration, trips = out
        self.emit(f"{pushes} = 0; {work} = 0; {per_iteration} = 0; {trips} = 0;")
        self._count(body, (), pushes, work)
        loop = body.elements[0] if len(body.elements) == 1 else None
        if isinstance(loop, LoopRegion) and loop.segment:
            self.open("")
            self.emit("int64_t sc_c = 0, sc_w = 0;")
            self._open_loop(loop)
            self.emit("sc_c = 0;")
            self._count(loop.body, (), "sc_c", "sc_w")
            self.emit(f"if (sc_c > {per_iteration}) {per_iteration} = sc_c;")
            self.close()
            a, b, s = (self.index.doprint(x) for x in (loop.start, loop.stop, loop.step))
            self.emit(f"{trips} = sc_trip({a}, {b}, {s}); (void)sc_w;")
            self.close()

    def _count(self, region, context, pushes, work):
        """Emit counters of pushes and of work (operations of tasklet instances): exact
        for counted loops, an upper bound past decisions on data, one iteration of
        each unbounded loop."""
        for r, around in regions(region):
            around = context + around
            if isinstance(r, LoopRegion) and r.tape_trips:
                self._in_context(around, f"{pushes} += 1;")
            if not isinstance(r, State):
                continue
            for node in r.nodes:
                for extra, inner in leaves(node):
                    if isinstance(inner, LibraryNode):
                        ops = " * ".join(self.index.doprint(x) for x in inner.work())
                        self._in_context(around + extra, f"{work} += {ops};")
                    elif isinstance(inner, Push):
                        self._in_context(around + extra, f"{pushes} += 1;")
                    elif isinstance(inner, Tasklet):
                        ops = 1 + sum(sp.count_ops(e) for _, e in inner.outputs)
                        self._in_context(around + extra, f"{work} += {ops};")

    def _in_context(self, context, statement):
        opened = 0
        for region in context:
            if isinstance(region, Guard):
                # a decision on data: check (and count) as if taken, where its integer
                # conjuncts hold (`i < N and A[i] > 0`: frontend.statements._decide)
                known = [c for c in sp.And.make_args(region.condition)
                         if not condition_containers(c, self.shapes)]
                if not known:
                    continue
                self.open(f"if ({self.checked.doprint(sp.And(*known))})")
            elif not countable(region):    # estimate one iteration (tape grows if short)
                self.open("")
                start = region.start if not index_loads(region.start) else 0
                self.emit(f"const int64_t {c_name(region.var, self.names)} = "
                          f"{self.index.doprint(start)};")
            else:
                self._open_loop(region)
            opened += 1
        self.emit(statement)
        for _ in range(opened):
            self.close()

    # ---- control flow ---------------------------------------------------------------
    def region(self, region):
        if isinstance(region, Sequence):
            for e in region.elements:
                self.region(e)
        elif isinstance(region, LoopRegion):
            self.loop_vars.append(region.var)
            self._loop(region)
            self.loop_vars.pop()
        elif isinstance(region, ConditionalRegion):
            if self._selects(region):
                return
            self.branches(region)
        elif isinstance(region, State):
            for node in region.nodes:
                self.node(node)
        else:
            raise TypeError(f"cannot generate code for {region!r}")

    def _loop(self, loop):
        """A loop (backend hook: C may run it on threads)."""
        self._sequential_loop(loop)

    def map_scope(self, node):
        """A map (backend hook: C may run it on threads)."""
        self._map(node)

    def _private(self, scope):
        """Each iteration's (a map's: each point's) own copy of the loop's private scalars
        (shadowing the pointers), from zero (see LoopRegion.zeroed, MapScope.private)."""
        for name in scope.private:
            t = C_TYPES[self.shapes[name].dtype.name]
            own = identifier("sc_own_", name)
            self.emit(f"{t} {own}[1] = {{0}}; {t} *restrict {identifier('v_', name)} = {own};")

    def _sequential_loop(self, loop):
        var = c_name(loop.var, self.names)
        if loop.segment:
            k0, k1 = (self.names[s] for s in SEGMENT)
            if loop.reverse:
                self.open(f"for (int64_t k{var} = {k1} - 1; k{var} >= {k0}; --k{var})")
            else:
                self.open(f"for (int64_t k{var} = {k0}; k{var} < {k1}; ++k{var})")
            self.emit(f"const int64_t {var} = {self.index.doprint(loop.start)} + k{var} * "
                      f"({self.index.doprint(loop.step)});")
            self._poll(loop)
            self._private(loop)
            self.region(loop.body)
            self.close()
            return
        if loop.reverse and loop.exit is not None:      # trip count from the tape
            self.open("")
            self._pop_trips(f"n{var}")
            self.open(f"for (int64_t k{var} = n{var} - 1; k{var} >= 0; --k{var})")
            self.emit(f"const int64_t {var} = {self.index.doprint(loop.start)} + k{var} * "
                      f"({self.index.doprint(loop.step)});")
            self._poll(loop)
            self.region(loop.body)
            self.close()
            self.close()
            return
        if decided(loop).interchange:
            self._interchanged(loop)
            return
        if decided(loop).promoted:
            self._promoting(loop)
            return
        reduction = decided(loop).reduction
        if reduction and not loop.parallel:      # a parallel loop's share is not SIMD's
            # independent iterations: a reversed loop may run forwards (unit stride)
            self._reduce(reduction, lambda: self._open_loop(replace(loop, reverse=False)))
            return
        if self._slotted(loop):
            return
        if loop.tape_trips:
            self.open("")
            self.emit(f"int64_t n{var} = 0;")
        self._open_loop(loop)
        self._poll(loop)
        self._private(loop)
        if loop.tape_trips:
            self.emit(f"n{var} += 1;")
        self.region(loop.body)
        if loop.exit is not None:
            self.emit(f"if ({self.index.doprint(loop.exit)}) break;")
            self._after_exit()
        self.close()
        if loop.tape_trips:
            self._push(f"(double)n{var}")
            self.close()

    def _promoting(self, loop):
        """The loop with the elements it keeps in locals (schedule.Promotion) read before
        it and, those it writes, written back after it; around a loop that runs at least
        once (an unproven index is checked for the iterations that run)."""
        kept = decided(loop).promoted
        self.open(f"if ({self._trips(loop)} > 0)")
        before, names = self.hoisted, {}
        for p in kept:
            m = p.element
            names[m.data, m.subset] = f"sc_reg{len(before) + len(names)}"
            self.emit(f"{self._ctype(m.data)} {names[m.data, m.subset]} = {self.access(m)};")
        self.hoisted = {**before, **names}
        self._sequential_loop(replace(loop, schedule=replace(decided(loop), promoted=())))
        self.hoisted = before
        for p in kept:
            if p.writes:
                m = p.element
                self.emit(f"{self.access(m)} = {names[m.data, m.subset]};")
        self.close()

    def _interchanged(self, loop, share=None):
        """A parallel loop as its body's pieces in turn, each over the loop's iterations
        (``share``: a thread's, of its iteration counter), inside a sequential loop's
        piece as its innermost loop, the iterations as SIMD lanes (schedule.Interchange):
        each iteration's statements run in their order, and the iterations are
        independent. A loop that pushes puts each iteration's values where the serial
        loop does (in its slots, or in the q-th block of ``per`` values from
        ``sc_tp0``), in the tape span it reserves at once when not given a share (see
        _taped_parallel). The scalars each iteration keeps are arrays of a strip of
        iterations, from zero (as _private's copies)."""
        plan = decided(loop).interchange
        n = f"n{c_name(loop.var, self.names)}"
        if share is None:
            if plan.offsets is None:
                self.open("")
                self.emit(f"const int64_t {n} = {self._trips(loop)};")
                self._interchanged(loop, ("0", n))
                self.close()
            else:
                def run():
                    if not plan.slotted:
                        self.emit("const int64_t sc_tp0 = sc_tp;")
                    self._interchanged(loop, ("0", n))
                self._tape_span(loop, plan.per, False, run)
            return
        before = self.hoisted
        if plan.own:
            k0, k1 = share
            self.open(f"for (int64_t sc_jb = {k0}; sc_jb < {k1}; sc_jb += {STRIP})")
            self.emit(f"const int64_t sc_je = sc_imin(sc_jb + {STRIP}, {k1});")
            var = c_name(loop.var, self.names)
            own = {}
            for name, subset in plan.own:
                x = identifier("sc_x_", name)
                if not any(n == name for n, _ in own):
                    self.emit(f"{self._ctype(name)} {x}[{STRIP}] = {{0}};")
                own[name, subset] = f"{x}[k{var} - sc_jb]"
            self.hoisted = {**before, **own}
            share = ("sc_jb", "sc_je")
        for k, piece in enumerate(plan.pieces):
            offset = None if plan.offsets is None else plan.offsets[k]
            if not isinstance(piece, LoopRegion):
                self._lanes(loop, piece, share, offset)
                continue
            self.loop_vars.append(piece.var)
            self.open("")
            self.emit(f"const int64_t n{c_name(piece.var, self.names)} = {self._trips(piece)};")
            self._open_counted(piece, not piece.reverse)
            self._lanes(loop, piece.body, share, offset, piece)
            self.close()
            self.close()
            self.loop_vars.pop()
        if plan.own:
            self.hoisted = before
            self.close()

    def _lanes(self, loop, body, share, offset, around=None):
        """``body`` over ``share`` of ``loop``'s iterations as SIMD lanes (an interchanged
        piece, inside the sequential loop ``around``). Where the loop pushes, each lane's
        values at ``offset``: its c-th in slot offset + c of the loop's (slotted), else
        at offset + c in its iteration's block, in the slots of ``around`` where that
        one pushes."""
        plan = decided(loop).interchange
        var = c_name(loop.var, self.names)
        self.loop_vars.append(loop.var)
        self.open("")
        nodes = tasklets_only(body, allow=(Push,))
        hoisted = self._hoist([n for n in nodes if isinstance(n, Tasklet)],
                              [name for name, _ in plan.own])
        self.emit("#pragma omp simd")
        self._open_counted(loop, True, share)
        slots, pushes = self.slots, sum(isinstance(n, Push) for n in nodes)
        if offset is not None and plan.slotted:
            self.slots = [f"n{var}", f"k{var}", offset, 1]
        elif offset is not None:
            self.emit(f"int64_t sc_tp = sc_tp0 + k{var} * ({self.index.doprint(plan.per)}) + "
                      f"({self.index.doprint(offset)});")
            if around is not None and pushes:
                self._use_slots(around, pushes, 0)
        self.region(body)
        self.slots = slots
        self.close()
        self._unhoist(hoisted)
        self.close()
        self.loop_vars.pop()

    def _poll(self, loop):
        """At the top of a loop that may run long (a while loop, or one around loop
        nests): leave the entry once SIGINT came (see INTERRUPTS). Not in threaded code,
        which cannot be left, nor in innermost counted loops, which should vectorise;
        one test per outer iteration costs nothing measurable."""
        if self._may_leave() and decided(loop).polls:
            self.emit(f"if (*sc_stop) {self._leave()}")
            self.polled = True

    def _may_leave(self):
        """Whether the code being generated may return from the entry (backend hook)."""
        return self.polling and not self.in_parallel

    def _leave(self):
        """The statement that returns INTERRUPTED (backend hook)."""
        return f"return {INTERRUPTED};"

    def _pop_trips(self, name):
        """Declare ``name``, a while loop's trip count, from the tape (backend hook)."""
        self.emit(f"const int64_t {name} = (int64_t)sc_tape[--sc_tp];")

    def _after_exit(self):
        """Statements after a while loop's exit test (backend hook)."""

    def _slotted(self, loop):
        """A loop whose values sit in slots (see _slot_layout): iteration q's c-th value
        goes to ``sc_tp + c * n + q`` (n trips), and the tape position moves once, by k n.
        Without the running ``sc_tp++`` the iterations no longer depend on each other:
        the loop vectorises, the pushes as unit-stride stores. The reverse loop mirrors
        its forward loop (same range, the pops in the reverse of the pushes' order), so
        it finds each value at the same place. Returns whether it generated the loop."""
        layout = decided(loop).slots
        if layout is None:
            return False
        pushes, pops = layout.pushes, layout.pops
        reduction = decided(loop).slot_reduction

        def run():
            self._use_slots(loop, pushes + pops, pops)
            if reduction:   # independent iterations but for the sums: forwards, vectorised
                self._reduce(reduction, lambda: self._open_counted(loop, True))
                return
            # a parallel loop's iterations are independent: forwards, unit stride
            self._open_counted(loop, loop.parallel or not loop.reverse)
            self._poll(loop)
            self._private(loop)
            self.region(loop.body)
            self.close()
        self._tape_span(loop, pushes + pops, pops, run)
        return True

    def _use_slots(self, loop, k, pops):
        """Place the next k values pushed or popped in the slots of the iteration (see
        _slotted), pops in the reverse order of the pushes."""
        var = c_name(loop.var, self.names)
        self.slots = [f"n{var}", f"k{var}", k - 1 if pops else 0, -1 if pops else 1]

    def _tape_span(self, loop, k, pops, body):
        """Around ``body``, a loop over ``loop``'s n iterations each pushing (or popping,
        ``pops``) ``k`` tape values, each at a place found from its index: the tape
        position moves once, by k n (before the loop for pops, so that ``sc_tp`` is the
        span's start), and the capacity is checked once."""
        var = c_name(loop.var, self.names)
        total = f"{self.index.parenthesize(sp.sympify(k), PRECEDENCE['Mul'])} * n{var}"
        self.open("")
        self.emit(f"const int64_t n{var} = {self._trips(loop)};")
        if pops:
            self.emit(f"sc_tp -= {total};")
        elif self.unbounded:
            self.emit(f"if (sc_tp + {total} > sc_cap) return -1;")
        saved = self.slots, self.unbounded
        self.unbounded = False          # checked above
        body()
        self.slots, self.unbounded = saved
        if not pops:
            self.emit(f"sc_tp += {total};")
        self.close()

    def _trips(self, loop):
        """The C number of iterations of a counted loop (a segment's share of them)."""
        if loop.segment:
            k0, k1 = (self.names[s] for s in SEGMENT)
            return f"sc_imax({k1} - {k0}, 0)"
        a, b, s = (self.index.doprint(x) for x in (loop.start, loop.stop, loop.step))
        return f"sc_trip({a}, {b}, {s})"

    def _open_counted(self, loop, forwards, share=None):
        """The loop over its iteration counter ``k<var>`` in [0, n<var>) (see _tape_span),
        or forwards over the ``share`` (k0, k1) of it, defining the loop variable."""
        var = c_name(loop.var, self.names)
        if share:
            self.open(f"for (int64_t k{var} = {share[0]}; k{var} < {share[1]}; ++k{var})")
        elif forwards:
            self.open(f"for (int64_t k{var} = 0; k{var} < n{var}; ++k{var})")
        else:
            self.open(f"for (int64_t k{var} = n{var} - 1; k{var} >= 0; --k{var})")
        q = f"({self.names[SEGMENT[0]]} + k{var})" if loop.segment else f"k{var}"
        self.emit(f"const int64_t {var} = {self.index.doprint(loop.start)} + {q} * "
                  f"({self.index.doprint(loop.step)});")

    def _slot(self):
        """The tape position of the next value pushed or popped in a slotted loop."""
        trips, counter, slot, step = self.slots
        self.slots[2] += step
        return f"sc_tape[sc_tp + {slot} * {trips} + {counter}]"

    def _push(self, value):
        if self.slots is not None:
            self.emit(f"{self._slot()} = {value};")
            return
        if self.unbounded:
            self.emit("if (sc_tp >= sc_cap) return -1;")
        self.emit(f"sc_tape[sc_tp++] = {value};")

    def _open_loop(self, loop):
        var = c_name(loop.var, self.names)
        if loop.stop is None:
            a, s = self.index.doprint(loop.start), self.index.doprint(loop.step)
            self.open(f"for (int64_t {var} = {a}; ; {var} += {s})")
            return
        a, b, s = (self.index.doprint(x) for x in (loop.start, loop.stop, loop.step))
        if loop.reverse:
            k = "k" + var
            self.open(f"for (int64_t {k} = sc_trip({a}, {b}, {s}) - 1; {k} >= 0; --{k})")
            self.emit(f"const int64_t {var} = {a} + {k} * ({s});")
            return
        if loop.step.is_positive:
            cond = f"{var} < {b}"
        elif loop.step.is_negative:
            cond = f"{var} > {b}"
        else:
            cond = f"({s} > 0 ? {var} < {b} : {var} > {b})"
        self.open(f"for (int64_t {var} = {a}; {cond}; {var} += {s})")

    # ---- dataflow -------------------------------------------------------------------
    def node(self, node):
        if isinstance(node, Tasklet):
            self._tasklet(node)
        elif isinstance(node, MapScope):
            self.map_scope(node)
        elif isinstance(node, LibraryNode):
            node.emit(self)
        elif isinstance(node, Push):
            self._push(self.access(node.memlet))
        elif isinstance(node, Pop):
            source = self._slot() if self.slots is not None else "sc_tape[--sc_tp]"
            self.emit(f"{self.access(node.memlet)} = {source};")
        else:
            raise TypeError(f"cannot generate code for {node!r}")

    def _tasklet(self, t):
        self.open("")
        for conn, m in t.inputs:
            self.emit(f"const {self._read_type(m.data)} {c_name(conn, self.names)} = "
                      f"{self.access(m)};")
        # Neighbours along the innermost loop of an element being written (a recurrence
        # such as Gauss-Seidel's A[i, j-1]) are added last, so that only the last
        # additions wait on the previous iteration.
        # Only derivatives may be reassociated: primal values print as written.
        free = reassociable(t)
        self.value.late = {c for c, m in t.inputs if free and any(
            _neighbour(m, o, self.loop_vars[-1:]) for o, _ in t.outputs)}
        exprs = [evaluated(e) if free else e for _, e in t.outputs]
        if self.loop_vars and free:
            fixed = {c for c, m in t.inputs
                     if not any(set(self.loop_vars) & e.free_symbols for e in m.subset)}
            exprs = _factor_out(exprs, fixed)
        names = sp.numbered_symbols("__t", real=True)
        temps, exprs = (sp.cse(exprs, symbols=names) if free
                        else common_subexpressions(exprs, names))
        for sym, e in temps:
            ctype = C_TYPES[e.dtype] if isinstance(e, IntCast) else "double"
            self.emit(f"const {ctype} {c_name(sym, self.names)} = {self.value.doprint(e)};")
        for (m, _), e in zip(t.outputs, exprs):
            value = self.value.doprint(e)
            if self.guard is not None:      # a select (see _selects)
                value = f"({self.guard}) ? ({value}) : {'0' if m.wcr else self.access(m)}"
            self._write(m, value)
        self.value.late = set()
        self.close()

    def branches(self, region: ConditionalRegion):
        """``if`` / ``else if`` / ``else`` around each branch's region."""
        for k, (cond, body) in enumerate(region.branches):
            if cond is None:
                self.open("else")
            else:
                self.open(("if" if k == 0 else "else if") + f" ({self.index.doprint(cond)})")
            self.region(body)
            self.close()

    def _selects(self, region):
        """A branch whose writes the schedule makes selects (``x = taken ? value : x``,
        schedule.decide: _selects). Returns whether it generated the region."""
        if not (region.schedule and region.schedule.selects):
            return False
        bodies = [tasklets_only(body) for _, body in region.branches]
        for (guard, _), body in zip(guarded_branches(region), bodies):
            self.guard = self.index.doprint(guard.condition)
            for t in body:
                self._tasklet(t)
        self.guard = None
        return True

    def _write(self, m, value):
        if m in self.accumulators:
            acc = self.accumulators[m]
            self.emit(f"{acc} += {value};" if m.wcr == "sum" else
                      f"{acc} = sc_{m.wcr}({acc}, {value});")
            return
        op = "+=" if m.wcr == "sum" else "="
        self.emit(f"{self.access(m)} {op} {value};")

    def _map(self, node, worksharing=False):
        loops = [LoopRegion(p, a, b, s, None) for p, (a, b, s) in zip(node.params, node.ranges)]
        for loop in loops[:-1]:
            self._open_loop(loop)
        self.loop_vars += list(node.params)
        # the outermost loop of a parallel map is the `omp for` itself
        reduction = node.schedule.reduction if node.schedule and (
            len(loops) > 1 or not worksharing) else None
        if reduction:
            self._reduce(reduction, lambda: (self._open_loop(loops[-1]), self._private(node)),
                         node.private)
        else:
            # nothing may stand between `omp for` and the loop it shares
            block = len(loops) > 1 or not worksharing
            if block:
                self.open("")
            hoisted = self._hoist(node.body, node.private) if block else self.hoisted
            self._open_loop(loops[-1])
            self._private(node)
            for inner in node.body:
                self.node(inner)
            self.close()
            self._unhoist(hoisted)
            if block:
                self.close()
        del self.loop_vars[-len(node.params):]
        for _ in loops[:-1]:
            self.close()

    def _reduce(self, reduction, open_loop, private=()):
        """The loop with one local accumulator per element it reduces into (a
        schedule.Reduction), written to the element after the loop: ``omp simd
        reduction`` lets it vectorise (a sum is reassociated across vector lanes,
        deterministically for a given machine; a maximum or minimum is exact)."""
        sums, body = reduction.sums, reduction.body
        self.open("")
        names = {}
        for m in sums:
            names[m] = f"sc_acc{len(self.accumulators) + len(names)}"
            start = "0" if m.wcr == "sum" else self.access(m)
            self.emit(f"{C_TYPES[self.shapes[m.data].dtype.name]} {names[m]} = {start};")
        hoisted = self._hoist(body, private)
        for op in ("sum", "max", "min"):
            accs = [names[m] for m in sums if m.wcr == op]
            if accs:
                self.emit(f"#pragma omp simd reduction({REDUCTION_OPS[op]}:{', '.join(accs)})")
        open_loop()
        outer, self.accumulators = self.accumulators, {**self.accumulators, **names}
        for t in body:
            self.node(t)
        self.accumulators = outer
        self.close()
        self._unhoist(hoisted)
        for m, name in names.items():
            self._write(m if m.wcr == "sum" else Memlet(m.data, m.subset), name)
        self.close()

    def _hoist(self, body, private=()):
        """Read the scalars that the innermost loop's ``body`` (dataflow nodes) reads and
        never writes into locals before the loop, and name them so inside it (see access);
        returns what ``_unhoist`` restores after the loop. The compiler cannot tell that
        the loop's stores leave them unchanged (GCC takes restrict on a local pointer for
        no promise), so it reloads them in every iteration and recomputes all that depends
        on them only: in cavity_flow's reverse sweep, dx**2 + dy**2 and two divisions
        per vector of four elements. A scalar's read is in bounds even where the loop
        runs no iteration."""
        reads, written = {}, set(private)
        for node in body:
            for _, inner in leaves(node):
                if not isinstance(inner, Tasklet):      # pops and library calls write
                    return {}
                written |= {m.data for m, _ in inner.outputs}
                reads.update(((m.data, m.subset), m) for _, m in inner.inputs
                             if self.shapes[m.data].is_scalar)
        before, new = self.hoisted, {}
        for key, m in reads.items():
            if m.data in written or key in before:
                continue
            new[key] = identifier("sc_inv_", m.data)
            self.emit(f"const {self._read_type(m.data)} {new[key]} = {self.access(m)};")
        self.hoisted = {**before, **new}
        return before

    def _unhoist(self, before):
        self.hoisted = before

    def _read_type(self, name):
        """The C type an element is read as: integers in their own dtype
        (frontend/dtypes.py), every other value as a double."""
        dtype = self.shapes[name].dtype
        return C_TYPES[dtype.name] if dtype.kind in "iu" else "double"

    def _ctype(self, name):
        return C_TYPES[self.shapes[name].dtype.name]

    def pointer(self, name):
        """The C pointer to container ``name``'s elements (what library nodes emit with)."""
        return identifier("v_", name)

    def fail(self, line):
        """The C statement ending the entry point because a library call at ``line``
        failed (a matrix not positive definite, singular): status FAILED - line."""
        return f"return {FAILED - int(line)};"

    def _load(self, name, subset):
        return self.access(Memlet(name, tuple(subset)))

    def access(self, memlet):
        """``v_<name>[flat index]``, printed once per element (sympy printing is most of
        code generation's time, and stencils name the same elements over and over)."""
        key = (memlet.data, memlet.subset)
        if key in self.hoisted:
            return self.hoisted[key]
        if key not in self.printed:
            c = self.shapes[memlet.data]
            flat = sum((i * s for i, s in zip(memlet.subset, c.strides())), sp.Integer(0))
            self.printed[key] = f"{identifier('v_', c.name)}[{self.index.doprint(flat)}]"
        return self.printed[key]


def _neighbour(read, write, innermost):
    """Whether ``read`` is ``write``'s element shifted by a constant along the innermost
    loop variable only."""
    if read.data != write.data or not innermost or read.subset == write.subset:
        return False
    v = innermost[0]
    for r, w in zip(read.subset, write.subset):
        d = sp.expand(r - w)
        if d != 0 and not (d.is_Integer and v in w.free_symbols):
            return False
    return True


def _factor_out(exprs, fixed):
    """Each product's costly factors over ``fixed`` connectors (loaded from elements the
    loop does not move over) grouped into one: ``g * (dy**2 / (2*dx**2 + 2*dy**2))``
    instead of ``g * dy**2 / (...)``. C evaluates left to right and may not reassociate,
    so only the grouped form lets the compiler hoist the division out of the loop: a
    gathered stencil adjoint otherwise divides once per term and element."""
    def costly(e):
        return any(isinstance(a, sp.Function) or isinstance(a, sp.Pow) and not (
            a.exp.is_Integer and a.exp > 0) for a in sp.preorder_traversal(e))

    def visit(e):
        if isinstance(e, sp.Add):
            return sp.Add(*map(visit, e.args))
        if not isinstance(e, sp.Mul):
            return e
        const = [a for a in e.args if a.free_symbols <= fixed]
        rest = [visit(a) for a in e.args if not a.free_symbols <= fixed]
        group = sp.Mul(*const)
        if not rest or not costly(group):
            return sp.Mul(*rest, group)
        return sp.Mul(*rest, sp.UnevaluatedExpr(group))
    return [visit(e) for e in exprs]


def decided(loop):
    """The loop's schedule (schedule.decisions); a loop no pass scheduled runs in order."""
    return loop.schedule or UNSCHEDULED


UNSCHEDULED = LoopSchedule()
