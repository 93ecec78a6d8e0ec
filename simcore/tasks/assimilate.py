"""task=assimilate: cycling strong-constraint 4D-Var, on a twin or on observation files.

Observation times t_1 < t_2 < ... (t_0 = 0, the initial time) come from ``obs.file``
(simcore.obsfile), or, in a twin experiment, every ``model.obs.every_m`` steps of a
truth run from the model's initial state with its true parameters: y = H x_t + sigma_o
eps, H every ``model.obs.every_k``-th grid point or ``task.stations`` interpolated
stations. A window holds ``task.window`` (W) observation times and ends at its last;
each cycle it advances ``task.shift`` (S, 1 ... W) times: cycle c ends at e_c = (c + 1) S
and starts at s_c = max(0, e_c - W), so the first windows grow from the initial time.
With ``task.newest_only`` (DAPPER's Var4D) a window assimilates only the times no
earlier window reached, (e_{c-1}, e_c]; else all of (s_c, e_c]. The background at the
window start is the previous analysis run from its window start to this one (cycle 0:
``background.file``, or the twin's truth plus a draw from B, or the model's initial
state); 4D-Var (simcore.fourdvar) gives the analysis x_a at the window start.

Scores against the truth (the twin's, or ``truth.file``), at observation times, with
DAPPER's meanings: f, the forecast one interval ahead (the background trajectory at
e_{c-1} + 1, before that time is assimilated); a, the analysis at the window end (the
analysis trajectory at e_c); s, the state at the window start after assimilation (x_a
at s_c). Time means over times after ``task.burn_in_time`` are summary.json's
``rmse_f``, ``rmse_a``, ``rmse_s``. Per cycle: RMSE of background and analysis at the
window start and end, observation-minus-background/-analysis, 2 J_min (the chi^2
check), iterations and model runs. Writes analysis.nc, diagnostics.nc, summary.json,
plots; twin runs also observations.nc, truth.nc and background.nc, which
``obs.file``, ``truth.file`` and ``background.file`` read back.

Resumable (``resume=true`` or a Slurm requeue): the state after every
``task.checkpoint_every``-th cycle goes to the run's checkpoint; truth and observations
are regenerated from the seed (or read again), so a resumed run ends exactly where an
uninterrupted one does.
"""
import logging
import time

import numpy as np

from ..chain import Chain, advance
from ..checkpoint import open_checkpoint
from ..covariance import BackgroundCovariance, flatten, unflatten
from ..errors import ConfigError, DataFileError
from ..fourdvar import Window, gauss_newton, lbfgs
from ..io import write_json
from ..obsfile import ObservationSet, read_states, states_at
from ..observation import ObservationOperator
from ..terminal import progress
from ..twin import Observations
from .assimilate_output import CYCLE_COLUMNS, ITERATIONS, SCORES, write_outputs

log = logging.getLogger("simcore")


class Setup:
    """Everything fixed over the cycles: observations, truth, B, the windows."""

    def __init__(self, run):
        model, cfg = run.model, run.cfg.task
        self.model, self.cfg = model, cfg
        self.files = {k: run.cfg[k].file for k in ("obs", "truth", "background")}
        self.params = model.truth()
        self.dt = float(model.time().dt)
        self.obs = Observations.from_config(run.cfg.model.obs)
        self.W = int(cfg.window)
        self.S = int(cfg.shift) if cfg.shift is not None else self.W
        self.twin = self.files["obs"] is None
        self.truth = None                       # (times + 1, n): at t_0 = 0, t_1, ...
        if self.twin:
            self._twin()
        else:
            self._read()
        self.T = np.concatenate([[0], self.data.times()[:self.n_times]])   # steps of t_j
        if self.files["truth"] is not None:
            times, states = read_states(model, self.files["truth"])
            self.truth = states_at(self.files["truth"], times, states, self.T * self.dt,
                                   self.dt)
        self.B = self._background_error()
        end = self.T[-1] * self.dt
        self.burn_in_time = 0.2 * end if cfg.burn_in_time is None else float(cfg.burn_in_time)
        if self.burn_in_time >= end:
            raise ConfigError(f"task.burn_in_time={cfg.burn_in_time:g}: must be below the "
                              f"run's last observation time {end:g}")

    def _twin(self):
        cfg, model = self.cfg, self.model
        if cfg.cycles is None:
            raise ConfigError("task.cycles=null: only with obs.file (a twin needs a number)")
        self.cycles = int(cfg.cycles)
        self.n_times = self.cycles * self.S
        if int(cfg.stations) > 0:
            H = ObservationOperator.stations(model, int(cfg.stations), model.rng(4))
        else:
            H = ObservationOperator.grid(model, self.obs.every_k)
        steps = self.obs.every_m * np.arange(1, self.n_times + 1)
        state = model.initial_state()
        start = flatten(model, state)
        frames = Chain(model, [self.obs.every_m] * self.n_times).run(
            state, self.params, lambda s: flatten(model, s))
        self.truth = np.stack([start, *frames])
        rng = model.rng(1) if self.obs.noise else None
        self.data = ObservationSet.synthetic(model, H, steps, frames, self.obs.sigma, rng)

    def _read(self):
        cfg, path = self.cfg, self.files["obs"]
        self.data = ObservationSet.read(path, self.model)
        available = len(self.data.times())
        most = -(-available // self.S)          # windows that reach a new time
        self.cycles = most if cfg.cycles is None else int(cfg.cycles)
        if self.cycles > most:
            raise DataFileError(f"{path}: time: {available} observation times; "
                                f"task.cycles={self.cycles} with task.shift={self.S} needs "
                                f"at least {(self.cycles - 1) * self.S + 1} "
                                "(task.cycles=null: as many as there are)")
        self.n_times = min(self.cycles * self.S, available)
        if self.n_times < available:
            log.info("assimilate: %s: the first %d of %d observation times (task.cycles=%d)",
                     path, self.n_times, available, self.cycles)

    def _background_error(self) -> BackgroundCovariance:
        cfg, model = self.cfg, self.model
        if cfg.b_covariance == "climatology":
            if self.truth is None:
                raise ConfigError("task.b_covariance=climatology needs a truth: a twin run "
                                  "or truth.file")
            std = 1.0 if cfg.b_std is None else float(cfg.b_std)
            return BackgroundCovariance(model, std, covariance=np.cov(self.truth.T))
        std, length = model.background_error()
        std = float(cfg.b_std) if cfg.b_std is not None else std
        length = float(cfg.b_length) if cfg.b_length is not None else length
        return BackgroundCovariance(model, std, length)

    def first_background(self) -> np.ndarray:
        path = self.files["background"]
        if path is not None:
            times, states = read_states(self.model, path)
            return states_at(path, times, states, [0.0], self.dt)[0]
        if self.twin:
            return self.truth[0] + self.B.sample(self.model.rng(2))
        log.info("assimilate: no background.file: the first background is the model's "
                 "initial state")
        return flatten(self.model, self.model.initial_state())

    # ---- the windows ---------------------------------------------------------------------
    def end(self, c) -> int:
        """e_c: the index of cycle c's last observation time (e_{-1} = 0)."""
        return min((c + 1) * self.S, self.n_times) if c >= 0 else 0

    def start(self, c) -> int:
        """s_c: the index of the time cycle c's window starts at (0: the initial time)."""
        return max(0, self.end(c) - self.W)

    def assimilated(self, c) -> np.ndarray:
        """The indices j of the observation times cycle c assimilates."""
        first = self.end(c - 1) if self.cfg.newest_only else self.start(c)
        return np.arange(first + 1, self.end(c) + 1)

    def window(self, c, xb) -> Window:
        used, s = self.assimilated(c), self.start(c)
        return Window(self.model, self.params, self.B, [self.data.at(self.T[j]) for j in used],
                      xb, self.T[used] - self.T[s])

    def time(self, c) -> float:
        return float(self.T[self.start(c)] * self.dt)

    def rmse(self, x, j) -> float:
        """RMSE of the flat state ``x`` against the truth at t_j (NaN without a truth)."""
        if self.truth is None:
            return float("nan")
        return float(np.sqrt(np.mean((x - self.truth[j]) ** 2)))


class Cycles:
    """What the cycles produced so far; saved to and restored from the checkpoint."""

    def __init__(self, n_times, saved=None):
        self.rows, self.xb, self.xa, self.iterations = [], [], [], []
        self.scores = np.full((n_times + 1, len(SCORES)), np.nan)   # f, a, s at each t_j
        self.next_background, self.resumed_from = None, None
        if saved is not None:
            a = saved.arrays
            self.rows, self.xb, self.xa = list(a["table"]), list(a["xb"]), list(a["xa"])
            self.iterations = np.split(a["iterations"], np.cumsum(a["counts"])[:-1])
            self.scores, self.next_background = a["scores"], a["next_background"]
            self.resumed_from = int(saved.step)

    def __len__(self):
        return len(self.rows)

    def add(self, row: dict, xb, xa, history, next_background, scores: dict):
        self.rows.append(np.array([row[c] for c in CYCLE_COLUMNS], dtype=np.float64))
        self.xb.append(xb)
        self.xa.append(xa)
        self.iterations.append(np.column_stack([history[c] for c in ITERATIONS]))
        for (j, name), value in scores.items():
            self.scores[j, SCORES.index(name)] = value
        self.next_background = next_background

    @property
    def counts(self) -> np.ndarray:
        return np.array([len(i) for i in self.iterations], dtype=np.int64)

    def save(self, ckpt):
        ckpt.save(len(self) - 1, arrays={
            "table": np.array(self.rows), "xb": np.array(self.xb), "xa": np.array(self.xa),
            "iterations": np.concatenate(self.iterations), "counts": self.counts,
            "scores": self.scores, "next_background": self.next_background})

    def column(self, name) -> np.ndarray:
        return np.array(self.rows)[:, CYCLE_COLUMNS.index(name)]


def assimilate(run) -> dict:
    cfg = run.cfg.task
    setup = Setup(run)
    B = setup.B
    log.info("assimilate: 4D-Var (%s) over %d cycles: windows of %d observation times "
             "advancing %d per cycle (%s), %d observation times in all (%s, %d observations; "
             "%s); B: std %g, %s", cfg.method, setup.cycles, setup.W, setup.S,
             "each observation once" if cfg.newest_only else "all of a window's every time",
             setup.n_times, _source(setup), len(setup.data),
             "no truth: no RMSE" if setup.truth is None else "scored against a truth",
             B.std, "climatological covariance" if B.length is None
             else f"correlation length {B.length:g} grid points")
    ckpt = open_checkpoint(run)
    done = Cycles(setup.n_times, ckpt.load())
    xb = setup.first_background() if done.next_background is None else done.next_background
    every = int(cfg.checkpoint_every)
    with progress(setup.cycles, "assimilate", "cycle", initial=len(done), leave=False) as bar:
        for c in range(len(done), setup.cycles):
            row, xa, history, xb_next, scores = analyse(setup, c, xb)
            done.add(row, xb, xa, history, xb_next, scores)
            if (c + 1) % every == 0 or c == setup.cycles - 1:
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
    log.info("assimilate: time-mean RMSE after t=%g: forecast (f) %s, analysis at the window "
             "end (a) %s, window start after assimilation (s) %s (observation error %s, "
             "climatology %s); 2 J_min / p = %.3f; %d iterations; %.2f s",
             setup.burn_in_time, *(_shown(summary[k]) for k in ("rmse_f", "rmse_a", "rmse_s")),
             _shown(summary["obs_sigma"]), _shown(summary["climatology_std"]),
             summary["chi2_per_obs"], summary["iterations"], summary["wall_time_s"])
    return summary


def _source(setup) -> str:
    """Where the observations come from, for the log."""
    if not setup.twin:
        return setup.files["obs"]
    obs, stations = setup.obs, int(setup.cfg.stations)
    where = f"{stations} interpolated stations" if stations else f"grid, obs.every_k={obs.every_k}"
    return (f"every {obs.every_m} steps, {where}, sigma_o={obs.sigma:g}, "
            + ("noisy" if obs.noise else "noise-free"))


def _shown(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.4g}"


def analyse(setup, c, xb):
    """One cycle: minimise J, diagnose, forecast. (row, x_a, history, next x_b, scores)."""
    started = time.perf_counter()
    cfg, window = setup.cfg, setup.window(c, xb)
    if cfg.method == "lbfgs":
        result = lbfgs(window, int(cfg.max_iter), float(cfg.gtol), int(cfg.memory))
    else:
        result = gauss_newton(window, int(cfg.outer_loops), int(cfg.max_iter), float(cfg.gtol))
    xa = window.initial(result.v)
    background = window.trajectory(xb)
    omb = window.y - window.observe(background)
    frames = window.trajectory(xa)
    oma = window.y - window.observe(frames)
    xb_next = _forecast(setup, xa, c)
    used, s, e = setup.assimilated(c), setup.start(c), setup.end(c)
    first = list(used).index(setup.end(c - 1) + 1)           # f: one interval ahead
    scores = {(e, "a"): setup.rmse(frames[-1], e),
              (used[first], "f"): setup.rmse(background[first], used[first])}
    if s > 0:
        scores[(s, "s")] = setup.rmse(xa, s)
    h = result.history
    row = {"time": setup.time(c), "time_end": float(setup.T[e] * setup.dt),
           "rmse_background_start": setup.rmse(xb, s), "rmse_analysis_start": setup.rmse(xa, s),
           "rmse_background_end": setup.rmse(background[-1], e),
           "rmse_analysis_end": setup.rmse(frames[-1], e),
           "omb_mean": float(omb.mean()), "omb_std": float(omb.std()),
           "oma_mean": float(oma.mean()), "oma_std": float(oma.std()),
           "cost_initial": h["cost"][0], "cost_final": h["cost"][-1],
           "cost_background": h["cost_background"][-1], "cost_obs": h["cost_obs"][-1],
           "chi2": 2.0 * h["cost"][-1], "n_obs": window.n_obs,
           "grad_norm_final": h["grad_norm_rel"][-1], "iterations": result.iterations,
           "forward_runs": window.runs["forward"], "adjoint_runs": window.runs["adjoint"],
           "tangent_runs": window.runs["tangent"], "seconds": time.perf_counter() - started}
    return row, xa, h, xb_next, scores


def _forecast(setup, xa, c) -> np.ndarray:
    """The analysis at cycle c's window start run to the next window's start."""
    steps = int(setup.T[setup.start(c + 1)] - setup.T[setup.start(c)])
    if steps == 0:
        return xa.copy()
    state = unflatten(setup.model, xa.copy())
    advance(setup.model, state, setup.params, steps)
    return flatten(setup.model, state)


def _progress(setup, c, row):
    log.info("assimilate: cycle %4d/%d  t=%-8.4g rmse at the window start: background %.4f "
             "-> analysis %.4f, at its end %.4f  J %.4g -> %.4g  2J/p=%.3f  %3d iterations  "
             "|grad J|/|grad J0|=%.1e", c + 1, setup.cycles, row["time"],
             row["rmse_background_start"], row["rmse_analysis_start"],
             row["rmse_analysis_end"], row["cost_initial"], row["cost_final"],
             row["chi2"] / row["n_obs"], row["iterations"], row["grad_norm_final"])


def _summary(run, setup, done) -> dict:
    cfg = setup.cfg
    after = done.column("time_end") > setup.burn_in_time       # cycles ending after burn-in
    times = setup.T * setup.dt
    late = times > setup.burn_in_time

    def mean(values):
        values = values[np.isfinite(values)]
        return float(np.mean(values)) if values.size else None

    scores = {f"rmse_{k}": mean(done.scores[late, i]) for i, k in enumerate(SCORES)}
    n_obs = done.column("n_obs")
    truth = setup.truth
    return {**run.header(), "method": cfg.method, "cycles": len(done),
            "window": setup.W, "shift": setup.S, "newest_only": bool(cfg.newest_only),
            "observation_times": int(setup.n_times), "observations": int(np.sum(n_obs)),
            "burn_in_time": setup.burn_in_time,
            "observation_file": setup.files["obs"], "truth_file": setup.files["truth"],
            "background_file": setup.files["background"],
            "observation_operator": _operator(setup),
            "obs_sigma": float(np.mean(setup.data.error_std)),
            "noise": bool(setup.obs.noise) if setup.twin else None,
            "b_covariance": cfg.b_covariance, "b_std": setup.B.std, "b_length": setup.B.length,
            **scores,
            "scored_times": {k: int(np.sum(np.isfinite(done.scores[late, i])))
                             for i, k in enumerate(SCORES)},
            "rmse_background_start": mean(done.column("rmse_background_start")[after]),
            "rmse_background_end": mean(done.column("rmse_background_end")[after]),
            "rmse_background_start_first": mean(done.column("rmse_background_start")[:1]),
            "rmse_analysis_start_first": mean(done.column("rmse_analysis_start")[:1]),
            "climatology_std": float(np.std(truth)) if truth is not None else None,
            "omb_std": mean(done.column("omb_std")[after]),
            "oma_std": mean(done.column("oma_std")[after]),
            "chi2_per_obs": float(np.sum(done.column("chi2")[after]) / np.sum(n_obs[after])),
            "iterations": int(np.sum(done.column("iterations"))),
            "iterations_per_cycle": float(np.mean(done.column("iterations"))),
            "forward_runs": int(np.sum(done.column("forward_runs"))),
            "adjoint_runs": int(np.sum(done.column("adjoint_runs"))),
            "tangent_runs": int(np.sum(done.column("tangent_runs"))),
            "seconds_per_cycle": float(np.mean(done.column("seconds"))),
            "resumed_from_cycle": done.resumed_from}


def _operator(setup) -> str:
    if not setup.twin:
        return "file"
    return "stations" if int(setup.cfg.stations) > 0 else "grid"
