"""IR node identity: a statement written twice is two statements.

Statements and regions compare by identity, memlets and containers by value
(adjoint/sdfg/nodes.py). When nodes compared by value, two equal statements on one
line (equal text, line and operands) collapsed into one in reverse mode's sets: the
second recorded nothing and ``twice``'s gradient came out as [6.44, 0.67, 14.85]
instead of 4 x**3 = [5.32, 1.37, 8.79]. References: the kernels run as Python.
"""
import copy
import pickle
from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from adjoint import float64, grad, jvp, kernel, symbol
from adjoint import pipeline
from adjoint.autodiff import differentiate
from adjoint.sdfg import to_text
from adjoint.sdfg.nodes import (SDFG, ConditionalRegion, Container, Guard, LoopRegion,
                                MapScope, Memlet, Pop, Push, Sequence, State, Tasklet)
from kernel_testing import (arg_names, assert_arrays_close, fd_directional, fd_gradient,
                            random_direction, rng_for, run_reference)

N = symbol("N")


@kernel
def twice(x: float64[N]) -> float:
    for i in range(N):
        x[i] = x[i] * x[i]; x[i] = x[i] * x[i]     # noqa: E702
    return np.sum(x)


@kernel
def twice_slices(x: float64[N]) -> float:
    x[:] = x * x; x[:] = x * x                     # noqa: E702  (fused: one map, two tasklets)
    return np.sum(x)


@kernel
def twice_nest(A: float64[N, N], T: int) -> float:
    for t in range(T):
        for i in range(N):
            for j in range(N):
                A[i, j] = np.sin(A[i, j]) * A[i, j]; A[i, j] = np.sin(A[i, j]) * A[i, j]  # noqa
    return np.sum(A * A)


@kernel
def twice_scalar(x: float64[N]) -> float:
    s = 1.0
    for i in range(N):
        s = s * x[i] + 0.5; s = s * x[i] + 0.5     # noqa: E702  (identical scalar pushes)
    return s


@kernel
def two_loops(x: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(N):
            x[i] = np.sin(x[i]) * x[i]
        for i in range(N):
            x[i] = np.sin(x[i]) * x[i]
    return np.sum(x)


def _args(k):
    rng = rng_for("identity", k.__name__)
    if k is twice_nest:
        return 0.5 + 0.5 * rng.random((4, 4)), 2
    if k is two_loops:
        return 0.5 + rng.random(5), 2
    return 0.5 + rng.random(5),


def _statements(region):
    """Every statement and region object of a control-flow tree, repeats included."""
    yield region
    if isinstance(region, State):
        for node in region.nodes:
            yield node
            yield from node.body if isinstance(node, MapScope) else ()
    elif isinstance(region, Sequence):
        for e in region.elements:
            yield from _statements(e)
    elif isinstance(region, LoopRegion):
        yield from _statements(region.body)
    elif isinstance(region, ConditionalRegion):
        for _, body in region.branches:
            yield from _statements(body)


def _assert_each_node_once(sdfg):
    objects = list(_statements(sdfg.body))
    assert len(set(map(id, objects))) == len(objects), f"a node occurs twice in {sdfg.name}"


def _check(k, args):
    """Forward, gradient (central differences of the Python run) and jvp of ``k``."""
    names = arg_names(k)
    index_of = {n: i for i, n in enumerate(names)}
    wrt = names[0]
    want, ref = run_reference(k, args)
    work = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
    assert float(k(*work)) == pytest.approx(want, rel=1e-12)
    assert_arrays_close(work[0], ref[0], 1e-12, what="forward")
    loss = lambda a: run_reference(k, a)[0]            # noqa: E731
    assert_arrays_close(grad(k, wrt=wrt)(*args), fd_gradient(loss, args, index_of, wrt), 1e-6,
                        what="gradient")
    dx = {wrt: random_direction(rng_for("identity-jvp", k.__name__), args[0])}
    _, dots = jvp(k, args, dx)
    assert dots["return"] == pytest.approx(fd_directional(loss, args, index_of, dx),
                                           rel=1e-6, abs=1e-9)
    spec = k.specialize(args)
    adj = spec.backward(frozenset({wrt}), frozenset({"__return"})).adjoint
    for sdfg in [spec.sdfg, spec.tangent(frozenset({wrt})).sdfg] + [
            s for r in adj.regions for s in (r.forward, r.record, r.reverse)]:
        _assert_each_node_once(sdfg)


def test_statements_compare_by_identity_values_by_value():
    i, c = sp.Symbol("i", integer=True), sp.Symbol("__in0", real=True)
    m = Memlet("x", (i,))
    t = Tasklet(((c, m),), ((m, c * c),), 3)
    state = State((t, Push(m, 3), Pop(m, 3)))
    loop = LoopRegion(i, sp.Integer(0), sp.Integer(4), sp.Integer(1), Sequence((state,)), 2)
    nodes = [t, MapScope((i,), ((0, 4, 1),), (t,), 3), Push(m, 3), Pop(m, 3), state,
             Sequence((state,)), loop, ConditionalRegion(((sp.Eq(i, 0), Sequence()),), 2),
             SDFG("k", (), {}, (), Sequence((loop,)))]
    for node in nodes:
        twin = copy.deepcopy(node)                      # equal text, line and operands
        assert twin != node and len({node, twin}) == 2, type(node).__name__
    for value in (m, Container("x", np.dtype(np.float64), (4,)), Guard(sp.Eq(i, 0))):
        assert copy.deepcopy(value) == value and len({value, copy.deepcopy(value)}) == 1


@pytest.mark.parametrize("k", [twice, twice_slices, twice_nest, twice_scalar],
                         ids=lambda k: k.__name__)
def test_repeated_identical_statements(k):
    args = _args(k)
    if k is twice:                                      # the numbers
        x = np.array([1.1, 0.7, 1.3])
        np.testing.assert_allclose(grad(twice, wrt="x")(x), 4 * x ** 3, rtol=1e-12)
    _check(k, args)


def test_identical_loops_in_one_time_step(monkeypatch):
    """Two inner loops equal in every field (the second a deep copy of the first, so
    equal lines too), in one time loop: both are loops of their own and each write
    records what its reverse reads. (The frontend renames the loops of callees apart, so
    only a pass could make such twins; here the test does.)"""
    parse = pipeline.parse

    def twins(src, name, types, *sizes):
        sdfg = parse(src, name, types, *sizes)
        if name != "two_loops":
            return sdfg
        time, *rest = sdfg.body.elements
        first, _ = time.body.elements
        body = Sequence((first, copy.deepcopy(first)))
        return sdfg.replace(body=Sequence((replace(time, body=body), *rest)))
    monkeypatch.setattr(pipeline, "parse", twins)
    monkeypatch.setattr(pipeline, "cached", lambda *key_compute: key_compute[-1]())  # no disk
    args = _args(two_loops)
    spec = two_loops.specialize(args)
    a, b = spec.sdfg.body.elements[0].body.elements
    assert a is not b and to_text(spec.sdfg.replace(body=a)) == to_text(
        spec.sdfg.replace(body=b)) and a.line == b.line
    _check(two_loops, args)


def test_a_pickled_sdfg_differentiates_as_the_original():
    """The artefact cache pickles SDFGs: the nodes come back as new objects, each still
    once, and reverse mode (keyed on them) gives the same sweeps."""
    args = _args(twice)
    sdfg = twice.specialize(args).sdfg
    with sp.evaluate(False):                    # as runtime/artefacts.py loads them
        loaded = pickle.loads(pickle.dumps(sdfg))
    _assert_each_node_once(loaded)
    sweeps = [[to_text(s) for r in differentiate(g, frozenset({"x"}), frozenset({"__return"}), "cpu")
               .regions for s in (r.forward, r.record, r.reverse)] for g in (sdfg, loaded)]
    assert sweeps[0] == sweeps[1]
    assert sum(text.count("push x[i]") for text in sweeps[0]) == 2     # one per statement
