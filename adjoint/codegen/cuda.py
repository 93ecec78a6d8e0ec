"""SDFG -> one CUDA translation unit behind the same ABI as the C modules.

Kernels run on the device and control flow around them on the host:

- a marked loop nest or map (``analysis.device``) becomes a ``__global__`` kernel with
  grid-stride loops over up to three levels (the innermost loop or map parameter along
  x, so that neighbouring threads touch neighbouring elements); its launch size is the
  trip counts of the levels, computed on the host for each launch;
- shared sums are ``atomicAdd``s; sums into scalars are per-thread partial sums reduced
  per block with warp shuffles, then added in a fixed order by a second kernel
  (deterministic for a given device);
- a loop or branch that holds kernels runs on the host and launches per iteration;
  conditions and bounds that read device data copy the value to the host;
- everything else -- a nest with no parallel work, scalar statements, tape pushes and
  pops of sequential code -- runs in a single GPU thread (``<<<1, 1>>>``), so that the
  data never leaves the device; the launch plan at the top of the source (shown by
  ``explain()``) says which;
- matrix products are a kernel (one thread per element of the product).

Entry points keep the C ABI (``sc_run``, ``sc_check``); ``data`` and ``tape`` are device
pointers. ``sc_run`` returns the tape position, -1 when the tape is too short, -3 when
a CUDA call or a launch failed (``sc_error()`` says which). The tape position lives on
the device while an entry runs; kernels that push or pop a fixed count per iteration
compute their positions from the iteration's place in the sequential order, so the
tape is the one the C module writes. ``emulate=True`` generates the same module for
the CPU emulation in ``cuda_preamble`` (C++ compiled by the system compiler).
"""
import re

import sympy as sp

from ..analysis.dependence import countable, trips_taped
from ..analysis.device import has_kernels
from ..sdfg.nodes import (ConditionalRegion, LibraryNode, LoopRegion, MapScope, Pop, Push, SEGMENT,
                          Sequence, State, Tasklet, flag_symbol, loops, walk)
from .c import ARGS, C_TYPES, FAILED, INTERRUPTED, INTERRUPTS, _dispatcher
from .statements import StatementPrinter
from .cuda_preamble import preamble
from .printer import c_name, identifier, spelling

API = """extern "C" void {p}sc_set_threads(int n) {{ (void)n; }}
extern "C" const char *{p}sc_error(void) {{ return sc_msg; }}
"""


def generate_cuda_module(layout, entries, checks, counted=(), emulate=False, prefix=""):
    """CUDA source for ``entries`` (SDFGs marked by ``analysis.device``), with
    ``sc_check`` as in the C module. ``prefix`` names the module's C functions and
    puts the rest in a namespace, without the preamble: several modules then share one
    translation unit after one ``cuda_preamble.preamble()`` (the compile tests)."""
    unbounded = any(_unbounded_region(s.body) for s in entries)
    module = _Module(layout, unbounded)
    body = [module.entry(k, sdfg) for k, sdfg in enumerate(entries)]
    checker = StatementPrinter(layout)
    parts = [_plan_comment(module.plan)]
    parts.append(f"namespace {prefix}module {{" if prefix else preamble(emulate))
    prologue = "    sc_failed = 0;\n    sc_msg[0] = 0;\n    if (sc_init() < 0) return -3;\n"
    parts += [module.declarations(), *module.kernels, *body, INTERRUPTS,
              _dispatcher(module.polls, prologue, f'extern "C" int64_t {prefix}'),
              _writes(layout, entries, prefix),
              API.format(p=prefix), 'extern "C" ' + checker.check_entry(checks, counted)
              .replace("int sc_check(", f"int {prefix}sc_check(", 1)]
    if prefix:
        parts.append("}")
    return "\n".join(parts)


def _unbounded_region(region):
    """Loops with an unknown trip count (``while``, ``break``): the C module's test."""
    return any(not countable(r) for r in loops(region))


def launch_plan(source):
    """The launch plan a generated CUDA module starts with (for ``explain()``)."""
    match = re.match(r"/\* launch plan:\n(.*?)\*/", source, re.S)
    if not match:
        return []
    return [line[3:] for line in match.group(1).splitlines()]


def _plan_comment(plan):
    """The plan as a comment: its names are spelled (printer.spelling), so none ends it."""
    lines = "".join(f" * {p}\n" for p in plan)
    return f"/* launch plan:\n{lines}*/"


def _writes(layout, entries, prefix):
    """``sc_writes(which, flags)``: which containers entry ``which`` writes (the runtime
    copies only those back when it is called with host arrays)."""
    names = [c.name for c in layout.containers]
    rows = []
    for sdfg in entries:
        written = set()
        for node, _ in walk(sdfg.body):
            if isinstance(node, Tasklet):
                written |= {m.data for m, _ in node.outputs}
            elif isinstance(node, MapScope):
                written |= {m.data for t in node.body if isinstance(t, Tasklet)
                            for m, _ in t.outputs}
            elif isinstance(node, Pop):
                written.add(node.memlet.data)
            elif isinstance(node, LibraryNode):
                written |= set(node.writes())
        rows.append("{" + ", ".join("1" if n in written else "0" for n in names) + "}")
    width = max(len(names), 1)
    table = ",\n    ".join(r if r != "{}" else "{0}" for r in rows) or "{0}"
    return (f"static const int8_t sc_written[{max(len(entries), 1)}][{width}] = {{\n"
            f"    {table}\n}};\n"
            f'extern "C" int {prefix}sc_writes(int64_t which, int8_t *flags) {{\n'
            f"    if (which < 0 || which >= {len(entries)}) return -2;\n"
            f"    memcpy(flags, sc_written[which], {len(names)});\n    return 0;\n}}\n")


class _Device(StatementPrinter):
    """Statements inside a kernel: the C generator with the GPU's tape and atomics.

    ``tape`` is None in a single-thread kernel (the tape position ``sc_tp`` moves as in
    C), or (kind, elements per iteration) in a grid kernel, whose iteration ``sc_r`` (its
    place in the sequential order) pushes at ``sc_t0 + sc_r * n + k`` and pops from
    ``sc_t0 - sc_r * n - k - 1``."""

    def __init__(self, layout, unbounded):
        super().__init__(layout, unbounded, None)
        self.in_parallel = True         # no OpenMP; maps inside kernels are loops
        self.tape, self.slot = None, 0

    def fail(self, line):
        """A failed library call in a kernel of one thread: its line noted for the host
        code after the launch (FAILS), the kernel ended."""
        return f"{{ *sc_fail_line = {int(line)}; return; }}"

    def _push(self, value):
        if self.tape is None:
            if self.unbounded:
                self.emit("if (sc_tp >= sc_cap) { sc_st->overflow = 1; sc_st->tp = sc_tp; "
                          "return; }")
            self.emit(f"sc_tape[sc_tp++] = {value};")
            return
        position = f"sc_t0 + sc_r * {self.tape[1]} + {self.slot}"
        self.slot += 1
        if self.unbounded:
            self.emit(f"if ({position} < sc_cap) sc_tape[{position}] = {value}; "
                      "else sc_st->overflow = 1;")
        else:
            self.emit(f"sc_tape[{position}] = {value};")

    def node(self, node):
        if isinstance(node, Pop) and self.tape is not None:
            self.emit(f"{self.access(node.memlet)} = "
                      f"sc_tape[sc_t0 - sc_r * {self.tape[1]} - {self.slot + 1}];")
            self.slot += 1
            return
        super().node(node)

    def _write(self, m, value):
        if m in self.atomic:
            t = C_TYPES[self.shapes[m.data].dtype.name]
            self.emit(f"atomicAdd(&{self.access(m)}, ({t})({value}));")
        else:
            super()._write(m, value)


# Only in modules with library calls that can fail (a factorisation in a kernel of one
# thread): the kernel notes the failing line in device memory, the host code after the
# launch reads it and returns the status C's entries return (codegen.c: FAILED - line).
FAILS = r"""static int64_t *sc_fail_line = NULL;    /* the line of a failed library call, or 0 */
static int64_t sc_fail_init(void)
{
    if (sc_fail_line) return 0;
    SC_TRY(cudaMalloc((void **)&sc_fail_line, sizeof(int64_t)));
    SC_TRY(cudaMemset(sc_fail_line, 0, sizeof(int64_t)));
    return 0;
}
static int64_t sc_fail_check(void)      /* the line noted (then cleared), or -3 */
{
    int64_t line = 0;
    SC_TRY(cudaMemcpy(&line, sc_fail_line, sizeof line, cudaMemcpyDeviceToHost));
    if (line) SC_TRY(cudaMemset(sc_fail_line, 0, sizeof line));
    return line;
}
"""


class _Module:
    """Generates the entries of one module; collects its kernels and launch plan."""

    def __init__(self, layout, unbounded):
        self.layout, self.unbounded = layout, unbounded
        self.kernels, self.plan = [], []
        self.polls = []         # per entry: whether its host code polls for Ctrl-C
        self.max_sums = 1
        self.fails = False      # whether a kernel may note a failed library call (FAILS)

    def declarations(self):
        nc, ns = max(len(self.layout.containers), 1), len(self.layout.symbols)
        return (f"typedef struct {{ void *data[{nc}]; int64_t syms[{ns}]; double *tape; "
                "int64_t cap; sc_tape_state *st; double *red; } sc_env;\n"
                "static sc_tape_state *sc_st = NULL;\n"
                "static double *sc_red = NULL;      /* partial sums of blocks */\n"
                "static int64_t sc_max_blocks = 1;  /* blocks of a grid-stride launch */\n"
                "static int64_t sc_init(void)\n{\n"
                "    int dev = 0, sms = 1;\n"
                "    if (sc_st) return 0;\n"
                "    SC_TRY(cudaGetDevice(&dev));\n"
                "    SC_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));\n"
                "    sc_max_blocks = (int64_t)sms * SC_BLOCKS_PER_SM;\n"
                f"    SC_TRY(cudaMalloc((void **)&sc_red, SC_RED_BLOCKS * {self.max_sums} * "
                "sizeof(double)));\n"
                "    SC_TRY(cudaMalloc((void **)&sc_st, sizeof(sc_tape_state)));\n"
                "    SC_TRY(cudaMemset(sc_st, 0, sizeof(sc_tape_state)));\n"
                "    return 0;\n}\n") + (FAILS if self.fails else "")

    def entry(self, k, sdfg):
        host = _Host(self, sdfg)
        self.plan.append(f"entry {k} ({spelling(sdfg.name)}):")
        host.lines, host.depth = [], 1
        host.region(sdfg.body)
        self.polls.append(host.polled)
        body = host.lines
        tape = _uses_tape(sdfg)
        out = [f"static int64_t sc_entry{k}({ARGS})", "{", "    sc_env sc_e;"]
        out.append(f"    for (int sc_i = 0; sc_i < {len(self.layout.containers)}; ++sc_i) "
                   "sc_e.data[sc_i] = sc_data[sc_i];")
        out.append(f"    for (int sc_i = 0; sc_i < {len(self.layout.symbols)}; ++sc_i) "
                   "sc_e.syms[sc_i] = sc_syms[sc_i];")
        out.append("    sc_e.tape = sc_tape; sc_e.cap = sc_cap; sc_e.st = sc_st; "
                   "sc_e.red = sc_red; (void)sc_stop;")
        out += ["    " + line for line in _unpack(self.layout, host.names, "\n".join(body),
                                                   "sc_syms", "sc_data", restrict=False)]
        if tape:
            out.append("    SC_OK(sc_tape_begin(sc_st, sc_tp));")
        out += body
        if tape:
            out.append("    return sc_tape_end(sc_st);")
        else:
            out.append("    SC_TRY(cudaDeviceSynchronize());")
            out.append("    return sc_failed ? -3 : sc_tp;")
        out.append("}")
        return "\n".join(out) + "\n"

    def kernel(self, text):
        name = f"sc_k{len(self.kernels)}"
        self.kernels.append(text.replace("@NAME@", name))
        return name


def _uses_tape(sdfg):
    for node, context in walk(sdfg.body):
        if isinstance(node, (Push, Pop)):
            return True
        if isinstance(node, MapScope) and any(isinstance(t, Push) for t in node.body):
            return True
        if any(isinstance(r, LoopRegion) and trips_taped(r) for r in context):
            return True
    return False


def _unpack(layout, names, text, syms, data, restrict=True, exclude=()):
    """Declarations of the sizes and containers ``text`` uses, from ``syms``/``data``
    (not of the containers in ``exclude``, which the kernel keeps per thread)."""
    out = []
    for k, s in enumerate(layout.symbols):
        name = names[s]
        if re.search(rf"\b{name}\b", text):
            out.append(f"const int64_t {name} = {syms}[{k}];")
    for k, c in enumerate(layout.containers):
        v = identifier("v_", c.name)
        if c.name not in exclude and re.search(rf"\b{v}\b", text):
            t = C_TYPES[c.dtype.name]
            qualifier = "restrict " if restrict else ""
            out.append(f"{t} *{qualifier}{v} = ({t} *){data}[{k}];")
    return out


def _items(region):
    """A region's elements with states opened up into their dataflow nodes."""
    if isinstance(region, Sequence):
        for e in region.elements:
            yield from _items(e)
    elif isinstance(region, State):
        yield from region.nodes
    else:
        yield region


def _line(item):
    if isinstance(item, (LoopRegion, ConditionalRegion, MapScope, LibraryNode, Tasklet, Push,
                         Pop)):
        if item.line:
            return item.line
    for node, _ in walk(item if isinstance(item, (Sequence, State, LoopRegion,
                                                  ConditionalRegion)) else State((item,))):
        line = getattr(node, "line", 0)
        if line:
            return line
    return 0


def _describe(item):
    if isinstance(item, LoopRegion):
        return f"loop over {spelling(item.var.name)}"
    if isinstance(item, MapScope):
        return f"map over {', '.join(spelling(p.name) for p in item.params)}"
    if isinstance(item, ConditionalRegion):
        return "branch"
    return "statement"


class _Host(StatementPrinter):
    """Host code of one entry point: control flow around kernels, and the launches."""

    def __init__(self, module, sdfg):
        super().__init__(module.layout, module.unbounded, None)
        self.module, self.sdfg = module, sdfg
        self.tape = _uses_tape(sdfg)
        self.in_parallel = True
        self.polling = True     # host loops poll for Ctrl-C (kernels cannot)
        for c in module.layout.containers:
            if c.is_scalar:                     # flags in conditions: read from the device
                self.names[flag_symbol(c.name)] = f"sc_fetch({identifier('v_', c.name)})"
        self.host_vars = []

    def access(self, memlet):
        """An element read on the host (an index array in a bound or condition)."""
        c = self.shapes[memlet.data]
        flat = sum((i * s for i, s in zip(memlet.subset, c.strides())), sp.Integer(0))
        return f"sc_fetch({identifier('v_', c.name)} + ({self.index.doprint(flat)}))"

    def plan(self, item, what):
        self.module.plan.append(f"  line {_line(item)}: {_describe(item)} {what}")

    # ---- control flow -----------------------------------------------------------------
    def region(self, region):
        run = []
        for item in _items(region):
            if has_kernels(item):
                self._single(run)
                run = []
                self._kernel_item(item)
            else:
                run.append(item)
        self._single(run)

    def _kernel_item(self, item):
        if isinstance(item, MapScope):
            self._map_kernel(item)
        elif isinstance(item, LibraryNode):
            item.emit_cuda(self)
        elif isinstance(item, LoopRegion) and item.parallel:
            self._loop_kernel(item)
        elif isinstance(item, LoopRegion):
            self.plan(item, "runs on the host, launching kernels per iteration")
            self.host_vars.append(item.var)
            self.loop_vars.append(item.var)
            self._sequential_loop(item)
            self.loop_vars.pop()
            self.host_vars.pop()
        elif isinstance(item, ConditionalRegion):
            self.plan(item, "is decided on the host")
            self.branches(item)
            self.emit("if (sc_failed) return -3;")
        else:
            raise TypeError(f"cannot generate CUDA for {item!r}")

    # The host runs the C generator's _sequential_loop with these hooks: its tape
    # position lives on the device, and a kernel may have failed or run out of tape.
    def _private(self, loop):
        """Host loops are sequential: no thread-private copies."""

    def _may_leave(self):
        """Host code is sequential: it may leave wherever it polls."""
        return self.polling

    def _leave(self):
        """Kernels launched so far finish first: the buffers stay the runtime's to free."""
        return f"{{ (void)cudaDeviceSynchronize(); return {INTERRUPTED}; }}"

    def _pop_trips(self, name):
        self.emit(f"int64_t {name} = 0;")
        self.emit(f"SC_OK(sc_host_pop(sc_st, sc_tape, &{name}));")

    def _push(self, value):
        self.emit(f"SC_OK(sc_host_push(sc_st, sc_tape, sc_cap, {value}));")

    def _after_exit(self):
        if self.tape:           # a recording that outgrew its tape stops here
            self.emit("if (sc_stopped(sc_st)) return sc_failed ? -3 : -1;")
        else:
            self.emit("if (sc_failed) return -3;")

    # ---- kernels ----------------------------------------------------------------------
    def _device(self, loop_vars):
        dev = _Device(self.layout, self.unbounded)
        dev.lines, dev.depth = [], 1
        dev.loop_vars = list(loop_vars)
        return dev

    def _params(self):
        return "".join(f", const int64_t {c_name(v, self.names)}" for v in self.host_vars)

    def _args(self):
        return "".join(f", {c_name(v, self.names)}" for v in self.host_vars)

    def _single(self, run):
        """Items with no parallel work: one kernel of one thread."""
        if not run:
            return
        dev = self._device(self.host_vars)
        for item in run:
            if isinstance(item, (Tasklet, MapScope, LibraryNode, Push, Pop)):
                dev.node(item)
            else:
                dev.region(item)
        body = "\n".join(dev.lines)
        head = []
        tape = re.search(r"\bsc_(tp|tape)\b", body)
        if tape:
            head = ["    double *restrict sc_tape = sc_e.tape;",
                    "    const int64_t sc_cap = sc_e.cap; (void)sc_cap;",
                    "    sc_tape_state *const sc_st = sc_e.st;"]
            if self.unbounded:
                head.append("    if (sc_st->overflow) return;")
            head.append("    int64_t sc_tp = sc_st->tp;")
        fails = re.search(r"\bsc_fail_line\b", body) is not None    # _Device.fail
        text = "\n".join([f"static __global__ void @NAME@(const sc_env sc_e{self._params()}"
                           + (", int64_t *sc_fail_line" if fails else "") + ")",
                          "{", *self._kernel_unpack(body), *head, body]
                         + (["    sc_st->tp = sc_tp;"] if tape else []) + ["}", ""])
        name = self.module.kernel(text)
        if fails:
            self.module.fails = True
            self.emit("SC_OK(sc_fail_init());")
        self.emit(f"SC_LAUNCH({name}, dim3(1), dim3(1), sc_e{self._args()}"
                  + (", sc_fail_line" if fails else "") + ");")
        self.emit("SC_TRY(cudaGetLastError());")
        if fails:
            self.emit(f"{{ const int64_t sc_line = sc_fail_check(); if (sc_line < 0) return -3; "
                      f"if (sc_line > 0) return {FAILED} - sc_line; }}")
        what = "statements" if len(run) > 1 else _describe(run[0])
        self.module.plan.append(f"  line {_line(run[0])}: {what} -> {name}, one GPU thread")

    def _kernel_unpack(self, body, exclude=()):
        return ["    " + line for line in _unpack(self.layout, self.names, body, "sc_e.syms",
                                                  "sc_e.data", exclude=exclude)]

    def _map_kernel(self, node):
        levels = [(p, self._trip(a, b, s), (a, s, None))
                  for p, (a, b, s) in zip(node.params, node.ranges)]
        plan = node.schedule.kernel          # schedule.MapKernel
        sums, pushes = list(plan.sums), plan.pushes
        dev = self._device(self.host_vars + list(node.params))
        dev.atomic = plan.atomic
        dev.tape = ("push", pushes) if pushes else None
        self._grid_kernel(node, levels, dev, lambda: [dev.node(t) for t in node.body], sums,
                          (), "push" if pushes else "", pushes, reverse=False)

    def _loop_kernel(self, loop):
        plan = loop.schedule.kernel         # schedule.Kernel
        if plan.pieces:
            for piece in plan.pieces:
                self._loop_kernel(piece)
            return
        nest = plan.nest
        if nest is None:            # marked by another analysis: run it in one thread
            self._single([loop])
            return
        levels = []
        for r in nest.loops:
            if r.segment:
                k0, k1 = SEGMENT
                levels.append((r.var, f"sc_imax({self.names[k1]} - {self.names[k0]}, 0)",
                               (r.start, r.step, k0)))
            else:
                levels.append((r.var, self._trip(r.start, r.stop, r.step),
                               (r.start, r.step, None)))
        dev = self._device(self.host_vars + [r.var for r in nest.loops])
        dev.atomic = nest.atomic
        dev.tape = (nest.tape, nest.per_iteration) if nest.tape else None
        self._grid_kernel(loop, levels, dev, lambda: dev.region(nest.body), nest.sums, nest.private,
                          nest.tape, nest.per_iteration, reverse=nest.loops[0].reverse)

    def _trip(self, a, b, s):
        return f"sc_trip({self.index.doprint(a)}, {self.index.doprint(b)}, {self.index.doprint(s)})"

    def _grid_kernel(self, item, levels, dev, emit_body, sums, private, tape, per_iteration,
                     reverse):
        """A kernel over the grid of ``levels`` (var, host trip count, (start, step,
        segment start)), outermost first; ``emit_body`` fills ``dev`` with the body."""
        d = len(levels)
        trips = [f"sc_n{k}" for k in range(d)]
        nx = trips[-1]
        ny = trips[-2] if d >= 2 else "1"
        nz = " * ".join(trips[:-2]) if d >= 3 else "1"
        dev.depth = 2
        for name in sums:
            dev.emit(f"double *restrict {identifier('v_', name)} = &{identifier('sc_sum_', name)};")
        dev.emit("for (int64_t sc_kz = blockIdx.z; sc_kz < sc_nz; sc_kz += gridDim.z)")
        dev.emit("for (int64_t sc_ky = blockIdx.y * (int64_t)blockDim.y + threadIdx.y; "
                 "sc_ky < sc_ny; sc_ky += (int64_t)gridDim.y * blockDim.y)")
        dev.open("for (int64_t sc_kx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; "
                 "sc_kx < sc_nx; sc_kx += (int64_t)gridDim.x * blockDim.x)")
        ks = self._level_indices(dev, d)
        for (var, _, (start, step, k0)), k in zip(levels, ks):
            offset = f"({self.names[k0]} + {k})" if k0 is not None else k
            dev.emit(f"const int64_t {c_name(var, self.names)} = {dev.index.doprint(start)} + "
                     f"{offset} * ({dev.index.doprint(step)});")
        if tape:
            flat = "(sc_kz * sc_ny + sc_ky) * sc_nx + sc_kx"
            order = f"sc_nx * sc_ny * sc_nz - 1 - ({flat})" if reverse else flat
            dev.emit(f"const int64_t sc_r = {order};")
        for name in private:
            t = C_TYPES[self.shapes[name].dtype.name]
            own = identifier("sc_own_", name)
            dev.emit(f"{t} {own}[1]; {t} *restrict {identifier('v_', name)} = {own};")
        emit_body()
        dev.close()
        body = "\n".join(dev.lines)
        head = [f"    const int64_t sc_nx = {nx}, sc_ny = {ny}, sc_nz = {nz};"]
        if tape:
            head += ["    double *restrict sc_tape = sc_e.tape;",
                     "    const int64_t sc_cap = sc_e.cap; (void)sc_cap;",
                     "    sc_tape_state *const sc_st = sc_e.st; (void)sc_st;",
                     "    const int64_t sc_t0 = sc_st->tp;"]
        head += [f"    double {identifier('sc_sum_', name)} = 0.0;" for name in sums]
        tail = [f"    sc_block_sum({identifier('sc_sum_', name)}, sc_e.red + {k} * SC_RED_BLOCKS + "
                "sc_block_id());" for k, name in enumerate(sums)]
        params = "".join(f", const int64_t {t}" for t in trips)
        unpack = self._kernel_unpack(body, exclude=set(sums) | set(private))
        text = "\n".join([f"static __global__ void __launch_bounds__(SC_BLOCK) "
                          f"@NAME@(const sc_env sc_e{self._params()}{params})", "{",
                          *unpack, *head, "    {", body, "    }", *tail, "}", ""])
        name = self.module.kernel(text)
        self.module.max_sums = max(self.module.max_sums, len(sums))
        # the launch
        self.open("")
        for t, (_, trip, _) in zip(trips, levels):
            self.emit(f"const int64_t {t} = {trip};")
        self.emit(f"const int64_t sc_nx = {nx}, sc_ny = {ny}, sc_nz = {nz};")
        self.open("if (sc_nx > 0 && sc_ny > 0 && sc_nz > 0)")
        self.emit("dim3 sc_grid, sc_block;")
        most = "sc_imin(sc_max_blocks, SC_RED_BLOCKS)" if sums else "sc_max_blocks"
        self.emit(f"sc_config(sc_nx, sc_ny, sc_nz, {most}, &sc_grid, &sc_block);")
        self.emit(f"SC_LAUNCH({name}, sc_grid, sc_block, sc_e{self._args()}, "
                  f"{', '.join(trips)});")
        self.emit("SC_TRY(cudaGetLastError());")
        index = {c.name: k for k, c in enumerate(self.layout.containers)}
        for k, s in enumerate(sums):
            t = C_TYPES[self.shapes[s].dtype.name]
            self.emit(f"SC_LAUNCH(sc_finish_sum<{t}>, dim3(1), dim3(SC_BLOCK), "
                      f"sc_e.red + {k} * SC_RED_BLOCKS, "
                      f"(int64_t)sc_grid.x * sc_grid.y * sc_grid.z, ({t} *)sc_data[{index[s]}]);")
            self.emit("SC_TRY(cudaGetLastError());")
        if tape:
            sign = "" if tape == "push" else "-"
            self.emit(f"SC_LAUNCH(sc_tape_advance, dim3(1), dim3(1), sc_st, "
                      f"{sign}sc_nx * sc_ny * sc_nz * {per_iteration});")
            self.emit("SC_TRY(cudaGetLastError());")
        self.close()
        self.close()
        extras = []
        if dev.atomic:
            extras.append("atomics on " + ", ".join(sorted({spelling(m.data) for m in dev.atomic})))
        if sums:
            extras.append("block sums into " + ", ".join(map(spelling, sums)))
        if tape:
            extras.append(f"{per_iteration} tape {tape}(es) per iteration")
        grid = " x ".join(spelling(v.name) for v, _, _ in levels)
        self.plan(item, f"-> {name}, grid over ({grid})" +
                  (f"; {'; '.join(extras)}" if extras else ""))

    def _level_indices(self, dev, d):
        """Trip indices of the levels: x innermost, y next, z the outer ones flattened."""
        if d == 1:
            return ["sc_kx"]
        if d == 2:
            return ["sc_ky", "sc_kx"]
        if d == 3:
            return ["sc_kz", "sc_ky", "sc_kx"]
        dev.emit("int64_t sc_rest = sc_kz;")
        names = []
        for k in range(d - 3, -1, -1):
            dev.emit(f"const int64_t sc_j{k} = sc_rest % sc_n{k}; sc_rest /= sc_n{k};")
            names.append(f"sc_j{k}")
        return list(reversed(names)) + ["sc_ky", "sc_kx"]


def cuda_source(layout, entries, checks, counted=(), emulate=False, prefix=""):
    """Schedule the entries for the GPU (their kernels: ``schedule.decide``, as
    pipeline.py does) and generate the module."""
    from ..schedule import schedule
    from ..sdfg import validate
    marked = [validate(schedule(sdfg, "cuda")) for sdfg in entries]
    return generate_cuda_module(layout, marked, checks, counted, emulate, prefix)
