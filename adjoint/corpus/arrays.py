"""Kernels written as whole-array NumPy: slices, broadcasting, ufuncs, masks, reductions,
temporaries and in-place updates of overlapping slices.

Same structure as :mod:`corpus`: every kernel is plain Python (``k.py_func`` is the
reference), returns a scalar loss, and comes with a factory drawing small random
inputs. Inputs keep ``np.maximum/minimum/where/abs/clip`` and masks away from their
kinks (no tie within reach of the finite differences) and logs/square roots positive.
"""
import numpy as np

from adjoint import float64, kernel, symbol
from adjoint.corpus.loops import CorpusCase

N = symbol("N")
M = symbol("M")
K = symbol("K")


def away_from(values, points, gap):
    """Whether every value is at least ``gap`` from every point (kinks of the kernel)."""
    return all(np.min(np.abs(np.asarray(values) - p)) > gap for p in points)


# --------------------------------------------------------------------------- stencils

@kernel
def jacobi2d_slices(A: float64[N, N], B: float64[N, N], T: int) -> float:
    for t in range(T):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:]
                               + A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:]
                               + B[2:, 1:-1] + B[:-2, 1:-1])
    return np.sum(A * A)


def make_jacobi2d_slices(rng, n=8):
    return rng.random((n, n)), rng.random((n, n)), 2


@kernel
def heat3d_vec(A: float64[N, N, N], B: float64[N, N, N], T: int) -> float:
    for t in range(T):
        B[1:-1, 1:-1, 1:-1] = (0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1]
                                        + A[:-2, 1:-1, 1:-1])
                               + 0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1]
                                          + A[1:-1, :-2, 1:-1])
                               + 0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1]
                                          + A[1:-1, 1:-1, :-2])
                               + A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1]
                                        + B[:-2, 1:-1, 1:-1])
                               + 0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1]
                                          + B[1:-1, :-2, 1:-1])
                               + 0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1]
                                          + B[1:-1, 1:-1, :-2])
                               + B[1:-1, 1:-1, 1:-1])
    return np.sum(A * A)


def make_heat3d_vec(rng, n=6):
    return rng.random((n, n, n)), rng.random((n, n, n)), 2


@kernel
def wave_temporaries(u: float64[N], v: float64[N], c: float, T: int) -> float:
    for t in range(T):
        lap = np.zeros_like(u)
        lap[1:-1] = u[2:] - 2.0 * u[1:-1] + u[:-2]
        v += c * lap
        u[1:-1] = u[1:-1] + 0.1 * v[1:-1]
    return np.sum(u * u) + 0.5 * np.sum(v * v)


def make_wave_temporaries(rng, n=12):
    return rng.standard_normal(n), rng.standard_normal(n), 0.2 + 0.1 * rng.random(), 3


# ------------------------------------------------------- linear algebra with np.sum(axis)

@kernel
def gesummv_vec(A: float64[N, N], B: float64[N, N], x: float64[N], y: float64[N],
                alpha: float, beta: float) -> float:
    tmp = np.sum(A * x[np.newaxis, :], axis=1)
    y[:] = alpha * tmp + beta * np.sum(B * x, axis=1)
    return np.sum(y * y)


def make_gesummv_vec(rng, n=6):
    return (rng.standard_normal((n, n)), rng.standard_normal((n, n)), rng.standard_normal(n),
            rng.standard_normal(n), 1.5 + 0.1 * rng.random(), 1.2 + 0.1 * rng.random())


@kernel
def atax_vec(A: float64[M, N], x: float64[N], y: float64[N]) -> float:
    tmp = np.sum(A * x, axis=1)
    y[:] = np.sum(A * tmp[:, None], axis=0)
    return np.sum(y * y)


def make_atax_vec(rng, n=5):
    return rng.standard_normal((n + 2, n)), rng.standard_normal(n), rng.standard_normal(n)


@kernel
def outer_update(C: float64[N, M], a: float64[N], b: float64[M], s: float) -> float:
    C += s * a[:, None] * b[None, :]
    C[:, 1:] -= 0.5 * C[:, :-1]
    return np.sum(C * C)


def make_outer_update(rng, n=5):
    return (rng.standard_normal((n, n + 2)), rng.standard_normal(n),
            rng.standard_normal(n + 2), 0.7 + 0.1 * rng.random())


@kernel
def row_broadcast(A: float64[N, M], b: float64[M], w: float64[N]) -> float:
    A += b
    A *= w[:, np.newaxis]
    A[1:] = A[1:] - A[0]
    return np.sum(A * A)


def make_row_broadcast(rng, n=5):
    return rng.standard_normal((n, n + 1)), rng.standard_normal(n + 1), rng.standard_normal(n)


# ----------------------------------------------------------------- ML-style reductions

@kernel
def softmax_rows(X: float64[N, M], W: float64[N, M], P: float64[N, M]) -> float:
    m = np.max(X, axis=1, keepdims=True)
    e = np.exp(X - m)
    P[:] = e / np.sum(e, axis=1, keepdims=True)
    return np.sum(P * W)


def make_softmax_rows(rng, n=4):
    return rng.standard_normal((n, n + 2)), rng.standard_normal((n, n + 2)), np.zeros((n, n + 2))


@kernel
def logsumexp(x: float64[N], w: float64[N]) -> float:
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m))) + np.sum(w * x) / x.shape[0]


def make_logsumexp(rng, n=9):
    return 3.0 * rng.standard_normal(n), rng.standard_normal(n)


@kernel
def layer_norm(X: float64[N, M], g: float64[M], Y: float64[N, M]) -> float:
    mu = X.mean(axis=1, keepdims=True)
    sd = np.sqrt(np.var(X, axis=1, keepdims=True) + 1e-3)
    Y[:] = g * (X - mu) / sd
    return np.sum(Y * Y * g) + np.std(X) + np.prod(g[:3])


def make_layer_norm(rng, n=4):
    return rng.standard_normal((n, n + 3)), 1.0 + rng.random(n + 3), np.zeros((n, n + 3))


@kernel
def mlp_relu(X: float64[N, K], W: float64[K, M], b: float64[M], H: float64[N, M]) -> float:
    H[:] = np.sum(X[:, :, None] * W[None, :, :], axis=1) + b
    H[H < 0.0] = 0.0
    return np.sum(H * H) + np.min(X, axis=0).sum() + np.max(H, axis=0).sum()


def make_mlp_relu(rng, n=4, gap=0.03):
    while True:
        X, W = rng.standard_normal((n, 3)), rng.standard_normal((3, n + 1))
        b = rng.standard_normal(n + 1) + 0.5
        pre = X @ W + b
        top = np.sort(np.maximum(pre, 0.0), axis=0)
        low = np.sort(X, axis=0)
        if away_from(pre, [0.0], gap) and np.all(top[-1] - top[-2] > gap) and \
                np.all(low[1] - low[0] > gap):
            return X, W, b, np.zeros((n, n + 1))


# ---------------------------------------------------------- limiters and masks

@kernel
def minmod_advection(q: float64[N], c: float, T: int) -> float:
    for t in range(T):
        dq = q[1:] - q[:-1]
        r = dq[:-1] * dq[1:] / (dq[1:] * dq[1:] + 1e-2)
        phi = np.maximum(0.0, np.minimum(1.0, r))
        flux = c * (q[1:-1] + 0.5 * phi * dq[1:])
        q[2:-1] -= flux[1:] - flux[:-1]
    return np.sum(q * q)


def make_minmod_advection(rng, n=12, gap=0.02):
    while True:
        q = np.sin(np.linspace(0.0, 4.0, n)) + 0.3 * rng.random(n)
        dq = np.diff(q)
        r = dq[:-1] * dq[1:] / (dq[1:] * dq[1:] + 1e-2)
        if away_from(r, [0.0, 1.0], gap):
            return q, 0.3 + 0.05 * rng.random(), 1


@kernel
def hdiff_limiter(inp: float64[N, M], coeff: float64[N, M], out: float64[N, M]) -> float:
    lap = 4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1]
                                   + inp[1:-1, 2:] + inp[1:-1, :-2])
    flx = lap[1:, 1:-1] - lap[:-1, 1:-1]
    flx = np.where(flx * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2]) > 0.0, 0.0, flx)
    fly = lap[1:-1, 1:] - lap[1:-1, :-1]
    fly = np.where(fly * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2]) > 0.0, 0.0, fly)
    out[2:-2, 2:-2] = inp[2:-2, 2:-2] - coeff[2:-2, 2:-2] * (flx[1:, :] - flx[:-1, :]
                                                             + fly[:, 1:] - fly[:, :-1])
    return np.sum(out * out)


def make_hdiff_limiter(rng, n=8, gap=1e-3):
    while True:
        inp, coeff = rng.standard_normal((n, n + 1)), 0.1 + 0.1 * rng.random((n, n + 1))
        lap = 4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1]
                                       + inp[1:-1, 2:] + inp[1:-1, :-2])
        fx = (lap[1:, 1:-1] - lap[:-1, 1:-1]) * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2])
        fy = (lap[1:-1, 1:] - lap[1:-1, :-1]) * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2])
        if away_from(fx, [0.0], gap) and away_from(fy, [0.0], gap):
            return inp, coeff, np.zeros((n, n + 1))


@kernel
def masked_updates(x: float64[N], y: float64[N], lo: float) -> float:
    x[x > 1.0] *= 0.5
    y[x < lo] = 2.0 * lo
    y[y > 0.5] = x[y > 0.5]
    m = x > 0.2
    z = np.where(m, np.abs(x - y), np.clip(y, -0.5, 0.5))
    return np.sum(z * z) + np.sum(x * y)


def make_masked_updates(rng, n=16, gap=0.02):
    while True:
        x, y, lo = 2.0 * rng.standard_normal(n), rng.standard_normal(n), -0.3
        x1 = np.where(x > 1.0, 0.5 * x, x)
        y1 = np.where(x1 < lo, 2.0 * lo, y)
        y2 = np.where(y1 > 0.5, x1, y1)
        kept = y1 <= 0.5                        # there |x - y| is away from 0
        if away_from(x, [1.0], gap) and away_from(x1, [lo, 0.2], gap) and \
                away_from(y1, [0.5], gap) and away_from(y2, [0.5, -0.5], gap) and \
                away_from(x1[kept] - y2[kept], [0.0], gap):
            return x, y, lo


# ------------------------------------------------------- overlapping in-place updates

@kernel
def overlapping_shifts(x: float64[N], y: float64[N], A: float64[N, N]) -> float:
    x[1:] = x[:-1] + y[1:]              # reads the old x: needs a copy
    x[:-1] += 0.5 * x[1:]               # likewise, the other way
    y[:-1:2] = 0.3 * y[1::2] + y[:-1:2]  # even <- odd: never overlaps, no copy
    y[:] = y[::-1] * 1.5                # reversal: needs a copy
    A[:] = A.T + 0.5 * A                # transpose: needs a copy
    A[1:, :] = A[:-1, :] * 0.5 + A[1:, :]
    return np.sum(x * x) + np.sum(y * y) + np.sum(A * A * A)


def make_overlapping_shifts(rng, n=7):
    return rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal((n, n))


@kernel
def views_and_copies(A: float64[N, M], v: float64[M]) -> float:
    row = A[0]
    row[1:] += 2.0 * row[:-1]           # writes A[0] through the view
    saved = A[:, 0].copy()
    A[:, 0] = 0.0
    B = np.flip(A, axis=1) + np.transpose(A)[::-1, :].T
    C = np.ones((N, M)) * 0.25 + np.full((N, M), 0.5)
    C[:, :] = C * B + saved[:, None] * v
    D = C.reshape(N * M).copy()
    return np.sum(D * D) + np.sum(A * saved[:, np.newaxis]) + np.sum(np.fliplr(A)[0] * v)


def make_views_and_copies(rng, n=4):
    return rng.standard_normal((n, n + 1)), rng.standard_normal(n + 1)


@kernel
def stepped_slices(x: float64[N], A: float64[N, M]) -> float:
    x[::3] = 2.0 * x[::3]
    A[::2, 1:] = A[::2, :-1] * x[::2, None]
    A[-1, ::-2] = np.sqrt(1.0 + A[-1, ::-2] ** 2)
    A[1, :] = A[:, 0].sum() + A[2, :-1].mean()
    return np.sum(A * A) + np.sum(x[-3:] ** 3)


def make_stepped_slices(rng, n=7):
    return rng.standard_normal(n), rng.standard_normal((n, n - 2))


@kernel
def assorted_views(A: float64[N, M], w: float64[N]) -> float:
    for i in range(N):
        r = A[i]
        r[:] = r * w[i] + 0.1 * i
        A[i][0] = 2.0 * A[i][0]
    flat = A.reshape(-1)
    flat[::2] *= 1.5                    # writes A through the reshaped view
    E = np.empty((N, M))
    E[...] = A[None][0] * 0.5
    A[w > 0.5] = E[w > 0.5]             # a mask of rows
    if np.any(A > 0.6) or np.all(w < 0.1):
        A[:] = A / 2.0
    return np.sum(A * A) + np.sum(np.clip(A, 0.01, None)) + np.sum(A > 0.0)


def make_assorted_views(rng, n=4, gap=0.02):
    while True:
        A = 0.2 + 0.4 * rng.random((n, n + 1))
        w = np.where(rng.random(n) < 0.5, 0.2, 0.6) + 0.25 * rng.random(n)
        B = A * w[:, None] + 0.1 * np.arange(n)[:, None]
        B[:, 0] *= 2.0
        B.reshape(-1)[::2] *= 1.5
        B[w > 0.5] *= 0.5
        if abs(B.max() - 0.6) > gap and away_from(w, [0.5], gap):
            return A, w


CASES = [
    CorpusCase("jacobi2d_slices", jacobi2d_slices, make_jacobi2d_slices, ("A", "B"), ("A", "B")),
    CorpusCase("heat3d_vec", heat3d_vec, make_heat3d_vec, ("A", "B"), ("A", "B")),
    CorpusCase("wave_temporaries", wave_temporaries, make_wave_temporaries, ("u", "v", "c"),
               ("u", "v")),
    CorpusCase("gesummv_vec", gesummv_vec, make_gesummv_vec,
               ("A", "B", "x", "y", "alpha", "beta"), ("y",)),
    CorpusCase("atax_vec", atax_vec, make_atax_vec, ("A", "x", "y"), ("y",)),
    CorpusCase("outer_update", outer_update, make_outer_update, ("C", "a", "b", "s"), ("C",)),
    CorpusCase("row_broadcast", row_broadcast, make_row_broadcast, ("A", "b", "w"), ("A",)),
    CorpusCase("softmax_rows", softmax_rows, make_softmax_rows, ("X", "W", "P"), ("P",)),
    CorpusCase("logsumexp", logsumexp, make_logsumexp, ("x", "w"), ()),
    CorpusCase("layer_norm", layer_norm, make_layer_norm, ("X", "g", "Y"), ("Y",)),
    CorpusCase("mlp_relu", mlp_relu, make_mlp_relu, ("X", "W", "b", "H"), ("H",)),
    CorpusCase("minmod_advection", minmod_advection, make_minmod_advection, ("q", "c"), ("q",)),
    CorpusCase("hdiff_limiter", hdiff_limiter, make_hdiff_limiter, ("inp", "coeff", "out"),
               ("out",)),
    CorpusCase("masked_updates", masked_updates, make_masked_updates, ("x", "y", "lo"),
               ("x", "y")),
    CorpusCase("overlapping_shifts", overlapping_shifts, make_overlapping_shifts,
               ("x", "y", "A"), ("x", "y", "A")),
    CorpusCase("views_and_copies", views_and_copies, make_views_and_copies, ("A", "v"), ("A",)),
    CorpusCase("stepped_slices", stepped_slices, make_stepped_slices, ("x", "A"), ("x", "A")),
    CorpusCase("assorted_views", assorted_views, make_assorted_views, ("A", "w"), ("A",)),
]

CASES_BY_NAME = {case.name: case for case in CASES}
