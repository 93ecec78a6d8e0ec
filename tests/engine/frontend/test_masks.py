"""Masked selections where NumPy's result does not depend on how many elements the mask
selects: ``A[m] = <elementwise expression of X[m] and numbers>`` (NPBench nbody's
``inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0] ** (-1.5)``) and ``sum``/``prod``/``mean`` of
``A[m]`` (azimint's ``np.mean(data[mask])``). Forward against the function run as Python,
gradient and tangent against central differences; the rest refused naming the line."""
import numpy as np
import pytest

from adjoint import KernelSyntaxError, kernel
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for


def inverse_cubes(r, c):
    inv = r * c
    inv[inv > 0.1] = inv[inv > 0.1] ** (-1.5) + np.exp(-inv[inv > 0.1]) * c
    return np.sum(inv * r)


def ring_means(data, radius, lo, hi):
    ring = np.logical_and(lo <= radius, radius < hi)
    return np.mean(data[ring]) * 2.0 + data[radius > 4.9].sum() + np.prod(data[ring] + 1.0)


def scaled_where_positive(a, s):
    a[a > 0.0] = np.sum(a[a > 0.0]) * s      # a number, broadcast over the selection
    return a * 1.0


def binned_means(data, radius, npt):
    """NPBench's azimint_naive: a selection bound to a name, then reduced."""
    res = np.zeros(npt)
    for i in range(npt):
        ring = np.logical_and(i / npt <= radius, radius < (i + 1) / npt)
        values = data[ring]
        res[i] = values.mean() + np.sum(values * values)
    return np.sum(res * res)


CASES = [(binned_means, lambda r: (r.standard_normal(40), r.random(40), 4)),
         (inverse_cubes, lambda r: (r.random(7) + 0.05, 1.3)),
         (ring_means, lambda r: (r.standard_normal(9), np.linspace(0.0, 10.0, 9), 2, 7)),
         (scaled_where_positive, lambda r: (r.standard_normal(6), 0.5))]


@pytest.mark.parametrize("f, make", CASES, ids=[c[0].__name__ for c in CASES])
def test_forward_gradient_and_tangent_as_python(f, make):
    rng = rng_for(f.__name__)
    args = make(rng)
    got_args, want_args = copy_args(args), copy_args(args)
    got, want = kernel(f)(*got_args), f(*want_args)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    for g, w in zip(got_args, want_args):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    check_vjp_and_jvp(kernel(f), f, args, rng)


def empty_ring(data, radius):
    return np.mean(data[radius > 2.0])       # selects nothing: nan, as NumPy


def between_divisions(x, n):
    """``1 / n`` of integers in a mask's condition is a true division (it was C's integer
    one: an empty mask, a silent wrong answer)."""
    return np.sum(np.logical_and(1 / n <= x, x < 3 / n) * x)


def test_a_true_division_of_integers_in_a_mask_divides_as_python():
    x = np.linspace(0.0, 1.0, 9)
    assert kernel(between_divisions)(x, 4) == between_divisions(x, 4) == 1.75


def test_mean_of_nothing_is_nan_as_numpy():
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = empty_ring(np.ones(4), np.zeros(4))
    assert np.isnan(want) and np.isnan(kernel(empty_ring)(np.ones(4), np.zeros(4)))


def times_an_array(a, x):
    a[a > 0] = a[a > 0] * x                  # x has the array's size, not the selection's
    return a


def largest_selected(a):
    return np.max(a[a > 0])                  # NumPy raises for an empty selection


def selected_then_changed(a):
    values = a[a > 0]
    a[0] = 5.0                               # the copy keeps the old values: not inlined
    return np.sum(values)


@pytest.mark.parametrize("f, offset", [(times_an_array, 1), (largest_selected, 1),
                                       (selected_then_changed, 1)],
                         ids=["times_an_array", "largest_selected", "selected_then_changed"])
def test_other_uses_of_a_masked_selection_are_refused_naming_the_line(f, offset):
    with pytest.raises(KernelSyntaxError) as info:
        kernel(f)(np.linspace(-1.0, 1.0, 4), *([np.ones(4)] if f is times_an_array else []))
    assert f"test_masks.py:{f.__code__.co_firstlineno + offset}:" in str(info.value)
