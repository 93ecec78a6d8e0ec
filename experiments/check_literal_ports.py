"""Check the literal (faithful, loop-for-loop) JAX ports of adjoint/corpus/jax_ports.py.

    python experiments/check_literal_ports.py                  # every port in LITERAL
    python experiments/check_literal_ports.py --kernels lu,adi

For every kernel with a literal port, at the corpus factory's default (small) size
(``case.make_args(rng)``), through the same ahead-of-time compilation as the benchmark
(experiments/bench_jax.py: integer arguments static, gradient w.r.t. the case's ``wrt``):

  value  the literal port's loss vs the original's (``k.py_func`` on copies);
  ∇      ``jax.grad`` of the literal port vs ``jax.grad`` of the idiomatic port (PORTS);
  fd     the literal gradient along a random direction vs a central finite difference of
         the original (float64 kernels only; a cross-check independent of both ports).

Errors are relative to the largest entry (bench_timing.rel_error), the worst argument.
Prints one line per kernel and a summary; lists loop-heavy kernels (kind "loops" or
"mixed" in adjoint/corpus/sizes.py) without a literal port. Exit status 1 when a check fails or
such a kernel is missing.
"""
import argparse
import inspect
import pathlib
import sys
import time
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]   # the checkout: adjoint (its corpus too) and experiments

from experiments import bench_jax  # noqa: E402
from adjoint.corpus.sizes import TABLE, CASES  # noqa: E402
from experiments.bench_timing import copies, max_rel_error, rel_error  # noqa: E402

TOL = {np.float64: {"value": 1e-9, "grad": 1e-9, "fd": 1e-5},
       np.float32: {"value": 1e-5, "grad": 1e-3, "fd": None}}


def precision(args):
    return np.float32 if any(isinstance(a, np.ndarray) and a.dtype == np.float32
                             for a in args) else np.float64


def fd_error(case, names, args, grads, rng):
    """Directional derivative of the original along a random direction of the wrt
    arguments (central difference) vs the same contraction of the literal gradient."""
    k = [names.index(w) for w in case.wrt]
    direction = [rng.standard_normal(np.shape(args[i])) for i in k]
    scale = max(1.0, max(float(np.max(np.abs(args[i]))) for i in k))
    h = 1e-6 * scale

    def f(step):
        a = list(copies(args))
        for i, d in zip(k, direction):
            a[i] = a[i] + step * d if isinstance(a[i], np.ndarray) else float(a[i] + step * d)
        return float(case.kernel.py_func(*a))
    want = (f(h) - f(-h)) / (2 * h)
    got = sum(float(np.sum(g * d)) for g, d in zip(grads, direction))
    return abs(got - want) / max(abs(want), 1e-300)


def check(J, name):
    case = CASES[name]
    names = list(inspect.signature(case.kernel.py_func).parameters)
    rng = np.random.default_rng(zlib.crc32(f"literal/{name}".encode()))
    args = case.make_args(rng)
    tol = TOL[precision(args)]
    want = case.kernel.py_func(*copies(args))
    lit = J.compile(name, names, args, case.wrt, forward=True, literal=True)
    value = rel_error(J.call(lit["fwd"], lit["dyn"]), want)
    g_lit = J.as_numpy(J.call(lit["grad"], lit["dyn"]))
    idio = J.compile(name, names, args, case.wrt, forward=False)
    g_idio = J.as_numpy(J.call(idio["grad"], idio["dyn"]))
    grad = max_rel_error(zip(g_lit, g_idio))
    fd = fd_error(case, names, args, g_lit, rng) if tol["fd"] else None
    ok = value <= tol["value"] and grad <= tol["grad"] and (fd is None or fd <= tol["fd"])
    return {"value": value, "grad": grad, "fd": fd, "ok": ok,
            "float32": precision(args) is np.float32}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="", help="comma-separated (default: every literal port)")
    opts = ap.parse_args()
    J, why = bench_jax.load()
    if J is None:
        sys.exit(f"cannot check: {why}")
    names = opts.kernels.split(",") if opts.kernels else \
        [b.name for b in TABLE if b.name in J.ports.LITERAL]
    t0, results, failed = time.perf_counter(), {}, []
    print(f"{'kernel':<20s} {'value':>9s} {'∇ vs idiomatic':>15s} {'fd':>9s}  result")
    for name in names:
        t1 = time.perf_counter()
        try:
            r = results[name] = check(J, name)
        except Exception as exc:              # report, go on
            failed.append(name)
            print(f"{name:<20s} ERROR {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            continue
        if not r["ok"]:
            failed.append(name)
        fd = "-" if r["fd"] is None else f"{r['fd']:.1e}"
        print(f"{name:<20s} {r['value']:9.1e} {r['grad']:15.1e} {fd:>9s}  "
              f"{'ok' if r['ok'] else 'FAIL'}{' (float32)' if r['float32'] else ''} "
              f"[{time.perf_counter() - t1:.1f} s]", flush=True)
    missing = [b.name for b in TABLE if b.kind in ("loops", "mixed")
               and b.name not in J.ports.LITERAL] if not opts.kernels else []
    f64 = [r for r in results.values() if not r["float32"]]
    print(f"\n{len(results)} literal ports checked in {time.perf_counter() - t0:.0f} s, "
          f"{len(names) - len(failed)} ok, failed: {', '.join(failed) or 'none'}")
    if f64:
        print(f"float64 ports ({len(f64)}): max value error "
              f"{max(r['value'] for r in f64):.1e}, max ∇ error vs idiomatic "
              f"{max(r['grad'] for r in f64):.1e}, max fd error "
              f"{max(r['fd'] for r in f64):.1e}")
    if not opts.kernels:
        print(f"loop-heavy kernels without a literal port: {', '.join(missing) or 'none'}")
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
