"""Store or recompute within a memory budget (issue 5): gradient time and peak memory of
1-D Burgers over a budget sweep, and the ILP's solve time.

    python experiments/memory.py [--n 40000] [--steps 1000] [--repeats 3] [--threads 1]

The budgets run from the least memory any plan needs (``least_memory`` over the plan's
candidates) to the store-all peak, geometrically in 8 steps, plus 10% of store-all.
Every gradient must be bitwise identical to the store-all one and the engine's measured
peak (its ledger) must stay within the budget. Times are the best of --repeats calls
after one warm-up call (one call only where a call takes over --slow seconds).
Single-threaded by default: what is measured is store against recompute. Writes
experiments/results/memory.{json,md}.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import random
import resource
import statistics
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]   # the checkout: adjoint (its corpus too) and experiments

import pulp  # noqa: E402

from adjoint import configure, grad  # noqa: E402
from adjoint.options import options  # noqa: E402
from adjoint.autodiff import plan as P  # noqa: E402
from adjoint.corpus.planning import burgers, random_problem  # noqa: E402

RESULTS = ROOT / "experiments" / "results"
MiB = 2**20


def timed(fn, make_args, repeats, slow):
    """(result, best wall time, best CPU time, wall times) of fn(*make_args()) after one
    warm-up call. CPU time (this process, user + system) is what the engine spent,
    whatever else the machine runs."""
    args = make_args()
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    walls, cpus = [time.perf_counter() - t0], [time.process_time() - c0]
    if walls[0] > slow:
        return out, walls[0], cpus[0], walls  # the warm-up is the sample (plan solve included)
    walls, cpus = [], []
    for _ in range(repeats):
        args = make_args()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn(*args)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return out, min(walls), min(cpus), walls


def gradient_sweep(n, steps, repeats, slow):
    x = np.linspace(0, 2 * np.pi, n)
    make_args = lambda: (np.sin(x) + 0.5, np.zeros(n), 0.01, 0.01, steps)  # noqa: E731
    spec = lambda: burgers.specializations[0]  # noqa: E731

    def run(label, budget=None, **plan):
        g = grad(burgers, wrt=("u", "nu", "dt"), memory_budget=budget, **plan)
        grads, best, cpu, times = timed(g, make_args, repeats, slow)
        sweep = spec().last_sweep
        row = dict(label=label, budget=budget, seconds=best, cpu_seconds=cpu, times=times,
                   measured_peak=sweep.ledger.peak, predicted_peak=sweep.plan.peak_bytes,
                   plan={c.name: str(o) for c, o in zip(sweep.plan.candidates, sweep.plan.choices)},
                   recomputed_work=sweep.plan.recompute_cost, plan_solve_seconds=sweep.plan.solve_seconds)
        print(f"{label:>18}: {best * 1e3:8.1f} ms (CPU {cpu * 1e3:8.1f} ms)  measured peak {row['measured_peak'] / MiB:8.2f} MiB  "
              f"plan {row['plan']}", flush=True)
        return row, grads, sweep

    store, reference, sweep = run("store_all", policy="store_all")
    base = sweep.ledger.peak - sum(o.held for o in sweep.plan.choices)
    least = P.least_memory([P.options_for(c) for c in sweep.plan.candidates], base, False)
    full = store["measured_peak"]
    budgets = sorted({int(b) for b in np.geomspace(least, full, 8)} | ({full // 10} if full // 10 >= least else set()))
    rows, again = [store], [store]
    for label, b, plan in [("recompute_all", None, dict(policy="recompute_all"))] + [
            (f"{b / full:.1%} budget" + (" (min)" if b == least else ""), b, {}) for b in budgets]:
        row, grads, _ = run(label, b, **plan)
        row["bitwise_equal"] = all(np.array_equal(a, r) for a, r in zip(grads, reference))
        if b is not None:
            row["within_budget"] = row["measured_peak"] <= b and row["predicted_peak"] <= b
        rows.append(row)
        again.append(run("  store_all again", policy="store_all")[0])   # the load drifts
    ref = {k: min(r[k] for r in again) for k in ("seconds", "cpu_seconds")}
    for r in rows:
        r["fraction_of_store_all"] = r["measured_peak"] / full
        r["time_vs_store_all"] = r["seconds"] / ref["seconds"]
        r["cpu_vs_store_all"] = r["cpu_seconds"] / ref["cpu_seconds"]
    return rows, dict(least_memory=least, store_all_peak=full, base=base, store_all_reference=ref,
                      store_all_samples=[(r["seconds"], r["cpu_seconds"]) for r in again],
                      tape_bytes=sum(c.tape_bytes for c in sweep.plan.candidates))


def ilp_times(sizes=(10, 50, 100), problems=10, repeats=3):
    """solve() on random problems (the tests' generator, loops included), timed as wall
    time and as CPU time (this process plus the CBC subprocess): the best of repeats per
    problem, then the median and the worst over problems. The same problems go to pulp's
    default CBC launcher (the `cbc` console script, cuts on), interleaved, for comparison."""
    solvers = {"engine": P._solver, "pulp_default": lambda: pulp.COIN_CMD(msg=False)}
    out = []
    for n in sizes:
        rng = random.Random(n)
        best = {k: dict(wall=[], cpu=[], costs=[]) for k in solvers}
        for _ in range(problems):
            cands = random_problem(rng, n, True)
            menus = [P.options_for(c) for c in cands]
            least = P.least_memory(menus, 1000, False)
            full = P.peak(cands, [m[0] for m in menus], 1000, False)
            budget = least + int(rng.choice([0.02, 0.1, 0.25, 0.5]) * (full - least))
            times = {k: ([], []) for k in solvers}
            for r in range(repeats):
                for key, solver in solvers.items():
                    P._solver, keep = solver, P._solver
                    t0, c0 = time.perf_counter(), _cpu()
                    plan = P.solve(cands, 1000, budget)
                    times[key][0].append(time.perf_counter() - t0)
                    times[key][1].append(_cpu() - c0)
                    P._solver = keep
                    if r == 0:
                        best[key]["costs"].append(plan.recompute_cost)
            for key, (wall, cpu) in times.items():
                best[key]["wall"].append(min(wall))
                best[key]["cpu"].append(min(cpu))
        row = dict(candidates=n, problems=problems,
                   same_optima=best["engine"]["costs"] == best["pulp_default"]["costs"])
        for key, b in best.items():
            row[key] = {f"{m}_{stat}": f(b[m]) for m in ("wall", "cpu")
                        for stat, f in (("median", statistics.median), ("worst", max))}
            row[key]["costs"] = b["costs"]
        e, d = row["engine"], row["pulp_default"]
        print(f"ILP {n:3d} candidates: median {e['wall_median'] * 1e3:.1f} ms (CPU {e['cpu_median'] * 1e3:.1f}), "
              f"worst {e['wall_worst'] * 1e3:.1f} ms; pulp default launcher: median {d['wall_median'] * 1e3:.1f} ms "
              f"(CPU {d['cpu_median'] * 1e3:.1f})", flush=True)
        out.append(row)
    return out


def _cpu():
    own, child = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + child.ru_utime + child.ru_stime


def machine():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), "?")
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "pulp": pulp.__version__, "cbc": P._cbc_binary() or "pulp default",
            "load_average_at_start": " ".join(f"{v:.2f}" for v in os.getloadavg()),
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def markdown(info, problem, rows, ilp, targets):
    flag = {True: "yes", False: "NO", None: "-"}
    lines = ["| run | budget MiB | measured peak MiB | predicted peak MiB | % of store-all | time ms | "
             "× store-all | CPU ms | CPU × store-all | plan | bitwise | within budget |", "|" + "---|" * 12]
    for r in rows:
        budget = "-" if r["budget"] is None else f"{r['budget'] / MiB:.2f}"
        plan = "; ".join(f"{k}: {v}" for k, v in r["plan"].items())
        lines.append(f"| {r['label']} | {budget} | {r['measured_peak'] / MiB:.2f} | {r['predicted_peak'] / MiB:.2f} | "
                     f"{100 * r['fraction_of_store_all']:.1f} | {r['seconds'] * 1e3:.0f} | {r['time_vs_store_all']:.2f} | "
                     f"{r['cpu_seconds'] * 1e3:.0f} | {r['cpu_vs_store_all']:.2f} | {plan} | "
                     f"{flag[r.get('bitwise_equal')]} | {flag[r.get('within_budget')]} |")
    lines += ["", "| candidates | solver | median ms | worst ms | CPU median ms | CPU worst ms | same optima |",
              "|---|---|---|---|---|---|---|"]
    for r in ilp:
        for key, name in (("engine", "engine (`plan._solver`)"), ("pulp_default", "pulp default launcher")):
            t = r[key]
            lines.append(f"| {r['candidates']} | {name} | {t['wall_median'] * 1e3:.1f} | {t['wall_worst'] * 1e3:.1f} | "
                         f"{t['cpu_median'] * 1e3:.1f} | {t['cpu_worst'] * 1e3:.1f} | {flag[r['same_optima']]} |")
    return "\n".join([
        "# Store or recompute within a memory budget", "",
        *[f"- {k}: {v}" for k, v in info.items()], "",
        f"Problem: 1-D Burgers, N={problem['n']}, T={problem['steps']} steps, gradient w.r.t. (u, nu, dt). "
        f"Tape {problem['tape_bytes'] / MiB:.1f} MiB; least memory {problem['least_memory'] / MiB:.2f} MiB; "
        f"store-all peak {problem['store_all_peak'] / MiB:.1f} MiB (engine allocations, base "
        f"{problem['base'] / MiB:.2f} MiB). Budgets: geometric from the least memory to store-all, plus 10% "
        f"of store-all. Times: best of {info['repeats']} after a warm-up, or the single first call (plan "
        f"solve included) where a call takes over {info['slow_seconds']} s; CPU is this process's user + "
        "system time (the engine is single-threaded, so it is the wall time of an idle machine). Peaks are "
        "the engine's ledger (buffers, tapes, snapshots), not process RSS. '× store-all' divides by the best "
        f"store-all gradient of the run (timed again after every row: {ref_text(problem)}). 'bitwise': "
        "every gradient equals the store-all one bit for bit.", "", *lines, "",
        "ILP: `plan.solve` on the tests' random problems (`adjoint.corpus.planning.random_problem`, loops included), 10 per size, "
        "best of 3 per problem; CPU includes the CBC subprocess. 'pulp default launcher' is "
        "`pulp.COIN_CMD(msg=False)`: the `cbc` console script on PATH, cuts on.", "",
        "Targets:", "", *[f"- {k}: {'met' if v['met'] else 'NOT met'} ({v['value']})" for k, v in targets.items()],
        ""])


def ref_text(problem):
    walls, cpus = zip(*problem["store_all_samples"])
    return (f"best {min(walls) * 1e3:.0f} ms, median {statistics.median(walls) * 1e3:.0f} ms; CPU best "
            f"{min(cpus) * 1e3:.0f} ms, median {statistics.median(cpus) * 1e3:.0f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--slow", type=float, default=2.0, help="seconds above which one call is enough")
    ap.add_argument("--threads", type=int, default=1,
                    help="engine threads for parallel loops, where the engine has them (0: all cores)")
    args = ap.parse_args()
    if hasattr(options, "threads"):
        configure(threads=args.threads)
    info = machine() | {"repeats": args.repeats, "slow_seconds": args.slow,
                        "engine_threads": getattr(options, "threads", "n/a")}
    rows, problem = gradient_sweep(args.n, args.steps, args.repeats, args.slow)
    problem |= {"n": args.n, "steps": args.steps}
    ilp = ilp_times()
    info["load_average_at_end"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
    ten = next((r for r in rows if r["budget"] == problem["store_all_peak"] // 10),
               dict(time_vs_store_all=float("nan"), cpu_vs_store_all=float("nan")))   # below the least
    hundred = next(r for r in ilp if r["candidates"] == 100)["engine"]
    targets = {
        "gradient at 10% of store-all memory <= 2x store-all time (wall)":
            dict(met=ten["time_vs_store_all"] <= 2, value=f"{ten['time_vs_store_all']:.2f}x"),
        "gradient at 10% of store-all memory <= 2x store-all time (CPU)": dict(met=ten["cpu_vs_store_all"] <= 2, value=f"{ten['cpu_vs_store_all']:.2f}x"),
        "ILP solve < 100 ms for 100 candidates (median wall)":
            dict(met=hundred["wall_median"] < 0.1, value=f"{hundred['wall_median'] * 1e3:.1f} ms, "
                 f"worst {hundred['wall_worst'] * 1e3:.1f} ms"),
        "ILP solve < 100 ms for 100 candidates (median CPU, CBC included)": dict(met=hundred["cpu_median"] < 0.1, value=f"{hundred['cpu_median'] * 1e3:.1f} ms, "
                                     f"worst {hundred['cpu_worst'] * 1e3:.1f} ms"),
        "gradients bitwise identical across budgets": dict(met=all(r.get("bitwise_equal", True) for r in rows),
                                                           value=f"{sum('bitwise_equal' in r for r in rows)} budgets"),
        "measured peak within every budget": dict(met=all(r.get("within_budget", True) for r in rows),
                                                  value=f"{sum('within_budget' in r for r in rows)} budgets"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "memory.json").write_text(json.dumps(dict(machine=info, problem=problem, runs=rows,
                                                         ilp=ilp, targets=targets), indent=1))
    md = markdown(info, problem, rows, ilp, targets)
    (RESULTS / "memory.md").write_text(md)
    print(md)
    return 0 if all(t["met"] for k, t in targets.items() if "bitwise" in k or "within" in k) else 1


if __name__ == "__main__":
    sys.exit(main())
