"""A twin experiment: synthetic observations of a truth run, the cost J and its gradient.

    J(p, x0) = 1/2 sum_t sum ((H(M_t(p, x0)) - y_t) / sigma_o)^2  +  J_b(p)

M_t runs the model's kernel to observation time t (every ``every_m`` steps); H keeps every
``every_k``-th grid point (starting at ``every_k // 2``) of each observed variable (or the
observations are read from a file: any times, interpolated positions, per-observation
errors sigma_o). The gradient is exact: one forward through the engine's ``vjp`` per
chunk between observation times, then the pullbacks chained backwards, the misfit's
cotangent added at each observation time (simcore.chain, as 4D-Var does). No finite
differences anywhere. Steps after the last observation time cannot change J and are not
run.
"""
from dataclasses import dataclass

import numpy as np

from .chain import Chain
from .covariance import flatten, unflatten
from .errors import ConfigError, DataFileError
from .obsfile import ObservationSet
from .observation import ObservationOperator
from .prior import prior_cost
from .state import copy_state


@dataclass(frozen=True)
class Observations:
    """Where and when the truth is observed, and with what noise."""
    every_k: int = 2
    every_m: int = 1
    sigma: float = 0.01
    noise: bool = True

    @classmethod
    def from_config(cls, cfg):
        obs = cls(int(cfg.every_k), int(cfg.every_m), float(cfg.sigma), bool(cfg.noise))
        if obs.every_k < 1 or obs.every_m < 1 or not obs.sigma > 0:
            raise ConfigError(f"observations need every_k >= 1, every_m >= 1 and sigma > 0, "
                              f"got every_k={obs.every_k}, every_m={obs.every_m}, "
                              f"sigma={obs.sigma}")
        return obs

    def select(self, ndim):
        k = self.every_k
        return (slice(k // 2, None, k),) * ndim


class Twin:
    """Observations of the truth of ``model`` and the cost/gradient of parameters against them.

    The observations are ``data`` (a :class:`simcore.obsfile.ObservationSet`, e.g. read
    from ``obs.file``), or else synthetic: ``obs`` of the truth run, every ``every_m``
    steps up to ``model.steps``. Observation-space frames are one flat vector per
    observation time (that time's records, in order)."""

    def __init__(self, model, obs: Observations, background: dict = None, data=None):
        self.model, self.obs = model, obs
        self.parameters = model.parameters()
        self.x0 = model.initial_state()
        self.truth = model.truth()
        self.background = background if background is not None else self.truth
        self.truth_states = None
        self.data = data if data is not None else self._synthetic()
        self.times = self.data.times()
        if self.times[-1] > model.steps:
            raise DataFileError(f"{self.data.source}: time: {self.times[-1] * model.time().dt:g}"
                                f" is outside the run (model.steps={model.steps} steps, to "
                                f"t={model.steps * model.time().dt:g})")
        self.chain = Chain(model, np.diff([0, *self.times]))
        self.observed = [self.data.at(t) for t in self.times]
        self.y = [o.y for o in self.observed]
        self.n_obs = len(self.data)

    def _synthetic(self):
        chunks = self.model.steps // self.obs.every_m
        if chunks < 1:
            raise ConfigError(f"model {self.model.name!r} runs {self.model.steps} steps but "
                              f"observes every {self.obs.every_m}: no observation time; lower "
                              "obs.every_m or raise steps")
        times = self.obs.every_m * np.arange(1, chunks + 1)
        H = ObservationOperator.grid(self.model, self.obs.every_k)
        frames = Chain(self.model, [self.obs.every_m] * chunks).run(
            copy_state(self.x0), self.truth, self.flat)
        rng = self.model.rng(1) if self.obs.noise else None
        self.truth_states = (times, frames)        # calibrate writes them as truth.nc
        return ObservationSet.synthetic(self.model, H, times, frames, self.obs.sigma, rng)

    def flat(self, state) -> np.ndarray:
        return flatten(self.model, state)

    def H_T(self, j, w) -> dict:
        """The transpose of time ``j``'s H applied to ``w``, as a state."""
        return unflatten(self.model, self.observed[j].H.adjoint(w))

    def _residuals(self, frames) -> list:
        return [(o.H(x) - o.y) / o.sigma for o, x in zip(self.observed, frames)]

    def cost(self, params: dict, x0: dict = None):
        """(J, {"obs": J_o, "prior": J_b}) by forward runs only."""
        frames = self.chain.run(copy_state(self.x0 if x0 is None else x0), params, self.flat)
        j_obs = sum(0.5 * float(np.sum(r * r)) for r in self._residuals(frames))
        j_b, _ = prior_cost(self.parameters, params, self.background)
        return j_obs + j_b, {"obs": j_obs, "prior": j_b}

    def cost_and_grad(self, params: dict, x0: dict = None):
        """(J, parts, dJ/dp {name: array}, dJ/dx0 {variable: array}) from the adjoint."""
        frames, pullbacks = self.chain.record(self.x0 if x0 is None else x0, params, self.flat)
        r = self._residuals(frames)
        j_obs = sum(0.5 * float(np.sum(d * d)) for d in r)
        gp, gx0 = self.chain.pull(pullbacks, [self.H_T(j, d / o.sigma) for j, (d, o)
                                              in enumerate(zip(r, self.observed))])
        j_b, gb = prior_cost(self.parameters, params, self.background)
        for name in gp:
            gp[name] += gb[name]
        return j_obs + j_b, {"obs": j_obs, "prior": j_b}, gp, gx0

    def linearized(self, params: dict, dp: dict, dx0: dict, x0: dict = None) -> list:
        """H(dM_t) for the tangents ``dp``, ``dx0`` at every observation time (forward mode)."""
        return [o.H(self.flat(t)) for o, t in zip(
            self.observed, self.chain.tangent(self.x0 if x0 is None else x0, params, dp, dx0))]

    def adjoint(self, params: dict, cotangents: list, x0: dict = None):
        """(dp, dx0) = the transpose of :meth:`linearized` applied to observation-space
        ``cotangents`` (one vector per observation time)."""
        _, pullbacks = self.chain.record(self.x0 if x0 is None else x0, params, self.flat)
        return self.chain.pull(pullbacks, [self.H_T(j, c) for j, c in enumerate(cotangents)])
