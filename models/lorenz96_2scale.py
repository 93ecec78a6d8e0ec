"""Two-scale Lorenz-96 (Lorenz 1996): K slow variables X_k on a ring, each coupled to J
fast variables Y_{j,k}; the fast ones form one ring of K*J (after Y_{J-1,k} comes
Y_{0,k+1}):

    dX_k/dt     = X_{k-1} (X_{k+1} - X_{k-2}) - X_k + F - (h c / b) sum_j Y_{j,k}
    dY_{j,k}/dt = -c b Y_{j+1,k} (Y_{j+2,k} - Y_{j-1,k}) - c Y_{j,k} + (h c / b) X_k

advanced with the classical fourth-order Runge-Kutta scheme. The defaults are the
setting of the parametrisation studies (Arnold et al. 2013; "online" closure learning
after Rasp 2020): K = 8, J = 32, F = 20, h = 1, b = c = 10, dt = 0.001 (the fast
variables' advection, about c b |Y|, needs it). It is the truth of a hybrid model: the
one-scale model on X misses the coupling term -(h c / b) sum_j Y_{j,k}, the subgrid
tendency a closure learns (:meth:`Lorenz96TwoScale.truth_run` records it). The forcing
F is the parameter; both scales are the state, the slow one observed.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from adjoint import float64, kernel, symbol
from simcore import Dim, Model, Parameter, TimeAxis, Variable, register
from simcore.schema import ObsConfig, above, at_least, interval, option, optional

K, J = symbol("K"), symbol("J")


@kernel
def tendencies(X: float64[K], Y: float64[K, J], dX: float64[K], dY: float64[K, J],
               F: float, h: float, b: float, c: float):
    """dX/dt into ``dX`` and dY/dt into ``dY``."""
    for k in range(K):
        s = 0.0
        for j in range(J):
            s += Y[k, j]
        dX[k] = ((X[(k + 1) % K] - X[(k + K - 2) % K]) * X[(k + K - 1) % K] - X[k] + F
                 - h * c / b * s)
    for k in range(K):
        for j in range(J):
            # neighbours on the ring of K * J fast variables: (k, j + 1), (k, j + 2), (k, j - 1)
            k1 = (k + (j + 1) // J) % K
            k2 = (k + (j + 2) // J) % K
            k0 = (k + K - 1 + (j + J - 1) // J) % K
            dY[k, j] = (-c * b * Y[k1, (j + 1) % J] * (Y[k2, (j + 2) % J] - Y[k0, (j + J - 1) % J])
                        - c * Y[k, j] + h * c / b * X[k])


@kernel
def lorenz96_2scale_steps(X: float64[K], Y: float64[K, J], kx: float64[4, K],
                          ky: float64[4, K, J], Xs: float64[K], Ys: float64[K, J], F: float,
                          h: float, b: float, c: float, dt: float, nsteps: int) -> float:
    """``nsteps`` RK4 steps of both scales in place; returns the slow energy 1/2 sum X^2."""
    for t in range(nsteps):
        tendencies(X, Y, kx[0], ky[0], F, h, b, c)
        Xs[:] = X + 0.5 * dt * kx[0]
        Ys[:] = Y + 0.5 * dt * ky[0]
        tendencies(Xs, Ys, kx[1], ky[1], F, h, b, c)
        Xs[:] = X + 0.5 * dt * kx[1]
        Ys[:] = Y + 0.5 * dt * ky[1]
        tendencies(Xs, Ys, kx[2], ky[2], F, h, b, c)
        Xs[:] = X + dt * kx[2]
        Ys[:] = Y + dt * ky[2]
        tendencies(Xs, Ys, kx[3], ky[3], F, h, b, c)
        X += dt / 6.0 * (kx[0] + 2.0 * kx[1] + 2.0 * kx[2] + kx[3])
        Y += dt / 6.0 * (ky[0] + 2.0 * ky[1] + 2.0 * ky[2] + ky[3])
    return 0.5 * np.sum(X * X)


def coupling(Y, h, b, c):
    """The slow variables' subgrid tendency -(h c / b) sum_j Y_{j,k} (NumPy)."""
    return -h * c / b * np.sum(Y, axis=1)


def tendency(X, Y, F, h, b, c):
    """(dX/dt, dY/dt) in NumPy (np.roll on the flattened fast ring): an independent
    reference for the kernel."""
    y = Y.reshape(-1)
    dX = (np.roll(X, -1) - np.roll(X, 2)) * np.roll(X, 1) - X + F + coupling(Y, h, b, c)
    dy = (-c * b * np.roll(y, -1) * (np.roll(y, -2) - np.roll(y, 1)) - c * y
          + h * c / b * np.repeat(X, Y.shape[1]))
    return dX, dy.reshape(Y.shape)


def rk4(X, Y, F, h, b, c, dt, nsteps):
    """``nsteps`` RK4 steps in NumPy (returns new arrays)."""
    X, Y = np.array(X, dtype=np.float64), np.array(Y, dtype=np.float64)
    for _ in range(nsteps):
        a = tendency(X, Y, F, h, b, c)
        s = tendency(X + 0.5 * dt * a[0], Y + 0.5 * dt * a[1], F, h, b, c)
        m = tendency(X + 0.5 * dt * s[0], Y + 0.5 * dt * s[1], F, h, b, c)
        e = tendency(X + dt * m[0], Y + dt * m[1], F, h, b, c)
        X = X + dt / 6.0 * (a[0] + 2.0 * s[0] + 2.0 * m[0] + e[0])
        Y = Y + dt / 6.0 * (a[1] + 2.0 * s[1] + 2.0 * m[1] + e[1])
    return X, Y


@dataclass
class Lorenz96TwoScaleConfig:
    """The truth is F; the initial state (X from F plus seeded noise, Y small seeded
    noise) is run ``spinup`` steps onto the attractor."""
    name: str = "lorenz96_2scale"
    K: int = option(8, at_least(4), "slow variables on the ring")
    J: int = option(32, at_least(1), "fast variables per slow one")
    F: float = option(20.0, help="forcing (the truth; calibrate estimates it)")
    h: float = option(1.0, help="coupling strength")
    b: float = option(10.0, above(0), "spatial-scale ratio of slow to fast")
    c: float = option(10.0, above(0), "time-scale ratio of fast to slow")
    dt: float = option(0.001, above(0), "RK4 time step")
    steps: int = option(200, at_least(1), "steps of one forward/calibrate/gradcheck run")
    spinup: int = option(5000, at_least(0), "steps from the noisy start onto the attractor")
    bounds: List[float] = option([0.0, 40.0], interval(), "calibrate's bounds on F")
    prior_std: Optional[float] = option(2.0, optional(above(0)), "sigma_b of F; null: none")
    # the slow variables every 20 steps (0.02 time units)
    obs: ObsConfig = option(ObsConfig(every_k=1, every_m=20, sigma=1.0, noise=True),
                            help="synthetic observations of X (model.obs.*)")


@register
class Lorenz96TwoScale(Model):
    """Two-scale Lorenz-96: K slow variables, each with J fast ones; F is the parameter."""
    name = "lorenz96_2scale"
    Config = Lorenz96TwoScaleConfig
    kernel = lorenz96_2scale_steps
    description = "two-scale Lorenz-96 (RK4): K slow variables each coupled to J fast ones"
    tiny = {"K": 4, "J": 4, "steps": 20, "spinup": 200, "obs.every_m": 5}

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        nk, nj = int(self.cfg.K), int(self.cfg.J)
        self._work = (np.zeros((4, nk)), np.zeros((4, nk, nj)), np.zeros(nk),
                      np.zeros((nk, nj)))
        self._x0 = None

    def dims(self):
        return [Dim("k", int(self.cfg.K), units="1", long_name="slow variable index",
                    axis="X"),
                Dim("j", int(self.cfg.J), units="1", long_name="fast variable index")]

    def variables(self):
        return [Variable("X", ("k",), units="1", long_name="slow variable"),
                Variable("Y", ("k", "j"), units="1", long_name="fast variable",
                         observed=False)]

    def parameters(self):
        c = self.cfg
        return [Parameter("F", (), float(c.F), units="1", long_name="forcing",
                          bounds=tuple(c.bounds), prior_std=c.prior_std)]

    def time(self):
        return TimeAxis(dt=float(self.cfg.dt), units="1", long_name="model time")

    def periodic(self):
        return ("k",)

    def coefficients(self):
        """(h, b, c) as floats."""
        return float(self.cfg.h), float(self.cfg.b), float(self.cfg.c)

    def initial_state(self):
        if self._x0 is None:
            c = self.cfg
            rng = self.rng(0)
            X = float(c.F) * (0.5 + rng.random(int(c.K)))
            Y = 0.1 * rng.standard_normal((int(c.K), int(c.J)))
            state = {"X": X, "Y": Y}
            self.advance(state, {"F": float(c.F)}, int(c.spinup))
            self._x0 = state
        return {n: v.copy() for n, v in self._x0.items()}

    def advance(self, state, params, nsteps):
        """Run the kernel ``nsteps`` steps on ``state`` in place."""
        if nsteps > 0:
            self.kernel(*self.kernel_args(state, params, nsteps))

    def kernel_args(self, state, params, nsteps):
        return (state["X"], state["Y"], *self._work, float(params["F"]),
                *self.coefficients(), float(self.cfg.dt), nsteps)

    def truth_run(self, nsteps, every=1):
        """The truth from the initial state: {"time", "X", "Y", "coupling"} at every
        ``every``-th step (``nsteps // every + 1`` times, the start included), with the
        slow variables' subgrid tendency -(h c / b) sum_j Y_{j,k} a closure learns."""
        if every < 1 or nsteps < 0:
            raise ValueError(f"truth_run: every={every} must be >= 1, nsteps={nsteps} >= 0")
        state, params = self.initial_state(), {"F": float(self.cfg.F)}
        frames = [{n: v.copy() for n, v in state.items()}]
        for _ in range(nsteps // every):
            self.advance(state, params, every)
            frames.append({n: v.copy() for n, v in state.items()})
        X = np.stack([f["X"] for f in frames])
        Y = np.stack([f["Y"] for f in frames])
        h, b, c = self.coefficients()
        time = np.arange(len(frames)) * every * float(self.cfg.dt)
        return {"time": time, "X": X, "Y": Y, "coupling": -h * c / b * Y.sum(axis=2)}
