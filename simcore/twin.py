"""A twin experiment: synthetic observations of a truth run, the cost J and its gradient.

    J(p, x0) = 1/2 sum_t sum ((H(M_t(p, x0)) - y_t) / sigma_o)^2  +  J_b(p)

M_t runs the model's kernel to observation time t (every ``every_m`` steps); H keeps every
``every_k``-th grid point (starting at ``every_k // 2``) of each observed variable. The
gradient is exact: one forward through the engine's ``vjp`` per chunk of ``every_m``
steps, then the pullbacks chained backwards, the misfit's cotangent added at each
observation time (simcore.chain, as 4D-Var does). No finite differences anywhere. Steps
after the last observation time cannot change J and are not run.
"""
from dataclasses import dataclass

import numpy as np

from .chain import Chain
from .errors import ConfigError
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
    """Observations of the truth of ``model`` and the cost/gradient of parameters against them."""

    def __init__(self, model, obs: Observations, background: dict = None):
        self.model, self.obs = model, obs
        self.parameters = model.parameters()
        self.observed = [v for v in model.variables() if v.observed]
        self.chunks = model.steps // obs.every_m
        if self.chunks < 1:
            raise ConfigError(f"model {model.name!r} runs {model.steps} steps but observes every "
                              f"{obs.every_m}: no observation time; lower obs.every_m or raise "
                              "steps")
        self.times = obs.every_m * np.arange(1, self.chunks + 1)
        self.chain = Chain(model, [obs.every_m] * self.chunks)
        self.x0 = model.initial_state()
        self.truth = model.truth()
        self.background = background if background is not None else self.truth
        self.y = self._observe(self.truth, self.x0)
        if obs.noise:
            rng = model.rng(1)
            for frame in self.y:
                for name in frame:
                    frame[name] = frame[name] + obs.sigma * rng.standard_normal(frame[name].shape)
        self.n_obs = sum(f[v.name].size for f in self.y for v in self.observed)

    def H(self, state) -> dict:
        """The observed points of ``state`` (copies)."""
        return {v.name: state[v.name][self.obs.select(state[v.name].ndim)].copy()
                for v in self.observed}

    def H_T(self, frame) -> dict:
        """The transpose of :meth:`H`: ``frame`` at the observed points of a zero state."""
        out = {n: np.zeros(shape) for n, shape in self.chain.shapes.items()}
        for n, d in frame.items():
            out[n][self.obs.select(out[n].ndim)] = d
        return out

    def _observe(self, params, x0):
        """H(M_t(p, x0)) at every observation time, by the compiled forward."""
        return self.chain.run(copy_state(x0), params, self.H)

    def cost(self, params: dict, x0: dict = None):
        """(J, {"obs": J_o, "prior": J_b}) by forward runs only."""
        frames = self._observe(params, self.x0 if x0 is None else x0)
        j_obs = sum(0.5 * float(np.sum(((f[n] - y[n]) / self.obs.sigma) ** 2))
                    for f, y in zip(frames, self.y) for n in f)
        j_b, _ = prior_cost(self.parameters, params, self.background)
        return j_obs + j_b, {"obs": j_obs, "prior": j_b}

    def cost_and_grad(self, params: dict, x0: dict = None):
        """(J, parts, dJ/dp {name: array}, dJ/dx0 {variable: array}) from the adjoint."""
        frames, pullbacks = self.chain.record(self.x0 if x0 is None else x0, params, self.H)
        r = [{n: (f[n] - y[n]) / self.obs.sigma for n in f} for f, y in zip(frames, self.y)]
        j_obs = 0.5 * sum(float(np.sum(d * d)) for f in r for d in f.values())
        gp, gx0 = self.chain.pull(pullbacks, [self.H_T({n: d / self.obs.sigma
                                                        for n, d in f.items()}) for f in r])
        j_b, gb = prior_cost(self.parameters, params, self.background)
        for name in gp:
            gp[name] += gb[name]
        return j_obs + j_b, {"obs": j_obs, "prior": j_b}, gp, gx0

    def linearized(self, params: dict, dp: dict, dx0: dict, x0: dict = None) -> list:
        """H(dM_t) for the tangents ``dp``, ``dx0`` at every observation time (forward mode)."""
        return [self.H(t) for t in
                self.chain.tangent(self.x0 if x0 is None else x0, params, dp, dx0)]

    def adjoint(self, params: dict, cotangents: list, x0: dict = None):
        """(dp, dx0) = the transpose of :meth:`linearized` applied to observation-space
        ``cotangents`` (one {variable: array} per observation time)."""
        _, pullbacks = self.chain.record(self.x0 if x0 is None else x0, params, self.H)
        return self.chain.pull(pullbacks, [self.H_T(c) for c in cotangents])
