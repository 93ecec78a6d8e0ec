"""The shared dependence analysis (adjoint/analysis/dependence.py) and the IR transformer
(adjoint/sdfg/visit.py): the answers checked against brute force over small iteration
spaces, the accesses of real kernels, and the layering that keeps them import-cycle free."""
import ast
import itertools
import pathlib

import numpy as np
import pytest
import sympy as sp

from adjoint import float64, grad, int64, kernel, options, symbol
from adjoint.analysis.dependence import (ANY, NEVER, READ, SUM, WRITE, Scope, countable,
                                         counted, distance, forward_only, injective,
                                         linear_form, other_lattice, same_iteration, stride)
from adjoint.sdfg import to_text, validate
from adjoint.sdfg.nodes import (LoopRegion, Memlet, Sequence, State, Tasklet, loops, regions,
                                walk)
from adjoint.sdfg.visit import Transformer

N = symbol("N")
M = symbol("M")
I, J = sp.Symbol("i", integer=True), sp.Symbol("j", integer=True)
R = range(-3, 4)            # the values each variable takes in the brute force

# indices a*i + b*j + c as coefficient triples: the brute force evaluates these, the
# analysis sees the sympy expressions
TERMS = [(1, 0, 0), (1, 0, 1), (1, 0, -2), (-1, 0, 3), (2, 0, 0), (2, 0, 1), (0, 1, 0),
         (1, 1, 0), (1, -1, 0), (0, 0, 2), (2, 1, 1), (3, 0, 0)]


def _expr(term):
    a, b, c = term
    return a * I + b * J + c


def _value(term, i, j):
    a, b, c = term
    return a * i + b * j + c


# pairs of 2-D subsets, a sample of all (the brute force takes a while per pair)
PAIRS = list(itertools.product(itertools.product(TERMS, repeat=2), repeat=2))[::37]


def _points():
    return itertools.product(R, repeat=4)


def test_same_iteration_is_sound():
    """Where two 2-D accesses are said to meet only in one iteration of the loop over i
    (j an inner variable), no two points with different i name one element."""
    told = 0
    for x, y in PAIRS:
        if not same_iteration(tuple(map(_expr, x)), tuple(map(_expr, y)), (I,), {J}):
            continue
        told += 1
        for i1, j1, i2, j2 in _points():
            assert i1 == i2 or [_value(t, i1, j1) for t in x] != \
                [_value(t, i2, j2) for t in y], (x, y, i1, j1, i2, j2)
    assert told > 10


def test_distance_is_exact_where_it_tells():
    """``distance`` over both variables: NEVER means no two points name one element, a
    tuple d that they do only at points u, w with u - w = d."""
    told = 0
    for x, y in PAIRS:
        forms = [tuple(linear_form(_expr(t), (I, J)) for t in s) for s in (x, y)]
        d = distance(*forms, 2)
        if d is ANY:
            continue
        told += 1
        for i1, j1, i2, j2 in _points():
            meet = [_value(t, i1, j1) for t in x] == [_value(t, i2, j2) for t in y]
            assert not meet or (d is not NEVER and (i1 - i2, j1 - j2) == d), (x, y, d)
    assert told > 10


def test_other_lattice_is_sound():
    """Indices on other lattices (``2p`` and ``2q + 1``) never meet, whatever the values
    of the map's parameters (i for x, j for y here: a store's write and its read)."""
    told = 0
    for x, y in itertools.product(TERMS, repeat=2):
        x, y = (x[0] + x[1], 0, x[2]), (0, y[0] + y[1], y[2])     # one parameter each
        if other_lattice(_expr(x), _expr(y), (I, J)):
            told += 1
            span = range(-12, 13)
            assert {_value(x, i, 0) for i in span}.isdisjoint({_value(y, 0, j) for j in span})
    assert told > 3


def test_index_forms():
    assert stride(2 * I + N - 1, (I, J)) == (I, 2, N - 1)
    assert stride(I + J, (I, J)) is None and stride(N, (I, J)) is None
    assert stride(I * I, (I,)) is None
    assert injective((I, J + 1), (I, J)) and not injective((I + J,), (I, J))
    assert other_lattice(2 * I, 2 * J + 1, (I, J)) and not other_lattice(2 * I, 4 * J + 2, (I, J))


def _brute_forward(order, upward):
    """Whether, running the iterations over R in order (upwards or not), every two
    accesses of different iterations naming one element (one of them a write) come in
    the body in the order of their iterations: ``order`` holds (position, term, writes)."""
    iterations = list(R) if upward else list(reversed(R))
    events = [(k, position, _value(term, i, 0), writes)
              for k, i in enumerate(iterations) for position, term, writes in order]
    return all(p1 < p2 for (k1, p1, e1, w1), (k2, p2, e2, w2) in itertools.permutations(events, 2)
               if k1 < k2 and e1 == e2 and (w1 or w2))


@pytest.mark.parametrize("upward", [True, False])
@pytest.mark.parametrize("terms", [((1, 0, 0), (1, 0, -1)), ((1, 0, 0), (1, 0, 1)),
                                   ((1, 0, 0), (1, 0, 0)), ((2, 0, 0), (2, 0, 1)),
                                   ((1, 0, 0), (-1, 0, 0)), ((1, 0, 2), (1, 0, 0))])
def test_forward_only_agrees_with_enumeration(terms, upward):
    """``g[a] += x`` then ``g[b] = 0`` in one body: forward_only says yes only when running
    the iterations in order keeps every cross-iteration dependence lexically forward."""
    first, second = terms
    x = sp.Symbol("x", real=True)
    body = [Tasklet(((x, Memlet("x", (I,))),), ((Memlet("g", (_expr(first),), "sum"), x),)),
            Tasklet((), ((Memlet("g", (_expr(second),)), sp.Integer(0)),))]
    order = [(1, first, True), (3, second, True)]
    if forward_only(I, body, {"g"}, upward):
        assert _brute_forward(order, upward)


# ---- accesses of kernels -------------------------------------------------------------
@kernel
def csr_rows(ptr: int64[N], col: int64[M], val: float64[M], x: float64[N],
             y: float64[N]) -> float:
    for i in range(N - 1):
        s = 0.0
        for k in range(ptr[i], ptr[i + 1]):
            s += val[k] * x[col[k]]
        if s > 0.0:
            y[i] = s
    return np.sum(y)


def _csr_sdfg():
    ptr = np.array([0, 1, 3, 3], dtype=np.int64)
    col = np.array([0, 2, 1], dtype=np.int64)
    return csr_rows.specialize((ptr, col, np.ones(3), np.ones(4), np.zeros(4))).sdfg


def test_scope_sees_loads_bounds_and_flags():
    """The accesses of the row loop: the index array ``col`` loaded in an index, ``ptr``
    in the inner loop's bounds, the flag of the ``if`` read by its condition; the
    written containers in the order they are first written."""
    sdfg = _csr_sdfg()
    row = next(loops(sdfg.body))
    scope = Scope(row.body, sdfg.containers)
    loads = {(a.data, a.subset) for a in scope.accesses if a.data in ("ptr", "col")}
    k = next(loops(row.body)).var
    assert ("col", (k,)) in loads
    assert {("ptr", (row.var,)), ("ptr", (row.var + 1,))} <= loads
    flags = [a for a in scope.accesses if a.node is None and a.subset == ()]
    assert flags and all(sdfg.containers[a.data].is_scalar and a.kind == READ for a in flags)
    assert scope.written[0] == "s" and "y" in scope.written
    assert {a.kind for a in scope.by_data["y"]} == {WRITE}
    # the row loop writes y[i] only: no two rows meet there
    assert next(scope.meeting("y", (row.var,)), None) is None
    # as reductions, ``s += ...`` adds into s without reading it
    assert SUM in Scope(row.body, sdfg.containers, reductions=True).kinds("s")


@kernel
def loop_kinds(x: float64[N], n: int64[N]) -> float:
    s = 0.0
    for i in range(N):                 # counted
        s += x[i]
    for i in range(N):                 # ends early
        if x[i] > 2.0:
            break
        s += x[i]
    for i in range(n[0]):              # a bound from data
        s += 1.0
    while s > 1.0:                     # no range
        s = s * 0.5
    return s


def test_counted_and_countable():
    sdfg = loop_kinds.specialize((np.ones(3), np.array([2, 0, 0]))).sdfg
    found = [r for r, context in regions(sdfg.body) if isinstance(r, LoopRegion) and not context]
    assert [counted(r) for r in found] == [True, False, True, False]
    assert [countable(r) for r in found] == [True, True, False, False]


@kernel
def last_value(x: float64[N], y: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s = x[i] * 2.0              # written first in every iteration ...
        y[i] = s * s
    return s + np.sum(y)            # ... but read after the loop: not private


@pytest.mark.parametrize("device", ["cpu", "cuda-emulated"])
def test_a_scalar_read_after_its_loop_keeps_the_last_value(device, monkeypatch):
    """The loop is parallel on y, but s is not private to its iterations (a thread's own
    copy would leave the s the return reads unchanged): OpenMP and CUDA ask the same
    ``private_scalar``."""
    if device != "cpu":
        monkeypatch.setattr(options, "device", "cuda")
        monkeypatch.setattr(options, "cuda_emulation", True)
    x = np.random.default_rng(3).random(20)
    np.testing.assert_allclose(last_value(x, np.zeros(20)),      # np.sum: within rounding
                               last_value.py_func(x, np.zeros(20)), rtol=1e-12)
    want = 8 * x
    want[-1] += 2
    (got,) = grad(last_value, ["x"])(x, np.zeros(20))
    np.testing.assert_allclose(got, want, rtol=1e-12)


# ---- the transformer -----------------------------------------------------------------
class _Copy(Transformer):
    pass


class _Twice(Transformer):
    """Every top-level loop twice: a list returned for a loop is spliced in."""

    def loop(self, loop):
        if self.loops:
            return super().loop(loop)
        return [super().loop(loop), super().loop(loop)]


def test_transformer_rebuilds_regions_and_keeps_nodes():
    """The base transformer rebuilds every region (new objects, same text) around the
    same dataflow nodes; the SDFG stays valid."""
    sdfg = _csr_sdfg()
    copy = sdfg.replace(body=_Copy().region(sdfg.body))
    validate(copy)
    assert to_text(copy) == to_text(sdfg)
    old = {id(r) for r, _ in regions(sdfg.body)}
    assert not old & {id(r) for r, _ in regions(copy.body)}
    assert [n for n, _ in walk(copy.body)] == [n for n, _ in walk(sdfg.body)]


def test_transformer_splices_lists_and_tracks_loops():
    body = Sequence((LoopRegion(I, sp.Integer(0), N, sp.Integer(1), Sequence((
        LoopRegion(J, sp.Integer(0), N, sp.Integer(1), Sequence((State(()),))),))),))
    twice = _Twice().region(body)
    assert len(twice.elements) == 2
    assert all(len(list(loops(e))) == 2 for e in twice.elements)


def test_the_shared_modules_import_only_the_ir():
    """dependence.py and visit.py sit just above the IR: importing anything else from the
    engine (options, codegen, a pass) could close an import cycle."""
    root = pathlib.Path(__file__).resolve().parents[3] / "adjoint"
    for path in (root / "analysis" / "dependence.py", root / "sdfg" / "visit.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.module.split(".")[-1] == "nodes", f"{path.name}: {node.module}"
