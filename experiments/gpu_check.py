"""Everything GPU-side in one run (under 5 minutes on one H200):

1. every corpus kernel's forward, gradient and tangent on the GPU against the C path
   (adjoint/corpus/loops.py, adjoint/corpus/arrays.py and the kernels below), then a few at sizes
   that need many blocks per launch (atomics under contention, block sums of many
   partials, tape positions of many threads); a failed allocation must be a DeviceError;
2. jacobi-2d, heat-3d and a Lorenz-96 ensemble, forward and gradient, at sizes that fill
   the GPU: time, and the memory bandwidth achieved under a minimal-traffic model (every
   array a loop touches moved once; tape and adjoints counted) against the device's peak
   (memory clock x bus width) and against a device-to-device copy.

    python experiments/gpu_check.py [--out DIR] [--skip-timing]

All modules are compiled first, in parallel (adjoint/corpus/cuda_warmup.py), into the compile
cache; the checks and timings then load them. Writes gpu_check.json into DIR (default
experiments/results); exits 1 if a check fails.
"""
import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT)]   # the checkout: adjoint (its corpus too) and experiments

import adjoint                                          # noqa: E402
from adjoint import float64, grad, jvp, kernel, symbol, value_and_grad  # noqa: E402
from adjoint.runtime.arguments import bind               # noqa: E402
from adjoint.corpus import loops as corpus              # noqa: E402
from adjoint.corpus import arrays as corpus_arrays      # noqa: E402
from adjoint.corpus.loops import CorpusCase            # noqa: E402
from adjoint.corpus import copy_args, rng_for          # noqa: E402

E, N, M, K = symbol("E"), symbol("N"), symbol("M"), symbol("K")
START = time.perf_counter()


# ---- kernels of this check (importable by the build processes) ---------------------------
@kernel
def lorenz96_ensemble(x: float64[E, N], k1: float64[E, N], k2: float64[E, N],
                      k3: float64[E, N], k4: float64[E, N], xs: float64[E, N], F: float,
                      dt: float, T: int) -> float:
    """models/lorenz96.py's RK4 steps for E independent members (rows) at once."""
    for t in range(T):
        for e in range(E):
            for i in range(N):
                k1[e, i] = ((x[e, (i + 1) % N] - x[e, (i + N - 2) % N]) * x[e, (i + N - 1) % N]
                            - x[e, i] + F)
        for e in range(E):
            for i in range(N):
                xs[e, i] = x[e, i] + 0.5 * dt * k1[e, i]
        for e in range(E):
            for i in range(N):
                k2[e, i] = ((xs[e, (i + 1) % N] - xs[e, (i + N - 2) % N])
                            * xs[e, (i + N - 1) % N] - xs[e, i] + F)
        for e in range(E):
            for i in range(N):
                xs[e, i] = x[e, i] + 0.5 * dt * k2[e, i]
        for e in range(E):
            for i in range(N):
                k3[e, i] = ((xs[e, (i + 1) % N] - xs[e, (i + N - 2) % N])
                            * xs[e, (i + N - 1) % N] - xs[e, i] + F)
        for e in range(E):
            for i in range(N):
                xs[e, i] = x[e, i] + dt * k3[e, i]
        for e in range(E):
            for i in range(N):
                k4[e, i] = ((xs[e, (i + 1) % N] - xs[e, (i + N - 2) % N])
                            * xs[e, (i + N - 1) % N] - xs[e, i] + F)
        for e in range(E):
            for i in range(N):
                x[e, i] = x[e, i] + dt / 6.0 * (k1[e, i] + 2.0 * k2[e, i] + 2.0 * k3[e, i]
                                                + k4[e, i])
    return 0.5 * np.sum(x * x)


def make_lorenz96_ensemble(rng, n=6, T=3, members=None):
    """``members`` rows of ``n`` sites (default n // 2 members)."""
    x = 8.0 + rng.standard_normal((members or max(n // 2, 2), max(n, 4)))
    return (x, *[np.zeros_like(x) for _ in range(5)], 8.0, 0.05, T)


@kernel
def two_layers(x: float64[N, K], W1: float64[K, M], b: float64[M], W2: float64[M, K]) -> float:
    h = np.tanh(x @ W1 + b)
    return np.sum((h @ W2) ** 2)


def make_two_layers(rng, n=5):
    return (rng.standard_normal((n, 3)), rng.standard_normal((3, n + 1)),
            rng.standard_normal(n + 1), rng.standard_normal((n + 1, 3)))


CASES = [CorpusCase("lorenz96_ensemble", lorenz96_ensemble, make_lorenz96_ensemble,
                    ("x", "F", "dt"), ("x",)),
         CorpusCase("two_layers", two_layers, make_two_layers, ("x", "W1", "b", "W2"))]
# the modules the warm-up's processes import the cases from
SOURCES = [("adjoint.corpus.loops", corpus.CASES),
           ("adjoint.corpus.arrays", corpus_arrays.CASES), ("gpu_check", CASES)]
ALL = [(module, case) for module, cases in SOURCES for case in cases]
# a few at sizes with many blocks per launch: (case name, n)
LARGE = [("jacobi2d", 260), ("jacobi2d_slices", 300), ("heat3d", 40), ("softmax_rows", 200),
         ("lorenz96_sweep", 2000), ("lorenz96_ensemble", 128)]
EMULATE = False     # --emulate: the CPU emulation of the CUDA code, tiny sizes (no GPU)


def log(*parts):
    print(f"[{time.perf_counter() - START:6.1f} s]", *parts, flush=True)


# ---- 1. correctness against the C path ---------------------------------------------------
def results(case, args):
    work = copy_args(args)
    ret = case.kernel(*work)
    g = grad(case.kernel, wrt=case.wrt)(*args)
    names = list(case.kernel._declared)
    tangents = {n: (np.full(np.shape(a), 0.5) if isinstance(a, np.ndarray) else 0.5)
                for n, a in zip(names, args) if n in case.wrt}
    _, dots = jvp(case.kernel, args, tangents)
    return ret, work, g, dots


def mismatch(cpu, gpu, rtol):
    """The largest relative difference of return value, written arrays, gradients and
    tangents (relative to each quantity's largest entry)."""
    def rel(a, b):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        scale = max(float(np.max(np.abs(a))) if a.size else 0.0, 1e-300)
        return float(np.max(np.abs(a - b))) / scale if a.size else 0.0
    (r1, w1, g1, d1), (r2, w2, g2, d2) = cpu, gpu
    errors = [rel(r1, r2)]
    errors += [rel(a, b) for a, b in zip(w1, w2) if isinstance(a, np.ndarray)]
    errors += [rel(a, b) for a, b in zip(g1, g2)]
    errors += [rel(d1[k], d2[k]) for k in d1]
    return max(errors)


def use_gpu():
    adjoint.configure(device="cuda", cuda_emulation=EMULATE)


def check(case, args, rtol):
    adjoint.configure(device="cpu")
    cpu = results(case, args)
    use_gpu()
    gpu = results(case, args)
    err = mismatch(cpu, gpu, rtol)
    return err, err <= rtol


def correctness(report):
    failures = []
    for module, case in ALL:
        rtol = 1e-4 if case.float32 else 1e-10
        try:
            err, ok = check(case, case.make_args(rng_for(case.name, salt="gpu")), rtol)
        except Exception:
            err, ok = float("nan"), False
            traceback.print_exc()
        report["corpus"][case.name] = {"max_rel_diff": err, "ok": ok}
        log(f"{case.name:22s} forward, gradient, tangent vs C: max rel diff {err:.1e}"
            + ("" if ok else "   FAILED"))
        if not ok:
            failures.append(case.name)
    by_name = {case.name: case for _, case in ALL}
    for name, n in LARGE:
        case = by_name[name]
        try:
            err, ok = check(case, case.make_args(rng_for(name, salt="large"), n=n), 1e-9)
        except Exception:
            err, ok = float("nan"), False
            traceback.print_exc()
        report["large"][f"{name}(n={n})"] = {"max_rel_diff": err, "ok": ok}
        log(f"{name}(n={n}) on many blocks: max rel diff {err:.1e}" + ("" if ok else " FAILED"))
        if not ok:
            failures.append(f"{name}(n={n})")
    use_gpu()
    if not EMULATE:
        try:
            args = corpus.make_jacobi2d(rng_for("oom"))
            corpus.jacobi2d.specialize(args).forward.module.empty((2**50,))
            failures.append("allocating 8 PiB did not fail")
        except adjoint.DeviceError as exc:
            log(f"an impossible allocation is a DeviceError: {str(exc)[:100]}")
    return failures


# ---- 2. timings ----------------------------------------------------------------------------
def best(fn, repeats=3):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def copy_bandwidth(module, nbytes=2**31):
    """A device-to-device copy between buffers allocated beforehand; a one-element
    download after it waits for it (the copy itself returns before it is done)."""
    a, b = module.zeros((nbytes // 8,), np.float64), module.zeros((nbytes // 8,), np.float64)
    fence = module.zeros((1,), np.float64)

    def copy():
        b.copy_from(a)
        fence.get()
    copy()
    t = best(copy, repeats=5)
    return 2 * nbytes / t                       # read + write


def time_kernel(name, k, args, wrt, bytes_forward, bytes_gradient, info):
    use_gpu()
    spec = k.specialize(args)
    syms, values = bind(spec.sdfg, copy_args(args))
    module = spec.forward.module
    buffers = [module.array(b) for b in spec.buffers(values, syms)]
    spec.run(module, 0, syms, buffers)          # warm: checks, first launches
    forward = best(lambda: spec.run(module, 0, syms, buffers))
    buffers.clear()                             # free the GPU memory for the gradient
    vg = value_and_grad(k, wrt)
    vg(*args)
    total = best(lambda: vg(*args), repeats=2)
    arrays = [a for a in args if isinstance(a, np.ndarray)]
    on_device = [module.array(a) for a in arrays]
    gradients = [d for d, n in zip(on_device, k._declared) if n in wrt]
    up = best(lambda: [module.array(a) for a in arrays], repeats=2)
    down = best(lambda: [d.get() for d in gradients], repeats=2)
    device = max(total - up - down, 1e-9)       # without the copies in and out
    plan = [line for line in k.explain().splitlines() if "one GPU thread" in line
            and "statement" not in line]
    peak, copy = info["peak_bandwidth"], info["copy_bandwidth"]
    row = {"forward_s": forward, "gradient_s": total, "gradient_device_s": device,
           "forward_GBps": bytes_forward / forward / 1e9,
           "gradient_GBps": bytes_gradient / device / 1e9,
           "forward_of_peak": bytes_forward / forward / peak,
           "gradient_of_peak": bytes_gradient / device / peak,
           "forward_of_copy": bytes_forward / forward / copy,
           "gradient_of_copy": bytes_gradient / device / copy,
           "loops_in_one_thread": plan}
    log(f"{name}: forward {forward * 1e3:8.2f} ms {row['forward_GBps']:7.0f} GB/s "
        f"({100 * row['forward_of_peak']:4.1f}% of peak, {100 * row['forward_of_copy']:4.1f}% "
        f"of copy) | gradient {device * 1e3:8.2f} ms on the device ({total * 1e3:.1f} ms with "
        f"copies) {row['gradient_GBps']:7.0f} GB/s ({100 * row['gradient_of_peak']:4.1f}% of "
        f"peak) | gradient/forward {device / forward:5.1f}")
    for line in plan:
        log("   runs in one GPU thread:", line.strip())
    return row


def timings(report):
    from adjoint.runtime.cuda import device_info
    info = device_info() if not EMULATE else {"name": "emulated", "compute_capability": (0, 0),
                                               "sms": 1, "peak_bandwidth": 1e10}
    use_gpu()
    module = corpus.jacobi2d.specialize(corpus.make_jacobi2d(rng_for("x"))).forward.module
    info["copy_bandwidth"] = copy_bandwidth(module, 2**31 if not EMULATE else 2**24)
    report["device"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in info.items()}
    log(f"{info['name']} (sm_{info['compute_capability'][0]}{info['compute_capability'][1]}, "
        f"{info['sms']} SMs): peak {info['peak_bandwidth'] / 1e12:.2f} TB/s (clock x bus), "
        f"device copy {info['copy_bandwidth'] / 1e12:.2f} TB/s")
    rng = np.random.default_rng(0)
    w = 8                                       # bytes per float64
    n, T = (8192, 50) if not EMULATE else (64, 2)
    A = rng.random((n, n))
    pts = (n - 2) ** 2
    # per step: two sweeps, each reads one array and writes the other; the reverse of a
    # sweep reads and clears one adjoint and adds into the other (read + write)
    report["timing"]["jacobi2d"] = time_kernel(
        f"jacobi-2d {n}^2 x {T} steps", corpus.jacobi2d, (A, A.copy(), T), ("A", "B"),
        T * 2 * 2 * pts * w, T * 2 * (2 + 4) * pts * w, info)
    n, T = (320, 20) if not EMULATE else (12, 2)
    A = rng.random((n, n, n))
    pts = (n - 2) ** 3
    report["timing"]["heat3d"] = time_kernel(
        f"heat-3d {n}^3 x {T} steps", corpus.heat3d, (A, A.copy(), T), ("A", "B"),
        T * 2 * 2 * pts * w, T * 2 * (2 + 4) * pts * w, info)
    members, n, T = (2**18, 40, 50) if not EMULATE else (64, 40, 2)
    args = make_lorenz96_ensemble(rng, n=n, T=T, members=members)
    pts = members * n
    # forward: 8 loops touching 2, 3, 2, 3, 2, 3, 2, 6 arrays = 23; the recording adds 4
    # tape writes; the reverse touches 56 (adjoints read and written, tape read)
    report["timing"]["lorenz96_ensemble"] = time_kernel(
        f"Lorenz-96 {members} members x {n} x {T} steps", lorenz96_ensemble, args,
        ("x", "F"), T * 23 * pts * w, T * (27 + 56) * pts * w, info)


# ---- main ----------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results"))
    parser.add_argument("--skip-timing", action="store_true")
    parser.add_argument("--emulate", action="store_true",
                        help="no GPU: the CUDA code emulated on the CPU, tiny timing sizes")
    opts = parser.parse_args()
    global EMULATE
    EMULATE = opts.emulate
    use_gpu()                                   # a clear error here without GPU or nvcc
    from adjoint.corpus.cuda_warmup import build_all
    gpu = "cuda-emulated" if EMULATE else "cuda"
    jobs = [(module, case.name, device, None, True) for module, case in ALL
            for device in (gpu, "cpu")]
    report = {"corpus": {}, "large": {}, "timing": {}, "failures": []}
    report["build_s"] = build_all(jobs, log=log)
    report["failures"] = correctness(report)
    if not opts.skip_timing:
        try:
            timings(report)
        except Exception:
            traceback.print_exc()
            report["failures"].append("timing")
    report["total_s"] = time.perf_counter() - START
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str))
    log(f"done; {len(report['failures'])} failure(s): {report['failures']}; "
        f"wrote {out / 'gpu_check.json'}")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
