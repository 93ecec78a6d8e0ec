"""Benchmark suite: every corpus kernel, compiled by the engine, against its NumPy/Python
original (forward) and a JAX port (``jax.jit(jax.grad(...))``, gradient).

    python experiments/bench.py                       # S and M, all kernels, with JAX
    python experiments/bench.py --sizes S --kernels seidel2d,lu --repeats 3
    python experiments/bench.py --no-jax
    python experiments/bench.py --sizes S --engine reassociate=True --engine vector_math=True

Per kernel and size, in one run:
  1. the original (``k.py_func``) runs once on a copy of the inputs: the reference;
  2. the engine's forward runs (the first call at the first size compiles it, cache cold)
     and is checked against the reference (return value and every array argument);
     then its gradient w.r.t. the corpus case's ``wrt`` (``adjoint.grad``; first call
     compiles the adjoint);
  3. the JAX port is compiled ahead of time, its gradient checked against the engine's,
     then timed. When its time at this size, predicted from the previous size (scaled
     by the engine's gradient-time ratio), is over 1/8 of ``--jax-budget``, it is first
     measured at up to three smaller values of one parameter (the time-step count if
     the kernel has one, else n), a factor 2 apart; if a fit of those predicts the full
     size within the budget it is measured there, otherwise the full-size time is
     **extrapolated** from the fit and reported as such. Kernels with a second, literal
     port (jax_ports.LITERAL) get the same for it;
  4. best-of-N wall times (fresh input copies made outside the timed region; fewer than
     ``--repeats`` calls once the calls took ``--budget`` seconds, more for fast calls;
     the engine's forward and gradient calls take turns, so their ratio compares calls
     made under the same conditions),
     the median CPU time of the same calls as a cross-check on a shared machine
     (``--clock cpu`` makes the tables use it), and the load average. The engine runs on
     ``--threads`` OpenMP threads; with the default 1 the whole process is pinned to one
     core first (XLA otherwise spreads its element-wise loops over every core, whatever
     its flags say), so the engine, NumPy and JAX all compute on one core.
Compile time: cold = first calls minus steady-state calls (forward + gradient), with a
fresh SIMCORE_CACHE_DIR; the first calls may use every core the script started with (the
engine compiles a module's parts in parallel, as it does for a user), the kernel itself
still runs on one thread; warm = the same in a new process loading from that cache, the
better of WARM_WORKERS such processes per kernel (like every other time here, a best of
several: one run had one kernel at 71 ms that took 7 ms in the next process).

Python's recursion limit is raised to RECURSION_LIMIT: with the default 1000, ``adjoint.grad``
fails with RecursionError while planning a top-level loop of more than about 150,000
trips (``adjoint/autodiff/revolve.py: costs`` recurses about 2 sqrt(2 n) frames deep for
2 snapshots), which would leave the 1-D kernels (n up to 2e6 at M) unmeasured.

Writes experiments/results/bench.{json,md} (bench.partial.json after every kernel, so an
interrupted run keeps its results; ``--update`` reruns some kernels into an existing
bench.json). Exit status 1 when a check failed.
"""
import argparse
import ast
import contextlib
import gc
import inspect
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import traceback

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]   # the checkout: adjoint (its corpus too) and experiments

from experiments import bench_jax, bench_report  # noqa: E402
from experiments.bench_timing import (best_of, best_of_each, copies, every_core,  # noqa: E402
                                      fit, ladder, load_average, machine, max_rel_error,
                                      run_on_one_core, timed)

RESULTS = ROOT / "experiments" / "results"
RECURSION_LIMIT = 20_000     # see the docstring: a work-around for the engine's planner
XLA_ONE_THREAD = " --xla_cpu_multi_thread_eigen=false"
FWD_RTOL = {np.float64: 1e-9, np.float32: 1e-4}    # engine forward vs the original
GRAD_RTOL = {np.float64: 1e-7, np.float32: 1e-3}   # engine gradient vs JAX's


def arg_names(kernel):
    return list(inspect.signature(kernel.py_func).parameters)


def precision(args):
    return np.float32 if any(isinstance(a, np.ndarray) and a.dtype == np.float32
                             for a in args) else np.float64


def rng_for(name, size_name):
    import zlib
    return np.random.default_rng(zlib.crc32(f"bench/{name}/{size_name}".encode()))


class Suite:
    def __init__(self, opts, adjoint, jax):
        self.opts, self.adjoint, self.jax = opts, adjoint, jax

    # ------------------------------------------------------------------ one kernel
    def kernel(self, bench, size_names):
        case = bench.case
        rec = {"name": bench.name, "kind": bench.kind, "sizes": {}, "errors": [],
               "wrt": list(case.wrt),
               "jax_port": self.jax.style(bench.name) if self.jax and self.jax.has(bench.name)
               else None}
        grad = self.adjoint.grad(case.kernel, wrt=case.wrt)
        previous = None
        for k, sname in enumerate(size_names):
            size = bench.sizes(sname)
            try:
                r = self.size(bench, grad, size, rng_for(bench.name, sname), rec, first=k == 0)
            except Exception as exc:                       # record, go on with the suite
                rec["errors"].append(f"{sname}: {type(exc).__name__}: {exc}")
                traceback.print_exc()
                break
            for prefix, literal in (("jax", False), ("jaxlit", True)):
                if self.jax and self.jax.has(bench.name, literal):
                    try:
                        self.jax_size(bench, grad, size, sname, r, previous, prefix, literal)
                    except Exception as exc:
                        r[prefix + "_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                        traceback.print_exc()
            r.pop("_engine_grad_value", None)
            rec["sizes"][sname] = r
            previous = r
        return rec

    def size(self, bench, grad, size, rng, rec, first):
        case, repeats, budget = bench.case, self.opts.repeats, self.opts.budget
        args = bench.args(size, rng)
        make = lambda: copies(args)  # noqa: E731
        r = {"params": size, "load": load_average(), "t": {}}
        t = r["t"]

        ref_args = copies(args)
        ref, py_wall, py_cpu = timed(case.kernel.py_func, *ref_args)
        eng_args = copies(args)
        with every_core() if first else contextlib.nullcontext():
            got, first_fwd, _ = timed(case.kernel, *eng_args)
        pairs = [(got, ref)] + [(g, w) for g, w in zip(eng_args, ref_args)
                                if isinstance(w, np.ndarray)]
        r["check_fwd"] = max_rel_error(pairs)
        r["check_fwd_ok"] = r["check_fwd"] <= FWD_RTOL[precision(args)]
        with every_core() if first else contextlib.nullcontext():
            g, first_grad, _ = timed(grad, *copies(args))
        t["engine_fwd"], t["engine_grad"] = best_of_each((case.kernel, grad), make, repeats,
                                                         budget)
        r["_engine_grad_value"] = g
        if first:     # compile times: wall clock (the C compiler runs in a child process)
            rec["compile_cold_fwd"] = max(first_fwd - t["engine_fwd"]["wall"], 0.0)
            rec["compile_cold_grad"] = max(first_grad - t["engine_grad"]["wall"], 0.0)
            rec["compile_size"] = size
        t["python_fwd"] = best_of(case.kernel.py_func, make, repeats, budget,
                                  first=(py_wall, py_cpu))
        return r

    # ------------------------------------------------------------------------- JAX
    def jax_size(self, bench, grad, size, sname, r, previous, prefix="jax", literal=False):
        """Measure a JAX port at this size, or extrapolate from smaller ones. Times go to
        ``r["t"][prefix + "_grad"]`` (and ``_fwd``)."""
        J, names, opts, clock = self.jax, arg_names(bench.case.kernel), self.opts, self.opts.clock
        t, key_grad = r["t"], prefix + "_grad"
        check_key = "check_grad" if prefix == "jax" else f"check_{prefix}"
        predicted = None
        if previous is not None and key_grad in previous["t"]:
            predicted = (previous["t"][key_grad]["wall"] * t["engine_grad"]["wall"]
                         / previous["t"]["engine_grad"]["wall"])
        r[prefix + "_predicted"] = predicted
        args = bench.args(size, rng_for(bench.name, sname))
        if predicted is None or predicted <= opts.jax_budget / 8:
            return self.jax_measure(bench, names, args, r, prefix, literal)
        # Perhaps too slow: measure at up to three smaller values of one parameter (the
        # time-step count, else n), a factor 2 apart, stopping when the fit so far
        # predicts the next one over half the budget; then measure the full size if the
        # fit predicts it within the budget, else extrapolate.
        key = bench.scale_key(size)
        linear = key != "n"
        exponent = 1.0
        if not linear and previous is not None and previous["params"]["n"] != size["n"]:
            exponent = math.log(t["engine_grad"]["wall"] / previous["t"]["engine_grad"]["wall"]) \
                / math.log(size["n"] / previous["params"]["n"])
        values = ladder(size[key], predicted, exponent, opts.jax_budget,
                        minimum=1 if linear else 8)
        points, last = [], None
        for v in values:
            if len(points) >= 2 and fit([(u, p["wall"]) for u, p in points], linear)[0](v) \
                    > opts.jax_budget / 2:
                break
            small = dict(size, **{key: v})
            a = bench.args(small, rng_for(bench.name, sname))
            fns = J.compile(bench.name, names, a, bench.case.wrt, forward=False, literal=literal)
            J.call(fns["grad"], fns["dyn"])
            call = lambda: J.call(fns["grad"], fns["dyn"])  # noqa: E731
            points.append((v, best_of(call, tuple, min(opts.repeats, 3), opts.budget)))
            last = (v, a, fns)
        r[prefix + "_points"] = [(v, p[clock]) for v, p in points]
        if len(points) >= 2:
            full = fit([(v, p["wall"]) for v, p in points], linear)[0](size[key])
        else:
            full = points[0][1]["wall"] * (size[key] / points[0][0]) ** exponent
        r[prefix + "_predicted_from_fit"] = full
        if full <= opts.jax_budget:
            return self.jax_measure(bench, names, args, r, prefix, literal)
        v, a, fns = last
        g = J.as_numpy(J.call(fns["grad"], fns["dyn"]))
        r[check_key] = max_rel_error(zip(g, grad(*copies(a))))
        r[check_key + "_ok"] = r[check_key] <= GRAD_RTOL[precision(args)]
        r[check_key + "_at"] = {key: v}
        r[prefix + "_compile_grad"] = fns["compile_grad"]
        t[key_grad] = {"extrapolated": True}
        for c in ("wall", "cpu"):
            predict, how = fit([(u, p[c]) for u, p in points], linear) if len(points) >= 2 \
                else (lambda x: points[0][1][c] * (x / points[0][0]) ** exponent,
                      f"one point, t ~ x^{exponent:.2f} (the engine's scaling)")
            t[key_grad][c] = predict(size[key])
            if c == clock:
                r[prefix + "_grad_how"] = (f"extrapolated: {key} = {[u for u, _ in points]} "
                                           f"-> {size[key]}, {how}")

    def jax_measure(self, bench, names, args, r, prefix, literal):
        """Compile the port for ``args``, check its gradient against the engine's, time it."""
        J, opts, t = self.jax, self.opts, r["t"]
        check_key = "check_grad" if prefix == "jax" else f"check_{prefix}"
        fns = J.compile(bench.name, names, args, bench.case.wrt, forward=not literal,
                        literal=literal)
        g = J.as_numpy(J.call(fns["grad"], fns["dyn"]))
        r[check_key] = max_rel_error(zip(g, r["_engine_grad_value"]))
        r[check_key + "_ok"] = r[check_key] <= GRAD_RTOL[precision(args)]
        call = lambda: J.call(fns["grad"], fns["dyn"])  # noqa: E731
        t[prefix + "_grad"] = best_of(call, tuple, opts.repeats, opts.budget)
        r[prefix + "_compile_grad"] = fns["compile_grad"]
        if not literal:
            fwd = lambda: J.call(fns["fwd"], fns["dyn"])  # noqa: E731
            fwd()
            t[prefix + "_fwd"] = best_of(fwd, tuple, opts.repeats, opts.budget)
            r[prefix + "_compile_fwd"] = fns["compile_fwd"]
        r[prefix + "_grad_how"] = "measured"


# ------------------------------------------------------------------------ warm compile

def warm_worker(names, sizes_name, threads, engine):
    """In a fresh process (cache already filled): first calls minus steady calls. Before
    each kernel, the objects of the ones before it are collected and frozen out of the
    garbage collector's view: with 72 kernels loaded, a full collection took 50-80 ms
    and landed on the first call of whichever kernel was loading then (cavity_flow,
    math_funcs; 7-8 ms each measured alone), a cost of the worker's heap, not of loading
    the kernel."""
    import adjoint
    from adjoint.corpus.sizes import BENCHES
    if hasattr(adjoint.options, "threads"):
        adjoint.configure(threads=threads)
    adjoint.configure(**engine)
    warmup(adjoint)
    for name in names:
        gc.collect()
        gc.freeze()
        b = BENCHES[name]
        args = b.args(b.sizes(sizes_name), rng_for(name, sizes_name))
        make = lambda: copies(args)  # noqa: E731
        out = {"name": name}
        try:
            grad = adjoint.grad(b.case.kernel, wrt=b.case.wrt)
            _, t1, _ = timed(b.case.kernel, *make())
            fwd = best_of(b.case.kernel, make, 3, 1.0)["wall"]
            _, t2, _ = timed(grad, *make())
            g = best_of(grad, make, 3, 1.0)["wall"]
            out.update(compile_warm_fwd=max(t1 - fwd, 0.0), compile_warm_grad=max(t2 - g, 0.0))
        except Exception as exc:
            out["error"] = f"{type(exc).__name__}: {exc}"
        print("WARM " + json.dumps(out), flush=True)


WARM_WORKERS = 2


def warm_compile(names, sizes_name, cache, threads, engine):
    """Per kernel, the warm times of the better of WARM_WORKERS fresh processes (both
    totals kept as ``compile_warm_runs``)."""
    runs = [_warm_worker_run(names, sizes_name, cache, threads, engine)
            for _ in range(WARM_WORKERS)]
    found = {}
    for name in names:
        done = [r[name] for r in runs if name in r and "compile_warm_fwd" in r[name]]
        if not done:
            found[name] = next((r[name] for r in runs if name in r), {})
            continue
        totals = [d["compile_warm_fwd"] + d["compile_warm_grad"] for d in done]
        found[name] = dict(done[totals.index(min(totals))], compile_warm_runs=totals)
    return found


def _warm_worker_run(names, sizes_name, cache, threads, engine):
    env = dict(os.environ, SIMCORE_CACHE_DIR=cache)
    settings = [a for k, v in engine.items() for a in ("--engine", f"{k}={v!r}")]
    proc = subprocess.run([sys.executable, __file__, "--warm-worker", "--sizes", sizes_name,
                           "--threads", str(threads), *settings,
                           "--kernels", ",".join(names)], env=env, capture_output=True,
                          text=True)
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("WARM "):
            d = json.loads(line[5:])
            found[d.pop("name")] = d
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
    return found


def warmup(adjoint):
    """Compile (or load) a trivial kernel: imports and one-time set-up out of the way."""
    from experiments.bench_warmup import tiny
    x = np.ones(4)
    tiny(x)
    adjoint.grad(tiny, wrt="x")(x)


# --------------------------------------------------------------------------------- main

def parse():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="S,M", help="comma-separated, from S,M")
    ap.add_argument("--kernels", default="", help="comma-separated corpus names (default all)")
    ap.add_argument("--repeats", type=int, default=5, help="best of this many calls")
    ap.add_argument("--budget", type=float, default=3.0,
                    help="seconds of calls after which repeats stop (default 3)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="the times the tables and ratios use (both are recorded): wall "
                         "(default: best of the calls) or cpu (median CPU time of this "
                         "process, all threads: not counting other jobs on a shared machine)")
    ap.add_argument("--no-jax", action="store_true", help="skip the JAX comparison")
    ap.add_argument("--jax-budget", type=float, default=8.0,
                    help="longest JAX gradient call to measure, seconds (default 8): "
                         "beyond, extrapolate from smaller sizes")
    ap.add_argument("--threads", type=int, default=1,
                    help="engine OpenMP threads (default 1; 0: all cores); with 1 the whole "
                         "process is pinned to one core, so the engine, NumPy and JAX each "
                         "compute on that one core")
    ap.add_argument("--engine", action="append", default=[], metavar="KEY=VALUE",
                    help="an engine option for every kernel, a Python literal, repeatable: "
                         "--engine reassociate=True --engine vector_math=True gives the "
                         "engine the freedom XLA takes (sums in any order, vectorised exp "
                         "and tanh); recorded under engine_options")
    ap.add_argument("--out", default=str(RESULTS), help="results folder")
    ap.add_argument("--update", action="store_true",
                    help="replace only these kernels' records in an existing bench.json "
                         "(same sizes), keep the others, rewrite bench.md")
    ap.add_argument("--warm-worker", action="store_true", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    opts.engine = dict(_setting(a) for a in opts.engine)
    return opts


def _setting(arg):
    """'reassociate=True' -> ('reassociate', True)."""
    key, sep, value = arg.partition("=")
    if not sep:
        sys.exit(f"--engine {arg!r}: expected KEY=VALUE")
    try:
        return key.strip(), ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        sys.exit(f"--engine {arg!r}: the value is not a Python literal")


def main():
    opts = parse()
    if opts.threads == 1:
        run_on_one_core()
    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))
    sizes = opts.sizes.split(",")
    if opts.warm_worker:
        warm_worker(opts.kernels.split(","), sizes[0], opts.threads, opts.engine)
        return 0
    cache = tempfile.mkdtemp(prefix="bench_cache_")
    os.environ["SIMCORE_CACHE_DIR"] = cache
    import adjoint
    adjoint.configure(cache_dir=cache)
    if hasattr(adjoint.options, "threads"):
        adjoint.configure(threads=opts.threads)
    adjoint.configure(**opts.engine)
    if opts.threads == 1:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + XLA_ONE_THREAD).strip()
    from adjoint.corpus.sizes import BENCHES, TABLE
    names = opts.kernels.split(",") if opts.kernels else [b.name for b in TABLE]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        sys.exit(f"unknown kernels {unknown}; known: {', '.join(BENCHES)}")
    bad = [s for s in sizes if s not in ("S", "M")]
    if bad:
        sys.exit(f"unknown sizes {bad}; known: S, M")
    jax, why = (None, "--no-jax") if opts.no_jax else bench_jax.load()
    if why:
        print(f"skipping JAX: {why}")
    info = machine(jax and jax.jax, adjoint.options)
    info.update(repeats=opts.repeats, budget_s=opts.budget, jax_budget_s=opts.jax_budget,
                clock=opts.clock, jax_skipped=why, sizes=sizes,
                python_recursion_limit=sys.getrecursionlimit(), engine_options=opts.engine)
    warmup(adjoint)
    suite = Suite(opts, adjoint, jax)
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    kept, partial = [], out / "bench.partial.json"
    if opts.update:                                  # the other kernels' earlier records
        old = json.loads((out / "bench.json").read_text())
        kept = [r for r in old["kernels"] if r["name"] not in names]
        reruns = old["machine"].get("reruns", []) + [
            {"kernels": names, "date": info["date"], "load_average_at_start":
             info["load_average_at_start"]}]
        info = {**old["machine"], "reruns": reruns}
        partial = out / "bench.update.partial.json"
    records = []
    for name in names:
        rec = suite.kernel(BENCHES[name], sizes)
        records.append(rec)
        print(bench_report.one_line(rec, opts.clock), flush=True)
        save(partial, info, records)
    warm = warm_compile(names, sizes[0], cache, opts.threads, opts.engine)
    shutil.rmtree(cache, ignore_errors=True)
    for rec in records:
        rec.update(warm.get(rec["name"], {"warm_error": "no result from the worker"}))
    if not opts.update:
        info["load_average_at_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if jax:
        ported = set(info.get("no_jax_port", [])) - set(names)
        info["no_jax_port"] = sorted(ported | {n for n in names if not jax.has(n)})
    order = {b.name: k for k, b in enumerate(TABLE)}
    records = sorted(kept + records, key=lambda r: order[r["name"]])
    save(out / "bench.json", info, records)
    partial.unlink(missing_ok=True)
    md = bench_report.markdown(info, records, sizes)
    (out / "bench.md").write_text(md)
    print(md)
    return 0 if bench_report.all_ok(records) else 1


def save(path, info, records):
    clean = [{**r, "sizes": {s: {k: v for k, v in d.items() if not k.startswith("_")}
                             for s, d in r["sizes"].items()}} for r in records]
    path.write_text(json.dumps({"machine": info, "kernels": clean}, indent=1,
                               default=_json_default))


def _json_default(v):
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(type(v))


if __name__ == "__main__":
    sys.exit(main())
