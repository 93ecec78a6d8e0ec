"""task=calibrate: a twin experiment, L-BFGS-B on J(p) with the engine's adjoint gradient.

Truth from the model config, synthetic observations (``model.obs``; written as
observations.nc and truth.nc) or ``obs.file``'s (simcore.obsfile; the "truth" is then the
configured parameters), first guess = the model's background or the truth perturbed
(``task.perturbation``), and

    J(p) = 1/2 sum ((H(M(p)) - y) / sigma_o)^2 + J_b(p)     (simcore.twin, simcore.prior)

minimised in the preconditioned control v = (p - p_b) / sigma_b with bounds from the
parameters. At the estimate, the Gauss-Newton posterior std of every parameter
(simcore.posterior: jvp and vjp products, Lanczos for many parameters). Writes
calibration.nc (per iteration), summary.json and cost.png.

Resumable (``resume=true``, or a Slurm requeue): after every iteration the evaluations
so far (control v, J and its parts, gradient) go to the run's checkpoint
(``simcore.checkpoint``). A resumed run restarts L-BFGS-B from the first guess and
answers its first evaluations from the checkpoint instead of running the model;
L-BFGS-B is deterministic, so it walks the same path to where the killed run stopped
and then goes on: the result equals the uninterrupted run's, bit for bit.
"""
import logging

import numpy as np
import xarray as xr
from scipy.optimize import minimize

from ..checkpoint import open_checkpoint
from ..control import Control
from ..covariance import flatten
from ..history import History
from ..io import pyplot, save_figure, write_json, write_netcdf
from ..obsfile import ObservationSet, write_states
from ..posterior import EXACT, Posterior
from ..plots import fields, label
from ..state import parameter_dataset
from ..terminal import progress
from ..twin import Observations, Twin

log = logging.getLogger("simcore")


def first_guess(model, perturbation: float) -> dict:
    """Each parameter's background, or its truth * (1 + perturbation * N(0, 1)), in bounds."""
    rng, out = model.rng(2), {}
    for p in model.parameters():
        if p.background is not None:
            guess = p.background.copy()
        else:
            guess = p.value * (1.0 + perturbation * rng.standard_normal(p.value.shape))
        if p.bounds is not None:
            guess = np.clip(guess, *p.bounds)
        out[p.name] = guess
    return out


class Evaluations:
    """Every evaluation of J so far, in order; replays a checkpoint's before computing.

    ``replay(v)`` answers the next saved evaluation when L-BFGS-B asks for exactly the
    point it was made at (None once the saved ones run out, or if the path departs,
    e.g. after a scipy upgrade: then it computes afresh and says so)."""
    FIELDS = ("J", "obs", "prior", "gnorm")

    def __init__(self, saved=None):
        self.v, self.gv, self.values = [], [], {f: [] for f in self.FIELDS}
        self.saved, self.next, self.resumed_from = saved, 0, None
        if saved is not None:
            self.resumed_from = int(saved.step)

    @property
    def replaying(self) -> bool:
        return self.saved is not None and self.next < len(self.saved.arrays["v"])

    def replay(self, v):
        if not self.replaying:
            return None
        a, k = self.saved.arrays, self.next
        if not np.array_equal(v, a["v"][k]):
            log.warning("calibrate: the resumed optimiser left the saved path at evaluation "
                        "%d (a different scipy?); computing from here on", k)
            self.saved = None
            return None
        self.next += 1
        if not self.replaying:
            log.info("calibrate: replayed %d evaluations (iterations 0-%d) from the "
                     "checkpoint; computing from here on", self.next, self.saved.step)
        parts = {"obs": a["obs"][k], "prior": a["prior"][k]}
        return self.add(a["v"][k], a["J"][k], parts, a["gv"][k], a["gnorm"][k])

    def add(self, v, J, parts, gv, gnorm):
        self.v.append(np.array(v, dtype=np.float64))
        self.gv.append(np.array(gv, dtype=np.float64))
        for f, x in zip(self.FIELDS, (J, parts["obs"], parts["prior"], gnorm)):
            self.values[f].append(float(x))
        return float(J), {"obs": float(parts["obs"]), "prior": float(parts["prior"])}, \
            self.gv[-1], float(gnorm)

    def save(self, ckpt, iteration):
        arrays = {"v": np.array(self.v), "gv": np.array(self.gv),
                  **{f: np.array(x) for f, x in self.values.items()}}
        ckpt.save(iteration, arrays, {"evaluations": len(self.v)})


def calibrate(run) -> dict:
    model, cfg = run.model, run.cfg.task
    obs = Observations.from_config(run.cfg.model.obs)
    guess = first_guess(model, float(cfg.perturbation))
    path = run.cfg.obs.file
    twin = Twin(model, obs, background=guess,
                data=None if path is None else ObservationSet.read(path, model))
    control = Control(model.parameters(), guess)
    log.info("calibrate: %d parameters from %d observations (%s)", control.size, twin.n_obs,
             f"{path}, {len(twin.times)} times" if path else
             f"obs.every_k={obs.every_k} points, obs.every_m={obs.every_m} steps, "
             f"sigma={obs.sigma:g}, {'noisy' if obs.noise else 'noise-free'}")
    files = _twin_files(run, twin)

    # per iteration, from the first guess on: the costs and calibration.nc's parameters
    cache, iterates = {}, []
    history = History("cost", "cost_obs", "cost_prior", "grad_norm", "evaluations")
    ckpt = open_checkpoint(run)
    evals = Evaluations(ckpt.load())

    def evaluate(v):
        params = control.unpack(v)
        hit = evals.replay(v)
        if hit is None:
            J, parts, grad, _ = twin.cost_and_grad(params)
            gnorm = float(np.sqrt(sum(np.sum(g * g) for g in grad.values())))
            hit = evals.add(v, J, parts, control.gradient(grad), gnorm)
        J, parts, gv, gnorm = hit
        cache.update(v=v.copy(), J=J, parts=parts, gnorm=gnorm, params=params,
                     evaluations=cache.get("evaluations", 0) + 1)
        return J, gv.copy()

    def record(v):
        if not np.array_equal(v, cache["v"]):
            evaluate(v)
        gnorm = cache["gnorm"]
        history.add(cost=cache["J"], cost_obs=cache["parts"]["obs"],
                    cost_prior=cache["parts"]["prior"], grad_norm=gnorm,
                    evaluations=cache["evaluations"])
        iterates.append((v.copy(), {k: p.copy() for k, p in cache["params"].items()}))
        it = len(history) - 1
        if it:
            bar.update(1)
        if evals.replaying:
            return
        evals.save(ckpt, it)
        if it % max(int(cfg.log_every), 1) == 0:
            log.info("calibrate: iter %3d/%d  J=%.6e  (obs %.4e, prior %.4e)  "
                     "|grad J|=%.3e  %s", it, cfg.max_iter, cache["J"], cache["parts"]["obs"],
                     cache["parts"]["prior"], gnorm, describe(cache["params"], twin.truth))

    v0 = np.zeros(control.size)
    with progress(int(cfg.max_iter), "calibrate", "iter", leave=False) as bar:
        evaluate(v0)
        record(v0)
        res = minimize(evaluate, v0, jac=True, method="L-BFGS-B", bounds=control.bounds(),
                       callback=lambda intermediate_result: record(intermediate_result.x),
                       options={"maxiter": int(cfg.max_iter), "ftol": float(cfg.ftol),
                                "gtol": float(cfg.gtol), "maxcor": int(cfg.memory),
                                "maxfun": 20 * int(cfg.max_iter)})
    final = control.unpack(res.x)
    if not np.array_equal(res.x, iterates[-1][0]):
        record(res.x)
    log.info("calibrate: %s after %d iterations, %d evaluations of J and grad J (%s)",
             "converged" if res.success else "NOT converged", res.nit,
             history["evaluations"][-1], _message(res))

    summary = _summary(run, twin, guess, final, history, res)
    summary["outputs"] += files
    std = _posterior(run, twin, final, summary)
    _write_history(run, twin, guess, history, [p for _, p in iterates], std)
    if cfg.plot:
        summary["outputs"] += _plots(run, twin, guess, final, history)
    summary["wall_time_s"] = run.elapsed()
    summary["resumed_from_iteration"] = evals.resumed_from
    write_json(summary, run.path("summary.json"))
    ckpt.finish()
    log.info("calibrate: relative error of the parameters %.3e (first guess %.3e); "
             "2 J_obs = %.4g for %d observations; %.2f s", summary["relative_error"],
             summary["relative_error_initial"], summary["chi2"], twin.n_obs,
             summary["wall_time_s"])
    return summary


def _posterior(run, twin, final, summary):
    """The posterior std of every parameter (simcore.posterior) into the summary; None
    with task.posterior_rank=0."""
    rank = int(run.cfg.task.posterior_rank)
    if rank == 0:
        return None
    post = Posterior(twin, final)
    std = post.unpack(post.std(rank=rank))
    summary["posterior_std"] = _values(run.model, std)
    summary["posterior_method"] = ("dense" if post.size <= EXACT
                                   else f"Lanczos, {min(rank, post.size - 1)} eigenpairs")
    summary["posterior_hessian_products"] = post.products
    log.info("calibrate: posterior std (Gauss-Newton Hessian, %s, %d products): %s",
             summary["posterior_method"], post.products, "  ".join(
                 f"{k}=" + np.array2string(v.ravel(), precision=3, separator=",")
                 if v.size <= 9 else f"{k}: {v.min():.3g} ... {v.max():.3g}"
                 for k, v in std.items()))
    return std


def relative_error(params, truth) -> float:
    num = sum(float(np.sum((params[k] - truth[k]) ** 2)) for k in truth)
    den = sum(float(np.sum(truth[k] ** 2)) for k in truth)
    return float(np.sqrt(num / den)) if den > 0 else float(np.sqrt(num))


def describe(params, truth, limit=9) -> str:
    """Small parameters in full; fields as mean and relative error against the truth."""
    parts = []
    for k, v in params.items():
        if v.size <= limit:
            parts.append(f"{k}=" + np.array2string(v.ravel(), precision=5, separator=",",
                                                    max_line_width=200))
        else:
            err = relative_error({k: v}, {k: truth[k]})
            parts.append(f"{k}: mean={v.mean():.4g} rel.err={err:.3e}")
    return "  ".join(parts)


def _values(model, params, limit=64):
    """JSON-friendly values: small parameters in full, fields as statistics."""
    out = {}
    for k, v in params.items():
        if v.size <= limit:
            out[k] = v.tolist()
        else:
            out[k] = {"shape": list(v.shape), "mean": float(v.mean()), "min": float(v.min()),
                      "max": float(v.max()), "in": "calibration.nc"}
    return out


def _summary(run, twin, guess, final, history, res) -> dict:
    truth, model = twin.truth, run.model
    J_obs = float(history["cost_obs"][-1])
    by_param = {k: {"initial": relative_error({k: guess[k]}, {k: truth[k]}),
                    "final": relative_error({k: final[k]}, {k: truth[k]}),
                    "rmse_final": float(np.sqrt(np.mean((final[k] - truth[k]) ** 2)))}
                for k in truth}
    return {**run.header(),
            "params_true": _values(model, truth), "params_initial": _values(model, guess),
            "params_final": _values(model, final),
            "relative_error": relative_error(final, truth),
            "relative_error_initial": relative_error(guess, truth),
            "relative_error_by_parameter": by_param,
            "cost_initial": history["cost"][0], "cost_final": history["cost"][-1],
            "cost_obs_final": J_obs, "cost_prior_final": history["cost_prior"][-1],
            "grad_norm_initial": history["grad_norm"][0],
            "grad_norm_final": history["grad_norm"][-1],
            "iterations": int(res.nit), "evaluations": int(history["evaluations"][-1]),
            "converged": bool(res.success), "message": _message(res),
            "n_obs": int(twin.n_obs), "n_params": int(sum(v.size for v in truth.values())),
            "chi2": 2.0 * J_obs, "chi2_per_obs": 2.0 * J_obs / twin.n_obs,
            "observation_file": run.cfg.obs.file,
            "noise": bool(twin.obs.noise) if run.cfg.obs.file is None else None,
            "outputs": ["calibration.nc", "summary.json"]}


def _twin_files(run, twin) -> list:
    """A twin's observations and truth run as observations.nc and truth.nc (the files
    obs.file reads, simcore.obsfile); nothing when the observations came from a file."""
    if twin.truth_states is None:
        return []
    name = run.model.name
    twin.data.write(run.path("observations.nc"), run.attrs(f"{name}: observations of a "
                                                           "twin truth run"))
    times, frames = twin.truth_states
    states = [flatten(run.model, twin.x0), *frames]
    write_states(run.model, run.path("truth.nc"), states,
                 np.concatenate([[0], times]) * run.model.time().dt,
                 run.attrs(f"{name}: truth run at the initial and observation times"))
    return ["observations.nc", "truth.nc"]


def _message(res):
    m = res.message
    return m.decode() if isinstance(m, bytes) else str(m)


def _write_history(run, twin, guess, history, params, std=None):
    model = run.model
    it = np.arange(len(history))
    dims = ("iteration",)
    ds = xr.Dataset(
        {"cost": (dims, history["cost"], {"units": "1", "long_name": "cost function J"}),
         "cost_obs": (dims, history["cost_obs"], {"units": "1",
                                                "long_name": "observation term of J"}),
         "cost_prior": (dims, history["cost_prior"], {"units": "1",
                                                  "long_name": "background term of J"}),
         "grad_norm": (dims, history["grad_norm"], {"units": "1",
                                                 "long_name": "norm of the gradient of J"}),
         "evaluations": (dims, history["evaluations"].astype(np.int64),
                         {"units": "1", "long_name": "cost evaluations so far"})},
        coords={"iteration": ("iteration", it, {"units": "1",
                                                "long_name": "L-BFGS-B iteration"})})
    stacked = {k: np.stack([p[k] for p in params]) for k in guess}
    ds = xr.merge([ds, parameter_dataset(model, stacked, leading=("iteration", it)),
                   parameter_dataset(model, twin.truth, suffix="_true"),
                   parameter_dataset(model, guess, suffix="_first_guess")])
    if std is not None:
        post = parameter_dataset(model, std, suffix="_posterior_std")
        for p in model.parameters():
            post[p.name + "_posterior_std"].attrs["long_name"] = (
                f"posterior standard deviation of {p.long_name} (Gauss-Newton)")
        ds = xr.merge([ds, post])
    write_netcdf(ds, run.path("calibration.nc"), run.attrs(f"{model.name}: calibration"))


def _plots(run, twin, guess, final, history) -> list:
    """cost.png, and <name>.png for every 2-D parameter; the files written."""
    plt = pyplot()
    if plt is None:
        log.info("calibrate: no plots: matplotlib is not installed (pip install -e \".[plot]\")")
        return []
    model = run.model
    fig, ax = plt.subplots(figsize=(6, 4))
    it = np.arange(len(history))
    prior = np.any(history["cost_prior"] > 0)
    ax.semilogy(it, history["cost"], "o-", ms=3, label="J" if prior else "J = J_obs (no prior)")
    if prior:
        ax.semilogy(it, np.maximum(history["cost_obs"], 1e-300), "--", label="J_obs")
        ax.semilogy(it, np.maximum(history["cost_prior"], 1e-300), ":", label="J_b")
    ax.set_xlabel("L-BFGS-B iteration")
    ax.set_ylabel("cost (dimensionless)")
    ax.set_title(f"{model.name}: cost descent")
    ax.legend()
    fig.tight_layout()
    save_figure(fig, run.path("cost.png"))
    plt.close(fig)
    files = ["cost.png"]
    for p in model.parameters():
        if p.value.ndim == 2:
            fields(plt, run.path(f"{p.name}.png"),
                   [("truth", twin.truth[p.name]), ("first guess", guess[p.name]),
                    ("calibrated", final[p.name])], [model.dim(d) for d in p.dims],
                   label(p.long_name, p.units),
                   difference=("calibrated - truth", final[p.name] - twin.truth[p.name]),
                   title=f"{model.name}: {p.long_name} {p.name}")
            files.append(f"{p.name}.png")
    return files
