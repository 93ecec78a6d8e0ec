"""A zero cotangent (or tangent) times an infinite partial is zero.

Distances ``r = sqrt(dx*dx + dy*dy)`` of a particle to itself are 0, where sqrt's
derivative is infinite; the self-term's adjoint is exactly 0 (``dW/dr = 0`` at 0), so the
contribution must be 0, not 0 * inf = nan (as the SPH codes' ``getAcc`` got it). Checked
against central differences of the plain Python function. Inside one expression a step
factor that is zero (``np.sqrt(np.maximum(0.0, x))`` at x < 0: max's derivative 0 times
sqrt's infinite one, Veros' TKE) gives zero too; another zero factor inside the same
expression as the infinite partial, ``np.sqrt(x * x) * (x - x)``, still gives nan.)"""
import numpy as np
import pytest

from adjoint import jvp, kernel, vjp
from kernel_testing import fd_atol, fd_directional, inner


def pair_energy(x, y, h):
    dx = x[:, None] - x[None, :]          # zero on the diagonal
    dy = y[:, None] - y[None, :]
    r = np.sqrt(dx * dx + dy * dy)
    return np.sum(np.exp(-(r * r) / (h * h)))


def powers(x):
    s = x * x
    r = np.sqrt(s)                        # infinite derivatives at 0 ...
    q = s ** 0.75
    return np.sum(r * 0.0 + q * (x - x))  # ... times exactly zero adjoints


@pytest.mark.parametrize("f, args", [(pair_energy, (np.linspace(0.0, 1.0, 5),
                                                    np.cos(np.arange(5.0)), 0.7)),
                                     (powers, (np.array([0.0, 1.0, -2.0]),))],
                         ids=["pair_energy", "powers"])
def test_zero_times_infinite_partial_is_zero(f, args):
    k = kernel(f)
    names = ["x", "y", "h"][:len(args)] if f is pair_energy else ["x"]
    index_of = {n: i for i, n in enumerate(names)}
    rng = np.random.default_rng(3)
    d = {n: (rng.standard_normal(np.shape(a)) if isinstance(a, np.ndarray) else 0.3)
         for n, a in zip(names, args)}
    want = fd_directional(lambda xs: f(*xs), args, index_of, d)
    _, pullback = vjp(k, *args)
    back = pullback({"return": 1.0})
    assert all(np.all(np.isfinite(back[n])) for n in names)
    got = sum(inner(back[n], d[n]) for n in names)
    assert got == pytest.approx(want, rel=1e-7, abs=fd_atol(f(*args)))
    _, dots = jvp(k, args, d)
    assert dots["return"] == pytest.approx(want, rel=1e-7, abs=fd_atol(f(*args)))


def clipped_root(x):
    return np.sum(np.sqrt(np.maximum(0.0, x)) * x)      # one expression: step and root


def test_a_step_factor_that_is_zero_zeroes_an_infinite_partial_in_one_expression():
    x = np.array([-1.0, 0.5, 2.0, -3.0])
    k = kernel(clipped_root)
    _, pullback = vjp(k, x)
    g = pullback({"return": 1.0})["x"]
    np.testing.assert_allclose(g, [0.0, 1.5 * np.sqrt(0.5), 1.5 * np.sqrt(2.0), 0.0], rtol=1e-14)
    assert jvp(k, (x,), {"x": np.ones(4)})[1]["return"] == pytest.approx(np.sum(g), rel=1e-14)


def selected_powers(x, m):
    a = np.where(m, x, 0.0) ** 2          # zero where m is false
    b = np.where(m, x, 1.0) ** 3          # x is 0 where m is true
    return np.sum(a + b) + np.sum(np.triu(np.outer(x, x), 1) ** 2)


def test_a_power_of_a_selection_has_the_power_rules_derivative():
    """d/dx where(m, x, c)**n is n*x**(n-1) where m holds, 0 elsewhere: sympy's rule
    for compound bases, b**n * n/b * b', was nan at x = 0 (0 * inf) and a ``zoo`` the
    C printer refused where m is false (np.triu(A, 1)**2)."""
    x = np.array([0.0, 1.5, -2.0, 0.0, 0.5])
    m = np.array([True, True, False, False, True])
    others = np.sum(x * x) - x * x        # d/dx_k of sum over i < j of (x_i x_j)**2
    want = np.where(m, 2 * x + 3 * x * x, 0.0) + 2 * x * others
    k = kernel(selected_powers)
    _, pullback = vjp(k, x, m)
    np.testing.assert_allclose(pullback({"return": 1.0})["x"], want, rtol=1e-14)
    d = np.linspace(-1.0, 1.0, x.size)
    _, dots = jvp(k, (x, m), {"x": d})
    assert dots["return"] == pytest.approx(inner(want, d), rel=1e-14)
