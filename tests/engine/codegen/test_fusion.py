"""Map fusion (analysis/fusion.py): consecutive maps over the same range fuse when each
point depends only on itself; results and gradients are those of the unfused kernel."""
import numpy as np
import pytest

from adjoint import float64, grad, kernel, symbol
from adjoint.sdfg.nodes import MapScope, walk

from kernel_testing import (arg_names, assert_arrays_close, check_vjp_and_jvp, copy_args,
                            fd_gradient, rng_for)

N = symbol("N")


@kernel
def chain(a: float64[N], b: float64[N], y: float64[N]) -> float:
    t = a * b
    y[:] = np.sin(t) + a
    a *= 2.0                         # after y read a: fusing keeps that order per point
    y *= a
    return np.sum(y * y)


@kernel
def neighbours(a: float64[N], b: float64[N], c: float64[N]) -> float:
    b[1:-1] = a[:-2] * a[1:-1]
    c[1:-1] = b[2:] + b[1:-1]        # reads the next point's b: must not fuse
    return np.sum(c * c)


def _maps(k, args):
    return [n for n, _ in walk(k.specialize(args).sdfg.body) if isinstance(n, MapScope)]


def test_pointwise_maps_fuse_and_neighbours_do_not():
    rng = rng_for("fusion")
    # four statements and the sum (its `s = 0` moved before them) -> one map; two
    # stencil stores stay two
    assert len(_maps(chain, (rng.random(6), rng.random(6), np.zeros(6)))) == 1
    assert len(_maps(neighbours, (rng.random(6), np.zeros(6), np.zeros(6)))) == 3


@pytest.mark.parametrize("k,wrt", [(chain, ("a", "b")), (neighbours, ("a",))],
                         ids=["chain", "neighbours"])
def test_fused_kernels_match_python_and_finite_differences(k, wrt):
    rng = rng_for(k.__name__)
    args = (rng.random(7) + 0.5, rng.random(7) + 0.5, np.zeros(7))
    got_args, want_args = copy_args(args), copy_args(args)
    assert k(*got_args) == pytest.approx(k.py_func(*want_args), rel=1e-13)
    for got, want in zip(got_args, want_args):
        np.testing.assert_allclose(got, want, rtol=1e-13)
    index_of = {a: i for i, a in enumerate(arg_names(k))}
    f = lambda a: float(k.py_func(*copy_args(a)))            # noqa: E731
    for name, g in zip(wrt, grad(k, wrt=wrt)(*copy_args(args))):
        assert_arrays_close(g, fd_gradient(f, args, index_of, name), 1e-7, f"d/d{name}")


@kernel
def binned_means(data: float64[N], radius: float64[N], res: float64[10]):
    for i in range(10):
        r1 = i / 10.0
        r2 = (i + 1) / 10.0
        inside = np.logical_and(r1 <= radius, radius < r2)
        res[i] = np.sum(data * inside) / np.sum(inside)


@kernel
def read_between(a: float64[N], y: float64[N]) -> float:
    y[:] = a * 2.0
    s = y[0] + 1.0          # reads what the first map wrote: stays after it
    return np.sum(a * s)


def test_scalar_statements_between_maps_move_before_the_first_when_they_commute():
    rng = rng_for("fusion_hoist")
    args = (rng.random(64), rng.random(64), np.zeros(10))
    # the mask, the masked sum and the count: one map a bin, their `s = 0` before it
    assert len(_maps(binned_means, args)) == 1
    got, want = copy_args(args), copy_args(args)
    binned_means(*got)
    binned_means.py_func(*want)
    np.testing.assert_allclose(got[2], want[2], rtol=1e-14)
    args = (rng.random(9), np.zeros(9))
    assert len(_maps(read_between, args)) == 2
    got, want = copy_args(args), copy_args(args)
    assert read_between(*got) == pytest.approx(read_between.py_func(*want), rel=1e-14)
    np.testing.assert_array_equal(got[1], want[1])


def unannotated_chain(sa, ct, p):
    """Sizes of two arguments (sa.shape, ct.shape) that the call checks equal, and p's
    (1, 1, n) broadcast: the maps over sa's and over ct's ranges fuse (Veros' gsw_dHdT)."""
    t1 = ct * (2.0 + 0.5 * ct)
    t2 = sa * t1 + p
    return t2 * np.sqrt(sa) - t1 * p


def test_maps_over_sizes_checked_equal_fuse():
    rng = rng_for("fusion_equal_sizes")
    args = (rng.random((4, 3, 2)) + 0.5, rng.random((4, 3, 2)), rng.random((1, 1, 2)))
    k = kernel(unannotated_chain)
    assert len(_maps(k, args)) == 1
    np.testing.assert_array_equal(k(*copy_args(args)), unannotated_chain(*args))
    check_vjp_and_jvp(k, unannotated_chain, args, rng)
    with pytest.raises(Exception, match="do not match"):    # still checked per call
        k(args[0], rng.random((4, 3, 3)), args[2][..., :1])
