"""seidel-2d benchmark: engine forward and adjoints vs hand-written C, plain Python and JAX.

    python experiments/seidel2d.py --sizes S,M,L,paper --repeats 5

Every timing is the best of --repeats calls after one warm-up call, with fresh
input copies made outside the timed region.  The engine runs twice: by default (values as
Python computes them: the forward is bit-identical to the plain Python, like the
Python-order C) and with ``reassociate=True`` (sums regrouped, like the fast C).  Engine gradients are checked against
the hand-written C adjoints (allclose) before anything is timed.  JAX's gradients are
measured at S and M; at L and paper (T=100, N=400: about a quarter of an hour per call)
they are **extrapolated**: measured at the same T and N/8, N/4, N/2 (best of up to three
calls within a second; one call where it takes longer), fitted as
t = c N^p (log-log least squares) and evaluated at N, labelled (e). An estimate, not a
bound: each update copies the whole array, so the local exponent grows as the array
leaves the caches (at paper size 3.3 from N/8 to N/4, 4.7 from N/4 to N/2).  Writes
experiments/results/seidel2d.{json,md}.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from experiments.bench_timing import ONE_CORE, run_on_one_core  # noqa: E402
from experiments.reference import loader as C  # noqa: E402
from experiments.reference.plain import plain_model, plain_seidel2d  # noqa: E402

SIZES = {"S": (8, 50), "M": (15, 100), "L": (40, 200), "paper": (100, 400)}  # (TSTEPS, N)
PYTHON_SIZES, JAX_SIZES, JAX_EXTRAPOLATED = {"S"}, {"S", "M"}, {"L", "paper"}
RESULTS = ROOT / "experiments" / "results"


def best(fn, make_args, repeats):
    """Best wall time of fn(*make_args()) over repeats, after one warm-up call."""
    fn(*make_args())
    times = []
    for _ in range(repeats):
        args = make_args()
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times)


def first_call(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def load_engine():
    try:
        import adjoint
        from simcore.models.seidel import seidel2d
        adjoint.grad, seidel2d.py_func  # noqa: B018  (the API this script needs)
        adjoint.configure(cache_dir=tempfile.mkdtemp(prefix="seidel2d_cache_"))  # cold first calls
        return adjoint, seidel2d
    except Exception as e:  # the engine is optional while it is being built
        print(f"engine unavailable ({type(e).__name__}: {e}); timing the references only")
        return None, None


def load_jax():
    try:
        import jax
        from experiments import jax_seidel2d
        return jax, jax_seidel2d
    except ImportError as e:
        print(f"JAX unavailable ({e}); skipping JAX")
        return None, None


def close(a, b):
    return bool(np.allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12))


def bench_size(name, T, n, repeats, adjoint, kern, jax, J):
    model = plain_model()
    A0, w = model.polybench_init(n), model.polybench_weights()
    copies = lambda: (A0.copy(), w, T)  # noqa: E731
    r = {"size": name, "TSTEPS": T, "N": n, "checks": {}}

    # hand-written C: reference values, then timings
    A_ref = A0.copy()
    loss_ref = C.fwd(A_ref, w, T)
    gA_ref = C.grad_A(A0.copy(), w, T)
    gw_ref, _ = C.grad_w(A0.copy(), w, T)
    A_pyorder = A0.copy()
    C.fwd(A_pyorder, w, T, order="python")  # bit-identical to the plain Python
    r["c_fwd"] = best(C.fwd, copies, repeats)
    r["c_fwd_python_order"] = best(lambda A, w, T: C.fwd(A, w, T, order="python"), copies, repeats)
    r["c_grad_A"] = best(C.grad_A, copies, repeats)
    r["c_grad_A_reverse_only"] = best(lambda A, w, T: C.grad_A(A, w, T, run_forward=False), copies, repeats)
    r["c_grad_w"] = best(C.grad_w, copies, repeats)

    if name in PYTHON_SIZES:
        py = plain_seidel2d()
        A = A0.copy()
        r["checks"]["python_fwd_vs_c"] = close(py(A, w, T), loss_ref) and bool(np.array_equal(A, A_pyorder))
        r["python_fwd"] = best(py, copies, min(repeats, 3))

    if adjoint is not None:
        grad_A, grad_w = adjoint.grad(kern, wrt="A"), adjoint.grad(kern, wrt="w")
        A = A0.copy()
        loss, r["engine_first_fwd"] = first_call(kern, A, w, T)
        gA, r["engine_first_grad_A"] = first_call(grad_A, A0.copy(), w, T)
        gw, r["engine_first_grad_w"] = first_call(grad_w, A0.copy(), w, T)
        r["checks"].update(engine_fwd=close(loss, loss_ref) and close(A, A_ref),
                           engine_grad_A=close(gA, gA_ref), engine_grad_w=close(gw, gw_ref))
        r["engine_fwd_bitwise_python"] = bool(np.array_equal(A, A_pyorder))
        r["engine_fwd"] = best(kern, copies, repeats)
        r["engine_grad_A"] = best(grad_A, copies, repeats)
        r["engine_grad_w"] = best(grad_w, copies, repeats)
        # the same with adjoint.configure(reassociate=True): sums regrouped like -ffast-math,
        # the speed reference's own order (a new specialisation; its first call compiles)
        adjoint.configure(reassociate=True)
        try:
            A = A0.copy()
            loss = kern(A, w, T)
            r["checks"].update(
                engine_reassociated_fwd=close(loss, loss_ref) and close(A, A_ref),
                engine_reassociated_grad_A=close(grad_A(A0.copy(), w, T), gA_ref),
                engine_reassociated_grad_w=close(grad_w(A0.copy(), w, T), gw_ref))
            for what, fn in (("fwd", kern), ("grad_A", grad_A), ("grad_w", grad_w)):
                r[f"engine_reassociated_{what}"] = best(fn, copies, repeats)
        finally:
            adjoint.configure(reassociate=False)

    if J is not None and name in JAX_SIZES:
        jA, jw = jax.numpy.asarray(A0), jax.numpy.asarray(w)
        t0 = time.perf_counter()
        fns = J.compiled(T, jA, jw)
        r["jax_compile"] = time.perf_counter() - t0  # all three (fwd, grad A, grad w)
        r["checks"].update(jax_grad_A=close(fns["grad_A"](jA, jw), gA_ref),
                           jax_grad_w=close(fns["grad_w"](jA, jw), gw_ref))
        for key, f in fns.items():
            r[f"jax_{key}"] = best(lambda: f(jA, jw).block_until_ready(), tuple, repeats)
    elif J is not None and name in JAX_EXTRAPOLATED:
        r["jax_extrapolated"] = extrapolate_jax(T, n, model, jax, J)
        r.update({f"jax_{key}": e["predicted"] for key, e in r["jax_extrapolated"].items()})
    return r


def extrapolate_jax(T, n, model, jax, J):
    """JAX's gradient times at (T, n) from calls at (T, n/8), (T, n/4), (T, n/2):
    {"grad_A": {"points": [[n', seconds], ...], "exponent": p, "predicted": s}, ...}."""
    points = {"grad_A": [], "grad_w": []}
    for m in (n // 8, n // 4, n // 2):
        jA = jax.numpy.asarray(model.polybench_init(m))
        jw = jax.numpy.asarray(model.polybench_weights())
        fns = J.compiled(T, jA, jw)
        for key in points:
            times = []
            while not times or (len(times) < 3 and sum(times) < 1.0):   # a minute at n/2
                t0 = time.perf_counter()
                fns[key](jA, jw).block_until_ready()
                times.append(time.perf_counter() - t0)
            points[key].append([m, min(times)])
        print(f"  JAX at T={T} N={m}: " + ", ".join(f"{k} {v[-1][1]:.3g} s"
                                                   for k, v in points.items()), flush=True)
    out = {}
    for key, pts in points.items():
        p, c = np.polyfit(np.log([m for m, _ in pts]), np.log([t for _, t in pts]), 1)
        out[key] = {"points": pts, "exponent": float(p), "predicted": float(np.exp(c) * n ** p)}
    return out


def ratios(r):
    out = {}
    for what in ("fwd", "grad_A", "grad_w"):
        if f"engine_{what}" in r:
            out[f"engine/C {what}"] = r[f"engine_{what}"] / r[f"c_{what}"]
        if f"jax_{what}" in r:
            out[f"JAX/C {what}"] = r[f"jax_{what}"] / r[f"c_{what}"]
            if f"engine_{what}" in r:
                out[f"JAX/engine {what}"] = r[f"jax_{what}"] / r[f"engine_{what}"]
    if "engine_fwd" in r:
        out["engine/C Python order fwd"] = r["engine_fwd"] / r["c_fwd_python_order"]
    for what in ("fwd", "grad_A", "grad_w"):
        if f"engine_reassociated_{what}" in r:
            out[f"engine reassoc./C {what}"] = r[f"engine_reassociated_{what}"] / r[f"c_{what}"]
    for who in ("engine", "c", "jax"):
        for g in ("grad_A", "grad_w"):
            if f"{who}_{g}" in r and f"{who}_fwd" in r:
                out[f"{who} {g}/fwd"] = r[f"{who}_{g}"] / r[f"{who}_fwd"]
    if "python_fwd" in r:
        out["python/C fwd"] = r["python_fwd"] / r["c_fwd"]
    return out


def machine(jax):
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "jax": jax.__version__ if jax else None, "gcc": gcc,
            "c_flags": " ".join(C.CFLAGS),
            "load_average_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()), "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "pinned_to_core": os.environ.get(ONE_CORE)}


COLUMNS = [("size", "size"), ("TSTEPS", "T"), ("N", "N"),
           ("engine_first_fwd", "engine 1st fwd"), ("engine_first_grad_A", "engine 1st ∇A"),
           ("engine_first_grad_w", "engine 1st ∇w"), ("engine_fwd", "engine fwd"), ("engine_grad_A", "engine ∇A"), ("engine_grad_w", "engine ∇w"),
           ("engine_reassociated_fwd", "engine reassoc. fwd"),
           ("engine_reassociated_grad_A", "engine reassoc. ∇A"),
           ("engine_reassociated_grad_w", "engine reassoc. ∇w"),
           ("c_fwd", "C fwd"), ("c_fwd_python_order", "C fwd Python order"), ("c_grad_A", "C ∇A"), ("c_grad_A_reverse_only", "C ∇A rev only"),
           ("c_grad_w", "C ∇w"), ("python_fwd", "Python fwd"),
           ("jax_fwd", "JAX fwd"), ("jax_grad_A", "JAX ∇A"), ("jax_grad_w", "JAX ∇w"), ("jax_compile", "JAX compile")]


def markdown(rows, info):
    def fmt(v):
        if not isinstance(v, float):
            return "-" if v is None else str(v)
        return f"{v * 1e3:.0f}" if v >= 0.1 else f"{v * 1e3:.3g}"

    def cell(r, k):         # (e): extrapolated, not measured
        e = k.startswith("jax_") and k[4:] in r.get("jax_extrapolated", {})
        return fmt(r.get(k)) + (" (e)" if e else "")

    def ratio(r, k):
        e = "JAX" in k and any(g in k for g in r.get("jax_extrapolated", {}))
        return f"{r['ratios'][k]:.3g}" + (" (e)" if e else "") if k in r["ratios"] else "-"

    keys = [k for k, _ in COLUMNS if any(k in r for r in rows)]
    head = [h for k, h in COLUMNS if k in keys]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(r, k) for k in keys) + " |" for r in rows]
    rk = list(dict.fromkeys(k for r in rows for k in r["ratios"]))
    lines += ["", "| size | " + " | ".join(rk) + " |", "|" + "---|" * (len(rk) + 1)]
    lines += [f"| {r['size']} | " + " | ".join(ratio(r, k) for k in rk) + " |" for r in rows]
    fits = [f"- {r['size']} (T={r['TSTEPS']}, N={r['N']}), JAX {g}: measured "
            + ", ".join(f"N={m}: {t:.3g} s" for m, t in e["points"])
            + f"; fit t ~ N^{e['exponent']:.2f}, predicted {e['predicted']:.3g} s"
            for r in rows for g, e in r.get("jax_extrapolated", {}).items()]
    if fits:
        lines += ["", "JAX extrapolations (same T; see the docstring):", *fits]
    checks = "; ".join(f"{r['size']}: " + ", ".join(f"{k} {'ok' if v else 'FAIL'}" for k, v in r["checks"].items())
                       for r in rows if r["checks"])
    bitwise = ", ".join(f"{r['size']} {'yes' if r['engine_fwd_bitwise_python'] else 'no'}"
                        for r in rows if "engine_fwd_bitwise_python" in r)
    return "\n".join(["# seidel-2d benchmark", "",
                      *[f"- {k}: {v}" for k, v in info.items()], "",
                      "Times in milliseconds, best of repeats after one warm-up call. "
                      "C: hand-written, the term on the just-updated A[i, j-1] summed last (the speed "
                      "reference, used in all C ratios); 'C fwd Python order' sums left to right as the "
                      "Python source does (bit-identical to it, no FMA contraction). "
                      "∇A: gradient of sum(A_final) w.r.t. A_initial; ∇w: w.r.t. the 3x3 weights. "
                      "C ∇A runs forward + reverse (what value_and_grad costs); 'rev only' skips the forward. "
                      "C ∇w tapes the overwritten element per update (tape allocated per call). "
                      "JAX compile covers forward + both gradients. "
                      "'engine 1st' is the first call at that size; the engine's cache starts empty, so at the "
                      "first size it includes generating and compiling the C (one build serves all sizes). "
                      "'engine': the default, values as Python computes them (bit-identical to it, so its "
                      "like-for-like forward reference is 'C fwd Python order'); 'engine reassoc.': "
                      "adjoint.configure(reassociate=True), sums regrouped as the speed reference does.", "", *lines, "",
                      f"Correctness (allclose vs hand-written C): {checks}", "",
                      f"Engine forward bit-identical to the plain Python: {bitwise or '-'}", ""])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="S,M", help="comma-separated, from " + ",".join(SIZES))
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    run_on_one_core()                   # JAX would spread over every core (bench_timing)
    adjoint, kern = load_engine()
    jax, J = load_jax()
    info = machine(jax)
    info["repeats"], info["engine"] = args.repeats, adjoint is not None
    rows = []
    for name in args.sizes.split(","):
        T, n = SIZES[name]
        r = bench_size(name, T, n, args.repeats, adjoint, kern, jax, J)
        r["ratios"] = ratios(r)
        rows.append(r)
        print(f"{name}: " + ", ".join(f"{k}={v * 1e3:.3g}ms" for k, v in r.items() if isinstance(v, float))
              + f"  checks={r['checks']}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "seidel2d.json").write_text(json.dumps({"machine": info, "results": rows}, indent=1))
    md = markdown(rows, info)
    (RESULTS / "seidel2d.md").write_text(md)
    print(md)
    return 0 if all(all(r["checks"].values()) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
