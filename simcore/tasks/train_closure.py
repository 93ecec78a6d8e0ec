"""task=train_closure: learn a neural subgrid closure of two-scale Lorenz-96, offline or online.

The truth (model=lorenz96_2scale, both scales) is run ``task.train_time`` for training and
``task.test_time`` more, held out; the hybrid is the one-scale model on the slow
variables plus a network of two tanh layers (models/lorenz96_hybrid.py) stepped every
``task.substeps`` truth steps. ``task.mode``: offline fits the network to the diagnosed
subgrid tendency -(h c / b) sum_j Y_jk; online trains it through ``task.rollout``-step
rollouts of the compiled hybrid against the truth's slow variables (the engine's
gradient); all does both; Adam in every case (simcore.closure). Every run scores the
hybrid without closure (none) beside what it trained: forecast RMSE per lead time, the
valid prediction time, and the long run's mean, std, autocorrelation and histogram
against the held-out truth. Writes closure.nc (weights, losses, scores), summary.json,
rmse.png, statistics.png, loss.png.
"""
import logging
import time

import numpy as np
import xarray as xr

from ..closure import (Data, evaluate, hellinger, initial_weights, statistics, step_seconds,
                       train_offline, train_online)
from ..io import pyplot, save_figure, write_json, write_netcdf
from ..models.lorenz96_hybrid import WEIGHTS, no_closure

log = logging.getLogger("simcore")
WEIGHT_DIMS = {"W1": ("hidden", "input"), "b1": ("hidden",), "W2": ("hidden", "hidden_in"),
               "b2": ("hidden",), "w3": ("hidden",), "b3": ("output",)}


def train_closure(run) -> dict:
    model, cfg = run.model, run.cfg.task
    seed, every = int(run.cfg.seed), int(cfg.log_every)
    t0 = time.perf_counter()
    data = Data.from_truth(model, float(cfg.train_time), float(cfg.test_time),
                           int(cfg.substeps))
    log.info("train_closure: truth of %d + %d hybrid steps (dt %g) in %.2f s",
             len(data.X_train) - 1, len(data.X_test) - 1, data.dt, time.perf_counter() - t0)
    weights = {"none": no_closure(int(cfg.hidden))}
    losses, timing = {}, {}
    modes = {"all": ["offline", "online"], "none": []}.get(cfg.mode, [cfg.mode])
    offline = None
    if "offline" in modes or ("online" in modes and cfg.online_init == "offline"):
        offline = initial_weights(cfg.hidden, seed)
        t0 = time.perf_counter()
        losses["offline"] = train_offline(data, offline, cfg, np.random.default_rng([seed, 2]),
                                          every)
        timing["offline_train_s"] = time.perf_counter() - t0
        if "offline" in modes:
            weights["offline"] = offline
    if "online" in modes:
        w = initial_weights(cfg.hidden, seed) if offline is None or \
            cfg.online_init == "random" else {n: a.copy() for n, a in offline.items()}
        t0 = time.perf_counter()
        losses["online"], seconds = train_online(data, w, cfg, np.random.default_rng([seed, 3]),
                                                 every)
        timing["online_train_s"] = time.perf_counter() - t0
        forward, step = step_seconds(data, w, cfg, np.random.default_rng([seed, 4]))
        timing.update(online_step_s=step, rollout_forward_s=forward,
                      step_over_forward=step / forward,
                      online_step_median_in_training_s=float(np.median(seconds)))
        weights["online"] = w
    t0 = time.perf_counter()
    scores = {m: evaluate(data, w, m, cfg) for m, w in weights.items()}
    truth = statistics(data.X_test, cfg, data)
    timing["evaluate_s"] = time.perf_counter() - t0
    summary = _summary(run, data, scores, truth, losses, timing)
    _write_dataset(run, data, weights, losses, scores, truth)
    summary["outputs"] = ["closure.nc", "summary.json"]
    if cfg.plot:
        summary["outputs"] += _plots(run, data.dt, scores, truth, losses)
    summary["wall_time_s"] = run.elapsed()
    write_json(summary, run.path("summary.json"))
    for m, s in summary["scores"].items():
        log.info("train_closure: %-7s RMSE %s; VPT %.3f (median %.3f); long run mean %.3f "
                 "std %.3f (truth %.3f, %.3f), histogram distance %.3f", m,
                 " ".join(f"{k}:{v:.3f}" for k, v in s["rmse"].items()), s["vpt_mean"],
                 s["vpt_median"], s["mean"], s["std"], truth["mean"], truth["std"],
                 s["hellinger"])
    return summary


def _at(lead, values, t):
    """``values`` at the lead time nearest ``t``."""
    return float(values[int(np.argmin(np.abs(lead - t)))])


def _summary(run, data, scores, truth, losses, timing) -> dict:
    cfg = run.cfg.task
    width = float(truth["bins"][1] - truth["bins"][0])
    out = {}
    for m, s in scores.items():
        out[m] = {"rmse": {f"{t:g}": _at(s["lead_time"], s["rmse"], t) for t in cfg.leads},
                  "vpt_mean": float(np.mean(s["vpt"])), "vpt_median": float(np.median(s["vpt"])),
                  "mean": s["mean"], "std": s["std"],
                  "hellinger": hellinger(s["hist"], truth["hist"], width),
                  "acf_rmse": float(np.sqrt(np.mean((s["acf"] - truth["acf"]) ** 2)))}
    return {**run.header(), "mode": cfg.mode, "hybrid_dt": data.dt,
            "train_states": len(data.X_train), "test_states": len(data.X_test),
            "parameters": sum(int(np.size(w)) for w in
                              initial_weights(cfg.hidden, 0).values()),
            "vpt_threshold": float(cfg.vpt_threshold),
            "climatological_std": float(data.X_test.std()),
            "truth": {"mean": truth["mean"], "std": truth["std"]},
            "final_loss": {m: float(l[-1]) for m, l in losses.items() if len(l)},
            "timing": timing, "scores": out}


def _write_dataset(run, data, weights, losses, scores, truth):
    modes = list(scores)
    first = scores[modes[0]]
    centres = 0.5 * (truth["bins"][1:] + truth["bins"][:-1])
    lag = np.arange(len(truth["acf"])) * data.dt
    ds = xr.Dataset(coords={
        "mode": ("mode", modes, {"long_name": "closure"}),
        "lead_time": ("lead_time", first["lead_time"], {"units": "1", "long_name": "lead time"}),
        "bin": ("bin", centres, {"units": "1", "long_name": "histogram bin centre of X"}),
        "lag": ("lag", lag, {"units": "1", "long_name": "autocorrelation lag"}),
        "forecast": ("forecast", np.arange(len(first["vpt"])),
                     {"units": "1", "long_name": "forecast number"})})
    ds["rmse"] = (("mode", "lead_time"), np.stack([scores[m]["rmse"] for m in modes]),
                  {"units": "1", "long_name": "forecast RMSE of X against the truth"})
    ds["vpt"] = (("mode", "forecast"), np.stack([scores[m]["vpt"] for m in modes]),
                 {"units": "1", "long_name": "valid prediction time"})
    ds["acf"] = (("mode", "lag"), np.stack([scores[m]["acf"] for m in modes]),
                 {"units": "1", "long_name": "autocorrelation of X in the long run"})
    ds["hist"] = (("mode", "bin"), np.stack([scores[m]["hist"] for m in modes]),
                  {"units": "1", "long_name": "density of X in the long run"})
    ds["truth_acf"] = (("lag",), truth["acf"], {"units": "1",
                                                "long_name": "autocorrelation of the truth's X"})
    ds["truth_hist"] = (("bin",), truth["hist"], {"units": "1",
                                                  "long_name": "density of the truth's X"})
    for m, w in weights.items():
        for n in WEIGHTS:
            ds[f"{m}_{n}"] = (WEIGHT_DIMS[n], w[n], {"units": "1",
                                                    "long_name": f"{m} closure weight {n}"})
    for m, l in losses.items():
        ds[f"{m}_loss"] = ((f"{m}_iteration",), l, {"units": "1",
                                                     "long_name": f"{m} training loss"})
    ds.attrs.update(hybrid_dt=data.dt, xm=data.scales[0], xs=data.scales[1],
                    um=data.scales[2], us=data.scales[3])
    write_netcdf(ds, run.path("closure.nc"), run.attrs(f"{run.model.name}: neural closure"))


def _plots(run, dt, scores, truth, losses) -> list:
    plt = pyplot()
    if plt is None:
        log.info("train_closure: matplotlib not installed; no plots")
        return []
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, s in scores.items():
        ax.plot(s["lead_time"], s["rmse"], label=m)
    ax.set(xlabel="lead time (model time units)", ylabel="RMSE of X", yscale="log",
           title="forecast error on held-out truth")
    ax.legend()
    save_figure(fig, run.path("rmse.png"))
    fig2, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    centres = 0.5 * (truth["bins"][1:] + truth["bins"][:-1])
    lag = np.arange(len(truth["acf"])) * dt
    a1.plot(centres, truth["hist"], "k", lw=2, label="truth")
    a2.plot(lag, truth["acf"], "k", lw=2, label="truth")
    for m, s in scores.items():
        a1.plot(centres, s["hist"], label=m)
        a2.plot(lag, s["acf"], label=m)
    a1.set(xlabel="X", ylabel="density", title="long-run histogram")
    a2.set(xlabel="lag (model time units)", ylabel="autocorrelation", title="long-run ACF")
    a1.legend()
    save_figure(fig2, run.path("statistics.png"))
    fig3, ax3 = plt.subplots(figsize=(6, 4))
    for m, l in losses.items():
        ax3.plot(np.arange(1, len(l) + 1), l, label=m)
    ax3.set(xlabel="Adam iteration", ylabel="training loss (MSE)", yscale="log")
    ax3.legend()
    save_figure(fig3, run.path("loss.png"))
    for f in (fig, fig2, fig3):
        plt.close(f)
    return ["rmse.png", "statistics.png", "loss.png"]
