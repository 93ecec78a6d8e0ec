"""What Veros' ocean routines (pyhpc-benchmarks' NumPy versions) need of the frontend, in
kernels written here in their style: arguments with size-1 axes broadcast as NumPy's do
(an argument's size-1 axis is part of the call's signature), `for` loops over a few
constant values whose variable decides slice extents (`: -1 + kr or None`) unrolled,
and integer conditional expressions (`ki = 0 if kr == 1 else 1`). Forward against the
function run as NumPy (bitwise), vjp and jvp against central differences.
"""
import numpy as np
import pytest

from adjoint import BoundsError, KernelSyntaxError, kernel, vjp
from adjoint.sdfg.nodes import loops
from float_testing import assert_same
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for

EPSLN = 1e-20


def enthalpy_like(sa, ct, p):
    """A density-like polynomial of salinity, temperature and pressure; p is (1, 1, nz)."""
    t1 = 0.5 * ct * (2.0e-3 + 1.0e-5 * ct) + sa * 1.0e-4
    t2 = t1 * p + np.sqrt(sa) * ct
    return t2 / (1.0 + 1.0e-3 * p) + np.log(1.0 + p * t1 ** 2)


def column_scaled(a, w, out):
    """In place, a (1, ny, 1) weight and a (1,) factor."""
    out[...] = a * w
    out[:, 1:] += out[:, :-1] * w[0, 0, 0]


def rows_loop(a, w):
    """A loop over an axis of size 1 (the constant 1 now)."""
    s = 0.0
    for i in range(a.shape[0]):
        s += np.sum(a[i] * w)
    return s


def taper(sx):
    return 0.5 * (1.0 + np.tanh((-np.abs(sx) + 0.3) / 0.2))


def slopes(drdt, dtdx, dtdz, dzw, k11, ai):
    """Isoneutral-style: `kr` decides the vertical extents (`ki:`, `: -1 + kr or None`),
    `ip` shifts a halo slice whose end is negative, and a nested function tapers."""
    def smooth(x):
        return taper(x) * x

    sumz = np.zeros_like(k11)[1:-2]
    for kr in range(2):
        ki = 0 if kr == 1 else 1
        for ip in range(2):
            drodxe = drdt[1 + ip:-2 + ip, ki:] * dtdx[1:-2, ki:]
            drodze = drdt[1 + ip:-2 + ip, ki:] * dtdz[1 + ip:-2 + ip, : -1 + kr or None]
            sxe = -drodxe / (np.minimum(0.0, drodze) - EPSLN)
            sumz[:, ki:] += dzw[np.newaxis, : -1 + kr or None] * np.maximum(0.1, smooth(sxe))
            ai[1:-2, ki:, ip, kr] = taper(sxe) * sxe
    k11[1:-2, :] = sumz / 4.0


def tops(a, out):
    """`kr : -1 + kr or None` as both ends, a loop with no other use of its variable."""
    for kr in range(2):
        out[:, :-1] += a[:, kr: -1 + kr or None] * (kr + 1.0)


def periodic_neighbour(a, out):
    """An integer conditional expression of a loop variable (not known when compiling)."""
    n = a.shape[0]
    for i in range(n):
        j = i + 1 if i < n - 1 else 0
        out[i] = a[i] * a[j]


def rebound(a):
    """An integer local assigned twice in straight-line code."""
    m = 1
    x = np.sum(a[m:] * 2.0)
    m = 2
    return x + np.sum(a[:-m] ** 2)


def long_loop(a, out):
    """More values than UNROLL: a loop, its slices symbolic."""
    for k in range(12):
        out[k:k + 2] += a[k:k + 2] * (k + 1.0)


def undecided_or(a, out):
    """`or None` on a value the compiler cannot know."""
    for k in range(a.shape[0]):
        out[: -k or None] += a[: -k or None]


def ocean(rng, nx=7, ny=6, nz=4):
    sa = rng.uniform(1.0, 10.0, (nx, ny, nz))
    ct = rng.uniform(-2.0, 20.0, (nx, ny, nz))
    p = rng.uniform(0.0, 1.0, (1, 1, nz))
    return sa, ct, p


def stratified(rng, nx=8, nz=4):
    drdt = -1.0 - rng.uniform(0.0, 0.5, (nx, nz))
    dtdx = rng.normal(0.0, 0.3, (nx, nz))
    dtdz = 1.0 + rng.uniform(0.0, 0.5, (nx, nz))
    dtdz[:, -1] = 0.0
    return drdt, dtdx, dtdz, rng.uniform(0.5, 1.5, nz), np.zeros((nx, nz)), \
        np.zeros((nx, nz, 2, 2))


def check_forward(func, args, ulps=0):
    """Bitwise; ``ulps`` where NumPy's own tanh loop (up to 2 ulps from the C library's,
    test_functions.py) feeds further operations."""
    k = kernel(func)
    want_args, got_args = copy_args(args), copy_args(args)
    want, got = func(*want_args), k(*got_args)
    if want is not None:
        assert_same(got, want, what=f"{func.__name__}: return value", ulps=ulps)
    for n, (g, w) in enumerate(zip(got_args, want_args)):
        if isinstance(w, np.ndarray):
            assert_same(g, w, what=f"{func.__name__}: argument {n}", ulps=ulps)
    return k


# ---- size-1 axes of arguments broadcast -------------------------------------------------
def test_size_one_axes_broadcast_forward_and_derivatives():
    rng = rng_for("size_one")
    args = ocean(rng)
    k = check_forward(enthalpy_like, args)
    check_vjp_and_jvp(k, enthalpy_like, args, rng)
    outs, pullback = vjp(k, *copy_args(args))
    cot = rng.standard_normal(outs["return"].shape)
    grads = pullback({"return": cot})
    assert grads["p"].shape == (1, 1, 4)        # summed over the broadcast axes


def test_size_one_and_full_sizes_are_two_specialisations():
    """The same kernel with p of full shape, and with (nx, 1, nz): each its own code."""
    rng = rng_for("size_one_full")
    sa, ct, p = ocean(rng)
    k = check_forward(enthalpy_like, (sa, ct, p))
    full = np.broadcast_to(p, sa.shape).copy()
    assert_same(k(sa, ct, full), enthalpy_like(sa, ct, full))
    middle = rng.uniform(0.0, 1.0, (7, 1, 4))
    assert_same(k(sa, ct, middle), enthalpy_like(sa, ct, middle))
    check_vjp_and_jvp(k, enthalpy_like, (sa, ct, middle), rng)
    assert len(k.specializations) == 3


def test_size_one_in_place_and_loops():
    rng = rng_for("size_one_in_place")
    a, w = rng.standard_normal((3, 5, 2)), rng.standard_normal((1, 5, 1))
    args = (a, w, np.zeros((3, 5, 2)))
    k = check_forward(column_scaled, args)
    check_vjp_and_jvp(k, column_scaled, args, rng)
    args = (rng.standard_normal((1, 4)), rng.standard_normal((1, 4)))
    k = check_forward(rows_loop, args)
    check_vjp_and_jvp(k, rows_loop, args, rng)


def test_sizes_that_do_not_broadcast_are_refused():
    rng = rng_for("size_one_refused")
    sa, ct, _ = ocean(rng)
    with pytest.raises(BoundsError, match=r"test_ocean_constructs.py:\d+: shapes"):
        kernel(enthalpy_like)(sa, ct, rng.uniform(0.0, 1.0, (1, 2, 4)))


# ---- small constant loops unrolled, `or None`, integer conditional expressions ----------
def test_unrolled_loops_with_or_none_slices():
    rng = rng_for("unrolled")
    args = stratified(rng)
    k = check_forward(slopes, args, ulps=8)
    check_vjp_and_jvp(k, slopes, args, rng)
    assert not list(loops(k.specialize(args).sdfg.body))       # four copies of the body
    args = (rng.standard_normal((3, 5)), np.zeros((3, 5)))
    k = check_forward(tops, args)
    check_vjp_and_jvp(k, tops, args, rng)


def test_integer_conditional_expression_of_a_loop_variable():
    rng = rng_for("int_ifexp")
    args = (rng.standard_normal(6), np.zeros(6))
    k = check_forward(periodic_neighbour, args)
    check_vjp_and_jvp(k, periodic_neighbour, args, rng)


def test_integer_local_rebound_in_straight_line_code():
    rng = rng_for("rebound")
    args = (rng.standard_normal(7),)
    k = check_forward(rebound, args)
    check_vjp_and_jvp(k, rebound, args, rng)


def test_long_constant_loop_stays_a_loop():
    rng = rng_for("long_loop")
    args = (rng.standard_normal(14), np.zeros(14))
    k = check_forward(long_loop, args)
    check_vjp_and_jvp(k, long_loop, args, rng)
    assert [str(r.var) for r in loops(k.specialize(args).sdfg.body)] == ["k"]


def test_or_none_on_an_unknown_value_is_refused():
    with pytest.raises(KernelSyntaxError, match=r"cannot tell whether .* is zero"):
        kernel(undecided_or)(np.ones(4), np.zeros(4))
