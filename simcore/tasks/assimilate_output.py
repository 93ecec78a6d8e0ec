"""task=assimilate's files: obs.nc, analysis.nc, diagnostics.nc (CF-1.8 + provenance),
and, when matplotlib is installed and ``task.plot``, rmse.png and a Hovmoller diagram
(1-D states) or snapshots of the last cycle (2-D states)."""
import logging

import numpy as np
import xarray as xr

from ..covariance import unflatten
from ..io import pyplot, save_figure, write_netcdf
from ..plots import dim_label, fields, label
from ..state import state_dataset

log = logging.getLogger("simcore")

# Per-cycle diagnostics: name -> (units, long_name); "1" where dimensionless or counted.
CYCLES = {
    "time": ("", "model time at the window start"),
    "rmse_background": ("", "RMSE of the background against the truth at the window start"),
    "rmse_analysis": ("", "RMSE of the analysis against the truth at the window start"),
    "rmse_background_end": ("", "RMSE of the background trajectory against the truth at "
                                "the window end (a forecast without this window's "
                                "observations)"),
    "rmse_analysis_end": ("", "RMSE of the analysis trajectory against the truth at the "
                              "window end (the next background)"),
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
    files = [_obs(run, setup), _analysis(run, setup, done), _diagnostics(run, setup, done)]
    if setup.cfg.plot:
        files += _plots(run, setup, done)
    summary["outputs"] = [f for f in files if f] + ["summary.json"]
    log.info("assimilate: wrote %s in %s", ", ".join(summary["outputs"]), run.outdir)


def _units(setup, name, default):
    if name == "time":
        return setup.model.time().units
    return default or _state_units(setup)


def _state_units(setup):
    units = {v.units for v in setup.model.variables() if v.observed}
    return units.pop() if len(units) == 1 else "1"


def _time(setup, values, long_name):
    t = setup.model.time()
    return xr.Variable(("time",), np.asarray(values, dtype=np.float64),
                       {"units": t.units, "long_name": long_name, "axis": "T"})


def _obs(run, setup):
    model, H = setup.model, setup.H
    times = (np.arange(setup.cycles)[:, None] * setup.steps + setup.offsets[None, :])
    times = times.ravel() * setup.dt
    p, units = H.size, _state_units(setup)
    names = [v.name for v in model.variables() if v.observed]
    data = {
        "y": (("time", "obs"), setup.y.reshape(-1, p),
              {"units": units, "long_name": "observation",
               "obs_error_std": float(setup.obs.sigma)}),
        "y_true": (("time", "obs"), setup.y_true.reshape(-1, p),
                   {"units": units, "long_name": "observed truth (noise-free)"}),
        "cycle": (("time",), np.repeat(np.arange(setup.cycles), len(setup.offsets)),
                  {"units": "1", "long_name": "analysis cycle of the observation"}),
        "obs_variable": (("obs",), np.array([names.index(n) for n in H.variable],
                                            dtype=np.int32),
                         {"units": "1", "long_name": "observed state variable",
                          "flag_values": np.arange(len(names), dtype=np.int32),
                          "flag_meanings": " ".join(names)}),
    }
    for d, values in H.coords.items():
        dim = model.dim(d)
        data[f"{d}_obs"] = (("obs",), values, {"units": dim.units,
                                              "long_name": f"{dim.long_name or d} of the "
                                                           "observation"})
    ds = xr.Dataset(data, coords={
        "time": _time(setup, times, "observation time"),
        "obs": ("obs", np.arange(p), {"units": "1", "long_name": "observation index"})})
    ds.attrs["observation_operator"] = H.kind
    write_netcdf(ds, run.path("obs.nc"), run.attrs(f"{model.name}: 4D-Var observations"))
    return "obs.nc"


def _stack(model, xs) -> dict:
    states = [unflatten(model, x) for x in xs]
    return {v.name: np.stack([s[v.name] for s in states]) for v in model.variables()}


def _analysis(run, setup, done):
    model, n = setup.model, len(done)
    times = np.array([setup.time(c) for c in range(n)])
    parts = []
    for suffix, xs in (("", done.xa), ("_background", done.xb), ("_truth", setup.truth[:n])):
        ds = state_dataset(model, _stack(model, xs), time=times)
        ds = ds.rename({v.name: v.name + suffix for v in model.variables()})
        for v in model.variables():
            what = {"": "analysis", "_background": "background",
                    "_truth": "truth"}[suffix]
            ds[v.name + suffix].attrs["long_name"] = f"{v.long_name} ({what})"
        parts.append(ds)
    ds = xr.merge(parts, combine_attrs="override")
    ds.time.attrs["long_name"] = "model time at the window start"
    write_netcdf(ds, run.path("analysis.nc"), run.attrs(f"{model.name}: 4D-Var analyses"))
    return "analysis.nc"


def _diagnostics(run, setup, done):
    n = len(done)
    data = {}
    for k, (units, long_name) in CYCLES.items():
        if k == "time":
            continue
        values = done.column(k)
        if units == "1" and k in ("n_obs", "iterations", "forward_runs", "adjoint_runs",
                                  "tangent_runs"):
            values = values.astype(np.int64)
        data[k] = (("cycle",), values, {"units": _units(setup, k, units),
                                        "long_name": long_name})
    width = int(done.counts.max()) if n else 0
    starts = np.concatenate([[0], np.cumsum(done.counts)[:-1]]).astype(int)
    for j, (k, (units, long_name)) in enumerate(ITERATIONS.items()):
        table = np.full((n, width), np.nan)
        for c in range(n):
            table[c, :done.counts[c]] = done.iterations[starts[c]:starts[c] + done.counts[c], j]
        data[k] = (("cycle", "iteration"), table,
                   {"units": units, "long_name": long_name + " (NaN past the last iteration)"})
    ds = xr.Dataset(data, coords={
        "cycle": ("cycle", np.arange(n), {"units": "1", "long_name": "analysis cycle"}),
        "iteration": ("iteration", np.arange(width),
                      {"units": "1", "long_name": "minimiser iteration (0: the background)"}),
        "time": (("cycle",), done.column("time"),
                 {"units": setup.model.time().units, "long_name": CYCLES["time"][1],
                  "axis": "T"})})
    ds.attrs.update(method=setup.cfg.method, burn_in=setup.burn_in)
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
    t = done.column("time")
    units = _state_units(setup)
    fig, ax = plt.subplots(figsize=(8, 4))
    # the analysis at a window's end is the next window's background: one line shows both
    ax.plot(t, done.column("rmse_background"), "-", lw=0.8, color="C0",
            label="background at the window start (= previous analysis at its end)")
    ax.plot(t, done.column("rmse_analysis"), "-", lw=0.8, color="C1",
            label="analysis at the window start")
    end = t + setup.steps * setup.dt
    ax.plot(end, done.column("rmse_background_end"), ":", marker=".", lw=0.8, color="C2",
            label="background forecast at the window end (no observations)")
    ax.axhline(setup.obs.sigma, color="k", ls="--", lw=0.8, label="observation error std")
    ax.set_xlabel(label(model.time().long_name, model.time().units))
    ax.set_ylabel(label("RMSE against the truth", units))
    ax.set_yscale("log")
    ax.set_title(f"{model.name}: 4D-Var ({setup.cfg.method}), {n} cycles")
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_figure(fig, run.path("rmse.png"))
    plt.close(fig)
    variable = model.variables()[0]
    if len(variable.dims) == 1:
        return ["rmse.png", _hovmoller(plt, run, setup, done, variable)]
    if len(variable.dims) == 2:
        xt = _stack(model, setup.truth[n - 1:n])[variable.name][0]
        xb = _stack(model, done.xb[-1:])[variable.name][0]
        xa = _stack(model, done.xa[-1:])[variable.name][0]
        fields(plt, run.path("analysis.png"),
               [("truth", xt), ("background", xb), ("analysis", xa)],
               [model.dim(d) for d in variable.dims], label(variable.long_name, variable.units),
               difference=("analysis - truth", xa - xt),
               title=f"{model.name}: {variable.name} at the start of the last cycle")
        return ["rmse.png", "analysis.png"]
    return ["rmse.png"]


def _hovmoller(plt, run, setup, done, variable, cycles=25):
    """Truth, analysis trajectory and their difference at every observation interval over
    the last ``cycles`` cycles (forward runs from the analyses)."""
    model, n = setup.model, len(done)
    times, xt, xa = [], [], []
    for c in range(max(n - cycles, 0), n):
        frames = setup.window(c, done.xa[c]).trajectory(done.xa[c])
        xa += [done.xa[c], *frames[:-1]]
        xt += [setup.truth[c], *setup.truth_obs[c][:-1]]
        times += list(setup.time(c) + np.array([0, *setup.offsets[:-1]]) * setup.dt)
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
        im = a.pcolormesh(x, times, z, cmap="RdBu_r", vmin=-vm, vmax=vm, shading="nearest")
        a.set_title(f"{variable.name}: {title}")
        a.set_xlabel(dim_label(dim))
        a.set_ylabel(label(model.time().long_name, model.time().units))
        fig.colorbar(im, ax=a, label=quantity)
    fig.suptitle(f"{model.name}: last {min(cycles, n)} cycles, every {setup.obs.every_m} steps")
    fig.tight_layout()
    save_figure(fig, run.path("hovmoller.png"))
    plt.close(fig)
    return "hovmoller.png"
