"""More of the corpus: PolyBench-style linear algebra and stencils, weather and CFD codes,
small ML kernels -- written the way they are written in NumPy (after PolyBench/C and
the NumPy versions of npbench, Barba's "12 steps to Navier-Stokes", COSMO's dycore).

Same structure as :mod:`corpus`: plain Python (``k.py_func`` is the reference), a scalar
loss (or the sum of the outputs), a factory drawing small inputs that keep the kernels
away from their kinks and branch thresholds (divisions and square roots well inside
their domains; decisions on data with a margin the finite differences cannot cross).
Products that NumPy writes with ``@`` are written as loops or ``np.sum`` over broadcast
axes. Several kernels call other kernels (``cavity_flow``, ``channel_flow``,
``mlp_loops``, ``ludcmp``), and one returns an array from a callee (``channel_flow``).
"""
import numpy as np

from adjoint import float64, kernel, symbol
from adjoint.corpus.arrays import away_from
from adjoint.corpus.loops import CorpusCase

N = symbol("N")
M = symbol("M")
K = symbol("K")
L = symbol("L")
T = symbol("T")


# ============================================================ PolyBench: linear algebra

@kernel
def bicg(A: float64[N, M], p: float64[M], r: float64[N], s: float64[M],
         q: float64[N]) -> float:
    s[:] = 0.0
    for i in range(N):
        q[i] = 0.0
        for j in range(M):
            s[j] = s[j] + r[i] * A[i, j]
            q[i] = q[i] + A[i, j] * p[j]
    return np.sum(s * s) + np.sum(q)


def make_bicg(rng, n=4):
    return (rng.standard_normal((n, n + 1)), rng.standard_normal(n + 1),
            rng.standard_normal(n), np.zeros(n + 1), np.zeros(n))


@kernel
def mvt(x1: float64[N], x2: float64[N], y1: float64[N], y2: float64[N],
        A: float64[N, N]) -> float:
    x1 += np.sum(A * y1, axis=1)                 # x1 += A @ y1
    x2 += np.sum(A * y2[:, None], axis=0)        # x2 += y2 @ A
    return np.sum(x1 * x2)


def make_mvt(rng, n=5):
    return tuple(rng.standard_normal(n) for _ in range(4)) + (rng.standard_normal((n, n)),)


@kernel
def gemver(alpha: float, beta: float, A: float64[N, N], u1: float64[N], v1: float64[N],
           u2: float64[N], v2: float64[N], w: float64[N], x: float64[N], y: float64[N],
           z: float64[N]) -> float:
    A += u1[:, None] * v1[None, :] + u2[:, None] * v2[None, :]
    x += beta * np.sum(A * y[:, None], axis=0) + z
    w += alpha * np.sum(A * x[None, :], axis=1)
    return np.sum(w * w)


def make_gemver(rng, n=4):
    return (1.5, 1.2, rng.standard_normal((n, n))) + \
        tuple(rng.standard_normal(n) for _ in range(8))


@kernel
def k2mm(alpha: float, beta: float, A: float64[N, K], B: float64[K, M], C: float64[M, L],
         D: float64[N, L]) -> float:
    tmp = np.zeros((N, M))
    for i in range(N):
        for j in range(M):
            for k in range(K):
                tmp[i, j] += alpha * A[i, k] * B[k, j]
    for i in range(N):
        for j in range(L):
            D[i, j] *= beta
            for k in range(M):
                D[i, j] += tmp[i, k] * C[k, j]
    return np.sum(D)


def make_k2mm(rng, n=3):
    return (1.5, 1.2, rng.standard_normal((n, n + 1)), rng.standard_normal((n + 1, n + 2)),
            rng.standard_normal((n + 2, n)), rng.standard_normal((n, n)))


@kernel
def k3mm(A: float64[N, K], B: float64[K, M], C: float64[M, L], D: float64[L, K],
         G: float64[N, K]) -> float:
    E = np.zeros((N, M))
    F = np.zeros((M, K))
    for i in range(N):
        for j in range(M):
            for k in range(K):
                E[i, j] += A[i, k] * B[k, j]
    for i in range(M):
        for j in range(K):
            for k in range(L):
                F[i, j] += C[i, k] * D[k, j]
    for i in range(N):
        for j in range(K):
            G[i, j] = 0.0
            for k in range(M):
                G[i, j] += E[i, k] * F[k, j]
    return np.sum(G * G)


def make_k3mm(rng, n=3):
    return (rng.standard_normal((n, n + 1)), rng.standard_normal((n + 1, n + 2)),
            rng.standard_normal((n + 2, n)), rng.standard_normal((n, n + 1)),
            np.zeros((n, n + 1)))


@kernel
def syrk(alpha: float, beta: float, C: float64[N, N], A: float64[N, M]) -> float:
    for i in range(N):
        for j in range(i + 1):
            C[i, j] *= beta
        for k in range(M):
            for j in range(i + 1):
                C[i, j] += alpha * A[i, k] * A[j, k]
    return np.sum(C * C)


def make_syrk(rng, n=4):
    return 1.5, 1.2, rng.standard_normal((n, n)), rng.standard_normal((n, n + 1))


@kernel
def syr2k(alpha: float, beta: float, C: float64[N, N], A: float64[N, M],
          B: float64[N, M]) -> float:
    for i in range(N):
        C[i, :i + 1] *= beta
        for k in range(M):
            C[i, :i + 1] += (A[:i + 1, k] * alpha * B[i, k]
                             + B[:i + 1, k] * alpha * A[i, k])
    return np.sum(C * C)


def make_syr2k(rng, n=4):
    return (1.5, 1.2, rng.standard_normal((n, n)), rng.standard_normal((n, n + 1)),
            rng.standard_normal((n, n + 1)))


@kernel
def symm(alpha: float, beta: float, C: float64[M, N], A: float64[M, M],
         B: float64[M, N]) -> float:
    for i in range(M):
        for j in range(N):
            temp2 = 0.0
            for k in range(i):
                C[k, j] += alpha * B[i, j] * A[i, k]
                temp2 += B[k, j] * A[i, k]
            C[i, j] = beta * C[i, j] + alpha * B[i, j] * A[i, i] + alpha * temp2
    return np.sum(C * C)


def make_symm(rng, n=4):
    return (1.5, 1.2, rng.standard_normal((n, n + 1)), rng.standard_normal((n, n)),
            rng.standard_normal((n, n + 1)))


@kernel
def trmm(alpha: float, A: float64[M, M], B: float64[M, N]) -> float:
    for i in range(M):
        for j in range(N):
            for k in range(i + 1, M):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return np.sum(B * B)


def make_trmm(rng, n=4):
    return 1.5, rng.standard_normal((n, n)), rng.standard_normal((n, n + 1))


def diagonally_dominant(rng, n):
    return rng.standard_normal((n, n)) + n * np.eye(n)


@kernel
def lu(A: float64[N, N]) -> float:
    for i in range(N):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, N):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]
    return np.sum(A * A)


def make_lu(rng, n=5):
    return (diagonally_dominant(rng, n),)


@kernel
def lu_in_place(A: float64[N, N]):
    for i in range(N):
        for j in range(i):
            w = A[i, j]
            for k in range(j):
                w -= A[i, k] * A[k, j]
            A[i, j] = w / A[j, j]
        for j in range(i, N):
            w = A[i, j]
            for k in range(i):
                w -= A[i, k] * A[k, j]
            A[i, j] = w


@kernel
def ludcmp(A: float64[N, N], b: float64[N], x: float64[N], y: float64[N]) -> float:
    lu_in_place(A)                                  # a kernel calling a kernel
    for i in range(N):
        w = b[i]
        for j in range(i):
            w -= A[i, j] * y[j]
        y[i] = w
    for i in range(N - 1, -1, -1):
        w = y[i]
        for j in range(i + 1, N):
            w -= A[i, j] * x[j]
        x[i] = w / A[i, i]
    return np.sum(x * x) + np.sum(y)


def make_ludcmp(rng, n=5):
    return diagonally_dominant(rng, n), rng.standard_normal(n), np.zeros(n), np.zeros(n)


@kernel
def cholesky(A: float64[N, N]) -> float:
    for i in range(N):
        for j in range(i):
            A[i, j] -= np.sum(A[i, :j] * A[j, :j])
            A[i, j] /= A[j, j]
        A[i, i] -= np.sum(A[i, :i] * A[i, :i])
        A[i, i] = np.sqrt(A[i, i])
    return np.sum(A * A)


def make_cholesky(rng, n=5):
    B = rng.standard_normal((n, n))
    return (B @ B.T + n * np.eye(n),)


@kernel
def durbin(r: float64[N], y: float64[N]) -> float:
    z = np.zeros_like(y)
    y[0] = -r[0]
    beta = 1.0
    alpha = -r[0]
    for k in range(1, N):
        beta = (1.0 - alpha * alpha) * beta
        s = np.sum(r[k - 1::-1] * y[:k])
        alpha = -(r[k] + s) / beta
        z[:k] = y[:k] + alpha * y[k - 1::-1]
        y[:k] = z[:k]
        y[k] = alpha
    return np.sum(y * y)


def make_durbin(rng, n=6):
    return 0.3 * rng.random(n) / n, np.zeros(n)


@kernel
def gramschmidt(A: float64[M, N], R: float64[N, N], Q: float64[M, N]) -> float:
    for k in range(N):
        nrm = np.sum(A[:, k] * A[:, k])
        R[k, k] = np.sqrt(nrm)
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, N):
            R[k, j] = np.sum(Q[:, k] * A[:, j])
            A[:, j] -= Q[:, k] * R[k, j]
    return np.sum(R) + np.sum(Q * Q * Q)


def make_gramschmidt(rng, n=3):
    return rng.standard_normal((n + 2, n)) + 2.0 * np.eye(n + 2, n), np.zeros((n, n)), \
        np.zeros((n + 2, n))


@kernel
def covariance(data: float64[N, M], cov: float64[M, M]) -> float:
    mean = np.mean(data, axis=0)
    data -= mean
    for i in range(M):
        for j in range(i, M):
            cov[i, j] = np.sum(data[:, i] * data[:, j]) / (data.shape[0] - 1.0)
            cov[j, i] = cov[i, j]
    return np.sum(cov * cov)


def make_covariance(rng, n=5):
    return rng.standard_normal((n, n - 1)), np.zeros((n - 1, n - 1))


@kernel
def correlation(data: float64[N, M], corr: float64[M, M]) -> float:
    mean = np.mean(data, axis=0)
    stddev = np.std(data, axis=0)
    stddev[stddev <= 0.1] = 1.0
    data -= mean
    data /= np.sqrt(data.shape[0] * 1.0) * stddev
    corr[:] = 0.0
    for i in range(M - 1):
        corr[i, i] = 1.0
        for j in range(i + 1, M):
            corr[i, j] = np.sum(data[:, i] * data[:, j])
            corr[j, i] = corr[i, j]
    corr[M - 1, M - 1] = 1.0
    return np.sum(corr * corr * corr)


def make_correlation(rng, n=5):
    while True:
        data = rng.standard_normal((n, n - 1))
        if np.all(np.std(data, axis=0) > 0.3):
            return data, np.zeros((n - 1, n - 1))


@kernel
def doitgen(A: float64[L, M, N], C4: float64[N, N]) -> float:
    s = np.zeros(N)
    for r in range(L):
        for q in range(M):
            for p in range(N):
                s[p] = 0.0
                for t in range(N):
                    s[p] += A[r, q, t] * C4[t, p]
            for p in range(N):
                A[r, q, p] = s[p]
    return np.sum(A * A)


def make_doitgen(rng, n=3):
    return rng.standard_normal((n, n + 1, n + 1)), rng.standard_normal((n + 1, n + 1))


# ======================================================================== stencils

@kernel
def fdtd_2d(ex: float64[N, M], ey: float64[N, M], hz: float64[N, M],
            fict: float64[T]) -> float:
    for t in range(T):
        ey[0, :] = fict[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])
    return np.sum(hz * hz) + np.sum(ex) + np.sum(ey * ey)


def make_fdtd_2d(rng, n=5):
    return (rng.standard_normal((n, n + 1)), rng.standard_normal((n, n + 1)),
            rng.standard_normal((n, n + 1)), rng.standard_normal(3))


@kernel
def adi(u: float64[N, N], v: float64[N, N], p: float64[N, N], q: float64[N, N],
        TSTEPS: int) -> float:
    DX = 1.0 / N
    DY = 1.0 / N
    DT = 1.0 / TSTEPS
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul2
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for t in range(1, TSTEPS + 1):
        v[0, 1:N - 1] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = v[0, 1:N - 1]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -c / (a * p[1:N - 1, j - 1] + b)
            q[1:N - 1, j] = (-d * u[j, 0:N - 2] + (1.0 + 2.0 * d) * u[j, 1:N - 1]
                             - f * u[j, 2:N] - a * q[1:N - 1, j - 1]) \
                / (a * p[1:N - 1, j - 1] + b)
        v[N - 1, 1:N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            v[j, 1:N - 1] = p[1:N - 1, j] * v[j + 1, 1:N - 1] + q[1:N - 1, j]
        u[1:N - 1, 0] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = u[1:N - 1, 0]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -f / (d * p[1:N - 1, j - 1] + e)
            q[1:N - 1, j] = (-a * v[0:N - 2, j] + (1.0 + 2.0 * a) * v[1:N - 1, j]
                             - c * v[2:N, j] - d * q[1:N - 1, j - 1]) \
                / (d * p[1:N - 1, j - 1] + e)
        u[1:N - 1, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            u[1:N - 1, j] = p[1:N - 1, j] * u[1:N - 1, j + 1] + q[1:N - 1, j]
    return np.sum(u * u) + np.sum(v)


def make_adi(rng, n=5):
    return (rng.standard_normal((n, n)), rng.standard_normal((n, n)), np.zeros((n, n)),
            np.zeros((n, n)), 2)


@kernel
def deriche(alpha: float, imgIn: float64[M, N], imgOut: float64[M, N]) -> float:
    k = (1.0 - np.exp(-alpha)) ** 2 / (1.0 + 2.0 * alpha * np.exp(-alpha)
                                       - np.exp(2.0 * alpha))
    a1 = k
    a5 = k
    a2 = k * np.exp(-alpha) * (alpha - 1.0)
    a6 = a2
    a3 = k * np.exp(-alpha) * (alpha + 1.0)
    a7 = a3
    a4 = -k * np.exp(-2.0 * alpha)
    a8 = a4
    b1 = 2.0 ** (-alpha)
    b2 = -np.exp(-2.0 * alpha)
    c1 = 1.0
    c2 = 1.0
    y1 = np.empty_like(imgIn)
    y1[:, 0] = a1 * imgIn[:, 0]
    y1[:, 1] = a1 * imgIn[:, 1] + a2 * imgIn[:, 0] + b1 * y1[:, 0]
    for j in range(2, N):
        y1[:, j] = (a1 * imgIn[:, j] + a2 * imgIn[:, j - 1] + b1 * y1[:, j - 1]
                    + b2 * y1[:, j - 2])
    y2 = np.empty_like(imgIn)
    y2[:, -1] = 0.0
    y2[:, -2] = a3 * imgIn[:, -1]
    for j in range(N - 3, -1, -1):
        y2[:, j] = (a3 * imgIn[:, j + 1] + a4 * imgIn[:, j + 2] + b1 * y2[:, j + 1]
                    + b2 * y2[:, j + 2])
    imgOut[:] = c1 * (y1 + y2)
    y1[0, :] = a5 * imgOut[0, :]
    y1[1, :] = a5 * imgOut[1, :] + a6 * imgOut[0, :] + b1 * y1[0, :]
    for i in range(2, M):
        y1[i, :] = (a5 * imgOut[i, :] + a6 * imgOut[i - 1, :] + b1 * y1[i - 1, :]
                    + b2 * y1[i - 2, :])
    y2[-1, :] = 0.0
    y2[-2, :] = a7 * imgOut[-1, :]
    for i in range(M - 3, -1, -1):
        y2[i, :] = (a7 * imgOut[i + 1, :] + a8 * imgOut[i + 2, :] + b1 * y2[i + 1, :]
                    + b2 * y2[i + 2, :])
    imgOut[:] = c2 * (y1 + y2)
    return np.sum(imgOut * imgOut)


def make_deriche(rng, n=5):
    return 0.25, rng.random((n, n + 1)), np.zeros((n, n + 1))


@kernel
def seidel2d(A: float64[N, N], TSTEPS: int) -> float:
    for t in range(TSTEPS):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1]
                           + A[i, j - 1] + A[i, j] + A[i, j + 1]
                           + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
    return np.sum(A * A)


def make_seidel2d(rng, n=6):
    return rng.random((n, n)), 2


# =================================================================== weather codes

@kernel
def vertical_advection(u: float64[N, M, K], w: float64[N, M, K], dt: float,
                       T: int) -> float:
    """Implicit vertical advection: one tridiagonal system per column (Thomas)."""
    a = np.zeros(K)
    b = np.zeros(K)
    c = np.zeros(K)
    cp = np.zeros(K)
    dp = np.zeros(K)
    for t in range(T):
        for i in range(N):
            for j in range(M):
                for k in range(K):
                    a[k] = 0.0
                    c[k] = 0.0
                    if k > 0:
                        a[k] = -0.25 * dt * w[i, j, k]
                    if k < K - 1:
                        c[k] = 0.25 * dt * w[i, j, k]
                    b[k] = 1.0 - a[k] + c[k]
                cp[0] = c[0] / b[0]
                dp[0] = u[i, j, 0] / b[0]
                for k in range(1, K):
                    den = b[k] - a[k] * cp[k - 1]
                    cp[k] = c[k] / den
                    dp[k] = (u[i, j, k] - a[k] * dp[k - 1]) / den
                u[i, j, K - 1] = dp[K - 1]
                for k in range(K - 2, -1, -1):
                    u[i, j, k] = dp[k] - cp[k] * u[i, j, k + 1]
    return np.sum(u * u)


def make_vertical_advection(rng, n=2):
    return rng.standard_normal((n, n + 1, 5)), 0.5 + rng.random((n, n + 1, 5)), 0.8, 2


@kernel
def hdiff_loops(inp: float64[N, M], coeff: float64[N, M], out: float64[N, M]) -> float:
    """COSMO horizontal diffusion with a flux limiter, written with loops and ifs."""
    lap = np.zeros((N, M))
    flx = np.zeros((N, M))
    fly = np.zeros((N, M))
    for i in range(1, N - 1):
        for j in range(1, M - 1):
            lap[i, j] = 4.0 * inp[i, j] - (inp[i + 1, j] + inp[i - 1, j]
                                           + inp[i, j + 1] + inp[i, j - 1])
    for i in range(1, N - 2):
        for j in range(2, M - 2):
            flx[i, j] = lap[i + 1, j] - lap[i, j]
            if flx[i, j] * (inp[i + 1, j] - inp[i, j]) > 0.0:
                flx[i, j] = 0.0
    for i in range(2, N - 2):
        for j in range(1, M - 2):
            fly[i, j] = lap[i, j + 1] - lap[i, j]
            if fly[i, j] * (inp[i, j + 1] - inp[i, j]) > 0.0:
                fly[i, j] = 0.0
    for i in range(2, N - 2):
        for j in range(2, M - 2):
            out[i, j] = inp[i, j] - coeff[i, j] * (flx[i, j] - flx[i - 1, j]
                                                   + fly[i, j] - fly[i, j - 1])
    return np.sum(out * out)


def make_hdiff_loops(rng, n=7, gap=1e-3):
    while True:
        inp, coeff = rng.standard_normal((n, n + 1)), 0.1 + 0.1 * rng.random((n, n + 1))
        lap = 4.0 * inp[1:-1, 1:-1] - (inp[2:, 1:-1] + inp[:-2, 1:-1]
                                       + inp[1:-1, 2:] + inp[1:-1, :-2])
        fx = (lap[1:, 1:-1] - lap[:-1, 1:-1]) * (inp[2:-1, 2:-2] - inp[1:-2, 2:-2])
        fy = (lap[1:-1, 1:] - lap[1:-1, :-1]) * (inp[2:-2, 2:-1] - inp[2:-2, 1:-2])
        if away_from(fx, [0.0], gap) and away_from(fy, [0.0], gap):
            return inp, coeff, np.zeros((n, n + 1))


# ============================================================================ CFD

@kernel
def build_up_b(b: float64[N, M], rho: float, dt: float, u: float64[N, M],
               v: float64[N, M], dx: float, dy: float):
    b[1:-1, 1:-1] = (rho * (1.0 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx)
                                        + (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy))
                            - ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx)) ** 2
                            - 2 * ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy)
                                   * (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2 * dx))
                            - ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) ** 2))


@kernel
def pressure_poisson(p, dx, dy, b, nit):             # unannotated: types from the call
    for q in range(nit):
        pn = p.copy()
        p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy ** 2
                          + (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx ** 2)
                         / (2 * (dx ** 2 + dy ** 2))
                         - dx ** 2 * dy ** 2 / (2 * (dx ** 2 + dy ** 2)) * b[1:-1, 1:-1])
        p[:, -1] = p[:, -2]
        p[0, :] = p[1, :]
        p[:, 0] = p[:, 1]
        p[-1, :] = 0.0


@kernel
def cavity_flow(u: float64[N, M], v: float64[N, M], p: float64[N, M], nt: int, nit: int,
                dt: float, rho: float, nu: float) -> float:
    """Lid-driven cavity (Barba, step 11): a few time steps."""
    dx = 2.0 / (M - 1)
    dy = 2.0 / (N - 1)
    b = np.zeros((N, M))
    for n in range(nt):
        un = u.copy()
        vn = v.copy()
        build_up_b(b, rho, dt, u, v, dx, dy)
        pressure_poisson(p, dx, dy, b, nit)
        u[1:-1, 1:-1] = (un[1:-1, 1:-1]
                         - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, 0:-2])
                         - vn[1:-1, 1:-1] * dt / dy * (un[1:-1, 1:-1] - un[0:-2, 1:-1])
                         - dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, 0:-2])
                         + nu * (dt / dx ** 2 * (un[1:-1, 2:] - 2 * un[1:-1, 1:-1]
                                                 + un[1:-1, 0:-2])
                                 + dt / dy ** 2 * (un[2:, 1:-1] - 2 * un[1:-1, 1:-1]
                                                   + un[0:-2, 1:-1])))
        v[1:-1, 1:-1] = (vn[1:-1, 1:-1]
                         - un[1:-1, 1:-1] * dt / dx * (vn[1:-1, 1:-1] - vn[1:-1, 0:-2])
                         - vn[1:-1, 1:-1] * dt / dy * (vn[1:-1, 1:-1] - vn[0:-2, 1:-1])
                         - dt / (2 * rho * dy) * (p[2:, 1:-1] - p[0:-2, 1:-1])
                         + nu * (dt / dx ** 2 * (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1]
                                                 + vn[1:-1, 0:-2])
                                 + dt / dy ** 2 * (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1]
                                                   + vn[0:-2, 1:-1])))
        u[0, :] = 0.0
        u[:, 0] = 0.0
        u[:, -1] = 0.0
        u[-1, :] = 1.0
        v[0, :] = 0.0
        v[-1, :] = 0.0
        v[:, 0] = 0.0
        v[:, -1] = 0.0
    return np.sum(u * u) + np.sum(v * v) + np.sum(p * p)


def make_cavity_flow(rng, n=6):
    return (0.1 * rng.standard_normal((n, n + 1)), 0.1 * rng.standard_normal((n, n + 1)),
            0.1 * rng.standard_normal((n, n + 1)), 2, 3, 0.01, 1.0, 0.1)


@kernel
def periodic_source(rho: float, dt: float, dx: float, dy: float, u: float64[N, M],
                    v: float64[N, M]):
    """The pressure source of channel flow, periodic in x: returns a new array."""
    b = np.zeros_like(u)
    b[1:-1, 1:-1] = rho * (1.0 / dt * ((u[1:-1, 2:] - u[1:-1, :-2]) / (2 * dx)
                                       + (v[2:, 1:-1] - v[:-2, 1:-1]) / (2 * dy))
                           - ((u[1:-1, 2:] - u[1:-1, :-2]) / (2 * dx)) ** 2
                           - ((v[2:, 1:-1] - v[:-2, 1:-1]) / (2 * dy)) ** 2)
    b[1:-1, -1] = rho * (1.0 / dt * ((u[1:-1, 0] - u[1:-1, -2]) / (2 * dx)
                                     + (v[2:, -1] - v[:-2, -1]) / (2 * dy))
                         - ((u[1:-1, 0] - u[1:-1, -2]) / (2 * dx)) ** 2)
    b[1:-1, 0] = rho * (1.0 / dt * ((u[1:-1, 1] - u[1:-1, -1]) / (2 * dx)
                                    + (v[2:, 0] - v[:-2, 0]) / (2 * dy))
                        - ((u[1:-1, 1] - u[1:-1, -1]) / (2 * dx)) ** 2)
    return b


@kernel
def channel_flow(u: float64[N, M], v: float64[N, M], p: float64[N, M], nit: int,
                 dt: float, rho: float, nu: float, F: float, tol: float,
                 maxit: int) -> float:
    """Channel flow (Barba, step 12), periodic in x, stepped until u settles."""
    dx = 2.0 / (M - 1)
    dy = 2.0 / (N - 1)
    udiff = 1.0
    steps = 0.0
    while udiff > tol and steps < maxit:
        un = u.copy()
        b = periodic_source(rho, dt, dx, dy, u, v)
        for q in range(nit):
            pn = p.copy()
            p[1:-1, 1:-1] = ((pn[1:-1, 2:] + pn[1:-1, :-2]) * dy ** 2
                             + (pn[2:, 1:-1] + pn[:-2, 1:-1]) * dx ** 2
                             - b[1:-1, 1:-1] * dx ** 2 * dy ** 2) / (2 * (dx ** 2 + dy ** 2))
            p[1:-1, -1] = p[1:-1, -2]
            p[1:-1, 0] = p[1:-1, 1]
            p[-1, :] = p[-2, :]
            p[0, :] = p[1, :]
        u[1:-1, 1:-1] = (un[1:-1, 1:-1]
                         - un[1:-1, 1:-1] * dt / dx * (un[1:-1, 1:-1] - un[1:-1, :-2])
                         - dt / (2 * rho * dx) * (p[1:-1, 2:] - p[1:-1, :-2])
                         + nu * dt / dy ** 2 * (un[2:, 1:-1] - 2 * un[1:-1, 1:-1]
                                                + un[:-2, 1:-1])
                         + F * dt)
        u[1:-1, -1] = u[1:-1, -2]
        u[1:-1, 0] = u[1:-1, 1]
        u[0, :] = 0.0
        u[-1, :] = 0.0
        v[1:-1, 1:-1] = 0.9 * v[1:-1, 1:-1]
        udiff = (np.sum(u) - np.sum(un)) / np.sum(u)
        steps += 1.0
    return np.sum(u * u) + np.sum(p * v) + steps


def _channel_udiffs(args, count):
    """The convergence measure after each step, from the reference (maxit = count)."""
    u, v, p, nit, dt, rho, nu, F, _, _ = [a.copy() if isinstance(a, np.ndarray) else a
                                          for a in args]
    out = []
    for _ in range(count):
        un = u.copy()
        channel_flow.py_func(u, v, p, nit, dt, rho, nu, F, -1.0, 1)
        out.append((np.sum(u) - np.sum(un)) / np.sum(u))
    return out


def make_channel_flow(rng, n=5):
    while True:
        u = 0.3 + 0.1 * rng.random((n, n + 1))
        u[0, :] = u[-1, :] = 0.0                        # the walls
        args = (u, 0.1 * rng.standard_normal((n, n + 1)), np.zeros((n, n + 1)), 2, 0.1,
                1.0, 0.5, 1.0, 0.0, 50)
        d = _channel_udiffs(args, 6)
        # stop after 5 steps: the threshold well between the 4th and 5th measures
        if d[3] > 1.1 * d[4] > 0.0 and all(x > 1.1 * d[3] for x in d[:3]):
            return args[:8] + (float(np.sqrt(d[3] * d[4])), 50)


# ============================================================================= ML

@kernel
def conv2d(x: float64[K, N, M], w: float64[L, K, 3, 3], bias: float64[L],
           out: float64[L, T, T]) -> float:
    for f in range(L):
        for i in range(T):
            for j in range(T):
                s = bias[f]
                for c in range(K):
                    for di in range(3):
                        for dj in range(3):
                            s += w[f, c, di, dj] * x[c, i + di, j + dj]
                out[f, i, j] = np.tanh(s)
    return np.sum(out * out)


def make_conv2d(rng, n=5):
    return (rng.standard_normal((2, n, n + 1)), 0.3 * rng.standard_normal((2, 2, 3, 3)),
            rng.standard_normal(2), np.zeros((2, n - 2, n - 2)))


@kernel
def dense_tanh(x: float64[N, K], W: float64[K, M], b: float64[M], h: float64[N, M]):
    for n in range(N):
        for m in range(M):
            s = b[m]
            for k in range(K):
                s += x[n, k] * W[k, m]
            h[n, m] = np.tanh(s)


@kernel
def mlp_loops(X: float64[N, K], W1: float64[K, M], b1: float64[M], W2: float64[M, L],
              b2: float64[L], Y: float64[N, L], H: float64[N, M], Z: float64[N, L]) -> float:
    """Two tanh layers (a kernel called twice) and a softmax cross-entropy loss."""
    dense_tanh(X, W1, b1, H)
    dense_tanh(H, W2, b2, Z)
    loss = 0.0
    for n in range(N):
        zmax = np.max(Z[n])
        lse = zmax + np.log(np.sum(np.exp(Z[n] - zmax)))
        loss += lse - np.sum(Y[n] * Z[n])
    return loss / N


def make_mlp_loops(rng, n=3, gap=1e-2):
    while True:
        X = rng.standard_normal((n, 4))
        W1, b1 = 0.5 * rng.standard_normal((4, 5)), 0.1 * rng.standard_normal(5)
        W2, b2 = 0.5 * rng.standard_normal((5, 3)), 0.1 * rng.standard_normal(3)
        Y = np.eye(3)[rng.integers(0, 3, n)]
        Z = np.tanh(np.tanh(X @ W1 + b1) @ W2 + b2)
        top = np.sort(Z, axis=1)
        if np.all(top[:, -1] - top[:, -2] > gap):
            return X, W1, b1, W2, b2, Y, np.zeros((n, 5)), np.zeros((n, 3))


@kernel
def softmax_loops(x: float64[N, M], w: float64[N, M], out: float64[N, M]) -> float:
    for i in range(N):
        mx = x[i, 0]
        for j in range(1, M):
            if x[i, j] > mx:
                mx = x[i, j]
        s = 0.0
        for j in range(M):
            out[i, j] = np.exp(x[i, j] - mx)
            s += out[i, j]
        for j in range(M):
            out[i, j] /= s
    return np.sum(out * w)


def make_softmax_loops(rng, n=3, gap=1e-2):
    while True:
        x = 2.0 * rng.standard_normal((n, n + 2))
        top = np.sort(x, axis=1)
        if np.all(np.diff(top, axis=1) > gap):
            return x, rng.standard_normal((n, n + 2)), np.zeros((n, n + 2))


CASES = [
    CorpusCase("bicg", bicg, make_bicg, ("A", "p", "r", "s", "q"), ("s", "q")),
    CorpusCase("mvt", mvt, make_mvt, ("x1", "x2", "y1", "y2", "A"), ("x1", "x2")),
    CorpusCase("gemver", gemver, make_gemver,
               ("alpha", "beta", "A", "u1", "v1", "u2", "v2", "w", "x", "y", "z"),
               ("A", "w", "x")),
    CorpusCase("2mm", k2mm, make_k2mm, ("alpha", "beta", "A", "B", "C", "D"), ("D",)),
    CorpusCase("3mm", k3mm, make_k3mm, ("A", "B", "C", "D", "G"), ("G",)),
    CorpusCase("syrk", syrk, make_syrk, ("alpha", "beta", "C", "A"), ("C",)),
    CorpusCase("syr2k", syr2k, make_syr2k, ("alpha", "beta", "C", "A", "B"), ("C",)),
    CorpusCase("symm", symm, make_symm, ("alpha", "beta", "C", "A", "B"), ("C",)),
    CorpusCase("trmm", trmm, make_trmm, ("alpha", "A", "B"), ("B",)),
    CorpusCase("lu", lu, make_lu, ("A",), ("A",)),
    CorpusCase("ludcmp", ludcmp, make_ludcmp, ("A", "b", "x", "y"), ("A", "x", "y")),
    CorpusCase("cholesky", cholesky, make_cholesky, ("A",), ("A",)),
    CorpusCase("durbin", durbin, make_durbin, ("r", "y"), ("y",)),
    CorpusCase("gramschmidt", gramschmidt, make_gramschmidt, ("A", "R", "Q"),
               ("A", "R", "Q")),
    CorpusCase("covariance", covariance, make_covariance, ("data", "cov"), ("data", "cov")),
    CorpusCase("correlation", correlation, make_correlation, ("data", "corr"),
               ("data", "corr")),
    CorpusCase("doitgen", doitgen, make_doitgen, ("A", "C4"), ("A",)),
    CorpusCase("fdtd_2d", fdtd_2d, make_fdtd_2d, ("ex", "ey", "hz", "fict"),
               ("ex", "ey", "hz")),
    CorpusCase("adi", adi, make_adi, ("u", "v", "p", "q"), ("u", "v", "p", "q")),
    CorpusCase("deriche", deriche, make_deriche, ("alpha", "imgIn", "imgOut"), ("imgOut",)),
    CorpusCase("seidel2d", seidel2d, make_seidel2d, ("A",), ("A",)),
    CorpusCase("vertical_advection", vertical_advection, make_vertical_advection,
               ("u", "w", "dt"), ("u",)),
    CorpusCase("hdiff_loops", hdiff_loops, make_hdiff_loops, ("inp", "coeff", "out"),
               ("out",)),
    CorpusCase("cavity_flow", cavity_flow, make_cavity_flow,
               ("u", "v", "p", "dt", "rho", "nu"), ("u", "v", "p")),
    CorpusCase("channel_flow", channel_flow, make_channel_flow,
               ("u", "v", "p", "dt", "rho", "nu", "F", "tol"), ("u", "v", "p")),
    CorpusCase("conv2d", conv2d, make_conv2d, ("x", "w", "bias", "out"), ("out",)),
    CorpusCase("mlp_loops", mlp_loops, make_mlp_loops,
               ("X", "W1", "b1", "W2", "b2", "Y", "H", "Z"), ("H", "Z")),
    CorpusCase("softmax_loops", softmax_loops, make_softmax_loops, ("x", "w", "out"),
               ("out",)),
]

CASES_BY_NAME = {case.name: case for case in CASES}
