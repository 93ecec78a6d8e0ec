"""The scheduling pass (adjoint/schedule/): the decisions it records on the IR, and
printers that only read them (a decision changed on the IR changes the printed code),
the one place reverse mode and the pass share for a recording map's loops, and the
``sc_*`` helpers written once for both backends."""
import re
from dataclasses import replace

import numpy as np
import sympy as sp

from adjoint import float64, kernel, symbol
from adjoint.codegen import Layout, generate_module
from adjoint.codegen import c as c_backend, cuda, cuda_preamble, helpers
from adjoint.codegen.statements import StatementPrinter
from adjoint.corpus.arrays import masked_updates
from adjoint.schedule import (LoopSchedule, MapKernel, MapSchedule, Reduction, Slots, Threading, Threads,
                              schedule)
from adjoint.schedule.tape import as_loops
from adjoint.sdfg import validate
from adjoint.sdfg.nodes import (ConditionalRegion, LoopRegion, MapScope, Push, Sequence, State,
                                regions, walk)
from adjoint.sdfg.visit import Transformer

N = symbol("N")


@kernel
def rows(A: float64[N, N], out: float64[N]) -> float:
    for i in range(N):
        s = 0.0
        for j in range(N):
            s += A[i, j] * A[i, j]          # a dot product: SIMD sums
        out[i] = s
    return out[0]


@kernel
def columns(A: float64[N, N], c: float64[N]) -> float:
    for i in range(N):
        for j in range(N):
            c[j] += A[i, j]                 # every row adds into every column
    return c[0]


@kernel
def stepped(A: float64[N, N], T: int) -> float:
    for t in range(T):
        for i in range(N):                  # parallel, inside a sequential loop
            for j in range(N):
                A[i, j] = 0.5 * A[i, j]
    return A[0, 0]


@kernel
def overwrite(A: float64[N, N], x: float64[N]) -> float:
    A[:, :] = np.sin(A)                     # a map that records A before it writes
    for i in range(N):
        x[i] = np.cos(x[i])
    return np.sum(A * A) + np.sum(x * x)


@kernel
def clipped(x: float64[N], y: float64[N]) -> float:
    for i in range(N):
        if x[i] > 0.0:
            y[i] = x[i]
        else:
            y[i] = 0.5 * x[i]
    return y[0]


def _sdfg(k, *args):
    return k.specialize(args).sdfg


def _loops(sdfg):
    return [r for r, _ in regions(sdfg.body) if isinstance(r, LoopRegion)]


def _source(sdfg):
    return generate_module(Layout(sdfg.symbols, tuple(sdfg.containers.values())), [sdfg], ())


def test_loops_record_their_threads_and_simd_sums():
    A = np.ones((6, 6))
    top, inner = _loops(schedule(_sdfg(rows, A, np.zeros(6))))
    assert top.schedule.threads == Threads(top.schedule.threads.work, 32768)
    assert top.schedule.threading is Threading.ROWS and top.schedule.polls
    assert isinstance(inner.schedule.reduction, Reduction)
    assert [m.data for m in inner.schedule.reduction.sums] == ["s"]
    assert inner.schedule.threads is None and not inner.schedule.polls


def test_sums_rows_share_and_loops_inside_loops_are_recorded():
    A = np.ones((6, 6))
    top = _loops(schedule(_sdfg(columns, A, np.zeros(6))))[0]
    assert top.schedule.threading is Threading.SUMMED and top.sums == ("c",)
    t, i, _ = _loops(schedule(_sdfg(stepped, A, 2)))
    assert t.schedule.threads is None and i.schedule.threading is Threading.SHARED


def test_branches_inside_loops_on_data_are_selects():
    branch, = [r for r, _ in regions(schedule(_sdfg(clipped, np.ones(5), np.ones(5))).body)
               if isinstance(r, ConditionalRegion)]
    assert branch.schedule.selects
    assert " ? " in _source(schedule(_sdfg(clipped, np.ones(5), np.ones(5))))


class _Serial(Transformer):
    """Every loop's decision replaced: no threads, no SIMD sums."""
    def loop(self, loop):
        loop = super().loop(loop)
        return replace(loop, schedule=LoopSchedule(polls=loop.schedule.polls))


def test_the_printer_only_reads_the_decisions():
    """The same IR with other decisions on it prints other code: without threads and
    SIMD sums, neither pragma."""
    sdfg = schedule(_sdfg(rows, np.ones((6, 6)), np.zeros(6)))
    source = _source(sdfg)
    assert "#pragma omp parallel for" in source and "#pragma omp simd" in source
    serial = _source(validate(sdfg.replace(body=_Serial().region(sdfg.body))))
    assert "#pragma omp" not in serial.split("/* ---- sc: part ---- */")[1]


def test_the_gpu_schedule_has_no_threads_simd_or_slots():
    for sdfg in (_sdfg(rows, np.ones((6, 6)), np.zeros(6)), _sdfg(columns, np.ones((6, 6)),
                                                                   np.zeros(6))):
        for r in _loops(schedule(sdfg, "cuda")):
            s = r.schedule
            assert (s.threads, s.reduction, s.slots, s.threading) == (None, None, None, None)


def test_the_gpu_schedule_records_each_kernel():
    """A marked loop's grid (its nest: levels, atomics, tape), a marked map's atomics and
    block sums: decided by the pass, read by the CUDA printer."""
    host, inner = _loops(schedule(_sdfg(columns, np.ones((6, 6)), np.zeros(6)), "cuda"))
    assert host.schedule.kernel is None and host.schedule.polls     # rows one by one
    assert [str(r.var) for r in inner.schedule.kernel.nest.loops] == ["j"]

    @kernel
    def total(x: float64[N]) -> float:
        return np.sum(x * x)
    maps = [n for n, _ in walk(schedule(_sdfg(total, np.ones(5)), "cuda").body)
            if isinstance(n, MapScope) and n.parallel]
    assert maps and all(isinstance(m.schedule.kernel, MapKernel) for m in maps)
    assert any(m.schedule.kernel.sums for m in maps)


def _records():
    spec = overwrite.specialize((np.ones((6, 6)), np.ones(6)))
    return spec.backward(frozenset({"A", "x"}), frozenset({"__return"})).adjoint.regions


def _pushing(sdfg):
    return [n for n, _ in walk(sdfg.body)
            if isinstance(n, MapScope) and any(isinstance(t, Push) for t in n.body)]


def test_a_recording_map_runs_as_the_loops_its_reverse_mirrors():
    """On the CPU a map that pushes becomes as_loops' nest, the outermost on threads (each
    finding its tape values from its index), the innermost in slots; reverse mode restores it through the same
    function, backwards: loops of the same ranges."""
    region = next(r for r in _records() if _pushing(r.record))
    node, = _pushing(region.record)
    scheduled = schedule(region.record)
    assert not _pushing(scheduled)
    outer, inner = [r for r in _loops(scheduled) if str(r.var).startswith("__m")]
    assert outer.parallel and outer.schedule.tape.kind == "push"     # the map's points
    assert inner.schedule.slots == Slots(pushes=1, pops=0)
    reverse = [r for r in _loops(region.reverse) if r.reverse]
    assert [(r.var, r.start, r.stop, r.step) for r in (outer, inner)] == \
        [(r.var, r.start, r.stop, r.step) for r in reverse[:2]]
    nest = as_loops(node.params, node.ranges, node.body, node.line, reverse=True)
    assert all(r.reverse for r, _ in regions(nest) if isinstance(r, LoopRegion))


def test_a_recording_map_that_is_a_whole_body_runs_as_loops_too():
    """A branch whose body is the state itself (no sequence around it)."""
    region = next(r for r in _records() if _pushing(r.record))
    state = next(r for r, _ in regions(region.record.body)
                 if isinstance(r, State) and any(n in _pushing(region.record) for n in r.nodes))
    branch = ConditionalRegion(((sp.Gt(N, 0), state),))
    sdfg = region.record.replace(body=Sequence((branch,)))
    assert _pushing(sdfg) and not _pushing(schedule(sdfg))


def test_slots_hold_a_fixed_count_per_iteration_on_the_cpu_only():
    region = next(r for r in _records() if _pushing(r.record))
    assert any(r.schedule.slots for r in _loops(schedule(region.record)))
    assert not any(r.schedule.slots for r in _loops(schedule(region.record, "cuda")))


def test_maps_record_threads_copies_and_partial_sums():
    @kernel
    def scaled(A: float64[N, N], a: float64[N]) -> float:
        A[:, :] = A * a[None, :]
        return np.sum(A)
    maps = [n for n, _ in walk(schedule(_sdfg(scaled, np.ones((6, 6)), np.ones(6))).body)
            if isinstance(n, MapScope)]
    assert maps and all(isinstance(m.schedule, MapSchedule) for m in maps)
    assert any(m.schedule.threads and not m.schedule.shared for m in maps)


def test_the_helpers_are_written_once():
    """Each sc_* function of helpers.ARITHMETIC is in both preambles with one body."""
    names = re.findall(r"\bsc_\w+(?=\()", helpers.ARITHMETIC)
    assert {"sc_mod", "sc_floordiv", "sc_trip", "sc_pow"} <= set(names)
    c_source = _source(schedule(_sdfg(clipped, np.ones(5), np.ones(5))))
    for text in (c_source, cuda_preamble.preamble(False), cuda_preamble.preamble(True)):
        for name in set(names):
            definition = re.search(rf"\b{name}\([^)]*\)\s*(/\*.*?\*/)?\s*\{{", text, re.S)
            assert definition, (name, text[:80])
        assert helpers.PYTHON_SEMANTICS in text and helpers.CHECKED in text
    body = helpers.arithmetic("Q", "Q ", "Q ")
    assert body in c_backend.PREAMBLE.replace("static inline", "Q").replace(
        helpers.C_POW, "Q ").replace(helpers.C_IPOW, "Q ") and \
        body in cuda_preamble.preamble(False).replace("SC_HD", "Q")


def test_backends_derive_from_the_public_printer_base():
    for cls in (cuda._Device, cuda._Host, c_backend.OpenMPPrinter):
        assert issubclass(cls, StatementPrinter)
    assert not issubclass(cuda._Device, c_backend.OpenMPPrinter)
    assert not issubclass(cuda._Host, c_backend.OpenMPPrinter)


def test_the_index_helpers_match_python_without_overflow(tmp_path):
    """sc_mod, sc_floordiv and sc_check's sc_cmod against Python's % and // at the edges of
    int64 (divisors beyond 2^62 included), and sc_ipow and sc_cpow against ** (sc_cpow
    flagging every power beyond int64, sc_ipow wrapping), compiled with UBSan where it is
    there: no signed overflow on the way."""
    import shutil
    import subprocess
    import pytest
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    big = 2 ** 63 - 1
    values = [0, 1, -1, 2, -2, 5, -5, 7, 2 ** 62, 2 ** 62 + 1, big - 3, big, -big, -big - 1]
    pairs = [(a, b) for a in values for b in values if b != 0 and not (a == -big - 1 and b == -1)]
    rows = ",\n".join(f"{{{a}LL, {b}LL}}" if a != -big - 1 else f"{{INT64_MIN, {b}LL}}"
                      for a, b in pairs).replace(f"{-big - 1}LL", "INT64_MIN")
    source = (helpers.CONSTANTS + "#include <stdint.h>\n#include <stdio.h>\n#include <math.h>\n"
              + helpers.arithmetic("static inline", helpers.C_POW, helpers.C_IPOW)
              + "#define SC_VALUE static inline\n" + helpers.PYTHON_SEMANTICS + helpers.CHECKED
              + f"static const int64_t cases[][2] = {{\n{rows}\n}};\nint main(void) {{\n"
              "  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {\n"
              "    volatile int64_t a = cases[k][0], b = cases[k][1]; int o = 0;\n"
              "    int64_t m = sc_cmod(a, b, &o);\n"
              "    printf(\"%lld %lld %lld %d\\n\", (long long)sc_mod(a, b),\n"
              "           (long long)sc_floordiv(a, b), (long long)m, o);\n  }\n"
              "  for (int64_t a = -3; a <= 3; ++a) for (int64_t b = 0; b <= 70; ++b) {\n"
              "    int o = 0; int64_t p = sc_cpow(a, b, &o);\n"
              "    printf(\"%lld %lld %d\\n\", (long long)sc_ipow(a, b), (long long)p, o);\n"
              "  }\n  return 0;\n}\n")
    path = tmp_path / "helpers.c"
    path.write_text(source)
    flags = ["-O2", "-std=c99", "-fsanitize=undefined", "-fno-sanitize-recover=all"]
    if subprocess.run([cc, *flags, str(path), "-o", str(tmp_path / "h"), "-lm"],
                      capture_output=True).returncode != 0:
        flags = ["-O2", "-std=c99"]             # no UBSan here: the values still
        subprocess.run([cc, *flags, str(path), "-o", str(tmp_path / "h"), "-lm"], check=True)
    out = subprocess.run([str(tmp_path / "h")], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    for (a, b), line in zip(pairs, lines[:len(pairs)]):
        assert [int(v) for v in line.split()] == [a % b, a // b, a % b, 0], (a, b)
    powers = [(a, b) for a in range(-3, 4) for b in range(71)]
    for (a, b), line in zip(powers, lines[len(pairs):], strict=True):
        wrapped = (a ** b + 2 ** 63) % 2 ** 64 - 2 ** 63
        fits = -2 ** 63 <= a ** b < 2 ** 63
        ipow, cpow, o = (int(v) for v in line.split())
        assert ipow == wrapped and o == (not fits) and (cpow == a ** b or not fits), (a, b)


def test_a_recording_map_sums_into_scalars_through_partial_sums():
    """masked_updates' record loop sums into scalars (the returned sums), its reverse into
    lo's adjoint: each a function over a thread's share, its sums SIMD accumulators
    added up in thread order, not a scalar in memory every thread adds into."""
    spec = masked_updates.specialize((np.ones(6), np.ones(6), 0.5))
    region, = spec.backward(frozenset({"x", "y", "lo"}), frozenset({"__return"})).adjoint.regions
    record, = [r for r in _loops(schedule(region.record)) if r.schedule.tape]
    reverse, = [r for r in _loops(schedule(region.reverse)) if r.schedule.tape]
    for loop, sums in ((record, {"__sum1", "__sum2"}), (reverse, {"__g_lo"})):
        assert set(loop.sums) == sums and loop.schedule.threading is Threading.SHARED
        assert {m.data for m in loop.schedule.slot_reduction.sums} == sums
    source = _source(schedule(region.reverse))
    assert "sc_part___g_lo" in source and "#pragma omp simd reduction(+:sc_acc0)" in source


def test_rows_of_an_innermost_loop_on_threads_are_simd_lanes_too():
    """masked_updates' reverse loop (its sums x's and y's own elements): its iterations
    independent, only tasklets and pops inside, `omp parallel for simd` (GCC does not
    vectorise the loop OpenMP outlines without it); a loop around loops is not."""
    spec = masked_updates.specialize((np.ones(6), np.ones(6), 0.5))
    region, = spec.backward(frozenset({"x", "y"}), frozenset({"__return"})).adjoint.regions
    reverse, = [r for r in _loops(schedule(region.reverse)) if r.schedule.tape]
    assert reverse.schedule.threading is Threading.ROWS and reverse.schedule.simd
    assert "#pragma omp parallel for simd" in _source(schedule(region.reverse))
    top, _ = _loops(schedule(_sdfg(rows, np.ones((6, 6)), np.zeros(6))))
    assert top.schedule.threading is Threading.ROWS and not top.schedule.simd
