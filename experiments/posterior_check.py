"""Is calibrate's posterior std right? The spread of estimates over noisy twins against it.

    python experiments/posterior_check.py                 # 50 twins of seidel and lorenz96
    python experiments/posterior_check.py --runs 10 --models lorenz96

Each run is ``task=calibrate`` with noisy observations and its own seed (its own noise,
first guess and, for both models, initial state), exactly as ``python run.py
model=<name> task=calibrate model.obs.noise=true seed=<k>`` runs it. For every
parameter value the normalised error z = (estimate - truth) / reported posterior std
should be N(0, 1) if the std is right: the check passes when the spread of z over all
runs and parameter values, std(z), is within 20 % of 1. Also per parameter: the spread
of the estimates over the runs against the RMS of the reported stds.

Writes experiments/results/posterior_check.{json,md}.
"""
import argparse
import datetime
import json
import logging
import os
import pathlib
import platform
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simcore.config import compose  # noqa: E402
from simcore.tasks import run_task  # noqa: E402

RESULTS = ROOT / "experiments" / "results"
TOLERANCE = 0.2


def one(model, seed, outdir):
    cfg = compose([f"model={model}", "task=calibrate", "model.obs.noise=true", f"seed={seed}",
                   "task.plot=false", "task.log_every=1000", f"checkpoint_dir={outdir}/ck"])
    s = run_task(cfg, outdir / f"{model}-{seed}", argv=["experiments/posterior_check.py"])
    flat = lambda d: np.concatenate([np.ravel(v) for v in d.values()])      # noqa: E731
    return flat(s["params_final"]), flat(s["params_true"]), flat(s["posterior_std"])


def check(model, runs, outdir) -> dict:
    start = time.perf_counter()
    est, truth, std = map(np.array, zip(*(one(model, k, outdir) for k in range(runs))))
    z = (est - truth) / std
    spread = est.std(axis=0, ddof=1)                          # per parameter value
    reported = np.sqrt(np.mean(std ** 2, axis=0))
    return {"model": model, "runs": runs, "parameters": int(est.shape[1]),
            "std_z": float(z.std(ddof=1)), "mean_z": float(z.mean()),
            "spread_over_reported": (spread / reported).tolist(),
            "reported_std_rms": reported.tolist(), "spread": spread.tolist(),
            "passed": bool(abs(z.std(ddof=1) - 1.0) <= TOLERANCE),
            "seconds": time.perf_counter() - start}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--models", nargs="+", default=["seidel", "lorenz96"])
    ap.add_argument("--out", default=str(RESULTS / "posterior_check"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    outdir = pathlib.Path(tempfile.mkdtemp(prefix="posterior_check_"))
    machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "python": platform.python_version(),
               "date": datetime.datetime.now().isoformat(timespec="seconds")}
    result = {"machine": machine, "tolerance": TOLERANCE,
              "checks": [check(m, args.runs, outdir) for m in args.models]}
    out = pathlib.Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0 if all(c["passed"] for c in result["checks"]) else 1


def markdown(result) -> str:
    lines = ["# Posterior std of calibrated parameters against the spread of estimates", ""]
    lines += [f"- {k}: {v}" for k, v in result["machine"].items()]
    lines += ["", "Noisy twin calibrations, one seed each (`python run.py model=<name> "
              "task=calibrate model.obs.noise=true seed=<k>`). z = (estimate - truth) / "
              "reported posterior std (Gauss-Newton, simcore/posterior.py); std(z) = 1 "
              f"when the reported std is right; passed when within {result['tolerance']:.0%}"
              " (with 50 runs the sampling error of a std is about 10 %).", "",
              "| model | runs | parameters | std(z) | mean(z) | spread / reported std per "
              "parameter (min-max) | passed | s |", "|---|---|---|---|---|---|---|---|"]
    for c in result["checks"]:
        ratio = c["spread_over_reported"]
        lines.append(f"| {c['model']} | {c['runs']} | {c['parameters']} | {c['std_z']:.3f} | "
                     f"{c['mean_z']:+.3f} | {min(ratio):.2f}-{max(ratio):.2f} | "
                     f"{'yes' if c['passed'] else 'NO'} | {c['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
