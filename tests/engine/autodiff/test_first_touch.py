"""Adjoints the reverse sweep assigns first (autodiff/first_touch.py): their buffers
start uninitialised, so every element must be written before it is read."""
import numpy as np
import pytest

from adjoint import float64, grad, kernel, options, symbol, vjp
from adjoint.library.matmul import MatMul
from adjoint.sdfg.nodes import MapScope, walk
from kernel_testing import rng_for

N = symbol("N")


@kernel
def squares(x: float64[N], y: float64[N]) -> float:
    y[:] = np.sin(x)
    return np.sum(y * y)


@kernel
def squares_of_a_part(x: float64[N], y: float64[N]) -> float:
    y[:] = np.sin(x)
    return np.sum(y[1:] * y[1:])


def _adjoint(k, args, outputs=frozenset({"__return"})):
    spec = k.specialize(args)
    return spec.backward(frozenset({"x", "y"}), frozenset(outputs)).adjoint


def _sums_into(adj, name):
    return [m for r in adj.regions for node, _ in walk(r.reverse.body)
            if isinstance(node, MapScope) for t in node.body for m, _ in t.outputs
            if m.data == name]


def test_the_sum_of_squares_assigns_the_adjoint_of_a_whole_array():
    x = rng_for("first").random(7)
    adj = _adjoint(squares, (x, np.zeros(7)))
    assert adj.assigned_first["__g_y"] == ((0, N),)
    first = _sums_into(adj, "__g_y")[0]
    assert first.wcr is None                    # an assignment, no zeros needed
    for _ in range(3):                          # pooled buffers come back dirty
        got = grad(squares, wrt="x")(x, np.zeros(7))
        assert np.allclose(got, 2 * np.sin(x) * np.cos(x), rtol=1e-12)


def test_a_sum_over_part_of_an_array_zeroes_the_rest():
    """Element 0 of y gets nothing from the sum: its adjoint must be zero, not whatever
    the uninitialised buffer held."""
    x = rng_for("part").random(9)
    assert _adjoint(squares_of_a_part, (x, np.zeros(9))).assigned_first["__g_y"] == ((1, N),)
    for _ in range(3):                          # pooled buffers come back dirty
        g = grad(squares_of_a_part, wrt="x")(x, np.zeros(9))
        assert g[0] == 0.0
        assert np.allclose(g[1:], 2 * np.sin(x[1:]) * np.cos(x[1:]), rtol=1e-12)


@pytest.mark.parametrize("seed", [0.0, 1.5])
def test_seeded_cotangents_are_not_overwritten(seed):
    """vjp seeds the cotangent of the written array y before the reverse sweep: the
    sum into y's adjoint must add to it."""
    x = rng_for("seeded").random(5)
    outs, pullback = vjp(squares, x, np.zeros(5))
    got = pullback({"return": 1.0, "y": np.full(5, seed)})["x"]
    assert np.allclose(got, (2 * np.sin(x) + seed) * np.cos(x), rtol=1e-12)


@kernel
def stepped(x: float64[N], y: float64[N], T: int) -> float:
    for i in range(1, N - 1):           # the kernel's own loop: a checkpointing segment
        y[i] = x[i] * x[i] + y[i]
    for t in range(T):
        y[1:-1] = 0.5 * y[1:-1] + 0.25 * (y[2:] + y[:-2])
    return np.sum(y * y)


@pytest.mark.parametrize("policy", ["store_all", "recompute_all", "revolve"])
def test_a_segment_loop_assigns_its_box_in_pieces(policy):
    """The reverse of the first loop is the first to touch x's adjoint, over [1, N - 1):
    checkpointing runs it in segments, each iteration once; the ends stay zero."""
    x, y = rng_for("stepped").random(23), rng_for("stepped y").random(23)
    assert _adjoint(stepped, (x, y, 3)).assigned_first["__g_x"] == ((1, N - 1),)
    want = None
    for _ in range(2):
        got = grad(stepped, wrt="x", policy=policy, snapshots=2)(x, y.copy(), 3)
        assert got[0] == 0.0 and got[-1] == 0.0
        if want is None:
            want = grad(stepped, wrt="x", policy="store_all")(x, y.copy(), 3)
        np.testing.assert_allclose(got, want, rtol=1e-13)
    h = 1e-6
    fd = np.array([(stepped(x + h * e, y.copy(), 3) - stepped(x - h * e, y.copy(), 3)) / (2 * h)
                   for e in np.eye(23)])
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-9)


@kernel
def lower_squares(x: float64[N, N], y: float64[N]) -> float:
    for i in range(N):
        for j in range(i + 1):
            y[i] += x[i, j] * x[i, j]
    return np.sum(y * y)


def test_a_triangular_nest_is_no_box():
    """The first sums into x's adjoint cover the lower triangle: no box, zeros kept (the
    upper triangle's gradient is exactly zero)."""
    x = rng_for("lower").random((6, 6))
    assert "__g_x" not in _adjoint(lower_squares, (x, np.zeros(6))).assigned_first
    for _ in range(2):
        g = grad(lower_squares, wrt="x")(x, np.zeros(6))
        assert np.all(g[np.triu_indices(6, 1)] == 0.0)
        y = np.sum(np.tril(x) ** 2, axis=1)
        np.testing.assert_allclose(g, np.tril(4 * y[:, None] * x), rtol=1e-12)


@kernel
def two_products(A: float64[N, N], x: float64[N], w: float64[N]) -> float:
    y = A @ x
    z = A @ w
    return np.sum(y * y) + np.sum(z * z)


@pytest.mark.parametrize("blas", [True, False], ids=["blas", "loops"])
def test_an_outer_products_adjoint_is_assigned_then_added(blas, monkeypatch):
    """The reverse of ``z = A @ w`` runs first and is the first to touch A's adjoint: its
    outer product assigns all of it (no zeros, one pass writing it instead of dger's read
    and write); the one of ``y = A @ x`` then adds to it. Pooled buffers come back dirty
    (N = 200: pooled, not framed)."""
    monkeypatch.setattr(options, "blas", blas)
    rng = rng_for("outer")
    A, x, w = rng.random((200, 200)), rng.random(200), rng.random(200)
    spec = two_products.specialize((A, x, w))
    adj = spec.backward(frozenset({"A", "x", "w"}), frozenset({"__return"})).adjoint
    assert adj.assigned_first["__g_A"] == ((0, N), (0, N))
    products = [n for r in adj.regions for n, _ in walk(r.reverse.body)
                if isinstance(n, MatMul) and n.out == "__g_A"]
    assert [p.accumulate for p in products] == [False, True]
    want = 2 * np.outer(A @ x, x) + 2 * np.outer(A @ w, w)
    for _ in range(3):
        got = grad(two_products, wrt="A")(A, x, w)
        np.testing.assert_allclose(got, want, rtol=1e-12)
