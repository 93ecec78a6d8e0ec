"""2-D heat diffusion with a spatially varying diffusivity kappa(y, x) as the parameter field.

    du/dt = div(kappa grad u)       on a ny x nx grid, u = 0 on the boundary

discretised with fluxes through cell faces (face diffusivity = mean of the two cells) and
explicit Euler steps, stable while dt * 4 * max(kappa) <= dx^2. Calibrating kappa means
one parameter per grid point: thousands of parameters, where finite differences would
need thousands of runs per gradient and the adjoint needs one.
"""
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from adjoint import float64, kernel, symbol
from simcore import Dim, Model, Parameter, TimeAxis, Variable, register
from simcore.errors import ConfigError
from simcore.schema import ObsConfig, above, at_least, interval, option, optional

NY = symbol("NY")
NX = symbol("NX")


@kernel
def heat_steps(u: float64[NY, NX], kappa: float64[NY, NX], work: float64[NY, NX],
               r: float, nsteps: int) -> float:
    """``nsteps`` explicit steps of du/dt = div(kappa grad u); r = dt / dx^2."""
    for t in range(nsteps):
        for i in range(1, NY - 1):
            for j in range(1, NX - 1):
                kc = kappa[i, j]
                east = 0.5 * (kc + kappa[i, j + 1]) * (u[i, j + 1] - u[i, j])
                west = 0.5 * (kc + kappa[i, j - 1]) * (u[i, j] - u[i, j - 1])
                north = 0.5 * (kc + kappa[i + 1, j]) * (u[i + 1, j] - u[i, j])
                south = 0.5 * (kc + kappa[i - 1, j]) * (u[i, j] - u[i - 1, j])
                work[i, j] = u[i, j] + r * (east - west + north - south)
        for i in range(1, NY - 1):
            for j in range(1, NX - 1):
                u[i, j] = work[i, j]
    return np.sum(u)


@dataclass
class HeatConfig:
    """The truth kappa is ``kappa_background`` plus ``kappa_bumps`` Gaussian bumps of
    +-``kappa_amplitude`` and width ``kappa_width`` (fraction of the domain), placed by the
    seed; the initial temperature a seeded sum of the lowest ``modes`` x ``modes`` sine modes."""
    name: str = "heat"
    ny: int = option(48, at_least(3), "grid points along y (kappa has ny * nx values)")
    nx: int = option(48, at_least(3), "grid points along x")
    dx: float = option(1.0, above(0), "grid spacing [m]")
    dt: float = option(0.15, above(0), "time step [s]; stable while 4 dt max(kappa) <= dx^2")
    steps: int = option(300, at_least(1), "time steps of one run")
    modes: int = option(5, at_least(1), "sine modes per axis in the initial temperature")
    kappa_background: float = option(1.0, above(0), "prior mean p_b and first guess of "
                                                    "kappa [m2 s-1]")
    kappa_amplitude: float = option(0.4, at_least(0), "height of the truth's bumps "
                                                      "[m2 s-1]")
    kappa_bumps: int = option(4, at_least(0), "Gaussian bumps in the truth kappa")
    kappa_width: float = option(0.15, above(0), "their width, as a fraction of the domain")
    bounds: List[float] = option([0.05, 1.6], interval(0), "calibrate's bounds on kappa "
                                                           "[m2 s-1]")
    prior_std: Optional[float] = option(0.5, optional(above(0)),
                                        "sigma_b of kappa at each point; null: none")
    smoothness_std: Optional[float] = option(0.05, optional(above(0)),
                                             "prior std of kappa differences between "
                                             "neighbours; null: none")
    # every 3rd point in each direction (16 x 16 stations) every 30 steps (4.5 s), error
    # std 0.01 K
    obs: ObsConfig = option(ObsConfig(every_k=3, every_m=30, sigma=0.01, noise=True),
                            help="synthetic observations (model.obs.*)")


@register
class Heat(Model):
    """2-D diffusion; the diffusivity field kappa (ny x nx values) is the parameter."""
    name = "heat"
    Config = HeatConfig
    kernel = heat_steps
    description = "2-D heat diffusion with a diffusivity field kappa(y, x)"
    tiny = {"ny": 10, "nx": 12, "steps": 24, "obs.every_m": 6, "obs.every_k": 2}

    def __init__(self, cfg=None, seed=0):
        super().__init__(cfg, seed)
        c = self.cfg
        worst = 4.0 * c.dt * max(c.bounds[1], float(self.kappa_truth().max())) / c.dx ** 2
        if worst > 1.0:
            raise ConfigError(f"model.dt={c.dt}: unstable for kappa up to "
                              f"{max(c.bounds[1], float(self.kappa_truth().max())):g} "
                              f"(4 dt kappa / dx^2 = {worst:.3g} > 1); lower model.dt or "
                              "model.bounds")
        self._work = np.zeros((int(c.ny), int(c.nx)))

    def dims(self):
        c = self.cfg
        return [Dim("y", int(c.ny), units="m", long_name="y distance", axis="Y", spacing=c.dx),
                Dim("x", int(c.nx), units="m", long_name="x distance", axis="X", spacing=c.dx)]

    def variables(self):
        return [Variable("u", ("y", "x"), units="K", long_name="temperature anomaly")]

    def parameters(self):
        c = self.cfg
        return [Parameter("kappa", ("y", "x"), value=self.kappa_truth(), units="m2 s-1",
                          long_name="thermal diffusivity", bounds=tuple(c.bounds),
                          prior_std=c.prior_std, background=c.kappa_background,
                          smoothness_std=c.smoothness_std)]

    def time(self):
        return TimeAxis(dt=float(self.cfg.dt), units="s", long_name="time since start")

    def kappa_truth(self):
        c = self.cfg
        y, x = np.meshgrid(np.linspace(0, 1, int(c.ny)), np.linspace(0, 1, int(c.nx)),
                           indexing="ij")
        rng = np.random.default_rng([int(self.seed), 10])
        kappa = np.full(x.shape, float(c.kappa_background))
        for k in range(int(c.kappa_bumps)):
            cy, cx = rng.uniform(0.2, 0.8, size=2)
            sign = 1.0 if k % 2 == 0 else -1.0
            kappa += sign * c.kappa_amplitude * np.exp(
                -((x - cx) ** 2 + (y - cy) ** 2) / (2 * c.kappa_width ** 2))
        return kappa

    def initial_state(self):
        c = self.cfg
        ny, nx, m = int(c.ny), int(c.nx), int(c.modes)
        y = np.linspace(0, 1, ny)[:, None]
        x = np.linspace(0, 1, nx)[None, :]
        amp = self.rng(0).standard_normal((m, m))
        u = np.zeros((ny, nx))
        for a in range(1, m + 1):
            for b in range(1, m + 1):
                u += amp[a - 1, b - 1] / (a * a + b * b) ** 0.5 * \
                    np.sin(np.pi * a * y) * np.sin(np.pi * b * x)
        return {"u": u}

    def kernel_args(self, state, params, nsteps):
        c = self.cfg
        return (state["u"], params["kappa"], self._work, c.dt / c.dx ** 2, nsteps)
