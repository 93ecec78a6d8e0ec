"""task=assimilate against DAPPER's Var4D, on DAPPER's own truth and observations.

    pip install dapper               # optional; without it this script says so and exits 0
    python experiments/dapper_compare.py                    # Nx = 40, Lag 1, 2, 4, Ko = 1000
    python experiments/dapper_compare.py --ko 100           # a quick look
    python experiments/dapper_compare.py --nx 400 --lags 4  # DAPPER: about 40 minutes

DAPPER (nansencenter/DAPPER, the reference Python data-assimilation toolbox) runs its
sakov2008 Lorenz-96 setup -- all Nx variables observed every ``dko`` = 4 steps
(dt = 0.05), R = I, Ko + 1 observation times, time means after t = 20 -- with its
exact-tangent-linear Var4D: a window of Lag observation intervals sliding by one, the
newest observation assimilated, B = xB I (``B="eye"``), Gauss-Newton with the exact
tangent-linear model of its RK4 step (``--tlm exact``, composed here from DAPPER's
continuous Jacobian; ``--tlm dapper`` keeps DAPPER's own ``dstep_dx``, the matrix
exponential of the continuous Jacobian, with which its analyses come out about 2 %
worse than the minimum of the cost would give). Its truth and
observations go into simcore's observation file (and its truth and first background,
X0's mean, into state files), and ``task=assimilate`` runs on them with the same
scheme: ``obs.file=... truth.file=... background.file=... task.cycles=null
task.window=Lag task.shift=1 task.newest_only=true task.b_std=sqrt(xB)
task.b_length=0 task.burn_in_time=20`` (L-BFGS on the nonlinear cost). One table:
rmse.a / rmse.f / rmse.s and seconds per window, side by side.

DAPPER 1.7.1's Var4D calls the observation operator it got for an observation time with
that time's integer index (``Obs(ko).linear(x)`` on ``Obs = HMM.Obs(ko)``), which
indexes the integer and fails with IndexError. DAPPER is not edited: the script gives
the HMM a time-dependent observation operator whose operator, called with an integer,
returns itself (and the identity selection of the state otherwise), so both of
DAPPER's calling conventions work.

Writes experiments/results/dapper_compare.{json,md}; the files and run folders go to a
temporary folder unless --keep DIR is given. No DAPPER code is copied here: the HMM is
assembled from DAPPER's own modules at run time.
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

RESULTS = ROOT / "experiments" / "results"
XB = {1: 0.2, 2: 0.1, 4: 0.02}          # sakov2008's suggested xB per Lag (DAPPER's notes)
BURN_IN = 20.0


def rk4_jacobian(x, t, dt):
    """The exact Jacobian of one classical RK4 step of Lorenz-96 (what DAPPER's ``step``
    takes), by the chain rule through the four stages with DAPPER's continuous Jacobian
    ``d2x_dtdx``. (DAPPER's own ``dstep_dx`` is expm(dt Df(x)), the frozen continuous
    flow's, which is not the step's Jacobian: its Gauss-Newton then stops beside the
    minimum.)"""
    from dapper.mods.Lorenz96 import dxdt
    from dapper.mods.Lorenz96.extras import d2x_dtdx
    eye = np.eye(len(x))
    k1, J1 = dxdt(x), d2x_dtdx(x)
    x2 = x + 0.5 * dt * k1
    k2, J2 = dxdt(x2), d2x_dtdx(x2) @ (eye + 0.5 * dt * J1)
    x3 = x + 0.5 * dt * k2
    k3, J3 = dxdt(x3), d2x_dtdx(x3) @ (eye + 0.5 * dt * J2)
    J4 = d2x_dtdx(x + dt * k3) @ (eye + dt * J3)
    return eye + dt / 6.0 * (J1 + 2.0 * J2 + 2.0 * J3 + J4)


def dapper_hmm(nx, ko, tlm="exact"):
    """sakov2008's HMM at ``nx`` variables, dko = 4, with the observation-operator fix;
    ``tlm``: "exact" (the RK4 step's Jacobian) or "dapper" (its dstep_dx)."""
    import dapper.mods as modelling
    from dapper.mods.Lorenz96 import dstep_dx, step, x0
    tseq = modelling.Chronology(0.05, dko=4, Ko=ko, BurnIn=BURN_IN)
    dyn = {"M": nx, "model": step, "noise": 0,
           "linear": rk4_jacobian if tlm == "exact" else dstep_dx}
    jj = np.arange(nx)
    eye = np.eye(nx)[jj]
    op = modelling.Operator(nx, noise=1)

    def observe(x):                     # called with a state, or (Var4D) an obs index
        return op if isinstance(x, (int, np.integer)) else x[..., jj]
    op.model, op.linear = observe, (lambda x: eye)
    obs = modelling.TimeDependentOperator(time_dependent=lambda ko: op)
    x_start = modelling.GaussRV(mu=x0(nx), C=0.001)
    return modelling.HiddenMarkovModel(dyn, obs, tseq, x_start)


def run_dapper(hmm, xx, yy, lag, xb):
    import dapper.da_methods as da
    xp = da.Var4D(Lag=lag, xB=xb, B="eye")
    start = time.perf_counter()
    xp.assimilate(hmm, xx, yy)
    seconds = time.perf_counter() - start
    xp.stats.average_in_time()
    a = xp.avrgs
    return {"rmse_a": float(a.rmse.a.val), "rmse_f": float(a.rmse.f.val),
            "rmse_s": float(a.rmse.s.val), "seconds": seconds,
            "seconds_per_window": seconds / (hmm.tseq.Ko + 1 + lag)}


def export(hmm, xx, yy, folder):
    """DAPPER's observations, truth (t = 0 and every observation time) and X0's mean as
    simcore's observation and state files."""
    import simcore
    from simcore.obsfile import ObservationSet, write_states
    nx, tseq = hmm.Nx, hmm.tseq
    model = simcore.get_model("lorenz96", overrides(nx))
    values = np.stack([np.asarray(y, dtype=np.float64) for y in yy])       # (Ko + 1, nx)
    k = len(values)
    steps = np.repeat(np.asarray(tseq.kko, dtype=np.int64), nx)
    data = ObservationSet(model, steps, np.full(k * nx, "x"),
                          {"site": np.tile(np.arange(nx, dtype=np.float64), k)},
                          values.ravel(), np.ones(k * nx), extra={"type": np.full(k * nx, "dapper")})
    folder.mkdir(parents=True, exist_ok=True)
    attrs = {"title": f"DAPPER sakov2008 Lorenz-96, Nx = {nx}, dko = 4, Ko = {tseq.Ko}",
             "source": "DAPPER HiddenMarkovModel.simulate"}
    data.write(folder / "observations.nc", attrs)
    write_states(model, folder / "truth.nc", np.concatenate([xx[:1], xx[tseq.kko]]),
                 np.concatenate([[0.0], tseq.tto]), attrs)
    write_states(model, folder / "background.nc", [hmm.X0.mu], [0.0], attrs)
    return folder


def overrides(nx):
    from simcore.config import compose
    return compose(["model=lorenz96", f"model.n={nx}"]).model


def run_simcore(folder, nx, lag, xb, method):
    from simcore.config import compose
    from simcore.tasks import run_task
    cfg = compose(["model=lorenz96", f"model.n={nx}", "task=assimilate",
                   f"obs.file={folder}/observations.nc", f"truth.file={folder}/truth.nc",
                   f"background.file={folder}/background.nc", "task.cycles=null",
                   f"task.window={lag}", "task.shift=1", "task.newest_only=true",
                   f"task.b_std={float(np.sqrt(xb))!r}", "task.b_length=0",
                   f"task.burn_in_time={BURN_IN}", f"task.method={method}",
                   "task.checkpoint_every=1000", "task.log_every=1000", "task.plot=false",
                   f"checkpoint_dir={folder}/checkpoints"])
    cpu = time.process_time()
    s = run_task(cfg, folder / f"simcore-lag{lag}-{method}",
                 argv=["experiments/dapper_compare.py"])
    return {k: s[k] for k in ("rmse_a", "rmse_f", "rmse_s", "seconds_per_cycle",
                              "iterations_per_cycle", "cycles")} | {
        "cpu_seconds": time.process_time() - cpu, "method": method}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nx", type=int, nargs="+", default=[40])
    ap.add_argument("--lags", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--ko", type=int, default=1000, help="observation times - 1")
    ap.add_argument("--seed", type=int, default=3000)
    ap.add_argument("--method", default="lbfgs", choices=["lbfgs", "gauss_newton"])
    ap.add_argument("--tlm", default="exact", choices=["exact", "dapper"],
                    help="DAPPER's tangent-linear model: the RK4 step's Jacobian, or its "
                         "own dstep_dx")
    ap.add_argument("--keep", default=None)
    ap.add_argument("--out", default=str(RESULTS / "dapper_compare"))
    args = ap.parse_args()
    try:
        import dapper
        from dapper.tools.seeding import set_seed
    except ImportError:
        print("dapper_compare: DAPPER is not installed (pip install dapper); skipped")
        return 0
    logging.basicConfig(level=logging.WARNING)
    base = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="dapper_compare_"))
    machine = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
               "python": platform.python_version(),
               "load_average_at_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
               "date": datetime.datetime.now().isoformat(timespec="seconds")}
    rows = []
    for nx in args.nx:
        set_seed(args.seed)
        hmm = dapper_hmm(nx, args.ko, args.tlm)
        xx, yy = hmm.simulate()
        folder = export(hmm, xx, yy, base / f"nx{nx}")
        for lag in args.lags:
            xb = XB.get(lag, 0.02)
            ours = run_simcore(folder, nx, lag, xb, args.method)
            theirs = run_dapper(hmm, xx, yy, lag, xb)
            rows.append({"nx": nx, "lag": lag, "xB": xb, "dapper": theirs, "simcore": ours})
            print(row_line(rows[-1]), flush=True)
    result = {"machine": machine, "dapper_version": dapper.__version__, "ko": args.ko, "seed": args.seed,
              "tlm": args.tlm, "method": args.method,
              "rows": rows}
    out = pathlib.Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    return 0


def row_line(r) -> str:
    d, s = r["dapper"], r["simcore"]
    return (f"| {r['nx']} | {r['lag']} | {r['xB']} | {d['rmse_a']:.4f} / {s['rmse_a']:.4f} | "
            f"{d['rmse_f']:.4f} / {s['rmse_f']:.4f} | {d['rmse_s']:.4f} / {s['rmse_s']:.4f} | "
            f"{d['seconds_per_window'] * 1e3:.1f} / {s['seconds_per_cycle'] * 1e3:.1f} | "
            f"{d['seconds_per_window'] / s['seconds_per_cycle']:.1f} |")


def markdown(result) -> str:
    lines = ["# task=assimilate against DAPPER's Var4D on DAPPER's data", ""]
    lines += [f"- {k}: {v}" for k, v in result["machine"].items()]
    lines += [f"- DAPPER {result['dapper_version']}, sakov2008 Lorenz-96, dko = 4, "
              f"Ko = {result['ko']} (Ko + 1 observation times), seed {result['seed']}, "
              f"time means after t = {BURN_IN:g}; DAPPER's tangent-linear model: "
              f"{result['tlm']}; simcore's minimiser: {result['method']}", "",
              "Each pair: DAPPER / simcore (task=assimilate on DAPPER's truth and "
              "observations exported to simcore's observation file). a: analysis at the "
              "window end, f: forecast one interval ahead, s: window start after "
              "assimilation. ms/window: wall time per window.", "",
              "| Nx | Lag | xB | rmse.a | rmse.f | rmse.s | ms / window | DAPPER / simcore |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [row_line(r) for r in result["rows"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
