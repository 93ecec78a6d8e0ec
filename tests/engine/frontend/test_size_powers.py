"""Integer powers of sizes in indices and extents (``R ** K``, ``R ** (K - i - 1)``), and
loops unrolled at the call's trip count where a name's shape varies with the iteration
(NPBench's stockham_fft in its style; the kernels here are written for the tests).

Forward results against the kernels run as plain Python, gradients and tangents against
central differences in float64, errors naming the line."""
import numpy as np
import pytest

from adjoint import BoundsError, KernelSyntaxError, kernel
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for


def passes(x, W, R, K):
    """Stockham-style passes over R ** K points: each pass's shapes are powers of the
    radix, so the loop is unrolled at the call's K (one specialisation per K)."""
    g, h = np.mgrid[0:R, 0:R ** K]
    y = x * 1.0
    for i in range(K):
        v = np.transpose(np.reshape(y, (R ** i, R, R ** (K - i - 1))), axes=(1, 0, 2))
        D = np.empty((R, R ** i, R ** (K - i - 1)))
        t = np.cos(g[:, :R ** i] * h[:, :R ** i] / R ** (i + 1))
        D[:] = np.repeat(np.reshape(t, (R, R ** i, 1)), R ** (K - i - 1), axis=2)
        twiddled = np.reshape(v, (R ** K,)) * np.reshape(D, (R ** K,))
        y = np.reshape(W @ np.reshape(twiddled, (R, R ** (K - 1))), (R ** K,))
    return y


def power_indices(x, R, K):
    """Exponents of loop variables, shown not negative by the loop's range: no unrolling."""
    s = 0.0
    for i in range(K):
        s += x[R ** i - 1] * x[R ** (K - 1 - i) - 1]
    return s * np.sum(x[:R ** K])


def _passes_args(rng, R, K):
    return rng.standard_normal(R ** K), rng.standard_normal((R, R)), R, K


def _outputs(f, args):
    work = copy_args(args)
    return f(*work), work


@pytest.mark.parametrize("R, K", [(2, 3), (3, 2), (2, 1)], ids=["2^3", "3^2", "2^1"])
def test_passes_forward_and_gradient(R, K):
    rng = rng_for(f"passes{R}{K}")
    args = _passes_args(rng, R, K)
    got, want = _outputs(kernel(passes), args)[0], _outputs(passes, args)[0]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    check_vjp_and_jvp(kernel(passes), passes, args, rng)


def test_a_loop_unrolled_at_the_call_compiles_once_per_trip_count():
    k, rng = kernel(passes), rng_for("passes_counts")
    for (R, K), count in [((2, 3), 1), ((2, 4), 2), ((3, 3), 2), ((2, 2), 3)]:
        args = _passes_args(rng, R, K)
        np.testing.assert_allclose(k(*copy_args(args)), passes(*copy_args(args)),
                                   rtol=1e-13, atol=1e-13)
        assert len(k.specializations) == count     # (3, 3) runs K = 3's: R stays a size


def test_exponents_of_loop_variables():
    rng = rng_for("power_indices")
    args = (rng.standard_normal(20), 2, 4)
    k = kernel(power_indices)
    assert k(*args) == pytest.approx(power_indices(*args), rel=1e-14)
    check_vjp_and_jvp(k, power_indices, args, rng)


def test_a_negative_exponent_is_a_bounds_error_naming_the_line():
    with pytest.raises(BoundsError, match=r"test_size_powers.py:\d+: the exponent of "
                                          r"`R \*\* K` in a grid bound is negative"):
        kernel(passes)(np.ones(4), np.ones((2, 2)), 2, -1)


def _negative_in_loop(x, R, K):
    s = 0.0
    for i in range(K):
        s += x[R ** (i - 1)]            # Python: R ** -1 is a float, no index
    return s


def test_an_exponent_the_loop_makes_negative_is_refused():
    line = _negative_in_loop.__code__.co_firstlineno + 3
    with pytest.raises((BoundsError, KernelSyntaxError),
                       match=rf"test_size_powers.py:{line}:.*exponent of `R \*\* \(i - 1\)`"):
        kernel(_negative_in_loop)(np.ones(8), 2, 3)
