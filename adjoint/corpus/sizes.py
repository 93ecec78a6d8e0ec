"""The benchmark's sizes: one table, every corpus kernel at an S and an M size.

S runs in milliseconds compiled (about 1e5 element updates for loop kernels); M is about
20x the work (about 2e6 element updates), the most the pure-Python originals finish in
a few seconds. Vectorised kernels, whose NumPy originals are fast, get larger sizes.
The shapes follow NPBench's parameters (time steps, N, ...) where the kernel has them.

A size is a dict of parameters: ``n`` goes to the corpus factory (``make_args(rng, n)``,
whose shapes derive from it), and a key naming an integer argument of the kernel (``T``,
``TSTEPS``, ``nt``, ``nit``) overrides that argument. Kernels whose factory cannot take a
size (a fixed time-step array, a convergence tolerance, fixed widths) have a maker here.

``kind`` classifies the NumPy original:
  loops       element-by-element loop nests (what the engine is for);
  mixed       Python loops over a spatial index around array statements;
  vectorised  whole-array statements, at most under a time-step loop.
"loop-heavy" in the summaries is loops + mixed.
"""
import inspect
from dataclasses import dataclass

import numpy as np

import adjoint.corpus

CASES = {c.name: c for c in adjoint.corpus.CASES}
TIME_KEYS = ("T", "TSTEPS", "nt", "steps", "maxit")   # linear in the work: extrapolate on these


@dataclass(frozen=True)
class Bench:
    name: str
    kind: str
    S: dict
    M: dict
    make: object = None          # make(rng, **size) -> args; default: the corpus factory
    scale: str = ""              # the parameter to shrink for JAX extrapolation
    notes: str = ""

    @property
    def case(self):
        return CASES[self.name]

    def sizes(self, which):
        return dict(getattr(self, which))

    def scale_key(self, size):
        if self.scale:
            return self.scale
        return next((k for k in TIME_KEYS if k in size and size[k] >= 8), "n")

    def args(self, size, rng):
        if self.make is not None:
            return self.make(rng, **size)
        return factory_args(self.case, rng, size)


def factory_args(case, rng, size):
    """The corpus factory's arguments at size n (kink margins off: with many random
    entries no margin can hold, and ties have probability zero), then the integer
    overrides by argument name."""
    size = dict(size)
    kwargs = {"n": size.pop("n")}
    if "gap" in inspect.signature(case.make_args).parameters:
        kwargs["gap"] = 0.0
    args = list(case.make_args(rng, **kwargs))
    names = list(inspect.signature(case.kernel.py_func).parameters)
    for key, value in size.items():
        k = names.index(key)
        assert isinstance(args[k], int), f"{case.name}: {key} is not an integer argument"
        args[k] = value
    return tuple(args)


# ------------------------------------------------------------- makers for special cases

def make_leapfrog(rng, n, steps):
    return rng.standard_normal(n), rng.standard_normal(n), 0.3 + 0.1 * rng.random(), steps


def make_column_recurrence(rng, n):
    """Entries in [0, 0.5), c <= 0.5: every row stays below 1 (a + c x^2 < 1 for x < 1).
    The corpus factory's entries in [0, 1) overflow to inf for some draws from n ~ 150,
    which spoiled the gradient check at the sizes JAX is extrapolated from."""
    return 0.5 * rng.random((n, n - 2)), 0.3 + 0.2 * rng.random()


def make_fdtd_2d(rng, n, T):
    return (rng.standard_normal((n, n + 1)), rng.standard_normal((n, n + 1)),
            rng.standard_normal((n, n + 1)), rng.standard_normal(T))


def make_vertical_advection(rng, n, K, T):
    return rng.standard_normal((n, n + 1, K)), 0.5 + rng.random((n, n + 1, K)), 0.8, T


def make_cavity_flow(rng, n, nt, nit):
    """dt = 0.001 as in Barba's notebook: the factory's 0.01 is unstable on these grids
    (nu dt / dx^2 = 2.5 at n = 101: the fields overflow)."""
    return (0.1 * rng.standard_normal((n, n + 1)), 0.1 * rng.standard_normal((n, n + 1)),
            0.1 * rng.standard_normal((n, n + 1)), nt, nit, 0.001, 1.0, 0.1)


def make_channel_flow(rng, n, nit, maxit):
    """tol = -1: the while loop runs exactly maxit steps (u grows under the forcing F, so
    the relative change stays positive); the decisions are the same every call. dt =
    0.001 for stability, as for the cavity."""
    u = 0.5 + 0.1 * rng.random((n, n + 1))
    return (u, 0.1 * rng.standard_normal((n, n + 1)), np.zeros((n, n + 1)), nit, 0.001, 1.0,
            0.1, 1.0, -1.0, maxit)


def make_mlp_loops(rng, n, d, h, c):
    X = rng.standard_normal((n, d))
    W1, b1 = rng.standard_normal((d, h)) / np.sqrt(d), 0.1 * rng.standard_normal(h)
    W2, b2 = rng.standard_normal((h, c)) / np.sqrt(h), 0.1 * rng.standard_normal(c)
    Y = np.eye(c)[rng.integers(0, c, n)]
    return X, W1, b1, W2, b2, Y, np.zeros((n, h)), np.zeros((n, c))


B = Bench
TABLE = [
    # ------------------------------------------------------------------ loops.py: loops
    B("jacobi1d", "loops", dict(n=1000, T=50), dict(n=10000, T=100)),
    B("jacobi2d", "loops", dict(n=50, T=20), dict(n=150, T=50)),
    B("heat3d", "loops", dict(n=20, T=10), dict(n=40, T=20)),
    B("wave1d", "loops", dict(n=2000, T=50), dict(n=10000, T=100)),
    B("prefix_sum", "loops", dict(n=100_000), dict(n=2_000_000)),
    B("sor1d", "loops", dict(n=2000, T=50), dict(n=10000, T=200)),
    B("red_black", "loops", dict(n=2001, T=50), dict(n=10001, T=200)),
    B("nonlinear_seidel", "loops", dict(n=50, T=10), dict(n=150, T=40)),
    B("forced_chain", "loops", dict(n=2000, T=50), dict(n=10000, T=200)),
    B("lorenz96_sweep", "loops", dict(n=2000, T=50), dict(n=10000, T=200)),
    B("ema", "loops", dict(n=100_000), dict(n=2_000_000)),
    B("trisolv", "loops", dict(n=300), dict(n=2000)),
    B("lower_matvec", "loops", dict(n=300), dict(n=2000)),
    B("back_substitution", "loops", dict(n=300), dict(n=2000)),
    B("gemm", "loops", dict(n=40), dict(n=120)),
    B("roughness", "loops", dict(n=100_000), dict(n=2_000_000)),
    B("mirror_coupling", "loops", dict(n=100_000), dict(n=2_000_000)),
    B("column_recurrence", "loops", dict(n=300), dict(n=1500), make=make_column_recurrence),
    B("powers", "loops", dict(n=100_000), dict(n=1_000_000)),
    B("clipped_update", "loops", dict(n=100_000), dict(n=1_000_000)),
    B("math_funcs", "loops", dict(n=30_000), dict(n=300_000)),
    B("numpy_funcs", "loops", dict(n=20_000), dict(n=200_000)),
    B("normalize_rows", "loops", dict(n=300), dict(n=1400)),
    B("diffuse32", "loops", dict(n=2000, T=50), dict(n=10000, T=200)),
    B("leapfrog", "loops", dict(n=2000, steps=50), dict(n=10000, steps=200),
      make=make_leapfrog),
    B("smooth_unannotated", "loops", dict(n=50, T=20), dict(n=150, T=50)),
    # ------------------------------------------------------------- arrays.py: vectorised
    B("jacobi2d_slices", "vectorised", dict(n=150, T=20), dict(n=600, T=50)),
    B("heat3d_vec", "vectorised", dict(n=30, T=10), dict(n=80, T=20)),
    B("wave_temporaries", "vectorised", dict(n=10_000, T=50), dict(n=100_000, T=200)),
    B("gesummv_vec", "vectorised", dict(n=300), dict(n=2000)),
    B("atax_vec", "vectorised", dict(n=300), dict(n=2000)),
    B("outer_update", "vectorised", dict(n=300), dict(n=2000)),
    B("row_broadcast", "vectorised", dict(n=300), dict(n=2000)),
    B("softmax_rows", "vectorised", dict(n=200), dict(n=1500)),
    B("logsumexp", "vectorised", dict(n=100_000), dict(n=4_000_000)),
    B("layer_norm", "vectorised", dict(n=200), dict(n=1500)),
    B("mlp_relu", "vectorised", dict(n=300), dict(n=2000)),
    B("minmod_advection", "vectorised", dict(n=10_000, T=20), dict(n=100_000, T=100)),
    B("hdiff_limiter", "vectorised", dict(n=200), dict(n=1000)),
    B("masked_updates", "vectorised", dict(n=100_000), dict(n=4_000_000)),
    B("overlapping_shifts", "vectorised", dict(n=300), dict(n=2000)),
    B("views_and_copies", "vectorised", dict(n=300), dict(n=2000)),
    B("stepped_slices", "vectorised", dict(n=300), dict(n=2000)),
    B("assorted_views", "mixed", dict(n=300), dict(n=1500)),
    # ---------------------------------------------------------------------------- more.py
    B("bicg", "loops", dict(n=300), dict(n=1500)),
    B("mvt", "vectorised", dict(n=300), dict(n=2000)),
    B("gemver", "vectorised", dict(n=300), dict(n=2000)),
    B("2mm", "loops", dict(n=40), dict(n=100)),
    B("3mm", "loops", dict(n=40), dict(n=100)),
    B("syrk", "loops", dict(n=60), dict(n=150)),
    B("syr2k", "mixed", dict(n=60), dict(n=200)),
    B("symm", "loops", dict(n=60), dict(n=150)),
    B("trmm", "loops", dict(n=60), dict(n=150)),
    B("lu", "loops", dict(n=60), dict(n=180)),
    B("ludcmp", "loops", dict(n=60), dict(n=180)),
    B("cholesky", "mixed", dict(n=100), dict(n=400)),
    B("durbin", "mixed", dict(n=500), dict(n=4000)),
    B("gramschmidt", "mixed", dict(n=60), dict(n=250)),
    B("covariance", "mixed", dict(n=100), dict(n=400)),
    B("correlation", "mixed", dict(n=100), dict(n=400)),
    B("doitgen", "loops", dict(n=20), dict(n=40)),
    B("fdtd_2d", "vectorised", dict(n=100, T=20), dict(n=500, T=100), make=make_fdtd_2d),
    B("adi", "mixed", dict(n=100, TSTEPS=10), dict(n=300, TSTEPS=20)),
    B("deriche", "mixed", dict(n=200), dict(n=1000)),
    B("seidel2d", "loops", dict(n=50, TSTEPS=8), dict(n=200, TSTEPS=40)),
    B("vertical_advection", "loops", dict(n=20, K=20, T=5), dict(n=40, K=40, T=10),
      make=make_vertical_advection),
    B("hdiff_loops", "loops", dict(n=150), dict(n=600)),
    B("cavity_flow", "vectorised", dict(n=41, nt=10, nit=20), dict(n=101, nt=50, nit=50),
      make=make_cavity_flow),
    B("channel_flow", "vectorised", dict(n=41, nit=10, maxit=10),
      dict(n=101, nit=50, maxit=20), make=make_channel_flow),
    B("conv2d", "loops", dict(n=50), dict(n=250)),
    B("mlp_loops", "loops", dict(n=64, d=32, h=32, c=10), dict(n=256, d=128, h=64, c=10),
      make=make_mlp_loops, scale="n"),
    B("softmax_loops", "loops", dict(n=200), dict(n=1000)),
]
del B

BENCHES = {b.name: b for b in TABLE}
assert set(BENCHES) == set(CASES), sorted(set(CASES) ^ set(BENCHES))
