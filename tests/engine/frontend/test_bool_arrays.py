"""Bool arrays the kernel writes: ``np.zeros(n, dtype=bool)``, ``np.ones(shape, bool)``,
``.astype(bool)``, masks named and returned (bool, as NumPy's), elements assigned and
updated with ``&=``, ``|=``, ``^=``, ``~``; stored as uint8 as NumPy stores them. No
derivative flows through them: as masks they select, gradients and tangents against
central differences. Forward against the function run as Python, bitwise."""
import numpy as np
import pytest

from adjoint import KernelSyntaxError, kernel
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for


def rising(x):
    up = np.zeros(x.shape[0], dtype=bool)
    for i in range(1, x.shape[0]):
        up[i] = x[i] > x[i - 1]
    up[0] = False
    return up


def flags(x, y):
    keep = np.ones(x.shape, bool)
    keep &= x > -0.5
    keep |= y > 1.0
    odd = np.full(x.shape, True) ^ (x < y)
    return keep, ~keep, odd, (x * 0.0).astype(bool), np.eye(3, dtype=bool)


def element_updates(x):
    m = np.zeros_like(x > 0)
    for i in range(x.shape[0]):
        m[i] |= x[i] > 0.3
        m[i] &= ~(x[i] > 0.9)
        m[i] ^= x[i] < -1.0
    return m


def roll_index(p, offset, n):
    return (p + offset) % n


def peaks(data, mode=roll_index):
    """Local maxima over a 3x3 periodic window, the window's indices from a helper."""
    shape = data.shape
    result = np.ones(data.shape, bool)
    for pos in np.ndindex(data.shape):
        for offset in np.ndindex(3, 3):
            at = tuple(mode(p, o - 1, n) for (p, o, n) in zip(pos, offset, shape))
            result[pos] &= data[at] <= data[pos]
    return result


def masked_energy(x, w):
    m = np.zeros(x.shape, dtype=bool)
    for i in range(1, x.shape[0]):
        m[i] = x[i] > x[i - 1]
    m |= x < -1.0
    return np.sum(np.where(m, w * x ** 2, 3.0 * x)) + np.sum(x * ~m) + np.sum(m * w)


FORWARD = [(rising, lambda r: (r.standard_normal(17),)),
           (flags, lambda r: (r.standard_normal(12), r.standard_normal(12) * 2)),
           (element_updates, lambda r: (r.standard_normal(25),)),
           (peaks, lambda r: (r.standard_normal((6, 5)),))]


@pytest.mark.parametrize("f, make", FORWARD, ids=[c[0].__name__ for c in FORWARD])
def test_bool_arrays_as_python(f, make):
    args = make(rng_for(f.__name__))
    got, want = kernel(f)(*copy_args(args)), f(*copy_args(args))
    for g, w in zip(*((got, want) if isinstance(want, tuple) else ((got,), (want,)))):
        assert g.dtype == w.dtype == np.bool_
        np.testing.assert_array_equal(g, w)


def test_gradient_and_tangent_through_masks():
    rng = rng_for("masked_energy")
    check_vjp_and_jvp(kernel(masked_energy), masked_energy,
                      (rng.standard_normal(20), rng.standard_normal(20)), rng)


def adds_to_a_mask(x):
    m = x > 0
    for i in range(x.shape[0]):
        m[i] += x[i] > 1.0
    return m


def test_arithmetic_update_of_a_bool_element_names_the_line():
    with pytest.raises(KernelSyntaxError, match=r"test_bool_arrays.py:\d+:.*`m` is a bool "
                                                r"array; update it with &=, \|= or \^="):
        kernel(adds_to_a_mask)(np.ones(3))
