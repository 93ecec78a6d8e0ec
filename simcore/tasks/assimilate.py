"""task=assimilate: cycling strong-constraint 4D-Var in a twin experiment.

The truth runs from the model's initial state with its true parameters; observations
y = H x_t + sigma_o eps are taken every ``model.obs.every_m`` steps (H: every
``model.obs.every_k``-th grid point, or ``task.stations`` interpolated stations; R =
sigma_o^2 I). Cycle c covers ``task.window`` observation intervals, L steps; its
observations are the ``task.window`` times after its start (the end included). The
background x_b of cycle 0 is the truth plus a draw from B; 4D-Var (simcore.fourdvar)
gives the analysis x_a at the window start; x_b of the next cycle is x_a run L steps.

Per cycle: RMSE against the truth of x_b and x_a at the window start and of their
trajectories at the window end (the analysis's is the next background; for dissipative
models such as heat, where estimating the start means running diffusion backwards, the
end is where 4D-Var's gain shows), observation-minus-background/-analysis statistics
over the window, 2 J_min (the chi^2 check: about the number of observations when B and R
are right), iterations and model runs. Writes obs.nc, analysis.nc, diagnostics.nc,
summary.json, rmse.png and hovmoller.png (or analysis.png for 2-D states).

Resumable (``resume=true`` or a Slurm requeue): the state after each cycle (next
background, analyses, diagnostics) goes to the run's checkpoint; truth and observations
are regenerated from the seed, so a resumed run ends exactly where an uninterrupted one
does.
"""
import logging
import time

import numpy as np

from ..chain import advance
from ..checkpoint import open_checkpoint
from ..covariance import BackgroundCovariance, flatten
from ..fourdvar import Window, gauss_newton, lbfgs
from ..io import write_json
from ..observation import ObservationOperator
from ..terminal import progress
from ..twin import Observations
from .assimilate_output import CYCLE_COLUMNS, ITERATIONS, write_outputs

log = logging.getLogger("simcore")

class Setup:
    """Everything fixed over the cycles: B, H, sigma_o, the window, truth and observations."""

    def __init__(self, run):
        model, cfg = run.model, run.cfg.task
        self.model, self.cfg = model, cfg
        self.obs = Observations.from_config(run.cfg.model.obs)
        std, length = model.background_error()
        std = float(cfg.b_std) if cfg.b_std is not None else std
        length = float(cfg.b_length) if cfg.b_length is not None else length
        self.B = BackgroundCovariance(model, std, length)
        if int(cfg.stations) > 0:
            self.H = ObservationOperator.stations(model, int(cfg.stations), model.rng(4))
        else:
            self.H = ObservationOperator.grid(model, self.obs.every_k)
        self.params = model.truth()
        self.offsets = self.obs.every_m * np.arange(1, int(cfg.window) + 1)
        self.steps = int(self.offsets[-1])              # window length L
        self.cycles = int(cfg.cycles)
        # validated below the cycles; null: a fifth of them (20 of the default 100)
        self.burn_in = self.cycles // 5 if cfg.burn_in is None else int(cfg.burn_in)
        self.dt = float(model.time().dt)
        self._truth_and_observations()

    def _truth_and_observations(self):
        """x_t at every window start (cycles + 1) and at every observation time; y."""
        model, n = self.model, self.cycles
        state = model.initial_state()
        starts, frames = [flatten(model, state)], []
        for _ in range(n):
            window, done = [], 0
            for o in self.offsets:
                advance(model, state, self.params, int(o - done))
                done = o
                window.append(flatten(model, state))
            frames.append(window)
            starts.append(flatten(model, state))
        self.truth = np.stack(starts)                               # (cycles + 1, n)
        self.truth_obs = np.stack([np.stack(w) for w in frames])    # (cycles, window, n)
        flat = self.truth_obs.reshape(-1, self.truth_obs.shape[-1])
        self.y_true = (self.H.matrix @ flat.T).T.reshape(n, len(self.offsets), self.H.size)
        self.y = self.y_true.copy()
        if self.obs.noise:
            rng = self.model.rng(1)
            for c in range(n):
                self.y[c] += self.obs.sigma * rng.standard_normal(self.y[c].shape)

    def first_background(self) -> np.ndarray:
        return self.truth[0] + self.B.sample(self.model.rng(2))

    def window(self, c, xb) -> Window:
        return Window(self.model, self.params, self.B, self.H, self.obs.sigma, xb, self.y[c],
                      self.offsets)

    def time(self, c) -> float:
        return c * self.steps * self.dt


class Cycles:
    """What the cycles produced so far; saved to and restored from the checkpoint."""

    def __init__(self, size, saved=None):
        if saved is None:
            self.table = np.zeros((0, len(CYCLE_COLUMNS)))
            self.xb, self.xa = np.zeros((0, size)), np.zeros((0, size))
            self.iterations, self.counts = np.zeros((0, 6)), np.zeros(0, dtype=np.int64)
            self.next_background, self.resumed_from = None, None
        else:
            a = saved.arrays
            self.table, self.xb, self.xa = a["table"], a["xb"], a["xa"]
            self.iterations, self.counts = a["iterations"], a["counts"]
            self.next_background, self.resumed_from = a["next_background"], int(saved.step)

    def __len__(self):
        return len(self.table)

    def add(self, row: dict, xb, xa, history, next_background):
        self.table = np.vstack([self.table, [row[c] for c in CYCLE_COLUMNS]])
        self.xb, self.xa = np.vstack([self.xb, xb]), np.vstack([self.xa, xa])
        its = np.column_stack([history[c] for c in ITERATIONS])
        self.iterations = np.vstack([self.iterations, its])
        self.counts = np.append(self.counts, len(its))
        self.next_background = next_background

    def save(self, ckpt):
        ckpt.save(len(self) - 1, arrays={
            "table": self.table, "xb": self.xb, "xa": self.xa, "iterations": self.iterations,
            "counts": self.counts, "next_background": self.next_background})

    def column(self, name) -> np.ndarray:
        return self.table[:, CYCLE_COLUMNS.index(name)]


def assimilate(run) -> dict:
    cfg = run.cfg.task
    setup = Setup(run)
    B, H = setup.B, setup.H
    log.info("assimilate: 4D-Var (%s) over %d cycles of %d steps: %d observation times "
             "every %d steps, %d observations each (%s), sigma_o=%g, %s; B: std %g, "
             "correlation length %g grid points", cfg.method, setup.cycles, setup.steps,
             len(setup.offsets), setup.obs.every_m, H.size,
             f"{cfg.stations} interpolated stations" if H.kind == "stations"
             else f"grid, obs.every_k={setup.obs.every_k}", setup.obs.sigma,
             "noisy" if setup.obs.noise else "noise-free", B.std, B.length)
    ckpt = open_checkpoint(run)
    done = Cycles(B.size, ckpt.load())
    xb = setup.first_background() if done.next_background is None else done.next_background
    with progress(setup.cycles, "assimilate", "cycle", initial=len(done), leave=False) as bar:
        for c in range(len(done), setup.cycles):
            row, xa, history, xb_next = analyse(setup, c, xb)
            done.add(row, xb, xa, history, xb_next)
            done.save(ckpt)
            if c % int(cfg.log_every) == 0 or c == setup.cycles - 1:
                _progress(setup, c, row)
            bar.update(1)
            xb = xb_next
    summary = _summary(run, setup, done)
    write_outputs(run, setup, done, summary)
    summary["wall_time_s"] = run.elapsed()
    write_json(summary, run.path("summary.json"))
    ckpt.finish()
    log.info("assimilate: time-mean RMSE over cycles %d-%d: background %.4f, analysis %.4f "
             "at the window start; %.4f, %.4f at its end (observation error %g, "
             "climatology %.3g); 2 J_min / p = %.3f; %d iterations; %.2f s",
             summary["burn_in"], setup.cycles - 1, summary["rmse_background"],
             summary["rmse_analysis"], summary["rmse_background_end"],
             summary["rmse_analysis_end"], setup.obs.sigma, summary["climatology_std"],
             summary["chi2_per_obs"], summary["iterations"], summary["wall_time_s"])
    return summary


def analyse(setup, c, xb):
    """One cycle: minimise J, diagnose, forecast. (row, x_a, history, next x_b)."""
    start = time.perf_counter()
    cfg, window = setup.cfg, setup.window(c, xb)
    if cfg.method == "lbfgs":
        result = lbfgs(window, int(cfg.max_iter), float(cfg.gtol), int(cfg.memory))
    else:
        result = gauss_newton(window, int(cfg.outer_loops), int(cfg.max_iter), float(cfg.gtol))
    xa = window.initial(result.v)
    background = window.trajectory(xb)
    omb = -window.misfit(background) * setup.obs.sigma                 # y - H M(x_b)
    frames = window.trajectory(xa)
    oma = -window.misfit(frames) * setup.obs.sigma
    xb_next = frames[-1]                               # the last observation ends the window
    truth, h = setup.truth, result.history
    rmse = lambda x, t: float(np.sqrt(np.mean((x - t) ** 2)))              # noqa: E731
    row = {"time": setup.time(c), "rmse_background": rmse(xb, truth[c]),
           "rmse_analysis": rmse(xa, truth[c]),
           "rmse_background_end": rmse(background[-1], truth[c + 1]),
           "rmse_analysis_end": rmse(xb_next, truth[c + 1]),
           "omb_mean": float(omb.mean()), "omb_std": float(omb.std()),
           "oma_mean": float(oma.mean()), "oma_std": float(oma.std()),
           "cost_initial": h["cost"][0], "cost_final": h["cost"][-1],
           "cost_background": h["cost_background"][-1], "cost_obs": h["cost_obs"][-1],
           "chi2": 2.0 * h["cost"][-1], "n_obs": window.n_obs,
           "grad_norm_final": h["grad_norm_rel"][-1], "iterations": result.iterations,
           "forward_runs": window.runs["forward"], "adjoint_runs": window.runs["adjoint"],
           "tangent_runs": window.runs["tangent"], "seconds": time.perf_counter() - start}
    return row, xa, h, xb_next


def _progress(setup, c, row):
    log.info("assimilate: cycle %4d/%d  t=%-8.4g rmse background %.4f -> analysis %.4f  "
             "J %.4g -> %.4g  2J/p=%.3f  %3d iterations  |grad J|/|grad J0|=%.1e",
             c + 1, setup.cycles, row["time"], row["rmse_background"], row["rmse_analysis"],
             row["cost_initial"], row["cost_final"], row["chi2"] / row["n_obs"],
             row["iterations"], row["grad_norm_final"])


def _summary(run, setup, done) -> dict:
    cfg = setup.cfg
    burn = setup.burn_in
    after = slice(burn, None)
    mean = lambda name: float(np.mean(done.column(name)[after]))           # noqa: E731
    n_obs = done.column("n_obs")
    return {**run.header(), "method": cfg.method, "cycles": len(done), "burn_in": burn,
            "window_steps": setup.steps, "observation_times_per_window": len(setup.offsets),
            "observation_every": setup.obs.every_m, "observations_per_time": setup.H.size,
            "observation_operator": setup.H.kind, "obs_sigma": setup.obs.sigma,
            "noise": setup.obs.noise, "b_std": setup.B.std, "b_length": setup.B.length,
            "rmse_background": mean("rmse_background"), "rmse_analysis": mean("rmse_analysis"),
            "rmse_background_end": mean("rmse_background_end"),
            "rmse_analysis_end": mean("rmse_analysis_end"),
            "rmse_background_first": float(done.column("rmse_background")[0]),
            "rmse_analysis_first": float(done.column("rmse_analysis")[0]),
            "climatology_std": float(np.std(setup.truth)),
            "omb_std": mean("omb_std"), "oma_std": mean("oma_std"),
            "chi2_per_obs": float(np.sum(done.column("chi2")[after])
                                  / np.sum(n_obs[after])),
            "iterations": int(np.sum(done.column("iterations"))),
            "iterations_per_cycle": float(np.mean(done.column("iterations"))),
            "forward_runs": int(np.sum(done.column("forward_runs"))),
            "adjoint_runs": int(np.sum(done.column("adjoint_runs"))),
            "tangent_runs": int(np.sum(done.column("tangent_runs"))),
            "seconds_per_cycle": float(np.mean(done.column("seconds"))),
            "resumed_from_cycle": done.resumed_from}
