"""Thread scaling: forward and gradient of kernels with parallel maps and loops on 1 and
on 2 OpenMP threads, measured in one run (alternating, so load changes hit both).

    python experiments/threads.py                 # the default kernels at their M size
    python experiments/threads.py --kernels jacobi2d,heat3d --scale 2 --repeats 7

``--scale`` multiplies the benchmark's M size parameter ``n`` (bigger problems amortise
starting threads). Results: experiments/results/threads.{json,md}. The speed-up is
best-of-repeats time on 1 thread over that on 2; the machine's other load is recorded.
"""
import argparse
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]   # the checkout: adjoint (its corpus too) and experiments

import adjoint  # noqa: E402
from adjoint.corpus.sizes import BENCHES  # noqa: E402
from experiments.bench_timing import best_of, copies, load_average, machine  # noqa: E402

RESULTS = ROOT / "experiments" / "results"
KERNELS = ("jacobi2d", "heat3d", "jacobi2d_slices", "heat3d_vec", "hdiff_loops", "conv2d",
           "outer_update", "wave_temporaries")


def measure(name, scale, repeats):
    bench = BENCHES[name]
    size = bench.sizes("M")
    size["n"] = int(size["n"] * scale)
    args = bench.args(size, np.random.default_rng(0))
    k, wrt = bench.case.kernel, bench.case.wrt
    g = adjoint.grad(k, wrt=wrt)
    k(*copies(args))
    g(*copies(args))                              # compile both before timing
    times = {1: {}, 2: {}}
    for _ in range(repeats):
        for threads in (1, 2):
            adjoint.options.threads = threads
            for what, fn in (("forward", k), ("gradient", g)):
                t = best_of(fn, lambda: copies(args), 1)["wall"]
                times[threads][what] = min(times[threads].get(what, np.inf), t)
    adjoint.options.threads = 0
    row = {"kernel": name, "size": size}
    for what in ("forward", "gradient"):
        row[what] = {"1": times[1][what] * 1e3, "2": times[2][what] * 1e3,
                     "speedup": times[1][what] / times[2][what]}
    return row


def report(rows, info):
    command = " ".join(["python experiments/threads.py"] + sys.argv[1:])
    lines = ["# Thread scaling: 1 vs 2 OpenMP threads", "",
             f"Produced by `{command}`: best-of wall times in ms, "
             "1 and 2 threads alternating within one run.", "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += ["", "| kernel | size | fwd 1 thread | fwd 2 threads | speed-up | "
              "∇ 1 thread | ∇ 2 threads | speed-up |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f, g = r["forward"], r["gradient"]
        size = " ".join(f"{k}={v}" for k, v in r["size"].items())
        lines.append(f"| {r['kernel']} | {size} | {f['1']:.3g} | {f['2']:.3g} | "
                     f"{f['speedup']:.2f} | {g['1']:.3g} | {g['2']:.3g} | {g['speedup']:.2f} |")
    geo = lambda xs: float(np.exp(np.mean(np.log(xs))))         # noqa: E731
    lines += ["", f"Geometric mean speed-up: forward "
              f"{geo([r['forward']['speedup'] for r in rows]):.2f}, gradient "
              f"{geo([r['gradient']['speedup'] for r in rows]):.2f}."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default=",".join(KERNELS))
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS))
    opts = parser.parse_args()
    info = machine(engine_options=adjoint.options)
    info["load_average_at_start"] = load_average()
    rows = []
    for name in opts.kernels.split(","):
        rows.append(measure(name, opts.scale, opts.repeats))
        f, g = rows[-1]["forward"], rows[-1]["gradient"]
        print(f"{name:20s} fwd {f['1']:.3g} -> {f['2']:.3g} ms ({f['speedup']:.2f}x)  "
              f"grad {g['1']:.3g} -> {g['2']:.3g} ms ({g['speedup']:.2f}x)", flush=True)
    info["load_average_at_end"] = load_average()
    out = pathlib.Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "threads.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1))
    (out / "threads.md").write_text(report(rows, info))
    print(f"wrote {out / 'threads.md'}")


if __name__ == "__main__":
    main()
