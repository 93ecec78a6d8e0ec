"""CUDA code generation (``device="cuda"``).

Without a GPU: the generated CUDA of every corpus kernel (forward, the entries of every
reverse region, tangent) compiles with nvcc (skipped without nvcc); golden checks of the
launch configuration, atomics, block reductions and tape positions; the generated code
run through the CPU emulation (``cuda_emulation``) against the C path. With a GPU
(marked ``gpu``, skipped without one): every corpus kernel's forward, gradient and
tangent on the GPU against the C path. ``pytest --device=cuda`` (or ``cuda-emulated``)
runs the engine's other numeric test files on the GPU too.
"""
import re
import shutil
import subprocess

import numpy as np
import pytest

import adjoint
from adjoint import DeviceError, complex128, float64, grad, jvp, kernel, options, symbol, vjp
from adjoint.analysis.bounds import index_checks
from adjoint.autodiff import differentiate, linearize
from adjoint.codegen import Layout
from adjoint.analysis.device import kernel_nest
from adjoint.codegen.cuda import cuda_source, launch_plan
from adjoint.codegen.cuda_preamble import preamble
from adjoint.frontend import parse, read_source, type_of_value
from adjoint.sdfg import validate
from adjoint.corpus import loops as corpus
from adjoint.corpus import arrays as corpus_arrays
from kernel_testing import copy_args, rng_for
from test_records import limited_flux, limited_flux_args

CASES = corpus.CASES + corpus_arrays.CASES
BY_NAME = {c.name: c for c in CASES}
N, M, K = symbol("N"), symbol("M"), symbol("K")
EXTRA = {}          # kernels of this file that also go through every check


def _gpu():
    try:
        from adjoint.runtime.cuda import _gpu as probe
        probe()
        return shutil.which(options.nvcc) is not None
    except DeviceError:
        return False


HAS_GPU = _gpu()
needs_nvcc = pytest.mark.skipif(shutil.which(options.nvcc) is None, reason="no nvcc here")
gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU here")


# ---- lowering without building: the pipeline's stages up to code generation -------------
def lowered(k, args, wrt, outputs=("__return",)):
    """(kind, layout, entries, checks, counted) of the forward, the reverse-mode module and
    the tangent module of kernel ``k`` for ``args``, as pipeline.py lowers them."""
    names = list(k._declared)
    types = {n: k._declared[n] or type_of_value(n, v) for n, v in zip(names, args)}
    sdfg = validate(parse(read_source(k.__wrapped__), k.__name__, types))
    checks = tuple(index_checks(sdfg))
    yield "forward", Layout(sdfg.symbols, tuple(sdfg.containers.values())), [sdfg], checks, ()
    adj = differentiate(sdfg, frozenset(wrt), frozenset(outputs), "cuda")
    entries = [s for r in adj.regions for s in (r.forward, r.record, r.reverse)]
    yield ("backward", Layout(sdfg.symbols, tuple(adj.containers.values())), entries, checks,
           [r.record for r in adj.regions])
    tan, _ = linearize(sdfg, frozenset(wrt))
    yield "tangent", Layout(tan.symbols, tuple(tan.containers.values())), [tan], checks, ()


def sources(k, args, wrt, **kw):
    """{kind: CUDA source} of a kernel's three modules."""
    return {kind: cuda_source(layout, entries, checks, counted, **kw)
            for kind, layout, entries, checks, counted in lowered(k, args, wrt)}


def _entry(source, k):
    """The text of entry point ``k`` (host code) of a module."""
    start = source.index(f"static int64_t sc_entry{k}(")
    return source[start:source.index("\n}\n", start)]


def _kernel(source, name):
    start = source.index(f" {name}(const sc_env")
    return source[start:source.index("\n}\n", start)]


# ---- every corpus kernel compiles ------------------------------------------------------------
@needs_nvcc
def test_every_corpus_kernel_compiles_with_nvcc(tmp_path):
    """All modules of the corpus in two translation units (one per core), each module in
    its own namespace; compiled to sm_90's PTX with the host code unoptimised (fast: ptxas,
    PTX to machine code, is left to the single modules the other tests build for sm_90)."""
    parts = []
    for case in CASES + list(EXTRA.values()):
        args = case.make_args(rng_for(case.name))
        for kind, layout, entries, checks, counted in lowered(case.kernel, args, case.wrt):
            prefix = f"{case.name}_{kind}_"
            parts.append(cuda_source(layout, entries, checks, counted, prefix=prefix))
    units = [parts[:len(parts) // 2], parts[len(parts) // 2:]]
    procs = []
    for k, unit in enumerate(units):
        path = tmp_path / f"corpus{k}.cu"
        path.write_text(preamble(False) + "\n".join(unit))
        procs.append((path, subprocess.Popen(
            [options.nvcc, "-O0", "-arch=compute_90", "-code=compute_90", "-w", "-c",
             str(path), "-o", str(path.with_suffix(".o"))],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for path, proc in procs:
        _, err = proc.communicate()
        assert proc.returncode == 0, f"nvcc failed on {path}:\n{err[-4000:]}"
    assert len(parts) == 3 * (len(CASES) + len(EXTRA))


# ---- golden checks of the generated code -----------------------------------------------------
@kernel
def square(x: float64[N], y: float64[N]) -> float:
    for i in range(N):
        y[i] = x[i] * x[i]
    return np.sum(y)


@kernel
def scaled_by_first(x: float64[N], y: float64[N]) -> float:
    y[:] = x * x[0]
    return np.sum(y)


def test_a_2d_stencil_is_a_2d_grid_launched_per_time_step():
    case = BY_NAME["jacobi2d_slices"]
    src = sources(case.kernel, case.make_args(rng_for("j")), case.wrt)["forward"]
    host = _entry(src, 0)
    # the time loop runs on the host and launches both sweeps per step
    assert "for (int64_t i_t = 0; i_t < n_T; i_t += 1) {" in host
    assert host.count("sc_config(sc_nx, sc_ny, sc_nz, sc_max_blocks, &sc_grid, &sc_block);") >= 2
    # launch sizes from the map's ranges: rows along y, columns (contiguous) along x
    assert "const int64_t sc_n0 = sc_trip(0, n_N - 2, 1);" in host
    assert "const int64_t sc_nx = sc_n1, sc_ny = sc_n0, sc_nz = 1;" in host
    assert "SC_LAUNCH(sc_k0, sc_grid, sc_block, sc_e, i_t, sc_n0, sc_n1);" in host
    body = _kernel(src, "sc_k0")
    assert "sc_kx += (int64_t)gridDim.x * blockDim.x" in body        # grid-stride loops
    assert "sc_ky += (int64_t)gridDim.y * blockDim.y" in body
    assert "atomicAdd" not in src                                    # the forward scatters nothing


def test_perfectly_nested_parallel_loops_are_one_3d_grid():
    case = BY_NAME["heat3d"]
    src = sources(case.kernel, case.make_args(rng_for("h")), case.wrt)["forward"]
    assert "const int64_t sc_nx = sc_n2, sc_ny = sc_n1, sc_nz = sc_n0;" in _entry(src, 0)
    assert "grid over (i x j x k)" in "\n".join(launch_plan(src))


@pytest.mark.parametrize("name,grid", [("jacobi2d", "(i x j)"), ("heat3d", "(i x j x k)")])
def test_gathered_pieces_of_a_reversed_stencil_are_full_grids(name, grid):
    """The gather splits the innermost range into boundary pieces and the interior; each
    piece is a kernel over every level (not a grid over the outer levels whose threads
    walk the pieces along a row: uncoalesced, and 28x jacobi-2d's forward on an H200)."""
    case = BY_NAME[name]
    src = sources(case.kernel, case.make_args(rng_for(name)), case.wrt)["backward"]
    reverse = [line for line in launch_plan(src) if "grid over" in line][4:]
    assert len(reverse) > 2 * 4                 # pieces of both sweeps, besides the sum
    assert all(f"grid over {grid}" in line for line in reverse if "__r1" not in line)


@kernel
def rows_scaled(x: float64[N, N], y: float64[N, N], z: float64[N, N]):
    for i in range(N):
        s = x[i, 0]
        for j in range(N):
            y[i, j] = s * x[i, j]
        for j in range(N):
            z[i, j] = s + x[i, j]


@kernel
def rows_apart(x: float64[N, N], y: float64[N, N], z: float64[N, N]):
    for i in range(N):
        for j in range(N):
            y[i, j] = 2.0 * x[i, j]
        for j in range(N):
            z[i, j] = 1.0 + x[i, j]


@pytest.mark.parametrize("k,pieces", [(rows_apart, 2), (rows_scaled, 0)])
def test_nests_are_distributed_over_their_pieces_unless_a_scalar_passes_between(k, pieces):
    from adjoint.analysis.device import distributed
    sdfg = validate(parse(read_source(k.__wrapped__), k.__name__, dict(k._declared)))
    outer = sdfg.body.elements[0]
    assert str(outer.var) == "i"
    assert kernel_nest(sdfg, outer) is not None         # a kernel either way
    nests = distributed(sdfg, outer) or []
    assert len(nests) == pieces
    assert all(len(kernel_nest(sdfg, n).loops) == 2 for n in nests)


def test_atomics_only_where_iterations_share_elements():
    case = BY_NAME["jacobi2d_slices"]
    src = sources(case.kernel, case.make_args(rng_for("j")), case.wrt)["backward"]
    gathered = re.findall(r"if \(n_N - 2 >= 2\) \{(.*?)\n        else \{", src, re.S)
    assert len(gathered) == 2                # both stencil adjoints are gathered ...
    for branch in gathered:
        for name in re.findall(r"SC_LAUNCH\((sc_k\d+),", branch):
            assert "atomicAdd" not in _kernel(src, name)
    # ... and keep their scatter (with atomics) for ranges shorter than the stencil
    assert "atomicAdd(&v___g_A[" in src
    rev = sources(scaled_by_first, (np.ones(4), np.ones(4)), ("x",))["backward"]
    assert "atomicAdd(&v___g_x[0]" in rev    # every iteration adds to x[0]'s adjoint
    rev = sources(square, (np.ones(4), np.ones(4)), ("x",))["backward"]
    assert "atomicAdd" not in rev            # y[i] = x[i]**2: each adjoint written once


def test_scalar_sums_are_block_reductions_not_atomics():
    src = sources(square, (np.ones(4), np.ones(4)), ("x",))["forward"]
    assert "sc_block_sum(sc_sum___sum1, sc_e.red + 0 * SC_RED_BLOCKS + sc_block_id());" in src
    assert "SC_LAUNCH(sc_finish_sum<double>, dim3(1), dim3(SC_BLOCK)" in src
    assert "sc_imin(sc_max_blocks, SC_RED_BLOCKS)" in src       # at most one partial per slot
    assert "atomicAdd" not in src


def test_a_sequential_nest_runs_in_one_gpu_thread():
    case = BY_NAME["lorenz96_sweep"]           # x[i] depends on x[i-1]: no parallel loop
    srcs = sources(case.kernel, case.make_args(rng_for("l")), case.wrt)
    assert "SC_LAUNCH(sc_k0, dim3(1), dim3(1), sc_e);" in _entry(srcs["forward"], 0)
    plan = "\n".join(launch_plan(srcs["backward"]))
    assert re.search(r"line \d+: loop over t -> sc_k1, one GPU thread", plan)
    # its tape moves in that thread, from and back to the device's tape position
    assert "int64_t sc_tp = sc_st->tp;" in srcs["backward"]
    assert "sc_tape[sc_tp++] = " in srcs["backward"]


def test_grid_kernels_push_and_pop_at_their_sequential_positions():
    case = BY_NAME["row_broadcast"]
    src = sources(case.kernel, case.make_args(rng_for("s")), case.wrt)["backward"]
    assert "sc_tape[sc_t0 + sc_r * 1 + 0] = " in src                  # record: push
    assert "= sc_tape[sc_t0 - sc_r * 1 - 1];" in src                  # reverse: pop
    assert "const int64_t sc_r = sc_nx * sc_ny * sc_nz - 1 - ((sc_kz * sc_ny + sc_ky) * sc_nx " \
           "+ sc_kx);" in src                                         # reversed loops
    assert "SC_LAUNCH(sc_tape_advance, dim3(1), dim3(1), sc_st, sc_nx * sc_ny * sc_nz * 1);" in src
    assert "SC_LAUNCH(sc_tape_advance, dim3(1), dim3(1), sc_st, -sc_nx * sc_ny * sc_nz * 1);" in src


def test_decisions_on_data_record_and_reverse_as_grid_kernels():
    """A flag decided in every iteration is pushed once per iteration, after its write,
    and popped before its reads (test_records): private to each GPU thread, so the
    record and reverse nests are grid kernels (they ran in one GPU thread)."""
    src = sources(limited_flux, limited_flux_args(rng_for("flags")), ("u", "c"))["backward"]
    plan = "\n".join(launch_plan(src))
    assert re.search(r"loop over i -> sc_k\d+, grid over \(i x j\); 1 tape push", plan)
    assert re.search(r"loop over i -> sc_k\d+, grid over \(i x j\); .*1 tape pop", plan)


EXTRA["limited_flux"] = corpus.CorpusCase("limited_flux", limited_flux, limited_flux_args,
                                          ("u", "c"))


@kernel
def two_layers(x: float64[N, K], W1: float64[K, M], b: float64[M], W2: float64[M, K]) -> float:
    h = np.tanh(x @ W1 + b)
    return np.sum((h @ W2) ** 2)


def two_layers_args(rng, n=5):
    return (rng.standard_normal((n, 3)), rng.standard_normal((3, n + 1)),
            rng.standard_normal(n + 1), rng.standard_normal((n + 1, 3)))


EXTRA["two_layers"] = corpus.CorpusCase("two_layers", two_layers, two_layers_args,
                                         ("x", "W1", "b", "W2"))


@kernel
def wave_phase(psi: complex128[N], k: float64[N]) -> float:
    phi = psi * np.exp(1j * k)          # complex values: real parts in CUDA too
    for i in range(1, N):
        phi[i] = phi[i] + 0.5j * phi[i - 1] / (1.0 + abs(phi[i - 1]))
    return np.sum(np.abs(phi) ** 2) + np.sum(np.real(np.conj(psi) * phi))


def wave_phase_args(rng, n=6):
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n), rng.standard_normal(n))


EXTRA["wave_phase"] = corpus.CorpusCase("wave_phase", wave_phase, wave_phase_args,
                                        ("psi", "k"))


@kernel
def price_path(S: float64[N], rows: float64[N, K], steps: int) -> float:
    """Lists grown by append (frontend/lists.py): numbers and rows, their length the trip
    count, read back whole and element by element."""
    T = 0.01
    Ps, hist = [], []
    for i in range(steps):
        Ps.append(np.sum(np.exp(-S * T)) / N)
        hist.append(rows[i % N] * T)
        T += 0.01
    return np.sum(np.array(Ps) ** 2) + Ps[-1] * np.sum(np.stack(hist))


def price_path_args(rng, n=6):
    return rng.uniform(0.5, 1.5, n), rng.standard_normal((n, 3)), 4


EXTRA["price_path"] = corpus.CorpusCase("price_path", price_path, price_path_args,
                                        ("S", "rows"))


def test_every_cuda_call_and_launch_is_checked():
    src = sources(two_layers, two_layers_args(rng_for("g")), ("W1", "b", "W2"))["forward"]
    body = src[src.index("static int64_t sc_entry0("):]
    launches = body.count("SC_LAUNCH(")
    assert launches and body.count("SC_LAUNCH(") == body.count("SC_TRY(cudaGetLastError());")
    assert "SC_LAUNCH(sc_matmul," in body
    assert "cudaMallocManaged" not in src and "cudaMallocHost" not in src


# ---- errors ----------------------------------------------------------------------------------
@pytest.mark.skipif(HAS_GPU, reason="a GPU is present")
def test_device_cuda_without_a_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(options, "device", "cpu")
    with pytest.raises(DeviceError, match="GPU|CUDA device|driver"):
        adjoint.configure(device="cuda")
    assert options.device == "cpu"                 # the failed change is not half applied


def test_device_cuda_without_nvcc_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(options, "device", "cpu")
    with pytest.raises(DeviceError, match="nvcc"):
        adjoint.configure(device="cuda", nvcc="/nonexistent/nvcc")
    assert options.device == "cpu" and options.nvcc != "/nonexistent/nvcc"


def test_unknown_device():
    with pytest.raises(ValueError, match="'cpu', 'cuda'"):
        adjoint.configure(device="tpu")


def test_hydra_device_group_selects_cuda():
    from simcore.config import compose
    from simcore.engine import settings
    cfg = compose(["device=cuda"])
    assert cfg.device.name == "cuda" and settings(cfg.engine, cfg.device)["device"] == "cuda"


# ---- the generated code run on the CPU (emulation) against the C path -------------------------
@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)


def _results(case, args):
    work = copy_args(args)
    ret = case.kernel(*work)
    g = grad(case.kernel, wrt=case.wrt)(*args)
    names = list(case.kernel._declared)
    tangents = {n: np.full(np.shape(a), 0.5) if isinstance(a, np.ndarray) else 0.5
                for n, a in zip(names, args) if n in case.wrt}
    outs, dots = jvp(case.kernel, args, tangents)
    return ret, work, g, dots


def _assert_same(cpu, cuda, rtol):
    (r1, w1, g1, d1), (r2, w2, g2, d2) = cpu, cuda
    assert r2 == pytest.approx(r1, rel=rtol)
    for a, b in zip(w1, w2):
        if isinstance(a, np.ndarray):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-13)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-13)
    for key in d1:
        np.testing.assert_allclose(d2[key], d1[key], rtol=rtol, atol=1e-13)


EMULATED = ["jacobi2d", "heat3d_vec", "lorenz96_sweep", "softmax_rows", "gesummv_vec", "ema",
            "two_layers", "limited_flux", "wave_phase", "price_path"]


@pytest.mark.parametrize("name", EMULATED)
def test_emulated_cuda_matches_the_c_path(name, monkeypatch):
    case = EXTRA[name] if name in EXTRA else BY_NAME[name]
    args = case.make_args(rng_for(name, salt="cuda"))
    monkeypatch.setattr(options, "device", "cpu")
    cpu = _results(case, args)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    _assert_same(cpu, _results(case, args), 1e-4 if case.float32 else 1e-11)


@kernel
def halve_until_small(x: float64[N], tol: float) -> float:
    for i in range(N):
        while abs(x[i]) > tol:
            x[i] = 0.5 * x[i] * (1.0 + 0.01 * np.tanh(x[i]))
    return np.sum(x * x * x)


def test_emulated_while_loops_grow_the_tape(emulated, monkeypatch):
    x = np.array([1e60, -3e50, 2.0])             # hundreds of halvings: the tape must grow
    g = grad(halve_until_small, wrt="x")(x, 1e-3)
    monkeypatch.setattr(options, "device", "cpu")
    want = grad(halve_until_small, wrt="x")(x, 1e-3)
    np.testing.assert_allclose(g, want, rtol=1e-12)


@kernel
def relax(u: float64[N], f: float64[N], tol: float) -> float:
    r = np.zeros_like(u)
    r[1:-1] = f[1:-1] - (2.0 * u[1:-1] - u[:-2] - u[2:])
    while np.max(np.abs(r)) > tol:
        u[1:-1] += 0.4 * r[1:-1]
        r[1:-1] = f[1:-1] - (2.0 * u[1:-1] - u[:-2] - u[2:])
    return np.sum(u * u)


def test_emulated_while_loop_around_kernels(emulated, monkeypatch):
    """The host runs the loop (condition read back from the device), tapes its trip
    count, and the reverse sweep pops it back."""
    f = 0.1 * rng_for("relax").random(9)
    value, g = adjoint.value_and_grad(relax, wrt=("u", "f"))(np.zeros(9), f, 1e-6)
    src = relax.specializations[0].backward(("u", "f"), {"__return"}).source
    assert "SC_OK(sc_host_push(" in src and "SC_OK(sc_host_pop(" in src
    monkeypatch.setattr(options, "device", "cpu")
    want_value, want = adjoint.value_and_grad(relax, wrt=("u", "f"))(np.zeros(9), f, 1e-6)
    assert value == pytest.approx(want_value, rel=1e-12)
    for a, b in zip(g, want):
        np.testing.assert_allclose(a, b, rtol=1e-11)


def test_a_differentiated_call_keeps_its_arrays_on_the_device(emulated, monkeypatch):
    from adjoint.runtime.cuda import CudaModule, DeviceArray
    seen = []
    original = CudaModule.call

    def call(self, entry, syms, buffers, tape=None, tape_position=0):
        seen.append(all(isinstance(b, DeviceArray) for b in buffers)
                    and (tape is None or isinstance(tape, DeviceArray)))
        return original(self, entry, syms, buffers, tape, tape_position)
    monkeypatch.setattr(CudaModule, "call", call)
    case = BY_NAME["jacobi2d_slices"]
    args = case.make_args(rng_for("resident"))
    outs, pullback = vjp(case.kernel, *args)
    pullback({"return": 1.0})
    pullback({"return": 2.0})                    # again, from the same device buffers
    assert seen and all(seen)


def test_explain_reports_what_runs_in_one_gpu_thread(emulated):
    case = BY_NAME["lorenz96_sweep"]
    args = case.make_args(rng_for("explain"))
    grad(case.kernel, wrt="x")(*args)
    text = case.kernel.explain()
    assert "GPU launch plan of the forward:" in text
    assert "loop over t -> sc_k0, one GPU thread" in text
    assert "block sums into __sum1" in text


def test_an_unknown_entry_is_a_device_error(emulated):
    case = BY_NAME["jacobi1d"]
    args = case.make_args(rng_for("entry"))
    case.kernel(*copy_args(args))
    spec = case.kernel.specialize(args)
    from adjoint.runtime.arguments import bind
    syms, values = bind(spec.sdfg, copy_args(args))
    with pytest.raises(DeviceError, match="no entry point 7"):
        spec.forward.module.call(7, syms, spec.buffers(values, syms))


# ---- on a GPU --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_modules():
    """Every module the GPU tests use, built in parallel first (nvcc takes seconds each)."""
    from adjoint.corpus.cuda_warmup import build_all
    named = [("adjoint.corpus.loops", c) for c in corpus.CASES] + \
        [("adjoint.corpus.arrays", c) for c in corpus_arrays.CASES]
    named += [("test_cuda", c) for c in EXTRA.values()]
    build_all([(module, case.name, device, None, True) for module, case in named
               for device in ("cuda", "cpu")])


@gpu
@needs_gpu
@pytest.mark.parametrize("case", CASES + list(EXTRA.values()), ids=lambda c: c.name)
def test_gpu_matches_the_c_path(case, monkeypatch, gpu_modules):
    args = case.make_args(rng_for(case.name, salt="gpu"))
    monkeypatch.setattr(options, "device", "cpu")
    cpu = _results(case, args)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", False)
    _assert_same(cpu, _results(case, args), 1e-4 if case.float32 else 1e-10)


@gpu
@needs_gpu
@pytest.mark.parametrize("name,n", [("jacobi2d_slices", 300), ("heat3d", 40),
                                    ("softmax_rows", 200), ("jacobi2d", 260)])
def test_gpu_at_sizes_with_many_blocks(name, n, monkeypatch, gpu_modules):
    """Large enough for many blocks per launch: atomics under contention, grid-stride
    loops, block sums of many partials, tape positions of many threads."""
    case = BY_NAME[name]
    args = case.make_args(rng_for(name, salt="big"), n=n)
    monkeypatch.setattr(options, "device", "cpu")
    cpu = _results(case, args)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", False)
    _assert_same(cpu, _results(case, args), 1e-9)


@gpu
@needs_gpu
def test_a_failed_allocation_does_not_fail_the_next_launch(monkeypatch, gpu_modules):
    """The runtime keeps a failed cudaMalloc as its last error until read; the launch
    checks read it, so it must be cleared when the allocation is reported."""
    case = BY_NAME["jacobi2d"]
    args = case.make_args(rng_for(case.name, salt="oom"))
    monkeypatch.setattr(options, "device", "cpu")
    cpu = _results(case, args)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", False)
    with pytest.raises(DeviceError, match="out of memory"):
        case.kernel.specialize(args).forward.module.empty((2**50,))
    _assert_same(cpu, _results(case, args), 1e-10)
