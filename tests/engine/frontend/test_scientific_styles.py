"""Kernels in the styles of public scientific NumPy code (issue 20), written here: a
lattice-Boltzmann step (np.roll over a tuple of velocities), a leapfrog wave equation with
a helper, upwind advection (np.where, np.maximum(0, u)), Lorenz-63 through RK4 with a
nested function, a k-means step (np.bincount), a radial profile (np.histogram, np.indices),
a Kuramoto step (np.subtract.outer), an image filter (scipy.ndimage) on an np.mgrid image,
Gaussian elimination (np.identity(n, a.dtype), np.diagonal), a cosine taper whose width
Python computes through floats (int(np.ceil(a * (n - 1) / 2)), len(B.shape),
.astype(B.dtype, copy=False)), spring forces (np.linalg.norm, np.add.at), reflecting walls
(i = np.where(pos[:, d] < 0) then pos[i, d] *= -1: the indices as a mask, among others),
cloud-in-cell weights (np.floor(x / dx).astype(int), np.mod, np.round, np.rint, np.ceil),
a Kalman filter's steps (functions imported from numpy and numpy.linalg, np.isscalar,
np.dot of numbers, np.atleast_2d, `in` of integers, try/except), a Mahalanobis distance
(np.asarray(x, dtype=None).squeeze(), np.squeeze(m, axis=1), float() of a product).

Forward against the kernel run as Python, gradients and tangents against central
differences (test_numpy_calls' check).
"""
import math

import numpy as np
import numpy.linalg as linalg
import pytest
import scipy.ndimage as ndi
from numpy import dot
from numpy.linalg import inv

from adjoint import kernel
from kernel_testing import rng_for
from test_numpy_calls import check_forward, check_gradient_and_tangent

C = ((0, 0), (1, 0), (0, 1), (-1, 0), (0, -1), (1, 1), (-1, 1), (-1, -1), (1, -1))
CX, CY = tuple(c[0] for c in C), tuple(c[1] for c in C)
IDXS, CXS, CYS = np.arange(9), np.array(CX), np.array(CY)
W = (4 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 36, 1 / 36, 1 / 36, 1 / 36)


def lbm_step(F, tau: float):
    """D2Q9 BGK: stream each population along its velocity (twice: in two styles), collide
    towards equilibrium."""
    for k, cx, cy in zip(IDXS, CXS, CYS):   # integer arrays from outside: shifts per k
        F[:, :, k] = np.roll(F[:, :, k], cx, axis=1)
        F[:, :, k] = np.roll(F[:, :, k], cy, axis=0)
    for k, (cx, cy) in enumerate(C):       # a tuple of velocities: Python's loop unrolled
        F[:, :, k] = 0.5 * (F[:, :, k] + np.roll(F[:, :, k], (cx, cy), axis=(1, 0)))
    rho = np.sum(F, 2)
    ux = np.sum(F * np.array(CX), 2) / rho
    uy = np.sum(F * np.array(CY), 2) / rho
    Feq = np.zeros(F.shape)
    for k in range(9):                       # tuples from outside indexed by k
        cu = 3 * (CX[k] * ux + CY[k] * uy)
        Feq[:, :, k] = rho * W[k] * (1 + cu + 0.5 * cu ** 2 - 1.5 * (ux ** 2 + uy ** 2))
        F[:, :, k] = np.roll(F[:, :, k], CY[k] - CY[k], axis=0)   # a shift of 0 by k
    F += -(1.0 / tau) * (F - Feq)
    return np.sum(rho * ux ** 2)


def _laplacian(u, dx):
    return (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1]) / dx ** 2


def wave(u, u_prev, c: float, dt: float, steps: int):
    """Leapfrog for u_tt = c^2 lap(u) with fixed edges."""
    dx = 1.0 / (u.shape[0] - 1)
    for _ in range(steps):
        u_next = u.copy()
        u_next[1:-1, 1:-1] = (2 * u[1:-1, 1:-1] - u_prev[1:-1, 1:-1]
                              + (c * dt) ** 2 * _laplacian(u, dx))
        u_prev = u
        u = u_next
    return np.sum(u * u)


def upwind(q, u, dt: float, dx: float, steps: int):
    """First-order upwind fluxes on a periodic line, the velocity's sign picking the side."""
    for _ in range(steps):
        up, um = np.maximum(0, u), np.minimum(u, 0)
        flux = up * q + um * np.roll(q, -1)
        q = q - dt / dx * (flux - np.roll(flux, 1))
        q = np.where(q > 0, q, 0.0)
    return q


def lorenz63(x0, sigma: float, rho: float, beta: float, dt: float, steps: int):
    def f(s):
        x, y, z = s
        return np.array([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    s = x0.copy()
    for _ in range(steps):
        k1 = f(s)
        k2 = f(s + dt / 2 * k1)
        k3 = f(s + dt / 2 * k2)
        k4 = f(s + dt * k3)
        s = s + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s


def kmeans_step(X, labels, k: int):
    """New centroids from the points' labels (bincount), then each point's squared distance."""
    counts = np.bincount(labels, minlength=k)
    cx = np.bincount(labels, weights=X[:, 0], minlength=k) / counts
    cy = np.bincount(labels, weights=X[:, 1], minlength=k) / counts
    d = (X[:, 0] - cx[labels]) ** 2 + (X[:, 1] - cy[labels]) ** 2
    return d.sum(), cx, cy


def radial_profile(image, bins: int):
    y, x = np.indices(image.shape)
    r = np.sqrt((x - image.shape[1] / 2) ** 2 + (y - image.shape[0] / 2) ** 2)
    total = np.histogram(r, bins, weights=image)[0]
    counts = np.histogram(r, bins)[0]
    return total / np.maximum(counts, 1)


def kuramoto(theta, omega, K: float, dt: float, steps: int):
    n = theta.shape[0]
    for _ in range(steps):
        coupling = np.sum(np.sin(np.subtract.outer(theta, theta)), axis=0)
        theta = theta + dt * (omega + K / n * coupling)
    return np.mean(np.cos(theta)), theta


def smoothed_edges(a: float, s: float):
    """A Gaussian bump on an np.mgrid, blurred (wrap) and differentiated (Sobel, reflect)."""
    Y, X = np.mgrid[-1.0:1.0:12j, -1.0:1.0:10j]
    img = np.exp(-(X ** 2 + Y ** 2) / s) * a
    blur = ndi.convolve(img, np.full((3, 3), 1.0 / 9.0), mode="wrap")
    gx = ndi.correlate1d(ndi.correlate1d(blur, [-1.0, 0.0, 1.0], axis=1), [1.0, 2.0, 1.0], axis=0)
    gy = ndi.correlate1d(ndi.correlate1d(blur, [-1.0, 0.0, 1.0], axis=0), [1.0, 2.0, 1.0], axis=1)
    return np.sqrt(gx ** 2 + gy ** 2 + 1e-3)


def elimination(a, w: float):
    """LU without pivoting, then each row scaled by its pivot."""
    l = np.identity(a.shape[0], a.dtype)
    for c in range(1, a.shape[0]):
        l[c:, c - 1] = a[c:, c - 1] / a[c - 1, c - 1:c]
        a[c:, c - 1:] = a[c:, c - 1:] - l[c:, c - 1][:, None] * a[c - 1, c - 1:]
    a /= np.diagonal(a)[:, None]
    return l * w + a.diagonal(1).sum()


def taper(B, a=0.37):
    assert len(B.shape) == 2
    n = B.shape[0]
    x = np.linspace(0.0, 1.0, num=n, endpoint=False).astype(B.dtype, copy=False)
    wl = np.ones_like(B[0])
    b = int(np.ceil(a * (n - 1) / 2))
    wl[:b] = 0.5 * (1 + np.cos(math.pi * (2 * np.arange(b) / (a * (n - 1)) - 1)))
    wl[-b:] = 0.5 * (1 + np.cos(math.pi * (2 * np.arange(b - 1, -1, -1) / (a * (n - 1)) - 1)))
    return B * np.sqrt(wl + wl[:, None]) * (x + round(n / 3))


def spring_acc(pos, ci, cj, L0, k: float, g: float):
    """Hooke's law along springs between nodes ci and cj: each node sums its springs'."""
    acc = np.zeros(pos.shape)
    d = pos[ci, :] - pos[cj, :]
    sep = np.linalg.norm(d, axis=1)
    f = -k * (sep - L0) / sep
    np.add.at(acc[:, 0], ci, f * d[:, 0])
    np.add.at(acc[:, 1], ci, f * d[:, 1])
    np.subtract.at(acc, cj, f[:, None] * d)
    acc[:, 1] += g
    return acc, np.linalg.norm(acc)


def _springs(rng):
    ci, cj = np.array([0, 1, 2, 3, 4, 0, 1]), np.array([1, 2, 3, 4, 5, 2, 5])
    return rng.standard_normal((6, 2)), ci, cj, rng.random(7) + 0.5, 2.0, -0.1


def reflect(pos, vel, box: float):
    for d in range(0, 2):
        out = np.where(pos[:, d] < 0)
        pos[out, d] *= -1
        vel[out, d] *= -1
        out = np.where(pos[:, d] > box)
        pos[out, d] = box - (pos[out, d] - box)
        vel[pos[:, d] > box - 0.1, d] *= 0.5
    fast = np.nonzero(vel > 1.0)
    vel[fast] = 1.0
    return pos, vel, np.sum(pos[pos[:, 1] > 1.0, 0])


def cell_weights(x, y, dx: float, n: int):
    """Each particle's cell and its weight towards the next one, as particle-in-cell codes
    compute them (floats rounded down and converted to integers)."""
    j = np.floor(x / dx).astype(int)
    jp1 = np.mod(j + 1, n)
    w = (x - j * dx) / dx
    steps = np.round(y) + np.rint(y) + np.ceil(y) * np.trunc(x * 3) + np.around(x)
    return w * y + steps * x, jp1, np.floor(x).astype(np.int32) * 2


def cents(y):
    return (np.round(y, 2) * 100).astype(np.int32), np.round(y, 1) - y


def _as_column(z, dim, ndim):
    z = np.atleast_2d(z)
    if z.shape[1] == dim:
        z = z.T
    if z.shape != (dim, 1):
        raise ValueError("z must be convertible to shape ({}, 1)".format(dim))
    return z[:, 0] if ndim == 1 else z


def kalman_step(x, P, z, R, H, F, Q, order: int, B=1, u=0):
    """Predict, then update with z, in filterpy's style."""
    if order not in (1, 2):
        raise ValueError("order must be 1 or 2")
    if np.isscalar(F):
        F = np.array(F)
    x = dot(F, x) + dot(B, u)
    P = dot(dot(F, P), F.T) + Q
    Hx = np.atleast_1d(dot(H, x))
    y = _as_column(z, Hx.shape[0], x.ndim) - Hx
    S = dot(dot(H, P), H.T) + R
    try:
        K = dot(dot(P, H.T), linalg.inv(S))
    except linalg.LinAlgError:
        K = dot(dot(P, H.T), 1.0 / S)
    x = x + dot(K, y)
    I_KH = np.eye(K.shape[0]) - dot(K, H)
    P = dot(dot(I_KH, P), I_KH.T) + dot(dot(K, R), K.T) * order
    return x, P, np.atleast_3d(inv(S))


def _kalman(rng):
    a, c = rng.standard_normal((4, 4)), rng.standard_normal((2, 2))
    H = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    return (rng.standard_normal(4), a @ a.T + np.eye(4), rng.standard_normal(2),
            c @ c.T + np.eye(2), H, np.eye(4) + 0.1 * rng.standard_normal((4, 4)),
            0.1 * np.eye(4), 2)


def mahalanobis(x, mean, cov):
    x = np.atleast_1d(np.asarray(x, dtype=None).squeeze())
    if x.ndim > 1:
        raise ValueError("Input vector should be 1-D.")
    y = x - np.squeeze(mean, axis=1)
    return math.sqrt(float(np.dot(np.dot(y.T, inv(np.atleast_2d(cov))), y)))


def _lbm(rng):
    F = 1.0 + 0.01 * rng.standard_normal((5, 6, 9))
    return F, 0.8


CASES = [
    (kernel(lbm_step), _lbm),
    (kernel(wave), lambda rng: (rng.standard_normal((7, 6)), rng.standard_normal((7, 6)),
                                0.5, 0.05, 3)),
    (kernel(upwind), lambda rng: (rng.random(8) + 0.5, rng.standard_normal(8), 0.05, 0.2, 3)),
    (kernel(lorenz63), lambda rng: (rng.standard_normal(3), 10.0, 28.0, 8 / 3, 0.01, 5)),
    (kernel(kmeans_step), lambda rng: (rng.standard_normal((10, 2)),
                                       np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0]), 3)),
    (kernel(radial_profile), lambda rng: (rng.standard_normal((6, 7)), 4)),
    (kernel(kuramoto), lambda rng: (rng.standard_normal(5), rng.standard_normal(5), 1.5,
                                    0.05, 3)),
    (kernel(smoothed_edges), lambda rng: (1.3, 0.4)),
    (kernel(elimination), lambda rng: (rng.random((6, 6)) + 6 * np.eye(6), 0.5)),
    (kernel(taper), lambda rng: (rng.standard_normal((10, 10)),)),
    (kernel(spring_acc), _springs),
    (kernel(reflect), lambda rng: (rng.uniform(-0.5, 2.5, (8, 2)), rng.standard_normal((8, 2)),
                                   2.0)),
    (kernel(cell_weights), lambda rng: (rng.uniform(0, 2, 12), rng.uniform(-3, 3, 12), 0.25,
                                        8)),
    (kernel(kalman_step), _kalman),
    (kernel(mahalanobis), lambda rng: (rng.standard_normal((1, 3)), rng.standard_normal((3, 1)),
                                       np.eye(3) + 0.1 * np.ones((3, 3)))),
]
IDS = ["lbm", "wave", "upwind", "lorenz63", "kmeans", "radial_profile", "kuramoto",
       "smoothed_edges", "elimination", "taper", "spring_acc", "reflect", "cell_weights", "kalman_step", "mahalanobis"]


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_forward_matches_numpy(case):
    k, make = CASES[case]
    check_forward(k, make(rng_for(IDS[case])), bitwise=False, rtol=1e-12)


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_gradients_and_tangents_match_finite_differences(case):
    k, make = CASES[case]
    rng = rng_for(IDS[case], salt="grad")
    check_gradient_and_tangent(k, make(rng), rng)


def test_an_integer_through_floats_is_the_call_sizes_own():
    """``b = int(np.ceil(a * (n - 1) / 2))`` holds for the sizes it was compiled for: another
    size is another specialisation, not the first one's b."""
    k = kernel(taper)
    for n in (10, 13, 10, 21):
        B = rng_for("taper", salt=str(n)).standard_normal((n, n))
        np.testing.assert_allclose(k(B.copy()), taper(B.copy()), rtol=1e-13)



def test_rounding_to_decimals_and_converting_is_numpys():
    y = rng_for("cents").uniform(-3, 3, 50)
    check_forward(kernel(cents), (y,), bitwise=True)


def test_a_number_for_a_matrix_takes_the_isscalar_branch():
    """``F = 1.5``: np.isscalar(F) holds, np.array(F) is 0-d and dot(F, x) scales."""
    args = list(_kalman(rng_for("kalman scalar")))
    args[5] = 1.5
    check_forward(kernel(kalman_step), tuple(args), bitwise=False, rtol=1e-12)


def test_squeeze_drops_the_axes_of_length_one_at_each_calls_sizes():
    k = kernel(mahalanobis)
    rng = rng_for("squeeze")
    for shape in ((1, 3), (3,), (1, 1, 4), (4, 1)):
        n = shape[-1] if shape[-1] > 1 else shape[0]
        args = (rng.standard_normal(shape), rng.standard_normal((n, 1)), np.eye(n))
        assert k(*args) == pytest.approx(mahalanobis(*args), rel=1e-13)
