"""Gauss-Seidel smoothing (PolyBench seidel-2d) with a 3x3 weight stencil.

With all weights 1/9 this is exactly PolyBench's ``seidel-2d``.  The sweep
updates ``A`` in place, so every point already sees its updated north and
west neighbours: the classic kernel on which functional AD copies whole arrays.
"""
import numpy as np

from adjoint import float64, kernel, symbol

N = symbol("N")


@kernel
def seidel2d(A: float64[N, N], w: float64[3, 3], TSTEPS: int) -> float:
    for t in range(TSTEPS - 1):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (w[0, 0] * A[i - 1, j - 1] + w[0, 1] * A[i - 1, j]
                           + w[0, 2] * A[i - 1, j + 1] + w[1, 0] * A[i, j - 1]
                           + w[1, 1] * A[i, j] + w[1, 2] * A[i, j + 1]
                           + w[2, 0] * A[i + 1, j - 1] + w[2, 1] * A[i + 1, j]
                           + w[2, 2] * A[i + 1, j + 1])
    return np.sum(A)


def polybench_weights():
    """The weights that make :func:`seidel2d` PolyBench's seidel-2d."""
    return np.full((3, 3), 1.0 / 9.0)


def polybench_init(n):
    """PolyBench's initial array: A[i, j] = (i * (j + 2) + 2) / n."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return (i * (j + 2) + 2.0) / n


# ---- the model: calibrate the 3x3 weights from observations of A ---------------------------
from dataclasses import dataclass  # noqa: E402
from typing import List, Optional  # noqa: E402

from simcore import Dim, Model, Parameter, TimeAxis, Variable, register  # noqa: E402
from simcore.schema import (ObsConfig, above, at_least, interval, matrix, one_of,  # noqa: E402
                            option, optional)

TRUE_WEIGHTS = [[0.05, 0.10, 0.05],
                [0.15, 0.30, 0.10],
                [0.05, 0.15, 0.05]]


@dataclass
class SeidelConfig:
    """``init``: 'random' (seeded uniform, excites every stencil weight) or 'polybench'."""
    name: str = "seidel"
    n: int = option(20, at_least(3), "grid points per side")
    steps: int = option(10, at_least(1), "Gauss-Seidel sweeps of one run")
    init: str = option("random", one_of("random", "polybench"),
                       "initial A: seeded uniform, or PolyBench's")
    weights: List[List[float]] = option(TRUE_WEIGHTS, matrix(3, 3),
                                        "the 3 x 3 stencil weights of the truth")
    bounds: List[float] = option([-1.0, 1.0], interval(), "calibrate's bounds on every weight")
    prior_std: Optional[float] = option(1.0, optional(above(0)),
                                        "sigma_b of the weights; null: no prior term")
    # every 2nd point in each direction after every sweep, error std 0.01 (weights the
    # misfit); a noise-free twin (noise=true adds N(0, sigma^2) noise)
    obs: ObsConfig = option(ObsConfig(every_k=2, every_m=1, sigma=0.01, noise=False),
                            help="synthetic observations (model.obs.*)")


@register
class Seidel(Model):
    """Weighted Gauss-Seidel sweeps of A (n x n); the 9 stencil weights are the parameters."""
    name = "seidel"
    Config = SeidelConfig
    kernel = seidel2d
    description = "Gauss-Seidel sweeps with a 3x3 weight stencil (PolyBench seidel-2d)"
    tiny = {"n": 8, "steps": 4}

    def dims(self):
        n = int(self.cfg.n)
        return [Dim("y", n, units="1", long_name="grid row index", axis="Y"),
                Dim("x", n, units="1", long_name="grid column index", axis="X"),
                Dim("di", 3, units="1", long_name="stencil row offset", start=-1.0),
                Dim("dj", 3, units="1", long_name="stencil column offset", start=-1.0)]

    def variables(self):
        return [Variable("A", ("y", "x"), units="1", long_name="smoothed field")]

    def parameters(self):
        return [Parameter("w", ("di", "dj"), value=np.array(self.cfg.weights, dtype=float),
                          units="1", long_name="stencil weights", bounds=tuple(self.cfg.bounds),
                          prior_std=self.cfg.prior_std)]

    def initial_state(self):
        n = int(self.cfg.n)
        if self.cfg.init == "polybench":
            return {"A": polybench_init(n)}
        return {"A": self.rng(0).random((n, n))}

    def time(self):
        return TimeAxis(dt=1.0, units="1", long_name="sweep")

    def kernel_args(self, state, params, nsteps):
        return (state["A"], params["w"], nsteps + 1)       # TSTEPS - 1 sweeps
