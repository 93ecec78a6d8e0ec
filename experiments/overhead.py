"""Call overhead (issue #25, deliverable 1): what a call costs outside the generated code.

    python experiments/overhead.py                          # this tree
    python experiments/overhead.py --before DIR             # and the engine of DIR, in the
                                                            # same run (rounds alternate)
    python experiments/overhead.py --before DIR --out /tmp/o   # results elsewhere

``DIR`` is a tree holding another version of ``adjoint/`` (for the record in
results/overhead.md: ``git archive <commit> adjoint | tar -x -C DIR``). Kernels, ours:

- ``tiny``: ``np.sum(x * x)`` over 8 elements, the smallest call with a scalar loss;
- ``lorenz96``: one Euler step of Lorenz-96 over N = 40 (a 4D-Var window called step
  by step, thousands of times), two arguments written in place, a scalar loss;
- ``flux``: a finite-volume flux of the vectorised NumPy kind (Euler equations on a
  32 x 32 grid) returning four arrays: forward, and ``vjp`` + pullback with cotangents;
- ``gemm``: the corpus' gemm (``corpus/loops.py``) at n = 4, a gradient of two regions
  (a record and a reverse entry each) whose C work is a few hundred flops.

Per kernel and call (forward; ``grad``; ``vjp`` and one pullback): the best over many
batches of calls of the wall time per call, in a child process pinned to one core (the
engine with threads=1, NumPy and JAX on that core). Rounds alternate between the trees,
so that both meet the machine alike; each figure is the best over the rounds. NumPy: the
same computation written in NumPy (its forward); JAX, when installed: ``jax.jit`` of the
same NumPy code, ``jit(grad)``, and ``jit`` of the forward with its ``vjp`` pullback,
each result waited for. The profile section is cProfile's account of the tiny kernel's
gradient calls in each tree: where a call's time goes outside the generated code.

Writes ``overhead.json`` and ``overhead.md`` to ``--out`` (experiments/results).
"""
import argparse
import cProfile
import json
import os
import pathlib
import pstats
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
TARGETS = {("tiny", "forward"): 5.0, ("tiny", "grad"): 10.0}     # us, issue #25
NOTES = "## Notes"          # from this heading on, overhead.md is written by hand
CALLS = {"forward": "forward", "grad": "grad", "vjp": "vjp + pullback"}


# ---- the kernels (the child imports the engine of its tree first) ---------------------------
def kernels(adjoint):
    import numpy as np
    from adjoint import float64, kernel, symbol
    N = symbol("N")

    @kernel
    def tiny(x: float64[N]) -> float:
        return np.sum(x * x)

    @kernel
    def lorenz96(x: float64[N], k: float64[N], F: float, dt: float, T: int) -> float:
        for t in range(T):
            for i in range(N):
                k[i] = (x[(i + 1) % N] - x[(i + N - 2) % N]) * x[(i + N - 1) % N] - x[i] + F
            for i in range(N):
                x[i] = x[i] + dt * k[i]
        return 0.5 * np.sum(x * x)

    @kernel
    def flux(rho: float64[N, N], vx: float64[N, N], vy: float64[N, N], P: float64[N, N],
             gamma: float):
        en = P / (gamma - 1.0) + 0.5 * rho * (vx * vx + vy * vy)
        c = np.sqrt(gamma * P / rho)
        return (rho * vx - c * rho, rho * vx * vx + P - c * rho * vx, rho * vx * vy,
                (en + P) * vx)

    from adjoint.corpus.loops import gemm, make_gemm
    rng = np.random.default_rng(0)
    grid = [rng.uniform(0.5, 1.5, (32, 32)) for _ in range(4)]
    matrices = make_gemm(rng, 4)
    return {
        "tiny": (tiny, lambda: (rng.uniform(0.5, 1.5, 8),), "x"),
        "lorenz96": (lorenz96, lambda: (8.0 + rng.standard_normal(40), np.zeros(40), 8.0,
                                        0.01, 1), "x"),
        "flux": (flux, lambda: tuple(g.copy() for g in grid) + (1.4,), None),
        "gemm": (gemm, lambda: (matrices[0].copy(),) + matrices[1:], "C"),
    }


def numpy_versions(np):
    def lorenz96(x, k, F, dt, T):
        for _ in range(T):
            k[:] = (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + F
            x += dt * k
        return 0.5 * float(np.sum(x * x))

    def flux(rho, vx, vy, P, gamma):
        en = P / (gamma - 1.0) + 0.5 * rho * (vx * vx + vy * vy)
        c = np.sqrt(gamma * P / rho)
        return (rho * vx - c * rho, rho * vx * vx + P - c * rho * vx, rho * vx * vy,
                (en + P) * vx)

    def gemm(C, A, B, alpha, beta):
        C *= beta
        C += alpha * A @ B
        return float(np.sum(C * C))

    return {"tiny": lambda x: float(np.sum(x * x)), "lorenz96": lorenz96, "flux": flux,
            "gemm": gemm}


def jax_versions():
    """{kernel: {call: function of the arguments}}, each waiting for its result."""
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    def tiny(x):
        return jnp.sum(x * x)

    def lorenz96(x, F, dt):                 # T = 1; k is the tendency, not an input
        k = (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + F
        x = x + dt * k
        return 0.5 * jnp.sum(x * x)

    def flux(rho, vx, vy, P, gamma):
        en = P / (gamma - 1.0) + 0.5 * rho * (vx * vx + vy * vy)
        c = jnp.sqrt(gamma * P / rho)
        return (rho * vx - c * rho, rho * vx * vx + P - c * rho * vx, rho * vx * vy,
                (en + P) * vx)

    def gemm(C, A, B, alpha, beta):
        C = beta * C + alpha * A @ B
        return jnp.sum(C * C)

    def with_pullback(f):               # the outputs and their pullback of ones
        def run(*a):
            out, pullback = jax.vjp(f, *a)
            return out, pullback(jax.tree_util.tree_map(jnp.ones_like, out))
        return jax.jit(run)

    wait = jax.block_until_ready
    out = {}
    for name, f, args in (("tiny", tiny, lambda a: a),
                          ("lorenz96", lorenz96, lambda a: (a[0], a[2], a[3])),
                          ("flux", flux, lambda a: a), ("gemm", gemm, lambda a: a)):
        fwd, vjp = jax.jit(f), with_pullback(f)
        calls = {"forward": lambda a, fwd=fwd, args=args: wait(fwd(*args(a))),
                 "vjp": lambda a, vjp=vjp, args=args: wait(vjp(*args(a)))}
        if name != "flux":
            g = jax.jit(jax.grad(f))
            calls["grad"] = lambda a, g=g, args=args: wait(g(*args(a)))
        out[name] = calls
    return out, jax.__version__


# ---- timing -------------------------------------------------------------------------------
def best(call, make_args, budget=1.0, batch=20):
    """The least wall time per call over batches of ``batch`` calls (fresh arguments per
    call, made before the batch), for about ``budget`` seconds."""
    call(*make_args())
    batches = [[make_args() for _ in range(batch)] for _ in range(4)]
    least, spent, t_end = float("inf"), 0, time.perf_counter() + budget
    while time.perf_counter() < t_end or spent < 5:
        args = batches[spent % len(batches)]
        t0 = time.perf_counter()
        for a in args:
            call(*a)
        least = min(least, (time.perf_counter() - t0) / batch)
        spent += 1
    return least * 1e6


def engine_calls(adjoint, k, wrt):
    import numpy as np
    calls = {"forward": k}
    if wrt is not None:
        calls["grad"] = adjoint.grad(k, wrt=wrt)
        cot = {"return": 1.0}
    else:
        cot = {"return": tuple(np.ones((32, 32)) for _ in range(4))}
    calls["vjp"] = lambda *a: adjoint.vjp(k, *a)[1](cot)
    return calls


def profile(fn, make_args, calls=2000):
    """cProfile of ``calls`` calls of ``fn``: the top functions by own time."""
    batch = [make_args() for _ in range(calls)]
    fn(*make_args())
    prof = cProfile.Profile()
    prof.enable()
    for args in batch:
        fn(*args)
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (path, line, func), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        rows.append({"function": f"{_short(path)}:{func}", "calls": ncalls // calls,
                     "own_us": tottime / calls * 1e6, "cumulative_us": cumtime / calls * 1e6})
    rows.sort(key=lambda r: -r["own_us"])
    return {"functions_per_call": stats.total_calls / calls, "top": rows[:12]}


def _short(path):
    parts = pathlib.Path(path).parts
    return "/".join(parts[parts.index("adjoint"):]) if "adjoint" in parts else parts[-1]


def child(tree, with_reference, budget):
    """Measure every kernel with the engine of ``tree``; prints one JSON line."""
    sys.path.insert(0, str(tree))
    import numpy as np
    import adjoint
    adjoint.configure(threads=1)
    out = {"engine": adjoint.__file__, "times": {}, "reference": {}}
    made = kernels(adjoint)
    for name, (k, make_args, wrt) in made.items():
        for call, fn in engine_calls(adjoint, k, wrt).items():
            out["times"][f"{name}/{call}"] = best(fn, make_args, budget)
    tiny, make_args, wrt = made["tiny"]
    out["profile"] = {"tiny/grad": profile(adjoint.grad(tiny, wrt=wrt), make_args),
                      "gemm/grad": profile(adjoint.grad(made["gemm"][0], wrt="C"),
                                           made["gemm"][1]),
                      "flux/forward": profile(made["flux"][0], made["flux"][1], 500)}
    if with_reference:
        for name, fn in numpy_versions(np).items():
            out["reference"][f"{name}/numpy"] = best(fn, made[name][1], budget)
        try:
            jax_calls, version = jax_versions()
        except ImportError as exc:
            out["jax"] = f"not installed ({exc})"
        else:
            out["jax"] = version
            for name, calls in jax_calls.items():
                for call, fn in calls.items():
                    out["reference"][f"{name}/jax_{call}"] = best(
                        lambda *a, fn=fn: fn(a), made[name][1], budget)
    print("RESULT " + json.dumps(out))


# ---- parent: rounds alternating between trees -----------------------------------------------
def run_child(tree, with_reference, budget, cache):
    env = dict(os.environ, SIMCORE_CACHE_DIR=cache, OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1",
               XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") +
                          " --xla_cpu_multi_thread_eigen=false").strip())
    cmd = [sys.executable, __file__, "--child", str(tree), "--budget", str(budget)]
    if with_reference:
        cmd.append("--reference")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"child for {tree} failed:\n{proc.stderr[-3000:]}")


def merge(runs):
    """Per measure the best over rounds; the profile of the last round."""
    out = dict(runs[-1])
    for part in ("times", "reference"):
        out[part] = {key: min(r[part][key] for r in runs if key in r.get(part, {}))
                     for key in runs[-1].get(part, {})}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", help="a tree with the engine to compare with (its adjoint/)")
    ap.add_argument("--before-note", default="",
                    help="what the --before tree is, for the record (e.g. a commit)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per tree (default 3)")
    ap.add_argument("--budget", type=float, default=1.0,
                    help="seconds of calls per measure and round (default 1)")
    ap.add_argument("--out", default=str(RESULTS), help="results folder")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--reference", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return child(pathlib.Path(args.child), args.reference, args.budget)
    sys.path.insert(0, str(ROOT))
    from experiments.bench_timing import machine
    trees = {"after": ROOT}
    if args.before:
        trees = {"before": pathlib.Path(args.before).resolve(), "after": ROOT}
    info = machine()
    runs = {label: [] for label in trees}
    with tempfile.TemporaryDirectory(prefix="overhead-cache-") as cache:
        for r in range(args.rounds):
            for label, tree in trees.items():
                runs[label].append(run_child(tree, label == "after", args.budget, cache))
                print(f"round {r + 1}/{args.rounds}: {label} done", file=sys.stderr)
    info["load_average_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    info["jax"] = runs["after"][-1].get("jax")
    info["engine_threads"] = 1
    info["cores_used"] = "one: each child pins itself to the lowest core it may use"
    trees = {k: str(v) for k, v in trees.items()}
    if args.before and args.before_note:
        trees["before"] += f" ({args.before_note})"
    results = {"machine": info, "trees": trees,
               "rounds": args.rounds, **{k: merge(v) for k, v in runs.items()}}
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "overhead.json").write_text(json.dumps(results, indent=1))
    md = out / "overhead.md"
    old = md.read_text() if md.exists() else ""
    text = report(results) + (old[old.index(NOTES):] if NOTES in old else "")
    md.write_text(text)
    print(text)


# ---- report -------------------------------------------------------------------------------
def report(res):
    after, before = res["after"], res.get("before")
    ref = after.get("reference", {})
    lines = ["# Call overhead (issue #25, deliverable 1)", "",
             "Written by `experiments/overhead.py` (its docstring says what is measured). "
             "Times in microseconds per call: the best over batches of calls and over "
             f"{res['rounds']} rounds per tree, alternating, on one core (engine threads=1).",
             "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in res["machine"].items()]
    lines += [f"- {label} tree: {tree}" for label, tree in res["trees"].items()]
    lines += ["",
              "## Times", "",
              "| kernel | call | before | after | before / after | NumPy | JAX | "
              "after / NumPy | after / JAX | target |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for key, t in after["times"].items():
        name, call = key.split("/")
        b = before["times"].get(key) if before else None
        numpy_t = ref.get(f"{name}/numpy") if call == "forward" else None
        jax_t = ref.get(f"{name}/jax_{call}")
        target = TARGETS.get((name, call))
        lines.append("| " + " | ".join([
            name, CALLS[call], _f(b), _f(t), _f(b / t if b else None, "x"), _f(numpy_t),
            _f(jax_t), _f(t / numpy_t if numpy_t else None, "x"),
            _f(t / jax_t if jax_t else None, "x"),
            f"<= {target:g}: {'met' if t <= target else 'not met'}" if target else ""]) + " |")
    for key, title in (("tiny/grad", "a tiny kernel's gradient call"),
                       ("gemm/grad", "a gradient call of two regions (gemm, n = 4)"),
                       ("flux/forward", "a forward call returning four arrays (flux)")):
        lines += ["", f"## Where {title} spends its time (cProfile)", ""]
        for label, run in (("before", before), ("after", after)):
            if not run:
                continue
            p = run["profile"][key]
            lines += [f"{label}: {p['functions_per_call']:.0f} Python function calls per "
                      "call; the top functions by own time (profiled: slower than above):", "",
                      "| function | calls per call | own us | cumulative us |",
                      "|---|---|---|---|"]
            lines += [f"| {r['function']} | {r['calls']} | {r['own_us']:.2f} | "
                      f"{r['cumulative_us']:.2f} |" for r in p["top"]]
            lines.append("")
    return "\n".join(lines) + "\n"


def _f(x, unit=""):
    if x is None:
        return ""
    return f"{x:.3g}{unit}" if unit else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")


if __name__ == "__main__":
    main()
