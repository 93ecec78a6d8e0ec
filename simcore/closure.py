"""Learning the subgrid closure of the two-scale Lorenz-96 system through the solver.

The truth is models/lorenz96_2scale.py run on both scales; the hybrid
(models/lorenz96_hybrid.py) is the one-scale model on the slow variables plus a small
network. ``Data`` cuts the truth into a training and a held-out segment at the hybrid's
time step; ``train_offline`` fits the network to the diagnosed subgrid tendencies
(regression), ``train_online`` through n-step rollouts of the compiled hybrid against
the truth's slow variables (the gradient of the rollout loss with respect to the
weights is one ``adjoint.value_and_grad`` call); both with ``Adam``. ``evaluate`` scores
a set of weights on the held-out segment: forecast RMSE at lead times, the valid
prediction time, and the long run's statistics against the truth's.
"""
import logging
import time
from dataclasses import dataclass

import numpy as np

from adjoint import value_and_grad
from .models.lorenz96_hybrid import (WEIGHTS, closure_loss, hybrid_run, init_weights,
                                     rollout_loss)

log = logging.getLogger("simcore")
MODES = ("none", "offline", "online")


class Adam:
    """Adam (Kingma & Ba 2015) on a dict of arrays, updated in place."""

    def __init__(self, params: dict, lr: float, beta1=0.9, beta2=0.999, eps=1e-8):
        self.lr, self.beta1, self.beta2, self.eps, self.t = lr, beta1, beta2, eps, 0
        self.m = {n: np.zeros_like(p) for n, p in params.items()}
        self.v = {n: np.zeros_like(p) for n, p in params.items()}

    def step(self, params: dict, grads: dict):
        self.t += 1
        c1, c2 = 1.0 - self.beta1 ** self.t, 1.0 - self.beta2 ** self.t
        for n, g in grads.items():
            self.m[n] = self.beta1 * self.m[n] + (1.0 - self.beta1) * g
            self.v[n] = self.beta2 * self.v[n] + (1.0 - self.beta2) * g * g
            params[n] -= self.lr * (self.m[n] / c1) / (np.sqrt(self.v[n] / c2) + self.eps)


@dataclass
class Data:
    """The truth's slow variables ``X`` and subgrid tendencies ``U`` every hybrid step
    (``dt``), split into a training segment and a held-out one; ``scales`` (xm, xs, um,
    us) are the training segment's means and standard deviations of X and U."""
    X_train: np.ndarray
    U_train: np.ndarray
    X_test: np.ndarray
    dt: float
    F: float
    scales: tuple

    @classmethod
    def from_truth(cls, model, train_time: float, test_time: float, substeps: int):
        dt = substeps * model.time().dt
        n_train, n_test = round(train_time / dt), round(test_time / dt)
        run = model.truth_run((n_train + n_test) * substeps, every=substeps)
        X, U = run["X"], run["coupling"]
        Xtr, Utr = X[:n_train + 1], U[:n_train + 1]
        scales = (float(Xtr.mean()), float(Xtr.std()), float(Utr.mean()), float(Utr.std()))
        return cls(Xtr, Utr, X[n_train:], dt, float(model.cfg.F), scales)

    def args(self, weights: dict) -> tuple:
        """The kernels' weight and scale arguments."""
        return (*(weights[n] for n in WEIGHTS), *self.scales)


def train_offline(data, weights, cfg, rng, log_every=1):
    """Adam on the closure's mean squared error against the diagnosed subgrid tendency
    of minibatches of training states; returns the loss per iteration."""
    step = value_and_grad(closure_loss, WEIGHTS)
    opt, losses = Adam(weights, float(cfg.lr)), []
    n = len(data.X_train)
    for it in range(int(cfg.offline_iters)):
        rows = rng.integers(0, n, int(cfg.batch))
        loss, grads = step(data.X_train[rows], data.U_train[rows], *data.args(weights))
        opt.step(weights, dict(zip(WEIGHTS, grads)))
        losses.append(loss)
        if it % log_every == 0 or it == int(cfg.offline_iters) - 1:
            log.info("train_closure: offline iter %4d/%d  loss %.5e", it + 1,
                     int(cfg.offline_iters), loss)
    return np.array(losses)


def rollout_batch(data, n: int, batch: int, rng):
    """(X0, Xt): ``batch`` training states and the truth's next ``n`` states from each."""
    starts = rng.integers(0, len(data.X_train) - n, batch)
    return data.X_train[starts], np.stack([data.X_train[s + 1:s + 1 + n] for s in starts])


def train_online(data, weights, cfg, rng, log_every=1):
    """Adam on the mean squared error of ``cfg.rollout``-step rollouts of the hybrid
    from minibatches of training states against the truth; returns the loss and the
    seconds of each training step (forward rollout and gradient to the weights)."""
    step = value_and_grad(rollout_loss, WEIGHTS)
    opt, losses, seconds = Adam(weights, float(cfg.lr)), [], []
    for it in range(int(cfg.online_iters)):
        X0, Xt = rollout_batch(data, int(cfg.rollout), int(cfg.batch), rng)
        t0 = time.perf_counter()
        loss, grads = step(X0, Xt, *data.args(weights), data.F, data.dt)
        seconds.append(time.perf_counter() - t0)
        if not np.isfinite(loss):
            raise FloatingPointError(f"train_closure: online loss {loss} at iteration {it + 1}"
                                     "; lower task.lr or task.rollout")
        opt.step(weights, dict(zip(WEIGHTS, grads)))
        losses.append(loss)
        if it % log_every == 0 or it == int(cfg.online_iters) - 1:
            log.info("train_closure: online iter %4d/%d  loss %.5e  (%.2f ms per step)",
                     it + 1, int(cfg.online_iters), loss, 1e3 * seconds[-1])
    return np.array(losses), np.array(seconds)


def step_seconds(data, weights, cfg, rng, repeat=20) -> tuple:
    """Median seconds of a forward rollout of one training minibatch (the loss alone)
    and of a training step on it (loss and gradient to the weights), measured in turns
    so that both see the same load on the machine."""
    X0, Xt = rollout_batch(data, int(cfg.rollout), int(cfg.batch), rng)
    args = (X0, Xt, *data.args(weights), data.F, data.dt)
    step = value_and_grad(rollout_loss, WEIGHTS)
    rollout_loss(*args), step(*args)
    forward, train = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        rollout_loss(*args)
        t1 = time.perf_counter()
        step(*args)
        forward.append(t1 - t0)
        train.append(time.perf_counter() - t1)
    return float(np.median(forward)), float(np.median(train))


def scales_for(mode, data):
    """The no-closure hybrid has no subgrid term: um = us = 0."""
    return data.scales if mode != "none" else (*data.scales[:2], 0.0, 0.0)


def run_hybrid(data, weights, mode, X0, nout, every):
    """The hybrid from ``X0`` for ``nout * every`` steps: its state every ``every``
    steps, (nout, K) (NaN from where it left the finite numbers)."""
    X, out = np.array(X0, dtype=np.float64), np.empty((nout, len(X0)))
    with np.errstate(all="ignore"):
        hybrid_run(X, out, *(weights[n] for n in WEIGHTS), *scales_for(mode, data), data.F,
                   data.dt, every)
    bad = ~np.all(np.isfinite(out), axis=1)
    if bad.any():
        out[np.argmax(bad):] = np.nan
    return out


def evaluate(data, weights, mode, cfg) -> dict:
    """Forecasts from ``cfg.forecasts`` held-out truth states (RMSE against the truth
    per lead time, the valid prediction time: the first time the error normalised by
    the truth's climatological std exceeds ``cfg.vpt_threshold``), and one long run
    over the held-out segment (mean, std, autocorrelation, histogram)."""
    nlead = round(float(cfg.forecast_time) / data.dt)
    clim = float(data.X_test.std())
    starts = np.linspace(0, len(data.X_test) - 1 - nlead, int(cfg.forecasts)).astype(int)
    sq = np.empty((len(starts), nlead))
    for j, s in enumerate(starts):
        traj = run_hybrid(data, weights, mode, data.X_test[s], nlead, 1)
        err = np.mean((traj - data.X_test[s + 1:s + 1 + nlead]) ** 2, axis=1)
        sq[j] = np.where(np.isfinite(err), err, np.inf)
    lead = np.arange(1, nlead + 1) * data.dt
    over = np.sqrt(sq) / clim > float(cfg.vpt_threshold)
    # a forecast never over the threshold counts as valid for the whole forecast_time
    vpt = np.where(over.any(axis=1), lead[np.argmax(over, axis=1)], float(cfg.forecast_time))
    long = run_hybrid(data, weights, mode, data.X_test[0], len(data.X_test) - 1, 1)
    return {"lead_time": lead, "rmse": np.sqrt(np.mean(sq, axis=0)), "vpt": vpt,
            "long": long, **statistics(long, cfg, data)}


def statistics(X, cfg, data) -> dict:
    """Mean, std, autocorrelation (over ``cfg.acf_time``, averaged over k) and the
    histogram (density on ``cfg.bins`` bins spanning the held-out truth's range and a
    fifth of it on either side) of a run (time, K); NaN where it blew up."""
    lo, hi = float(data.X_test.min()), float(data.X_test.max())
    bins = np.linspace(lo - 0.2 * (hi - lo), hi + 0.2 * (hi - lo), int(cfg.bins) + 1)
    dt = data.dt
    nlag = round(float(cfg.acf_time) / dt) + 1
    if not np.all(np.isfinite(X)):
        nan = np.full(nlag, np.nan)
        return {"mean": np.nan, "std": np.nan, "acf": nan,
                "hist": np.full(len(bins) - 1, np.nan), "bins": bins}
    a = X - X.mean(axis=0)
    var = np.mean(a * a, axis=0)
    acf = np.array([np.mean(np.mean(a[:len(a) - l] * a[l:], axis=0) / var)
                    for l in range(nlag)])
    hist, _ = np.histogram(X, bins=bins, density=True)
    return {"mean": float(X.mean()), "std": float(X.std()), "acf": acf, "hist": hist,
            "bins": bins}


def hellinger(p, q, width) -> float:
    """Hellinger distance of two densities on the same bins (0: equal, 1: disjoint)."""
    return float(np.sqrt(max(0.0, 1.0 - np.sum(np.sqrt(p * q)) * width)))


def initial_weights(hidden, seed):
    """The seeded first weights (the same for offline and online training)."""
    return init_weights(int(hidden), np.random.default_rng([seed, 1]))
