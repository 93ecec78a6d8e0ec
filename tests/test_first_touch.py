"""Adjoints the reverse sweep assigns first (autodiff/first_touch.py): their buffers
start uninitialised, so every element must be written before it is read."""
import numpy as np
import pytest

from adjoint import float64, grad, kernel, symbol, vjp
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
    assert "__g_y" in adj.assigned_first
    first = _sums_into(adj, "__g_y")[0]
    assert first.wcr is None                    # an assignment, no zeros needed
    for _ in range(3):                          # pooled buffers come back dirty
        got = grad(squares, wrt="x")(x, np.zeros(7))
        assert np.allclose(got, 2 * np.sin(x) * np.cos(x), rtol=1e-12)


def test_a_sum_over_part_of_an_array_keeps_the_zeros():
    """Element 0 of y gets nothing from the sum: its adjoint must be zero, not whatever
    the uninitialised buffer held."""
    x = rng_for("part").random(9)
    assert "__g_y" not in _adjoint(squares_of_a_part, (x, np.zeros(9))).assigned_first
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
