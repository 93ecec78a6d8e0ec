"""Branches on integers and on data: forward equals Python, gradients equal finite
differences, and the reverse sweep replays the forward's decisions."""
import math

import numpy as np
import pytest

from adjoint import AdjointError, float64, grad, jvp, kernel, options, symbol, vjp
from kernel_testing import check_vjp_and_jvp, fd_directional

N = symbol("N")


@kernel
def branchy(x: float64[N], y: float64[N], a: float) -> float:
    for t in range(3):
        for i in range(1, N):
            if x[i - 1] * a > 0.1 and i % 2 == 0:
                x[i] = x[i] * x[i - 1] + a
            elif y[i] < 0:
                x[i] = math.sin(x[i]) - y[i]
            else:
                y[i] = y[i] * 0.5 + x[i] * x[i]
    return np.sum(x * y)


@kernel
def boundary(u: float64[N], k: float) -> float:
    for t in range(4):
        for i in range(N):
            if i == 0:
                u[i] = u[i] + k * (u[i + 1] - u[i])
            elif i == N - 1:
                u[i] = u[i] + k * (u[i - 1] - u[i])
            else:
                u[i] = u[i] + k * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    return np.sum(u * u)


@kernel
def clip_in_place(x: float64[N], lo: float) -> float:
    s = 0.0
    for i in range(N):
        if x[i] < lo:          # the decision depends on a value the branch overwrites
            x[i] = lo * x[i] * x[i]
        s += x[i] * x[i]
    return s


CASES = [(branchy, lambda r: (r.standard_normal(11), r.standard_normal(11), 0.7)),
         (boundary, lambda r: (r.standard_normal(9), 0.2)),
         (clip_in_place, lambda r: (r.standard_normal(12), 0.1))]


def _names(k):
    return list(k.__wrapped__.__code__.co_varnames[:k.__wrapped__.__code__.co_argcount])


@pytest.mark.parametrize("k,make", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_forward_matches_python(k, make):
    args = make(np.random.default_rng(1))
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    assert k(*got) == pytest.approx(k.py_func(*want), rel=1e-13)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13)


@pytest.mark.parametrize("k,make", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_gradient_matches_finite_differences(k, make):
    rng = np.random.default_rng(2)
    args = make(rng)
    names = _names(k)
    grads = grad(k, wrt=tuple(names))(*args)
    d = {n: (rng.standard_normal(a.shape) if isinstance(a, np.ndarray) else 1.0)
         for n, a in zip(names, args)}
    want = fd_directional(lambda a: k.py_func(*[x.copy() if isinstance(x, np.ndarray) else x
                                                for x in a]),
                          args, {n: i for i, n in enumerate(names)}, d, h=1e-6)
    got = sum(float(np.sum(g * d[n])) for n, g in zip(names, grads))
    assert got == pytest.approx(want, rel=1e-6)
    outs, dots = jvp(k, args, d)
    assert dots["return"] == pytest.approx(got, rel=1e-10)


def test_decisions_are_replayed_not_reevaluated():
    """clip_in_place overwrites x[i] inside the branch so that re-evaluating the
    condition in the reverse sweep would take the other branch."""
    x = np.array([-0.5, 0.3, -2.0])
    _, pullback = vjp(clip_in_place, x, 0.1)
    g = pullback({"return": 1.0})
    # s = sum(x_i'^2) with x_i' = lo * x_i^2 where x_i < lo, else x_i
    lo = 0.1
    want = np.where(x < lo, 2 * (lo * x * x) * (2 * lo * x), 2 * x)
    np.testing.assert_allclose(g["x"], want, rtol=1e-14)


@kernel
def halve_until_small(x: float64[N], tol: float) -> float:
    for i in range(N):
        while abs(x[i]) > tol:        # trip count depends on the data
            x[i] = 0.5 * x[i] * (1.0 + 0.01 * math.tanh(x[i]))
    return np.sum(x * x * x)


@kernel
def first_crossing(x: float64[N], y: float64[N], c: float) -> float:
    s = 0.0
    for i in range(N):
        if x[i] > c:
            break
        if y[i] < 0:
            continue
        s += x[i] * y[i]
        y[i] = y[i] * x[i]
    return s + np.sum(y * y)


@kernel
def newton_sqrt(a: float64[N], out: float64[N]) -> float:
    for i in range(N):
        r = a[i]
        while True:
            r_new = 0.5 * (r + a[i] / r)
            if abs(r_new - r) < 1e-12:
                break
            r = r_new
        out[i] = r_new
    return np.sum(out)


JUMPS = [(halve_until_small, lambda r: (r.uniform(-40, 40, 7), 0.3)),
         (first_crossing, lambda r: (r.uniform(-1, 1, 12), r.standard_normal(12), 0.8)),
         (newton_sqrt, lambda r: (r.uniform(0.5, 4.0, 6), np.zeros(6)))]


@pytest.mark.parametrize("k,make", JUMPS, ids=lambda c: getattr(c, "__name__", ""))
def test_while_break_continue_forward(k, make):
    test_forward_matches_python(k, make)


@pytest.mark.parametrize("k,make", JUMPS, ids=lambda c: getattr(c, "__name__", ""))
def test_while_break_continue_gradients(k, make):
    test_gradient_matches_finite_differences(k, make)


def test_newton_gradient_is_the_derivative_of_sqrt():
    a = np.array([0.7, 2.0, 9.0])
    g = grad(newton_sqrt, wrt="a")(a, np.zeros(3))
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a), rtol=1e-8)


def test_nonterminating_while_loop_raises(monkeypatch):
    monkeypatch.setattr(options, "tape_limit_bytes", 2**24)
    x = np.array([np.inf])
    with pytest.raises(AdjointError, match="while loop"):
        grad(halve_until_small, wrt="x")(x, 1e-3)


def test_a_tape_length_that_sufficed_is_kept_for_the_next_call(monkeypatch):
    """The first call finds the while loop's tape length by restarting; later calls at
    the same sizes start with it (channel_flow's gradient: 27 -> 18 ms)."""
    from adjoint.sweep import Sweep
    grown = []
    original = Sweep._grow
    monkeypatch.setattr(Sweep, "_grow", lambda self, i: (grown.append(i), original(self, i)))
    x = np.array([1e60, -3e50, 2.0])
    g1 = grad(halve_until_small, wrt="x")(x, 1e-3)
    assert grown                                   # about 200 halvings: more than 1024
    grown.clear()
    g2 = grad(halve_until_small, wrt="x")(x, 1e-3)
    assert not grown
    np.testing.assert_array_equal(g1, g2)


def test_long_while_loops_grow_the_tape():
    """The tape size of a while loop is unknown before running: the engine retries."""
    x = np.array([1e60, -3e50, 2.0])          # about 200 halvings each
    g = grad(halve_until_small, wrt="x")(x, 1e-3)
    h = 1e-3
    for i in range(3):
        e = np.zeros(3)
        e[i] = h * abs(x[i])
        fd = (halve_until_small.py_func(x + e, 1e-3) - halve_until_small.py_func(x - e, 1e-3))
        assert g[i] * 2 * e[i] == pytest.approx(fd, rel=1e-4, abs=1e-15)


@kernel
def gather_positive(x: float64[N], y: float64[N]) -> float:
    for i in range(N):
        if x[i] > 0.0:
            y[i] = x[i // 2]          # an integer quotient: not computed unless taken
    return np.sum(y * y)


def _forward_source(k, args):
    k(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    return k.specializations[0].forward.source


@pytest.mark.c_source
def test_decisions_on_data_in_loops_assign_by_selects():
    """clip_in_place's branch on data only assigns: each write becomes ``x = taken ?
    value : x``, with no branch to mispredict and no store of some vector lanes only
    (GCC's masked stores, reloaded at once by the reverse sweep's next statement, cost
    more than the branch). Its accesses are in bounds taken or not (bounds analysis
    ignores conditions). Branches on integers stay branches (their accesses may be out
    of bounds when not taken), and so do branches that compute an integer quotient."""
    src = _forward_source(clip_in_place, (np.ones(5), 0.1))
    assert "if (v___if" not in src
    assert "v_x[i_i] = (v___if1[0] != 0) ? (" in src and ") : v_x[i_i];" in src
    assert "if (i_i == 0) {" in _forward_source(boundary, (np.ones(5), 0.2))
    assert "if (v___if1[0] != 0) {" in _forward_source(gather_positive, (np.ones(5), np.ones(5)))
    x = np.random.default_rng(3).standard_normal(9)
    y, want = np.ones(9), np.ones(9)
    assert gather_positive(x, y) == pytest.approx(gather_positive.py_func(x, want), rel=1e-14)
    np.testing.assert_array_equal(y, want)


# ------------------------------------------------ branches on sizes, decided per call

def shape_by_sizes(n, m, H, B, z):
    """``if n == m`` choosing between shapes: the branch the call's sizes do not take is
    never lowered (its ``X`` would be (n, n) where the other's is (n, B.shape[1]))."""
    A = np.zeros((n, n))
    for k in range(H.shape[0]):
        A += z ** k * H[k]
    if n == m:
        X = np.linalg.inv(A)
    elif n > 2 * m:
        X = A[:, :m] * 0.5
    else:
        X = np.linalg.solve(A, B)
    out = np.zeros((n, m))
    for i in range(n):
        if i < m:                       # a loop variable: lowered as a branch, as before
            out[i] = X[i] * z
    return out


def _shape_by_sizes_args(rng, n, m):
    H = rng.random((3, n, n)) + 4.0 * np.eye(n)
    return n, m, H, rng.random((n, m)), 0.7


def test_branches_on_sizes_are_decided_per_call():
    """Each call runs the branch its sizes take, equal to Python's; a call whose sizes
    decide otherwise gets a specialisation of its own, and one that decides as an
    earlier call reuses that one."""
    k = kernel(shape_by_sizes)
    rng = np.random.default_rng(4)
    for n, m, count in [(3, 5, 1), (4, 4, 2), (6, 2, 3), (5, 7, 3)]:
        args = _shape_by_sizes_args(rng, n, m)
        np.testing.assert_allclose(k(*args), shape_by_sizes(*args), rtol=1e-12, atol=1e-13)
        assert len(k.specializations) == count
    spec, _, _ = k.bound(_shape_by_sizes_args(rng, 3, 5))
    assert any("`n == m` is False at these sizes" in c.message for c in spec.forward.checks)


@pytest.mark.parametrize("n, m", [(3, 5), (4, 4)], ids=["solve", "inv"])
def test_branches_on_sizes_gradients(n, m):
    rng = np.random.default_rng(5)
    check_vjp_and_jvp(kernel(shape_by_sizes), shape_by_sizes,
                      _shape_by_sizes_args(rng, n, m), rng)
