"""Helpers shared by the engine tests: argument handling and finite differences.

Everything here is independent of the engine: references come from running the
kernel's ``py_func`` (plain Python/NumPy) in float64.
"""
import inspect

import numpy as np

from adjoint.corpus import copy_args, rng_for, seed_for  # noqa: F401  (the tests' names)


def arg_names(kernel):
    return list(inspect.signature(kernel.py_func).parameters)


def as_float64(args):
    return tuple(a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args)


def snapshot(args):
    """Copies to check later, with :func:`assert_untouched`, that nothing was modified."""
    return copy_args(args)


def assert_untouched(args, saved, what):
    for k, (a, s) in enumerate(zip(args, saved)):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, s), f"{what} modified argument #{k} of the caller"


def run_reference(kernel, args):
    """Run ``py_func`` on copies: (return value as float or None, final argument copies)."""
    work = copy_args(args)
    ret = kernel.py_func(*work)
    return (None if ret is None else float(ret)), work


def random_direction(rng, value):
    if isinstance(value, tuple):                 # a returned tuple
        return tuple(random_direction(rng, v) for v in value)
    if isinstance(value, list):                  # a returned list (grown by append)
        return rng.standard_normal(np.shape(value))
    if isinstance(value, np.ndarray):
        return rng.standard_normal(value.shape)
    return float(rng.standard_normal())


def shifted(args, index_of, directions, step):
    """float64 copies of ``args`` with ``args[index_of[name]] += step * directions[name]``."""
    out = list(as_float64(copy_args(args)))
    for name, d in directions.items():
        k = index_of[name]
        out[k] = out[k] + step * d
    return tuple(out)


def fd_directional(func, args, index_of, directions, h=1e-4):
    """Fourth-order central difference of ``func(args)`` along ``directions`` (by name).

    With h = 1e-4 the truncation error is O(h^4) ~ 1e-16 and the rounding error
    ~ eps * |f| / h ~ 1e-12 * |f|: far below the 1e-6 the tests ask of the engine.
    """
    f = lambda s: func(shifted(args, index_of, directions, s * h))  # noqa: E731
    # Differences first, so a function that does not depend on the direction gives 0.0.
    return (8.0 * (f(1.0) - f(-1.0)) - (f(2.0) - f(-2.0))) / (12.0 * h)


def fd_atol(f0, h=1e-4):
    """What rounding alone can leave in :func:`fd_directional` (a few ulps of |f| / h)."""
    return 100.0 * np.finfo(np.float64).eps * max(abs(f0), 1.0) / h


def inner(a, b):
    """<a, b> for arrays (any dtype, summed in float64), scalars or tuples of them."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        assert len(a) == len(b), f"tuples of {len(a)} and {len(b)}"
        return sum(inner(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
        return float(np.sum(a * b))
    return float(a) * float(b)


def assert_close_scalar(got, want, rtol, atol=0.0, what=""):
    err = abs(got - want)
    assert err <= rtol * max(abs(got), abs(want)) + atol, (
        f"{what}: got {got!r}, want {want!r} (|diff| = {err:.3e}, rtol = {rtol:g})")


def assert_arrays_close(got, want, rtol, what=""):
    """Elementwise, relative to the array's scale (entries near zero are not singled out)."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, err_msg=what)


def fd_gradient(func, args, index_of, name, h=1e-4):
    """The full gradient w.r.t. one argument, one coordinate at a time (small arrays only)."""
    value = args[index_of[name]]
    if not isinstance(value, np.ndarray):
        return fd_directional(func, args, index_of, {name: 1.0}, h)
    out = np.zeros(value.shape)
    for idx in np.ndindex(value.shape):
        e = np.zeros(value.shape)
        e[idx] = 1.0
        out[idx] = fd_directional(func, args, index_of, {name: e}, h)
    return out


def check_vjp_and_jvp(k, python, args, rng, rel=1e-7):
    """vjp and jvp of the kernel ``k`` against central differences of ``python`` (the
    function run as plain Python) along random directions, for random cotangents on
    every output the vjp reports (written arrays and the return value)."""
    from adjoint import jvp, vjp
    names = arg_names(k)
    index_of = {n: i for i, n in enumerate(names)}
    wrt = [n for n, a in zip(names, args) if isinstance(a, (np.ndarray, float))]
    outs, pullback = vjp(k, *copy_args(args))
    cot = {n: random_direction(rng, v) for n, v in outs.items()}

    def loss(xs):
        work = copy_args(xs)
        values = dict(zip(names, work), **{"return": python(*work)})
        return sum(inner(c, values[n]) for n, c in cot.items())
    d = {n: random_direction(rng, args[index_of[n]]) for n in wrt}
    want = fd_directional(loss, args, index_of, d)
    atol = fd_atol(loss(args))
    back = pullback(cot)
    got = sum(inner(back[n], d[n]) for n in wrt)
    assert abs(got - want) <= rel * abs(want) + atol, ("vjp", got, want)
    _, dots = jvp(k, copy_args(args), d)
    tangent = sum(inner(cot[n], dots[n]) for n in outs)
    assert abs(tangent - want) <= rel * abs(want) + atol, ("jvp", tangent, want)
