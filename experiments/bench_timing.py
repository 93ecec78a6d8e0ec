"""Timing, checking and extrapolation helpers for the benchmark suite (bench.py)."""
import contextlib
import datetime
import math
import os
import platform
import subprocess
import sys
import time

import numpy as np


ONE_CORE = "SIMCORE_BENCH_ONE_CORE"
ALL_CORES = "SIMCORE_BENCH_ALL_CORES"       # the cores the script was started with


def run_on_one_core():
    """Re-execute this script pinned to one core, unless it already is.

    XLA's CPU runtime runs large element-wise loops on every core it may use, whatever
    --xla_cpu_multi_thread_eigen says (measured: CPU time 2x wall on this 2-core machine),
    and OpenBLAS starts its threads when NumPy is imported. Pinning the process before
    anything starts (the affinity survives exec and every thread inherits it) puts the
    engine, NumPy and JAX on the same single core."""
    if os.environ.get(ONE_CORE) or not hasattr(os, "sched_setaffinity"):
        return
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    os.environ.update({ONE_CORE: str(min(cores)), ALL_CORES: ",".join(map(str, sorted(cores))),
                       "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    os.execv(sys.executable, [sys.executable] + sys.argv)


@contextlib.contextmanager
def every_core():
    """For the block, the calling thread (so the compiler processes it starts) may run on
    every core the script was started with, as a user's compile does; the engine's
    threads and the timed calls stay on the one core."""
    cores = os.environ.get(ALL_CORES)
    if not cores or not hasattr(os, "sched_setaffinity"):
        yield
        return
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {int(c) for c in cores.split(",")})
    try:
        yield
    finally:
        os.sched_setaffinity(0, pinned)


def copies(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def timed(fn, *args):
    """(result, wall seconds, CPU seconds of this process) of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - t0, time.process_time() - c0


FAST_CALLS = 40     # bench_report.py's "How to read" says so


def best_of(fn, make_args, repeats, budget=3.0, first=None):
    """{"wall", "cpu", "cpu_min", "calls"}: the best wall time, the median and least CPU
    time (this process, all threads) of ``fn(*make_args())`` over up to ``repeats`` calls,
    fresh arguments made outside the timed region; stops early once the calls took
    ``budget`` seconds (one call at least); fast calls get up to FAST_CALLS x ``repeats``
    within 0.25 s (at S, where calls take 50-300 us, best of 20 moved kernel ratios by
    +-50 % run to run). ``first``: (wall, cpu) already measured for one such call.

    On a shared machine a call is preempted whenever other jobs run: wall time then
    counts their time too, CPU time does not. But JAX computes on a runtime thread whose
    CPU time the kernel accounts at scheduler ticks, so a single short call's CPU time
    can be far off: hence the median, a cross-check of the best wall time."""
    return best_of_each([fn], make_args, repeats, budget, [first])[0]


def best_of_each(fns, make_args, repeats, budget=3.0, firsts=None):
    """:func:`best_of` for each of ``fns``, their calls taking turns, so that each meets
    the machine as the others do: the ratio of two (a gradient's to its forward's) is
    then not the ratio of two quiet or busy spells."""
    samples = [([f[0]], [f[1]]) if f else ([], []) for f in (firsts or [None] * len(fns))]

    def more(walls):
        n, spent = len(walls), sum(walls)
        if n == 0:
            return True
        if n < repeats:                  # up to `repeats`, within the budget
            return spent < budget
        return n < FAST_CALLS * repeats and spent < 0.25  # fast calls: more, cheaply
    while True:
        due = [k for k, (walls, _) in enumerate(samples) if more(walls)]
        if not due:
            break
        for k in due:
            _, wall, cpu = timed(fns[k], *make_args())
            samples[k][0].append(wall)
            samples[k][1].append(cpu)
    return [{"wall": min(walls), "cpu": float(np.median(cpus)), "cpu_min": min(cpus),
             "calls": len(walls)} for walls, cpus in samples]


def rel_error(got, want):
    """max |got - want| / max |want| (0 when both are zero): arrays or scalars."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return math.inf
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    if not np.all(np.isfinite(got)) or not np.all(np.isfinite(want)):
        return math.inf
    return err / scale if scale > 0 else err


def max_rel_error(pairs):
    return max((rel_error(g, w) for g, w in pairs), default=0.0)


# ---------------------------------------------------------------------- extrapolation

def fit(points, linear):
    """Fit time(x) to measured (x, seconds) points: ``linear`` (time-step counts: a fixed
    cost plus a cost per step) t = a + b x, else a power law t = c x^p on the largest
    points. Returns (predict(x), description)."""
    xs = np.array([p[0] for p in points], float)
    ts = np.array([p[1] for p in points], float)
    if linear:
        b, a = np.polyfit(xs, ts, 1)
        if a < 0 or b <= 0:                          # noise: proportional through 0
            b, a = float(np.sum(ts * xs) / np.sum(xs * xs)), 0.0
        return (lambda x: a + b * x), f"linear fit t = {a * 1e3:.3g} ms + {b * 1e3:.3g} ms * x"
    p, logc = np.polyfit(np.log(xs), np.log(ts), 1)
    return (lambda x: math.exp(logc) * x ** p), f"power-law fit t ~ x^{p:.2f}"


def ladder(full, predicted_full, exponent, budget, minimum, points=3):
    """Values of the scaling parameter to measure at when the full size would take
    ``predicted_full`` > budget seconds: ``points`` values a factor 2 apart, the largest
    predicted to take at most budget / 4 (time ~ value^exponent), each >= minimum."""
    f = (budget / 4.0 / predicted_full) ** (1.0 / max(exponent, 0.5))
    top = max(int(full * min(f, 0.5)), minimum * 2 ** (points - 1))
    values = sorted({max(minimum, top // 2 ** k) for k in range(points)})
    return [v for v in values if v < full]


# ----------------------------------------------------------------------------- machine

def machine(jax=None, engine_options=None):
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
        except Exception:
            return "?"
    cpu = "?"
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        mem = next(ln.split(":", 1)[1].strip() for ln in open("/proc/meminfo")
                   if ln.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = "?"
    info = {"cpu": cpu, "cores": os.cpu_count(), "memory": mem,
            "os": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "jax": getattr(jax, "__version__", None),
            "cc": first_line([os.environ.get("CC", "cc"), "--version"]),
            "load_average_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}
    if engine_options is not None:
        info["engine_cflags"] = " ".join(engine_options.cflags)
        info["engine_threads"] = getattr(engine_options, "threads", None)
        info["engine_blas"] = getattr(engine_options, "blas", None)
    if hasattr(os, "sched_getaffinity"):
        info["cores_used"] = sorted(os.sched_getaffinity(0))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS", ONE_CORE, ALL_CORES):
        if os.environ.get(var):
            info[var] = os.environ[var]
    return info


def load_average():
    return round(os.getloadavg()[0], 2)
