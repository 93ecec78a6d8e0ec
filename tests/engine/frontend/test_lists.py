"""Lists grown by ``append`` in counted loops (``Ps = []`` ... ``Ps.append(P)``, benchpress'
black_scholes ``price``, its ``bench.flush()`` included: test_values.py).

Forward results bitwise against the functions run as plain Python (a returned list is a
list, element by element; within a few ulps where np.sum rounds), gradients and tangents against central differences; the
appends whose count the loops do not give, and other uses of a list, are refused naming
the line."""
import inspect
import math

import numpy as np
import pytest

from adjoint import KernelSyntaxError, grad, jvp, kernel, vjp
from float_testing import assert_same
from kernel_testing import (check_vjp_and_jvp, copy_args, fd_atol, fd_directional, inner,
                            rng_for)
from test_values import bench          # benchpress' `bench = util.Benchmark(...)`


def _cnd(x):
    k = 1.0 / (1.0 + 0.2316419 * np.absolute(x))
    w = 1.0 - 1.0 / math.sqrt(2 * np.pi) * np.exp(-x * x / 2.) * (0.31938153 * k + 0.5 * k ** 2)
    mask = x < 0
    return w * ~mask + (1.0 - w) * mask


def price(S, I, X=65.0, dT=(1.0 / 365.0), r=0.08, v=0.3):
    """benchpress' black_scholes.price, its shape kept: a list of scalars, a flush."""
    T = dT
    Ps = []
    N = len(S)
    for i in range(I):
        d1 = (np.log(S / X) + (r + v * v / 2.) * T) / (v * math.sqrt(T))
        P = np.sum(S * _cnd(d1) - X * math.exp(-r * T) * _cnd(d1 - v * math.sqrt(T))) / N
        Ps.append(P)
        T += dT
        bench.flush()
    return Ps


def total_price(S, I):
    return np.sum(price(S, I))


def history(u, n, c):
    """Arrays appended (each a new array: `u` is rebound), then stacked."""
    hist = [u.copy()]
    for t in range(n):
        u = u + c * (np.roll(u, 1) - 2.0 * u + np.roll(u, -1))
        hist.append(u)
    return np.array(hist)


def readings(x, n):
    """Nested loops, reads of the list while it grows (`xs[-1]`, `len(xs)`), straight-line
    appends, a second loop, then the reads Python's lists take."""
    xs = []
    xs.append(x[0])
    s = 1.0
    for i in range(n):
        for j in range(3):
            xs.append(s * x[j] + xs[-1] * 0.5)
        s = s * 0.5 + xs[-1] / len(xs)
    for k in range(2, n, 2):
        xs.append(x[1] * k)
    t = 0.0
    for v in xs:
        t += v * v
    return sum(xs) + np.sum(xs) + t + len(xs) + xs[-1] + max(xs) * min(xs)


def rows_of(A):
    """A loop over an array's rows, a list in a tuple returned."""
    out = []
    for row in A:
        out.append(np.sin(row) * 2.0)
    return np.stack(out), np.asarray(out)[:, 0], out


def per_step(x, n):
    """A list made anew in each iteration of an outer loop; only the last is left."""
    total = 0.0
    for t in range(n):
        ys = []
        for j in range(4):
            ys.append(x[j] * (t + 1))
        total += np.sum(ys) * np.mean(ys)
    return total + ys[0]


def lists_of_lists(x, n):
    """A loop over a grown list, a loop over constants written out, inside a counted loop."""
    ys = []
    for i in range(n):
        ys.append(x[i] * 2.0)
    zs = []
    for t in range(2):
        for v in ys:
            zs.append(v + t)
        for c in (1.0, 2.0):
            zs.append(c * x[0])
    return zs


def squares(n):
    ks = []
    for k in range(n):
        ks.append(k * k)
    return ks


def mixed(x, n):
    """Integers, then a float: a list NumPy makes floats of."""
    vs = [0]
    for k in range(n):
        vs.append(k + 1)
        vs.append(x[k] * 0.5)
    return np.array(vs) * 2.0


# np.sum rounds as the engine's other sums do (not bitwise NumPy's pairwise order): those
# kernels within a few ulps, the others bitwise
SUMS = {"price", "readings", "per_step"}
FORWARD = [(price, lambda r: (r.uniform(58, 62, 20), 5)),
           (history, lambda r: (r.random(9), 4, 0.2)),
           (readings, lambda r: (r.random(4), 5)),
           (rows_of, lambda r: (r.standard_normal((3, 4)),)),
           (per_step, lambda r: (r.random(5), 3)),
           (lists_of_lists, lambda r: (r.random(4), 3)),
           (squares, lambda r: (6,)),
           (mixed, lambda r: (r.random(4), 3)),
]


def _same(got, want, what, ulps):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want), (what, got)
        for g, w in zip(got, want):
            _same(g, w, what, ulps)
    else:
        assert_same(got, want, what=what, ulps=ulps)


@pytest.mark.parametrize("f, make", FORWARD, ids=[c[0].__name__ for c in FORWARD])
def test_forward_as_python(f, make):
    args = make(rng_for(f.__name__))
    _same(kernel(f)(*copy_args(args)), f(*copy_args(args)), f.__name__,
          4 if f.__name__ in SUMS else 0)


def test_a_returned_list_is_a_list_of_numbers():
    ps = kernel(price)(rng_for("numbers").uniform(58, 62, 8), 3)
    assert type(ps) is list and all(type(p) is float for p in ps)
    assert kernel(squares)(5) == [0, 1, 4, 9, 16]
    assert all(type(k) is int for k in kernel(squares)(3))


@pytest.mark.parametrize("f, make", FORWARD[:5], ids=[c[0].__name__ for c in FORWARD[:5]])
def test_vjp_and_jvp_against_central_differences(f, make):
    rng = rng_for(f.__name__, salt="grad")
    check_vjp_and_jvp(kernel(f), f, make(rng), rng)


def test_gradient_of_the_summed_prices():
    """The issue's check: d/dS of np.sum(price(S, I)), reverse and forward mode."""
    rng = rng_for("summed prices")
    S, I = rng.uniform(58, 62, 30), 6
    k = kernel(total_price)
    assert k(S, I) == pytest.approx(total_price(S, I), rel=1e-14)
    d = rng.standard_normal(S.shape)
    want = fd_directional(lambda xs: total_price(*xs), (S, I), {"S": 0}, {"S": d})
    atol = fd_atol(total_price(S, I))
    assert inner(grad(k, wrt="S")(S, I), d) == pytest.approx(want, rel=1e-7, abs=atol)
    _, dots = jvp(k, (S, I), {"S": d})
    assert dots["return"] == pytest.approx(want, rel=1e-7, abs=atol)


def test_cotangents_of_a_returned_list_element_by_element():
    """As experiments/realcode.py gives them: "return0", "return1", ... (the keys of a
    tuple's elements), missing ones zero; or the whole list under "return"."""
    rng = rng_for("elements")
    S, I = rng.uniform(58, 62, 10), 4
    outs, pullback = vjp(kernel(price), S, I)
    assert outs["return"] == price(S, I)
    cot = [0.5, 0.0, -1.0, 2.0]
    whole = pullback({"return": cot})["S"]
    parts = pullback({"return0": 0.5, "return2": -1.0, "return3": 2.0})["S"]
    np.testing.assert_array_equal(parts, whole)
    d = rng.standard_normal(S.shape)
    want = fd_directional(lambda xs: float(np.dot(cot, price(*xs))), (S, I), {"S": 0},
                          {"S": d})
    assert inner(whole, d) == pytest.approx(want, rel=1e-7, abs=fd_atol(1e3))


def test_the_length_follows_an_int_argument():
    """One specialisation for every trip count: the array's length is symbolic."""
    k = kernel(price)
    S = rng_for("lengths").uniform(58, 62, 7)
    for n in (0, 1, 4):
        assert k(S, n) == price(S, n)
    (spec,) = k.specializations
    assert spec.sdfg.containers[next(iter(spec.sdfg.lists))].shape[0].free_symbols


# ---- what stays refused ----------------------------------------------------------------------
def under_an_if(x, n):
    xs = []
    for i in range(n):
        if x[i] > 0.5:
            xs.append(x[i])
    return np.sum(xs)


def in_a_while(x, n):
    xs = []
    s = 0.0
    while s < 3.0:
        s += x[0] + 0.1
        xs.append(s)
    return np.sum(xs)


def with_a_break(x, n):
    xs = []
    for i in range(n):
        xs.append(x[i])
        if x[i] > 0.9:
            break
    return np.sum(xs)


def triangular(x, n):
    xs = []
    for i in range(n):
        for j in range(i):
            xs.append(x[j])
    return np.sum(xs)


def repeated(x, n):
    xs = []
    for i in range(n):
        xs.append(x[i])
    return np.sum(xs * 2)


def aliased(u, n):
    hist = []
    for t in range(n):
        hist.append(u)
        u[1:] += 0.5 * u[:-1]
    return np.array(hist)


def reshaped(x, n):
    xs = []
    xs.append(x)
    xs.append(x[1:])
    return np.array(xs)


def passed_on(x, n):
    xs = []
    for i in range(n):
        xs.append(x[i])
    return _total(xs)


def _total(values):
    return np.sum(values)


def stored_row(x, n):
    hist = []
    for i in range(n):
        hist.append(x * i)
    hist[0] = x
    return np.sum(hist)


def extended(x, n):
    xs = []
    for i in range(n):
        xs.append(x[i])
    xs.extend([1.0])
    return np.sum(xs)


def _line(f, text):
    lines, first = inspect.getsourcelines(f)
    return first + next(k for k, s in enumerate(lines) if text in s)


REFUSED = [(under_an_if, "xs.append(x[i])", r"under an `if`.*keep\[i\] = cond"),
           (in_a_while, "xs.append(s)", r"`while` loop"),
           (with_a_break, "xs.append(x[i])", r"`break`, `continue` or `return`"),
           (triangular, "xs.append(x[j])", r"depends on the loop variable 'i'"),
           (repeated, "xs * 2", r"list grown by append.*np.array\(xs\)"),
           (aliased, "hist.append(u)", r"holds 'u' itself.*u.copy\(\)"),
           (reshaped, "xs.append(x[1:])", r"have one shape"),
           (passed_on, "_total(xs)", r"list grown by append"),
           (stored_row, "hist[0] = x", r"elements of 'hist' are arrays.*np.array\(hist\)"),
           (extended, "xs.extend", r"takes `append` only")]


@pytest.mark.parametrize("f, text, message", REFUSED, ids=[c[0].__name__ for c in REFUSED])
def test_refused_naming_the_line(f, text, message):
    x = rng_for(f.__name__).random(6)
    with pytest.raises(KernelSyntaxError, match=rf"test_lists.py:{_line(f, text)}:.*{message}"):
        kernel(f)(x, 4)
