"""task=assimilate's files: analysis.nc, diagnostics.nc (CF-1.8 + provenance); for twin
runs observations.nc, truth.nc and background.nc (simcore.obsfile's formats, which
obs.file, truth.file and background.file read); and, when matplotlib is installed, a
truth is known and ``task.plot``, rmse.png and a Hovmoller diagram (1-D states) or
snapshots of the last cycle (2-D states)."""
import logging

import numpy as np
import xarray as xr

from ..covariance import unflatten
from ..io import pyplot, save_figure, write_netcdf
from ..obsfile import write_states
from ..plots import dim_label, fields, label
from ..state import state_dataset

log = logging.getLogger("simcore")

# Per-cycle diagnostics: name -> (units, long_name); "1" where dimensionless or counted.
CYCLES = {
    "time": ("", "model time at the window start"),
    "time_end": ("", "model time at the window end (its last observation time)"),
    "rmse_background_start": ("", "RMSE of the background against the truth at the window "
                                  "start"),
    "rmse_analysis_start": ("", "RMSE of the analysis against the truth at the window start "
                                "(where the control variable lives)"),
    "rmse_background_end": ("", "RMSE of the background trajectory against the truth at "
                                "the window end (a forecast without this window's "
                                "observations)"),
    "rmse_analysis_end": ("", "RMSE of the analysis trajectory against the truth at the "
                              "window end"),
    "omb_mean": ("", "mean observation minus background (over the window)"),
    "omb_std": ("", "std of observation minus background (over the window)"),
    "oma_mean": ("", "mean observation minus analysis (over the window)"),
    "oma_std": ("", "std of observation minus analysis (over the window)"),
    "cost_initial": ("1", "cost function J at the background"),
    "cost_final": ("1", "cost function J at the analysis"),
    "cost_background": ("1", "background term J_b at the analysis"),
    "cost_obs": ("1", "observation term J_o at the analysis"),
    "chi2": ("1", "2 J_min (expected: about the number of observations)"),
    "n_obs": ("1", "number of observations in the window"),
    "grad_norm_final": ("1", "|grad J| / |grad J_0| at the analysis"),
    "iterations": ("1", "minimiser iterations (Gauss-Newton: inner CG iterations)"),
    "forward_runs": ("1", "nonlinear model runs over the window"),
    "adjoint_runs": ("1", "adjoint model runs over the window"),
    "tangent_runs": ("1", "tangent-linear model runs over the window"),
    "seconds": ("s", "wall time of the cycle"),
}
# Scores at each observation time (DAPPER's meanings), NaN where a time has none.
SCORES = ("f", "a", "s")
SCORE_NAMES = {
    "f": "RMSE of the forecast one observation interval ahead of the last analysis (the "
         "background trajectory before this time is assimilated)",
    "a": "RMSE of the analysis at the window end (this time ends a window)",
    "s": "RMSE of the state at the window start after assimilation (this time starts a "
         "window)",
}
CYCLE_COLUMNS = list(CYCLES)
ITERATIONS = {
    "cost": ("1", "cost function J"),
    "cost_background": ("1", "background term J_b"),
    "cost_obs": ("1", "observation term J_o"),
    "grad_norm_rel": ("1", "|grad J| / |grad J_0|"),
    "outer_loop": ("1", "Gauss-Newton outer loop (0 for L-BFGS)"),
    "quadratic": ("1", "1: J of the quadratic (incremental) model, 0: nonlinear J"),
}


def write_outputs(run, setup, done, summary):
    files = _twin_files(run, setup, done) + [_analysis(run, setup, done),
                                       _diagnostics(run, setup, done)]
    if setup.cfg.plot and setup.truth is not None:
        files += _plots(run, setup, done)
    summary["outputs"] = [f for f in files if f] + ["summary.json"]
    log.info("assimilate: wrote %s in %s", ", ".join(summary["outputs"]), run.outdir)


def _units(setup, name, default):
    if name in ("time", "time_end"):
        return setup.model.time().units
    return default or _state_units(setup)


def _state_units(setup):
    units = {v.units for v in setup.model.variables() if v.observed}
    return units.pop() if len(units) == 1 else "1"


def _twin_files(run, setup, done) -> list:
    """A twin's observations, truth and first background, as the files that
    ``obs.file``, ``truth.file`` and ``background.file`` read (simcore.obsfile)."""
    if not setup.twin:
        return []
    name = setup.model.name
    setup.data.write(run.path("observations.nc"), run.attrs(f"{name}: observations of a "
                                                            "twin truth run"))
    write_states(setup.model, run.path("truth.nc"), setup.truth, setup.T * setup.dt,
                 run.attrs(f"{name}: truth at the initial time and every observation time"))
    write_states(setup.model, run.path("background.nc"), done.xb[:1], [0.0],
                 run.attrs(f"{name}: the first background (time 0)"))
    return ["observations.nc", "truth.nc", "background.nc"]


def _stack(model, xs) -> dict:
    states = [unflatten(model, x) for x in xs]
    return {v.name: np.stack([s[v.name] for s in states]) for v in model.variables()}


def _analysis(run, setup, done):
    model, n = setup.model, len(done)
    times = np.array([setup.time(c) for c in range(n)])
    series = [("", done.xa, "analysis"), ("_background", done.xb, "background")]
    if setup.truth is not None:
        series.append(("_truth", setup.truth[[setup.start(c) for c in range(n)]], "truth"))
    parts = []
    for suffix, xs, what in series:
        ds = state_dataset(model, _stack(model, xs), time=times)
        ds = ds.rename({v.name: v.name + suffix for v in model.variables()})
        for v in model.variables():
            ds[v.name + suffix].attrs["long_name"] = f"{v.long_name} ({what})"
        parts.append(ds)
    ds = xr.merge(parts, combine_attrs="override")
    ds.time.attrs["long_name"] = "model time at the window start"
    write_netcdf(ds, run.path("analysis.nc"), run.attrs(f"{model.name}: 4D-Var analyses at "
                                                        "the window starts"))
    return "analysis.nc"


COUNTS = ("n_obs", "iterations", "forward_runs", "adjoint_runs", "tangent_runs")


def _diagnostics(run, setup, done):
    n = len(done)
    data = {}
    for k, (units, long_name) in CYCLES.items():
        if k == "time":
            continue
        values = done.column(k)
        if k in COUNTS:
            values = values.astype(np.int64)
        data[k] = (("cycle",), values, {"units": _units(setup, k, units),
                                        "long_name": long_name})
    counts = done.counts
    width = int(counts.max()) if n else 0
    for j, (k, (units, long_name)) in enumerate(ITERATIONS.items()):
        table = np.full((n, width), np.nan)
        for c in range(n):
            table[c, :counts[c]] = done.iterations[c][:, j]
        data[k] = (("cycle", "iteration"), table,
                   {"units": units, "long_name": long_name + " (NaN past the last iteration)"})
    for i, k in enumerate(SCORES):
        data[f"rmse_{k}"] = (("obs_time",), done.scores[1:, i],
                             {"units": _state_units(setup),
                              "long_name": SCORE_NAMES[k] + " (NaN: none at this time)"})
    t = setup.model.time()
    ds = xr.Dataset(data, coords={
        "cycle": ("cycle", np.arange(n), {"units": "1", "long_name": "analysis cycle"}),
        "iteration": ("iteration", np.arange(width),
                      {"units": "1", "long_name": "minimiser iteration (0: the background)"}),
        "time": (("cycle",), done.column("time"),
                 {"units": t.units, "long_name": CYCLES["time"][1], "axis": "T"}),
        "obs_time": ("obs_time", setup.T[1:] * setup.dt,
                     {"units": t.units, "long_name": "observation time", "axis": "T"})})
    ds.attrs.update(method=setup.cfg.method, window=setup.W, shift=setup.S,
                    newest_only=int(bool(setup.cfg.newest_only)),
                    burn_in_time=setup.burn_in_time)
    write_netcdf(ds, run.path("diagnostics.nc"),
                 run.attrs(f"{setup.model.name}: 4D-Var diagnostics"))
    return "diagnostics.nc"


def _plots(run, setup, done):
    plt = pyplot()
    if plt is None:
        log.info("assimilate: no plots: matplotlib is not installed (pip install -e "
                 "\".[plot]\")")
        return []
    model, n = setup.model, len(done)
    t = setup.T[1:] * setup.dt
    units = _state_units(setup)
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, (k, style) in enumerate(zip(SCORES, ("-", "-", ":"))):
        values = done.scores[1:, i]
        keep = np.isfinite(values)
        ax.plot(t[keep], values[keep], style, lw=0.8, color=f"C{i}",
                label={"f": "forecast one interval ahead (f)",
                       "a": "analysis at the window end (a)",
                       "s": "window start after assimilation (s)"}[k])
    ax.axhline(float(np.mean(setup.data.error_std)), color="k", ls="--", lw=0.8,
               label="observation error std")
    ax.axvline(setup.burn_in_time, color="0.6", lw=0.8, label="burn-in")
    ax.set_xlabel(label(model.time().long_name, model.time().units))
    ax.set_ylabel(label("RMSE against the truth", units))
    ax.set_yscale("log")
    ax.set_title(f"{model.name}: 4D-Var ({setup.cfg.method}), {n} cycles, window "
                 f"{setup.W}, shift {setup.S}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, run.path("rmse.png"))
    plt.close(fig)
    variable = model.variables()[0]
    if len(variable.dims) == 1:
        return ["rmse.png", _hovmoller(plt, run, setup, done, variable)]
    if len(variable.dims) == 2:
        s = setup.start(n - 1)
        xt = _stack(model, setup.truth[s:s + 1])[variable.name][0]
        xb = _stack(model, done.xb[-1:])[variable.name][0]
        xa = _stack(model, done.xa[-1:])[variable.name][0]
        fields(plt, run.path("analysis.png"),
               [("truth", xt), ("background", xb), ("analysis", xa)],
               [model.dim(d) for d in variable.dims], label(variable.long_name, variable.units),
               difference=("analysis - truth", xa - xt),
               title=f"{model.name}: {variable.name} at the start of the last cycle")
        return ["rmse.png", "analysis.png"]
    return ["rmse.png"]


def _hovmoller(plt, run, setup, done, variable, times=100):
    """Truth, analysis trajectory and their difference at the last ``times`` observation
    times: each time from the window that first reaches it (forward runs from the
    analyses)."""
    model, n = setup.model, len(done)
    stamps, xt, xa = [], [], []
    cycles = -(-times // setup.S)                      # each reaches shift new times
    for c in range(max(n - cycles, 0), n):
        frames = setup.window(c, done.xa[c]).trajectory(done.xa[c])
        used = list(setup.assimilated(c))
        for j in range(setup.end(c - 1) + 1, setup.end(c) + 1):
            xa.append(frames[used.index(j)])
            xt.append(setup.truth[j])
            stamps.append(setup.T[j] * setup.dt)
    xt = _stack(model, xt)[variable.name]
    xa = _stack(model, xa)[variable.name]
    dim = model.dim(variable.dims[0])
    x = dim.values()
    lim = max(float(np.max(np.abs(xt))), float(np.max(np.abs(xa))))
    err = xa - xt
    quantity = label(variable.long_name, variable.units)
    fig, axes = plt.subplots(1, 3, figsize=(12, 5))
    for a, (title, z, vm) in zip(axes, [("truth", xt, lim), ("analysis", xa, lim),
                                        ("analysis - truth", err,
                                         max(float(np.max(np.abs(err))), 1e-12))]):
        im = a.pcolormesh(x, stamps, z, cmap="RdBu_r", vmin=-vm, vmax=vm, shading="nearest")
        a.set_title(f"{variable.name}: {title}")
        a.set_xlabel(dim_label(dim))
        a.set_ylabel(label(model.time().long_name, model.time().units))
        fig.colorbar(im, ax=a, label=quantity)
    fig.suptitle(f"{model.name}: the last {len(stamps)} observation times")
    fig.tight_layout()
    save_figure(fig, run.path("hovmoller.png"))
    plt.close(fig)
    return "hovmoller.png"
