"""Lorenz-96: the standard testbed of data assimilation, a ring of n variables

    dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F        (indices mod n)

advanced with the classical fourth-order Runge-Kutta scheme. With n = 40, F = 8 and
dt = 0.05 (about 6 hours of weather) it is chaotic: errors double in about 0.42 time
units (8 steps), the climatological standard deviation is about 3.6. The forcing F is
the parameter (calibrate estimates it); 4D-Var estimates the state.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from adjoint import float64, kernel, symbol
from simcore import Dim, Model, Parameter, TimeAxis, Variable, register
from simcore.schema import ObsConfig, above, at_least, interval, option, optional

N = symbol("N")


@kernel
def lorenz96_steps(x: float64[N], k1: float64[N], k2: float64[N], k3: float64[N],
                   k4: float64[N], xs: float64[N], F: float, dt: float, nsteps: int) -> float:
    """``nsteps`` RK4 steps of Lorenz-96 in place; returns the energy 1/2 sum x^2."""
    for t in range(nsteps):
        for i in range(N):
            k1[i] = (x[(i + 1) % N] - x[(i + N - 2) % N]) * x[(i + N - 1) % N] - x[i] + F
        for i in range(N):
            xs[i] = x[i] + 0.5 * dt * k1[i]
        for i in range(N):
            k2[i] = (xs[(i + 1) % N] - xs[(i + N - 2) % N]) * xs[(i + N - 1) % N] - xs[i] + F
        for i in range(N):
            xs[i] = x[i] + 0.5 * dt * k2[i]
        for i in range(N):
            k3[i] = (xs[(i + 1) % N] - xs[(i + N - 2) % N]) * xs[(i + N - 1) % N] - xs[i] + F
        for i in range(N):
            xs[i] = x[i] + dt * k3[i]
        for i in range(N):
            k4[i] = (xs[(i + 1) % N] - xs[(i + N - 2) % N]) * xs[(i + N - 1) % N] - xs[i] + F
        for i in range(N):
            x[i] = x[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
    return 0.5 * np.sum(x * x)


def tendency(x, F):
    """dx/dt in NumPy (np.roll): an independent reference for the kernel."""
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + F


def rk4(x, F, dt, nsteps):
    """``nsteps`` RK4 steps in NumPy (returns a new array)."""
    x = np.array(x, dtype=np.float64)
    for _ in range(nsteps):
        a = tendency(x, F)
        b = tendency(x + 0.5 * dt * a, F)
        c = tendency(x + 0.5 * dt * b, F)
        d = tendency(x + dt * c, F)
        x = x + dt / 6.0 * (a + 2.0 * b + 2.0 * c + d)
    return x


@dataclass
class Lorenz96Config:
    """The truth is F; the initial state is F plus a seeded perturbation, run ``spinup``
    steps onto the attractor. ``b_std``/``b_length``: the background error std and its
    Gaussian correlation length (grid points) that task=assimilate uses by default."""
    name: str = "lorenz96"
    n: int = option(40, at_least(4), "variables on the ring")
    F: float = option(8.0, help="forcing (the truth; calibrate estimates it)")
    dt: float = option(0.05, above(0), "RK4 time step (0.05 ~ 6 hours)")
    steps: int = option(20, at_least(1), "steps of one forward/calibrate/gradcheck run "
                                         "(20: 1 time unit)")
    spinup: int = option(2000, at_least(0), "steps from F + noise onto the attractor")
    bounds: List[float] = option([0.0, 20.0], interval(), "calibrate's bounds on F")
    prior_std: Optional[float] = option(1.0, optional(above(0)), "sigma_b of F; null: none")
    b_std: float = option(0.4, above(0), "assimilate: B = b_std^2 C ...")
    b_length: float = option(0.5, at_least(0), "... C Gaussian of this length, in grid "
                                               "points")
    # all variables every 4 steps (0.2 time units), R = I
    obs: ObsConfig = option(ObsConfig(every_k=1, every_m=4, sigma=1.0, noise=True),
                            help="synthetic observations (model.obs.*)")


@register
class Lorenz96(Model):
    """Lorenz-96 on a ring of n variables; the forcing F is the parameter."""
    name = "lorenz96"
    Config = Lorenz96Config
    kernel = lorenz96_steps
    description = "Lorenz-96 (RK4) on a ring of n variables with forcing F"
    tiny = {"steps": 8, "spinup": 200}

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        n = int(self.cfg.n)
        self._work = [np.zeros(n) for _ in range(5)]
        self._x0 = None

    def dims(self):
        return [Dim("site", int(self.cfg.n), units="1", long_name="site index on the ring",
                    axis="X")]

    def variables(self):
        return [Variable("x", ("site",), units="1", long_name="Lorenz-96 variable")]

    def parameters(self):
        c = self.cfg
        return [Parameter("F", (), float(c.F), units="1", long_name="forcing",
                          bounds=tuple(c.bounds), prior_std=c.prior_std)]

    def time(self):
        return TimeAxis(dt=float(self.cfg.dt), units="1",
                        long_name="model time (1 unit ~ 5 days)")

    def initial_state(self):
        if self._x0 is None:
            c = self.cfg
            x = np.full(int(c.n), float(c.F))
            x += 0.01 * self.rng(0).standard_normal(x.shape)
            self._x0 = rk4(x, float(c.F), float(c.dt), int(c.spinup))
        return {"x": self._x0.copy()}

    def background_error(self):
        return float(self.cfg.b_std), float(self.cfg.b_length)

    def periodic(self):
        return ("site",)

    def kernel_args(self, state, params, nsteps):
        return (state["x"], *self._work, float(params["F"]), float(self.cfg.dt), nsteps)
