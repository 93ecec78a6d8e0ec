"""NumPy functions and small constructs real code uses (issue 20): logical ufuncs, sign,
fmod, hypot, isnan/isfinite/isclose, nan-reductions, gradient, pad, convolve, trapezoid,
cross, kron, interp, polyval, split, scipy.special's erf/expit/logit/xlogy,
out=/fill/copyto, reversed ranges, roll, cumsum, diff, joins, triangles, ranges,
ufunc.outer, np.ndarray and keyword arguments, slice bounds that may be None, index arrays
of every integer dtype, boolean mask arguments, default argument values and module-level
constants.

Every kernel here is written for these tests. Forward results are compared with the
kernel run as plain Python/NumPy (``py_func``; bitwise where the floating-point contract of
docs/kernel-language.md says so: everything here but sums), gradients and tangents with
central differences of the Python function, a few kernels again through the CUDA code
run on the CPU (``cuda_emulation``), and what stays unsupported raises a located error.
"""
import math

import numpy as np
import pytest
import scipy.special
from scipy import special
from scipy.special import erf

from adjoint import ArgumentError, BoundsError, KernelSyntaxError, float64, jvp, kernel, symbol, vjp
from adjoint.options import options
from float_testing import SPECIAL, assert_same, quiet
from kernel_testing import (arg_names, copy_args, fd_atol, fd_directional, inner,
                            random_direction, rng_for)

N = symbol("N")
M = symbol("M")
RELAX = 0.25            # module-level constants: read as constants of the specialisation
SWEEPS = 2
SHIFT = 3


# ---- elementwise functions -----------------------------------------------------------------
@kernel
def elementwise(x: float64[N], y: float64[N], out: float64[8, N]):
    out[0] = np.sign(x)
    out[1] = np.fmod(x, y)
    out[2] = np.hypot(x, y)
    out[3] = np.where(np.logical_and(x > 0.0, y < 1.0), x, y)
    out[4] = np.where(np.logical_or(np.logical_not(x > y), np.logical_xor(x < 0.0, y < 0.0)),
                      y, -x)
    for i in range(N):          # the same functions on numbers
        out[5, i] = np.sign(y[i]) * x[i] + np.logical_and(x[i] > 0.0, np.logical_not(y[i] > 0.0))
        out[6, i] = np.fmod(y[i], x[i])
        out[7, i] = np.hypot(y[i], np.multiply(x[i], 2.0))


def test_sign_fmod_hypot_and_logical_functions_are_numpys_bitwise():
    """Special values against each other (inf, nan, signed zeros, subnormals)."""
    grid = np.array(SPECIAL)
    x, y = (np.ascontiguousarray(a.ravel()) for a in np.meshgrid(grid, grid))
    got, want = np.zeros((8, x.size)), np.zeros((8, x.size))
    elementwise(x, y, got)
    quiet(elementwise.py_func, x, y, want)
    for k in range(8):
        assert_same(got[k], want[k], (x, y), f"row {k}")


# ---- kernels with derivatives --------------------------------------------------------------
@kernel
def periodic_diffusion(u: float64[N, M], nu: float, T: int):
    for t in range(T):
        u[:] = u + nu * (np.roll(u, 1, axis=0) + np.roll(u, -1, axis=0)
                         + np.roll(u, 1, axis=1) + np.roll(u, -1, axis=1) - 4.0 * u)
    return u * np.sign(u)


@kernel
def shifted(q: float64[N, M], c: float64[M], s: int):
    a = np.roll(q, s, axis=1) * c          # a shift known only at run time
    b = np.roll(q, (1, -2), axis=(0, 1))   # several axes
    return a - b + np.roll(q, SHIFT) * np.hypot(q, 1.0)      # no axis: the flattened array


@kernel
def scans(x: float64[N], A: float64[N, M]):
    s = np.cumsum(x * x)
    P = np.cumprod(A, axis=1) + A.cumsum(axis=0) + np.cumsum(A).reshape(N, M)
    return s, P + np.add.accumulate(A) + np.maximum.accumulate(A, axis=1)


@kernel
def differences(x: float64[N], A: float64[N, M]):
    return np.diff(x) * np.fmod(x[1:], 0.7), np.diff(A, n=2, axis=0)[:, 1:] + np.diff(A)[2:]


@kernel
def triangles(A: float64[N, N], w: float):
    return np.triu(A) + w * np.tril(A, -1) + np.triu(A * A, k=1)


@kernel
def joins(x: float64[N], y: float64[M], A: float64[N, M], w: float):
    z = np.concatenate((x, y * w, x[:2]))
    stacked = np.stack([A, A * w], axis=1)
    rows = np.vstack((A, y, A[0] * y))
    flat = np.hstack((x, np.sin(x)))
    small = np.array([x[0], w * y[1], 3.0])
    grid = np.array([[w, x[1]], [y[0], 2.0]])
    return z, stacked, rows, flat * small[1], grid * np.concatenate([A, A], axis=None)[3]


@kernel
def ranges(x: float64[N], a: float, b: float):
    t = np.linspace(a, b, N)
    r = np.linspace(start=b, stop=a, num=N, endpoint=False, dtype=np.float64)
    k = np.arange(N) * 0.5 + np.arange(1, N + 1, 2).sum()
    return t * x + r, k * x, np.arange(0.25, 2.0, 0.5) * a


@kernel
def shortest_paths(D: float64[N, N], x: float64[N]):
    for k in range(N):
        D[:] = np.minimum(D, np.add.outer(D[:, k], D[k, :]))
    return (np.subtract.outer(x, x) * np.multiply.outer(x, x)
            + np.maximum.outer(x, x[::-1]) - np.minimum.outer(x, x))


@kernel
def columns(u: float64[N, M], dt: float):
    n, m = u.shape
    flux = np.ndarray((n, m), dtype=u.dtype)
    flux[:] = np.where(np.greater(u, 0.0), u, 0.5 * u)
    mean = np.ndarray(shape=u.shape[1], dtype=float)
    mean[:] = np.mean(flux, axis=u.ndim - 2)
    return np.clip(u - dt * mean, a_min=None, a_max=2.0) + np.sum(flux, axis=1, keepdims=True)


@kernel
def repeats(x: float64[N], A: float64[N, M], r: int):
    wide = np.repeat(A, r, axis=1) * np.repeat(x, M * r).reshape(N, M * r)   # an int argument
    return wide + np.repeat(A[:, :1], 2 * r, axis=-1), np.repeat(A, 2) * 0.5  # none: flattened


@kernel
def trimmed(x: float64[N], w: float64[N]):
    k = 0
    v = np.asarray(x)               # x itself: writes through v reach it
    v[0] = 2.0 * w[0]
    return x[k:-k or None] * w[1:(0 or None)][0] + x[:None] * np.sum(w[2:-1 or None])


@kernel
def masked(A: float64[N], w: float64[N], m):
    A[m] = w[m]
    A[~m] *= 2.0
    return np.where(m, A, -A) * RELAX


def relax(u, omega=0.5, sweeps=SWEEPS, periodic=True):
    """Default values: constants of the specialisation when left out."""
    for _ in range(sweeps):
        if periodic:
            u[:] = (1.0 - omega) * u + omega * 0.5 * (np.roll(u, 1) + np.roll(u, -1))
        else:
            u[1:-1] = (1.0 - omega) * u[1:-1] + omega * 0.5 * (u[2:] + u[:-2])
    return u * RELAX


relax_kernel = kernel(relax)


def comparisons(x, y, A):
    close = np.isclose(x, y, atol=0.05)
    jump = np.where(close, 0.0, np.heaviside(x - y, 0.5) * (x - y) ** 2)
    return np.sum(jump) + np.allclose(x, x) + np.count_nonzero(A > 0.0, axis=0)[0] * 1.0


def in_place_forms(x, y):
    np.exp(x, out=y)
    np.multiply(y, 2.0, out=y)
    z = np.empty_like(x)
    z.fill(0.5)
    np.copyto(z[1:], x[:-1])
    for i in reversed(range(1, x.shape[0])):
        z[i - 1] += 0.5 * z[i]
    return sum(z) + np.sum(y)


def stencil_tools(u, U, w, dx):
    gy, gx = np.gradient(U, 0.5, dx)
    padded = np.pad(u, 2, mode="wrap") + np.pad(u, (1, 3), mode="edge") + np.pad(u, 2)
    mirrored = np.pad(U, ((1, 0), (2, 1)), mode="reflect") * np.pad(U, ((1, 0), (1, 2)), "symmetric")
    smooth = np.convolve(u, w, mode="same") + np.convolve(u, w, "valid")[0]
    return (np.sum(np.gradient(u, dx) ** 2) + np.sum(gy * gx) + np.sum(padded ** 2)
            + np.sum(mirrored) + np.sum(smooth * u) + np.trapezoid(u ** 2, dx=dx)
            + np.sum(np.trapezoid(U, x=np.cumsum(w[:2] ** 2), axis=0)))


def axes_and_angles(A, x):
    B = np.expand_dims(x, (0, 2)) * np.swapaxes(np.moveaxis(A[:, :, None], 2, 0), 1, 2)
    angles = np.sin(np.deg2rad(x)) + np.radians(x) * np.degrees(x) + np.rad2deg(x)
    return (np.sum(B ** 2) + np.sum(angles) + np.sum(np.sinc(x)) + math.erf(x[0])
            + math.erfc(x[1]) + np.sum(np.logaddexp(x, x[::-1])) + np.logaddexp(x[0], x[0]))


def products(a, b, P, V, x32):
    """Cross products of 3-vectors (rows broadcast) and of 2-vectors, Kronecker products,
    a float32 array summed in float64."""
    return (np.sum(np.cross(a, b) * np.cross(P, V)) + np.sum(np.kron(a, b) ** 2)
            + np.sum(np.kron(P[:2, :2], V[:2])) + np.mean(a, dtype=np.float64)
            + np.sum(x32, dtype=np.float64) + np.cross(a[:2], b[1:]))


def special_functions(x, p):
    """scipy.special's ufuncs by every spelling: imported, through its module, dotted."""
    s = 0.0
    for i in range(x.shape[0]):
        s += erf(x[i]) + special.expit(x[i])
    return (s + np.sum(scipy.special.erfc(x) * special.logit(p))
            + np.sum(special.xlogy(x * x, p)) + special.xlogy(0.0, p[0]))


def profile(z, zp, tp):
    """Interpolating a profile, as column models read their forcing."""
    t = np.interp(z, zp, tp) + np.interp(z * 0.5, zp, tp, left=-1.0, right=2.5)
    s = 0.0
    for i in range(z.shape[0]):
        s += np.interp(z[i] + 0.25, zp, tp) ** 2
    return np.sum(t * t) + s


def polynomials(c, x, A):
    return np.sum(np.polyval(c, x) ** 2) + np.sum(np.polyval(c[:2], A)) + np.polyval(c, x[0])


def splits(x, A):
    a, b = np.split(x, 2)
    p, q, r = np.array_split(x[:5], 3)         # 2, 2, 1
    c, d, e = np.split(x, [1, 4])
    left, right = np.split(A, 2, axis=1)
    return (np.sum(a * b) + np.sum(p) * np.sum(q) - r[0] + np.sum(d) * c[0] + e[1]
            + np.sum(left * right))


def matrix_shapes(a, b, A):
    M = np.column_stack((a, b))
    rows = np.broadcast_to(a, (3, a.shape[0])) * np.arange(3.0)[:, None]
    return np.sum(M @ M.T) + np.trace(A) + A.trace(1) + np.sum(rows) + np.sum(np.cbrt(A) * A)

CASES = [
    (periodic_diffusion, lambda rng: (rng.standard_normal((5, 4)), 0.1, 3)),
    (shifted, lambda rng: (rng.standard_normal((4, 5)), rng.standard_normal(5), -2)),
    (scans, lambda rng: (rng.standard_normal(4),     # no near ties for the running maximum
                         rng.permutation(20).reshape(4, 5) * 0.05 + 0.6)),
    (differences, lambda rng: (rng.standard_normal(5), rng.standard_normal((5, 4)))),
    (triangles, lambda rng: (rng.standard_normal((5, 5)), 0.3)),
    (joins, lambda rng: (rng.standard_normal(4), rng.standard_normal(3),
                         rng.standard_normal((4, 3)), 0.7)),
    (ranges, lambda rng: (rng.standard_normal(6), -0.3, 1.9)),
    (shortest_paths, lambda rng: (rng.random((5, 5)) + np.eye(5) * 3.0,
                                  rng.standard_normal(5))),
    (columns, lambda rng: (rng.standard_normal((4, 3)), 0.3)),
    (trimmed, lambda rng: (rng.standard_normal(6), rng.standard_normal(6))),
    (repeats, lambda rng: (rng.standard_normal(3), rng.standard_normal((3, 2)), 3)),
    (masked, lambda rng: (rng.standard_normal(6), rng.standard_normal(6), rng.random(6) > 0.5)),
    (relax_kernel, lambda rng: (rng.standard_normal(7),)),
    (relax_kernel, lambda rng: (rng.standard_normal(7), 0.7, 3, False)),
    (kernel(comparisons), lambda rng: (np.arange(6.0), np.arange(6.0) + [0.01, 0.3, -0.02, -0.4,
                                                                       0.2, 0.0],
                                       rng.standard_normal((4, 3)))),
    (kernel(matrix_shapes), lambda rng: (rng.standard_normal(4), rng.standard_normal(4),
                                         rng.standard_normal((4, 4)) + 0.1)),
    (kernel(products), lambda rng: (rng.standard_normal(3), rng.standard_normal(3),
                                    rng.standard_normal((4, 3)), rng.standard_normal((4, 3)),
                                    rng.standard_normal(5).astype(np.float32))),
    (kernel(special_functions), lambda rng: (rng.standard_normal(5), rng.random(5) * 0.8 + 0.1)),
    (kernel(profile), lambda rng: (rng.uniform(-1.0, 7.0, 9), np.cumsum(rng.uniform(0.5, 1.5, 6)),
                                   rng.standard_normal(6))),
    (kernel(polynomials), lambda rng: (rng.standard_normal(4), rng.standard_normal(5),
                                       rng.standard_normal((2, 3)))),
    (kernel(splits), lambda rng: (rng.standard_normal(6), rng.standard_normal((3, 4)))),
    (kernel(in_place_forms), lambda rng: (rng.standard_normal(6), np.zeros(6))),
    (kernel(stencil_tools), lambda rng: (rng.standard_normal(6), rng.standard_normal((2, 4)),
                                         rng.standard_normal(3), 0.3)),
    (kernel(axes_and_angles), lambda rng: (rng.standard_normal((3, 4)),
                                           rng.standard_normal(4))),
]
IDS = ["roll_stencil", "roll_shifts", "scans", "diff", "triangles", "joins", "ranges",
       "outer", "ndarray_keywords", "slice_none", "repeat", "bool_mask_argument",
       "defaults", "defaults_given", "isclose_heaviside_count", "column_stack_trace_cbrt",
       "cross_kron_dtype", "scipy_special", "interp", "polyval", "split",
       "out_fill_copyto_reversed",
       "gradient_pad_convolve_trapezoid", "axes_angles_erf"]
SUMS = {"ranges", "ndarray_keywords", "slice_none", "roll_shifts",     # within rounding
        "isclose_heaviside_count", "column_stack_trace_cbrt", "cross_kron_dtype",
        "scipy_special", "interp", "polyval", "split", "out_fill_copyto_reversed",
        "gradient_pad_convolve_trapezoid", "axes_angles_erf"}


def _outputs(k, args):
    """Every array argument afterwards and what the kernel returns, as a flat list."""
    work = copy_args(args)
    ret = k(*work)
    ret = list(ret) if isinstance(ret, tuple) else [ret]
    return [a for a in work if isinstance(a, np.ndarray)] + ret


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_forward_matches_numpy(case):
    k, make = CASES[case]
    check_forward(k, make(rng_for(IDS[case])), bitwise=IDS[case] not in SUMS)


def check_forward(k, args, bitwise, rtol=1e-13):
    """Every output of ``k`` at ``args`` against its ``py_func``'s: bitwise, or within
    ``rtol`` (sums)."""
    got, want = _outputs(k, args), _outputs(k.py_func, args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
        if bitwise:
            assert np.array_equal(g, w), (g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


def _floating(a):
    return isinstance(a, float) or isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _loss(k, cot, given):
    """<cot, F(args)>, F the kernel run as Python, over the outputs vjp reported (the
    arguments that are not floating-point as ``given``: finite differences make floats)."""
    def f(args):
        work = copy_args(tuple(a if _floating(g) else g for a, g in zip(args, given)))
        ret = k.py_func(*work)
        values = dict(zip(arg_names(k), work), **{"return": ret})
        return sum(inner(c, values[n]) for n, c in cot.items())
    return f


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_gradient_and_tangent_match_finite_differences(case):
    k, make = CASES[case]
    rng = rng_for(IDS[case], salt="grad")
    check_gradient_and_tangent(k, make(rng), rng)


def check_gradient_and_tangent(k, args, rng):
    """vjp and jvp of ``k`` at ``args`` against central differences of its ``py_func``,
    along random directions of its float arguments and outputs."""
    names = arg_names(k)[:len(args)]
    index_of = {n: i for i, n in enumerate(names)}
    wrt = [n for n, a in zip(names, args) if _floating(a)]
    outs, pullback = vjp(k, *copy_args(args))
    cot = {n: random_direction(rng, v) for n, v in outs.items()}
    f = _loss(k, cot, args)
    d = {n: random_direction(rng, args[index_of[n]]) for n in wrt}
    want = fd_directional(f, args, index_of, d)
    back = pullback(cot)
    got = sum(inner(back[n], d[n]) for n in wrt)
    assert got == pytest.approx(want, rel=1e-7, abs=fd_atol(f(args)))
    _, dots = jvp(k, copy_args(args), d)
    tangent = sum(inner(cot[n], dots[n]) for n in outs)
    assert tangent == pytest.approx(want, rel=1e-7, abs=fd_atol(f(args)))


def test_sign_fmod_hypot_derivatives_away_from_kinks():
    rng = rng_for("elementwise", salt="grad")
    x, y = rng.standard_normal(6) * 3.0, rng.random(6) + 0.5
    args = (x, y, np.zeros((8, 6)))
    outs, pullback = vjp(elementwise, *copy_args(args))
    cot = {"out": rng.standard_normal((8, 6))}
    f = _loss(elementwise, cot, args)
    d = {"x": rng.standard_normal(6), "y": rng.standard_normal(6)}
    index_of = {"x": 0, "y": 1}
    want = fd_directional(f, args, index_of, d)
    back = pullback(cot)
    assert inner(back["x"], d["x"]) + inner(back["y"], d["y"]) == \
        pytest.approx(want, rel=1e-7, abs=fd_atol(f(args)))


# ---- the same kernels through the CUDA code, run on the CPU ------------------------------
@pytest.mark.parametrize("case", [IDS.index(n) for n in ("roll_stencil", "scans", "joins")],
                         ids=["roll_stencil", "scans", "joins"])
def test_emulated_cuda_matches_python(case, monkeypatch):
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    k, make = CASES[case]
    args = make(rng_for(IDS[case], salt="cuda"))
    for g, w in zip(_outputs(k, args), _outputs(k.py_func, args)):
        assert np.array_equal(g, w)
    outs, pullback = vjp(k, *copy_args(args))
    monkeypatch.setattr(options, "device", "cpu")
    cpu_outs, cpu_pullback = vjp(k, *copy_args(args))
    cot = {n: tuple(np.ones(np.shape(e)) for e in v) if isinstance(v, tuple) else
           np.ones(np.shape(v)) for n, v in outs.items()}
    for n, g in pullback(cot).items():
        np.testing.assert_allclose(g, cpu_pullback(cot)[n], rtol=1e-12, atol=1e-12)


@kernel
def misfit_with_gaps(obs: float64[N], model: float64[N]):
    """Observations with gaps (nan) and saturated ones (inf), masked as assimilation code
    masks them: by array and by element."""
    valid = np.isfinite(obs)
    d = np.where(valid, obs - model, 0.0)
    s = 0.0
    for i in range(N):
        if math.isnan(obs[i]) or np.isinf(obs[i]):
            continue
        s += (obs[i] - model[i]) ** 2
    return np.sum(d * d) + s + np.count_nonzero(valid) + np.sum(np.isnan(obs))


def test_isnan_isinf_isfinite_mask_gaps_in_both_backends(monkeypatch):
    """d/dmodel is -4 (obs - model) where obs is finite, 0 at its gaps (by hand)."""
    obs = np.array([1.0, np.nan, 2.5, np.inf, -0.5, -np.inf, 0.0])
    model = np.linspace(0.1, 0.7, obs.size)
    want = misfit_with_gaps.py_func(obs, model)
    assert misfit_with_gaps(obs, model) == pytest.approx(want, rel=1e-15)
    gap = ~np.isfinite(obs)
    _, pullback = vjp(misfit_with_gaps, obs, model)
    np.testing.assert_array_equal(pullback({"return": 1.0})["model"],
                                  np.where(gap, 0.0, -4.0 * (obs - model)))
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    assert misfit_with_gaps(obs, model) == pytest.approx(want, rel=1e-15)


def nan_reductions(x, A, out):
    out[0] = np.nansum(x) + np.nanmean(x) + np.nanmax(x) + np.nanmin(x) + np.nanprod(x[:3])
    out[1:4] = np.nanmax(A, axis=0) + np.nanmin(A, axis=1, keepdims=True)[0]
    out[4:6] = np.nanmean(A, axis=1)
    out[6] = np.nanmax(A[:, :1]) + np.nanmin(A[:, 0])
    out[7] = np.round(x[0] * 1.37, 1) + x.round(2)[3]
    out[8:] = A[0].clip(0.5, 1.5)[1:]


def test_nan_reductions_ignore_nans_as_numpy():
    """nan only where every value is (nanmax of a column of nans); d/dx of nansum is 1
    where x is a number, 0 at its nans."""
    x = np.array([1.0, np.nan, -2.0, 3.0, np.nan])
    A = np.array([[np.nan, 1.0, 2.0], [np.nan, np.nan, -1.0]])
    got, want = np.zeros(10), np.zeros(10)
    kernel(nan_reductions)(x, A, got)
    quiet(nan_reductions, x, A, want)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    assert np.isnan(got[6]) and np.isnan(want[6])
    _, pullback = vjp(kernel(lambda x: np.nansum(x * x)), x)
    np.testing.assert_array_equal(pullback({"return": 1.0})["x"],
                                  np.where(np.isnan(x), 0.0, 2.0 * x))


def test_interp_is_numpys_at_knots_ends_nan_and_one_point(monkeypatch):
    xp = np.array([0.0, 1.0, 1.5, 3.0, 4.0, 6.0])
    fp = np.array([1.0, -1.0, 2.0, 0.5, 0.0, 3.0])
    x = np.array([-1.0, 0.0, 0.3, 1.0, 1.2, 2.9, 3.0, 5.5, 6.0, 7.0, np.nan, -np.inf, np.inf])
    k = kernel(lambda x, xp, fp: np.interp(x, xp, fp))
    np.testing.assert_array_equal(k(x, xp, fp), np.interp(x, xp, fp))
    np.testing.assert_array_equal(k(x, xp[:1].copy(), fp[:1].copy()),
                                  np.interp(x, xp[:1], fp[:1]))
    A = x[:12].reshape(3, 4).copy()
    np.testing.assert_array_equal(k(A, xp, fp), np.interp(A, xp, fp))
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    np.testing.assert_array_equal(k(x, xp, fp), np.interp(x, xp, fp))


def extremes_and_where(x, A, out):
    out[0] = max(x) - 2.0 * min(x)            # Python's builtins: the first of equals
    out[1] = np.sum(x, where=x > 0.0) + np.mean(x, where=x < 0.5)
    out[2:5] = np.sum(A, axis=0, where=A > 0.0)
    out[5:] = np.mean(A, axis=1, where=np.array([True, False, True]))


@pytest.mark.parametrize("x", [[1.0, np.nan, 2.0], [np.nan, 1.0], [0.0, -0.0, 3.0, 3.0],
                               [-0.0, 0.0], [2.0, -1.0, 7.0, 7.0, -3.0]])
def test_builtin_max_min_of_a_vector_and_where_reductions_as_python(x):
    x, A = np.array(x), np.arange(-3.0, 9.0).reshape(4, 3)
    got, want = np.zeros(9), np.zeros(9)
    kernel(extremes_and_where)(x, A, got)
    quiet(extremes_and_where, x, A, want)
    assert_same(got, want, (), "max/min/where", ulps=4)    # the sums within rounding
    _, pullback = vjp(kernel(lambda v: max(v) - 2.0 * min(v)), np.array([2.0, -1.0, 7.0, -3.0]))
    np.testing.assert_array_equal(pullback({"return": 1.0})["v"], [0.0, 0.0, 1.0, -2.0])


def test_isclose_is_numpys_at_special_values():
    """Infinities equal only to themselves, nan to nothing unless ``equal_nan``."""
    grid = np.array(SPECIAL)
    x, y = (np.ascontiguousarray(a.ravel()) for a in np.meshgrid(grid, grid))

    def closeness(x, y, out):
        out[0] = np.isclose(x, y)
        out[1] = np.isclose(x, y, 1e-3, 1e-300, True)
    got, want = np.zeros((2, x.size), bool), np.zeros((2, x.size), bool)
    kernel(closeness)(x, y, got)
    quiet(closeness, x, y, want)
    np.testing.assert_array_equal(got, want)


# ---- arguments: integer dtypes, defaults, keywords --------------------------------------------
@kernel
def gather(x: float64[N], idx, w):
    s = 0.0
    for k in range(idx.size):
        s += w[k] * x[idx[k]]
    return s


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64"])
def test_index_arrays_of_every_integer_dtype(dtype):
    rng = rng_for("gather")
    x, idx, w = rng.standard_normal(9), np.array([0, 8, 3, 3, 5], dtype=dtype), rng.random(5)
    assert gather(x, idx, w) == gather.py_func(x, idx, w)
    back = vjp(gather, x, idx, w)[1]({"return": 1.0})
    want = np.zeros(9)
    np.add.at(want, idx.astype(np.int64), w)
    assert np.array_equal(back["x"], want)


def test_index_values_beyond_int64_are_refused():
    # uint64 arrays are passed in their own dtype; a value beyond int64 indexes beyond
    # every size
    with pytest.raises(BoundsError, match=r"idx\[k\] can reach the size N"):
        gather(np.ones(3), np.array([2 ** 63], dtype=np.uint64), np.ones(1))
    with pytest.raises(Exception, match="out of bounds|can reach|BoundsError|index"):
        gather(np.ones(3), np.array([7], dtype=np.uint8), np.ones(1))


def test_defaults_are_constants_and_keywords_bind_like_python():
    rng = rng_for("relax")
    u = rng.standard_normal(7)
    calls = [((), {}), ((0.3,), {}), ((0.3, 1), {}), ((), {"periodic": False}),
             ((0.9,), {"sweeps": 1, "periodic": False})]
    for args, kwargs in calls:
        a, b = u.copy(), u.copy()
        assert np.array_equal(relax_kernel(a, *args, **kwargs), relax(b, *args, **kwargs))
        assert np.array_equal(a, b)
    with pytest.raises(ArgumentError, match=r"takes 1 to 4 arguments \(u, omega, sweeps, "
                                            r"periodic\), got 0"):
        relax_kernel()
    with pytest.raises(ArgumentError, match="unexpected keyword argument 'omgea'"):
        relax_kernel(u, omgea=0.1)


def _array_default(x, w=np.ones(3)):
    return x * w


def test_a_default_that_is_no_constant_asks_for_the_argument():
    k = kernel(_array_default)
    assert np.array_equal(k(np.ones(3), np.full(3, 2.0)), np.full(3, 2.0))
    with pytest.raises(KernelSyntaxError, match="parameter 'w': its default value") as info:
        k(np.ones(3))
    assert f":{_array_default.__code__.co_firstlineno}:" in str(info.value)


# ---- what stays unsupported names the line ---------------------------------------------------
def _float_arange(x: float64[N], a: float):
    return x * np.arange(a, 2.0, 0.5)[0]


def _undecided_slice(x: float64[N], k: int):
    return x[1:(k or None)]


def _unknown_outer(x: float64[N]):
    return np.logaddexp2.outer(x, x)


def _joined_name(x: float64[N]):
    return np.concatenate(x)


def _retstep(x: float64[N], a: float):
    return np.linspace(0.0, a, N, retstep=True)


def _index_from_data(x: float64[N], a: float):
    return x[int(x[0] / a)]


@pytest.mark.parametrize("func, message", [
    (_float_arange, "with float bounds the length depends on their values"),
    (_undecided_slice, "cannot tell whether k is zero"),
    (_unknown_outer, "np.logaddexp2.outer` is not supported"),
    (_joined_name, "write the arrays to join as a tuple or list"),
    (_retstep, "retstep=True returns a tuple"),
    (_index_from_data, "computes an integer from the data x, a; .* an integer array"),
], ids=["float_arange", "undecided_slice", "unknown_outer", "joined_name", "retstep",
        "index_from_data"])
def test_unsupported_forms_name_the_line(func, message):
    args = {"_float_arange": (np.ones(4), 0.5), "_undecided_slice": (np.ones(4), 2),
            "_retstep": (np.ones(4), 1.0),
            "_index_from_data": (np.ones(4), 0.5)}.get(func.__name__, (np.ones(4),))
    with pytest.raises(KernelSyntaxError, match=message) as info:
        kernel(func)(*args)
    assert f":{func.__code__.co_firstlineno + 1}:" in str(info.value)
