"""A corpus of loop kernels written the way scientists write NumPy loops.

Each kernel is plain Python (``k.py_func`` is the reference semantics) and returns a
scalar loss, so every one can be differentiated.  Each comes with a factory that
draws small random inputs from a seeded ``numpy.random.Generator`` -- small, because
the tests run the pure-Python reference many times for finite differences.

A :class:`CorpusCase` says which arguments are differentiable (``wrt``: every
floating argument, arrays and float scalars) and which arrays the kernel writes
(``writes``: what ``vjp`` reports as outputs besides ``"return"``).

Inputs avoid the kinks of ``abs/min/max`` (the factories keep their arguments away
from ties) and keep ``log``/``sqrt``/``**`` arguments positive.
"""
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from adjoint import float32, float64, kernel, symbol

N = symbol("N")
M = symbol("M")
K = symbol("K")


@dataclass(frozen=True)
class CorpusCase:
    name: str
    kernel: object
    make_args: Callable[..., tuple]  # make_args(rng, n=<small default>) -> positional args
    wrt: tuple                       # the differentiable (floating) arguments, by name
    writes: tuple = ()               # the arrays the kernel writes
    float32: bool = False            # single precision: looser tolerances


# --------------------------------------------------------------------------- stencils

@kernel
def jacobi1d(A: float64[N], B: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1])
        for i in range(1, N - 1):
            A[i] = 0.33333 * (B[i - 1] + B[i] + B[i + 1])
    return np.sum(A * A)


def make_jacobi1d(rng, n=16):
    return rng.random(n), rng.random(n), 3


@kernel
def jacobi2d(A: float64[N, N], B: float64[N, N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1]
                                 + A[i + 1, j] + A[i - 1, j])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = 0.2 * (B[i, j] + B[i, j - 1] + B[i, j + 1]
                                 + B[i + 1, j] + B[i - 1, j])
    return np.sum(A * A)


def make_jacobi2d(rng, n=8):
    return rng.random((n, n)), rng.random((n, n)), 2


@kernel
def heat3d(A: float64[N, N, N], B: float64[N, N, N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                for k in range(1, N - 1):
                    B[i, j, k] = (0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k])
                                  + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k])
                                  + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1])
                                  + A[i, j, k])
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                for k in range(1, N - 1):
                    A[i, j, k] = (0.125 * (B[i + 1, j, k] - 2.0 * B[i, j, k] + B[i - 1, j, k])
                                  + 0.125 * (B[i, j + 1, k] - 2.0 * B[i, j, k] + B[i, j - 1, k])
                                  + 0.125 * (B[i, j, k + 1] - 2.0 * B[i, j, k] + B[i, j, k - 1])
                                  + B[i, j, k])
    return np.sum(A * A)


def make_heat3d(rng, n=6):
    return rng.random((n, n, n)), rng.random((n, n, n)), 2


@kernel
def wave1d(up: float64[N], u: float64[N], un: float64[N], c2: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            un[i] = 2.0 * u[i] - up[i] + c2 * (u[i + 1] - 2.0 * u[i] + u[i - 1])
        for i in range(1, N - 1):
            up[i] = u[i]
            u[i] = un[i]
    return np.sum(u * u)


def make_wave1d(rng, n=14):
    u = np.sin(np.linspace(0.0, 3.0, n)) + 0.1 * rng.random(n)
    return u - 0.05 * rng.random(n), u, rng.random(n), 0.3 + 0.1 * rng.random(), 4


# ----------------------------------------------------------- in-place recurrences

@kernel
def prefix_sum(x: float64[N]) -> float:
    for i in range(1, N):
        x[i] += x[i - 1]
    return np.sum(x * x)


def make_prefix_sum(rng, n=12):
    return (rng.standard_normal(n),)


@kernel
def sor1d(u: float64[N], f: float64[N], omega: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            u[i] = (1.0 - omega) * u[i] + omega * 0.5 * (u[i - 1] + u[i + 1] + f[i])
    return np.sum(u * u)


def make_sor1d(rng, n=12):
    return rng.random(n), 0.1 * rng.standard_normal(n), 1.2 + 0.2 * rng.random(), 3


@kernel
def red_black(u: float64[N], f: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1, 2):
            u[i] = 0.5 * (u[i - 1] + u[i + 1]) + f[i]
        for i in range(N - 2, 0, -2):
            u[i] = 0.5 * (u[i - 1] + u[i + 1]) - 0.25 * f[i]
    return np.sum(u * u)


def make_red_black(rng, n=11):
    return rng.random(n), 0.1 * rng.standard_normal(n), 3


@kernel
def nonlinear_seidel(A: float64[N, N], omega: float, dt: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (A[i, j]
                           + omega * (0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1]
                                              + A[i, j + 1]) - A[i, j])
                           + dt * math.sin(A[i, j]))
    return np.sum(A * A)


def make_nonlinear_seidel(rng, n=7):
    return rng.random((n, n)), 0.8 + 0.2 * rng.random(), 0.05 + 0.05 * rng.random(), 2


@kernel
def forced_chain(x: float64[N], dt: float, p: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N):
            x[i] = x[i] + dt * math.sin(x[i - 1]) * p
    return np.sum(x * x)


def make_forced_chain(rng, n=10):
    return rng.standard_normal(n), 0.1 + 0.05 * rng.random(), 0.5 + rng.random(), 3


@kernel
def lorenz96_sweep(x: float64[N], F: float, dt: float, T: int) -> float:
    for t in range(T):
        for i in range(2, N - 1):
            x[i] = x[i] + dt * ((x[i + 1] - x[i - 2]) * x[i - 1] - x[i] + F)
    return np.sum(x * x)


def make_lorenz96_sweep(rng, n=12):
    return rng.standard_normal(n), 8.0 + rng.random(), 0.01 + 0.005 * rng.random(), 3


@kernel
def ema(x: float64[N], y: float64[N], beta: float) -> float:
    m = 0.0
    for i in range(N):
        m = beta * m + (1.0 - beta) * x[i]
        y[i] = m * m
    return np.sum(y)


def make_ema(rng, n=12):
    return rng.standard_normal(n), rng.random(n), 0.6 + 0.3 * rng.random()


# ----------------------------------------------------------------- triangular loops

@kernel
def trisolv(L: float64[N, N], b: float64[N], x: float64[N]) -> float:
    for i in range(N):
        x[i] = b[i]
        for j in range(i):
            x[i] -= L[i, j] * x[j]
        x[i] = x[i] / L[i, i]
    return np.sum(x * x)


def make_trisolv(rng, n=8):
    L = 0.3 * rng.standard_normal((n, n)) + np.diag(2.0 + rng.random(n))
    return L, rng.standard_normal(n), rng.standard_normal(n)


@kernel
def lower_matvec(L: float64[N, N], x: float64[N], y: float64[N]) -> float:
    for i in range(N):
        s = 0.0
        for j in range(i + 1):
            s += L[i, j] * x[j]
        y[i] = s
    return np.sum(y * y) + 0.5 * np.sum(x * y)


def make_lower_matvec(rng, n=8):
    return rng.standard_normal((n, n)), rng.standard_normal(n), rng.standard_normal(n)


@kernel
def back_substitution(U: float64[N, N], b: float64[N], x: float64[N]) -> float:
    x[N - 1] = b[N - 1] / U[N - 1, N - 1]
    for i in range(N - 2, -1, -1):
        s = b[i]
        for j in range(i + 1, N):
            s -= U[i, j] * x[j]
        x[i] = s / U[i, i]
    return np.sum(x * x)


def make_back_substitution(rng, n=8):
    U = 0.3 * rng.standard_normal((n, n)) + np.diag(2.0 + rng.random(n))
    return U, rng.standard_normal(n), rng.standard_normal(n)


@kernel
def gemm(C: float64[N, M], A: float64[N, K], B: float64[K, M],
         alpha: float, beta: float) -> float:
    for i in range(N):
        for j in range(M):
            C[i, j] *= beta
        for k in range(K):
            for j in range(M):
                C[i, j] += alpha * A[i, k] * B[k, j]
    return np.sum(C * C)


def make_gemm(rng, n=5):
    return (rng.standard_normal((n, n + 1)), rng.standard_normal((n, n + 2)),
            rng.standard_normal((n + 2, n + 1)), 1.5 + 0.1 * rng.random(),
            0.8 + 0.1 * rng.random())


# ----------------------------------------------------------- accumulators, locals

@kernel
def roughness(x: float64[N], w: float64[N], lam: float) -> float:
    s = 0.0
    for i in range(1, N):
        d = x[i] - x[i - 1]
        s += w[i] * d * d
    r = 0.0
    for i in range(N):
        r += x[i] * x[i]
    return 0.5 * s + lam * r


def make_roughness(rng, n=12):
    return rng.standard_normal(n), 1.0 + rng.random(n), 0.1 + 0.1 * rng.random()


@kernel
def mirror_coupling(x: float64[N], y: float64[N]) -> float:
    for i in range(1, N):
        k = N - 1 - i
        y[i] = 0.5 * y[i - 1] + x[k] * x[i]
    return np.sum(y * y)


def make_mirror_coupling(rng, n=11):
    return rng.standard_normal(n), rng.standard_normal(n)


@kernel
def column_recurrence(A: float64[N, M], c: float) -> float:
    for i in range(1, A.shape[0]):
        for j in range(A.shape[1] - 1):
            A[i, j] = A[i, j] + c * A[i - 1, j] * A[i - 1, j + 1]
    return np.sum(A * A)


def make_column_recurrence(rng, n=7):
    return rng.random((n, n - 2)), 0.3 + 0.2 * rng.random()


# --------------------------------------------------- operators and intrinsics

@kernel
def powers(x: float64[N], y: float64[N], c: float, p: float) -> float:
    for i in range(1, N):
        x[i] = c * x[i - 1] ** 3 + (1.0 + y[i] ** 2) ** p - x[i] ** 2
    return np.sum(x * x)


def make_powers(rng, n=10):
    return rng.random(n), rng.random(n), 0.05 + 0.02 * rng.random(), 0.4 + 0.3 * rng.random()


@kernel
def clipped_update(x: float64[N], y: float64[N]) -> float:
    for i in range(1, N - 1):
        y[i] = (max(x[i], 0.5 * x[i - 1]) + abs(x[i] - x[i + 1])
                - min(x[i], 2.0 * x[i + 1] - 0.3))
    return np.sum(y * y)


def make_clipped_update(rng, n=10, gap=0.05):
    # Resample until every max/min/abs argument pair is `gap` away from a tie (no kinks
    # within reach of the finite differences), and both branches of max/min are taken.
    while True:
        x = rng.random(n)
        a = x[1:-1] - 0.5 * x[:-2]
        b = x[1:-1] - x[2:]
        c = x[1:-1] - (2.0 * x[2:] - 0.3)
        if min(np.abs(a).min(), np.abs(b).min(), np.abs(c).min()) > gap and \
                (a > 0).any() and (a < 0).any() and (c > 0).any() and (c < 0).any():
            return x, rng.standard_normal(n)


@kernel
def math_funcs(x: float64[N], y: float64[N], a: float) -> float:
    for i in range(N):
        y[i] = (math.tanh(a * x[i]) + math.exp(-x[i] * x[i]) + math.log(1.0 + x[i] * x[i])
                + math.sqrt(2.0 + math.cos(x[i])) + math.sin(x[i]) * math.atan(x[i])
                + math.tan(0.5 * x[i]))
    return np.sum(y * y)


def make_math_funcs(rng, n=10):
    return 2.0 * rng.random(n) - 1.0, rng.random(n), 0.5 + rng.random()


@kernel
def numpy_funcs(x: float64[N], y: float64[N]) -> float:
    for i in range(1, N):
        y[i] = (np.sin(x[i]) * np.cos(x[i - 1]) + np.tan(0.3 * x[i]) + np.exp(0.1 * x[i])
                + np.log(2.0 + x[i]) + np.sqrt(1.0 + x[i] * x[i]) + np.tanh(y[i - 1])
                + np.arctan(x[i]))
    return np.sum(y * y)


def make_numpy_funcs(rng, n=10):
    return 2.0 * rng.random(n) - 1.0, rng.standard_normal(n)


@kernel
def normalize_rows(A: float64[N, M], s: float) -> float:
    for i in range(N):
        for j in range(1, M):
            A[i, j] *= s
            A[i, j] /= 1.0 + A[i, j - 1] * A[i, j - 1]
    return np.sum(A * A)


def make_normalize_rows(rng, n=6):
    return rng.standard_normal((n, n + 3)), 0.9 + 0.2 * rng.random()


# ------------------------------------------------------------------ single precision

@kernel
def diffuse32(x: float32[N], alpha: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            x[i] = x[i] + alpha * (x[i - 1] - 2.0 * x[i] + x[i + 1])
    return np.sum(x * x)


def make_diffuse32(rng, n=16):
    return rng.random(n).astype(np.float32), 0.2 + 0.05 * rng.random(), 3


# ------------------------------------------- unannotated (specialised per call)

@kernel
def leapfrog(x, y, a, n):
    for t in range(n):
        for i in range(x.shape[0]):
            y[i] += a * x[i]
            x[i] -= 0.5 * a * y[i]
    return np.sum(y * y) + np.sum(x * x)


def make_leapfrog(rng, n=9):
    return rng.standard_normal(n), rng.standard_normal(n), 0.3 + 0.1 * rng.random(), 4


@kernel
def smooth_unannotated(A, alpha, T):
    for t in range(T):
        for i in range(1, A.shape[0] - 1):
            for j in range(1, A.shape[1] - 1):
                A[i, j] = A[i, j] + alpha * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1]
                                             + A[i, j + 1] - 4.0 * A[i, j])
    return np.sum(A * A)


def make_smooth_unannotated(rng, n=7):
    return rng.random((n, n + 1)), 0.15 + 0.05 * rng.random(), 2


# ------------------------------------------------------------------------ the corpus

# ---- kernels the interop tests (engine/runtime/test_interop_*.py) share: a returned tuple,
# and an argument written in place with nothing returned
@kernel
def step_and_energy(u: float64[N], c: float):
    v = u.copy()
    v[1:-1] += c * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return v, 0.5 * np.sum(v * v)


@kernel
def relax(u: float64[N], omega: float, sweeps: int):
    for s in range(sweeps):
        for i in range(1, N - 1):
            u[i] = (1.0 - omega) * u[i] + omega * 0.5 * (u[i - 1] + u[i + 1])


CASES = [
    CorpusCase("jacobi1d", jacobi1d, make_jacobi1d, ("A", "B"), ("A", "B")),
    CorpusCase("jacobi2d", jacobi2d, make_jacobi2d, ("A", "B"), ("A", "B")),
    CorpusCase("heat3d", heat3d, make_heat3d, ("A", "B"), ("A", "B")),
    CorpusCase("wave1d", wave1d, make_wave1d, ("up", "u", "un", "c2"), ("up", "u", "un")),
    CorpusCase("prefix_sum", prefix_sum, make_prefix_sum, ("x",), ("x",)),
    CorpusCase("sor1d", sor1d, make_sor1d, ("u", "f", "omega"), ("u",)),
    CorpusCase("red_black", red_black, make_red_black, ("u", "f"), ("u",)),
    CorpusCase("nonlinear_seidel", nonlinear_seidel, make_nonlinear_seidel,
               ("A", "omega", "dt"), ("A",)),
    CorpusCase("forced_chain", forced_chain, make_forced_chain, ("x", "dt", "p"), ("x",)),
    CorpusCase("lorenz96_sweep", lorenz96_sweep, make_lorenz96_sweep, ("x", "F", "dt"), ("x",)),
    CorpusCase("ema", ema, make_ema, ("x", "y", "beta"), ("y",)),
    CorpusCase("trisolv", trisolv, make_trisolv, ("L", "b", "x"), ("x",)),
    CorpusCase("lower_matvec", lower_matvec, make_lower_matvec, ("L", "x", "y"), ("y",)),
    CorpusCase("back_substitution", back_substitution, make_back_substitution,
               ("U", "b", "x"), ("x",)),
    CorpusCase("gemm", gemm, make_gemm, ("C", "A", "B", "alpha", "beta"), ("C",)),
    CorpusCase("roughness", roughness, make_roughness, ("x", "w", "lam"), ()),
    CorpusCase("mirror_coupling", mirror_coupling, make_mirror_coupling, ("x", "y"), ("y",)),
    CorpusCase("column_recurrence", column_recurrence, make_column_recurrence,
               ("A", "c"), ("A",)),
    CorpusCase("powers", powers, make_powers, ("x", "y", "c", "p"), ("x",)),
    CorpusCase("clipped_update", clipped_update, make_clipped_update, ("x", "y"), ("y",)),
    CorpusCase("math_funcs", math_funcs, make_math_funcs, ("x", "y", "a"), ("y",)),
    CorpusCase("numpy_funcs", numpy_funcs, make_numpy_funcs, ("x", "y"), ("y",)),
    CorpusCase("normalize_rows", normalize_rows, make_normalize_rows, ("A", "s"), ("A",)),
    CorpusCase("diffuse32", diffuse32, make_diffuse32, ("x", "alpha"), ("x",), float32=True),
    CorpusCase("leapfrog", leapfrog, make_leapfrog, ("x", "y", "a"), ("x", "y")),
    CorpusCase("smooth_unannotated", smooth_unannotated, make_smooth_unannotated,
               ("A", "alpha"), ("A",)),
]

CASES_BY_NAME = {case.name: case for case in CASES}
