"""Parallel loops around sequential loops run with their own iterations innermost
(schedule/interchange.py), elements sequential loops keep in locals (schedule/promote.py)
and an element a loop accumulates, recorded once before it (autodiff/reverse.py:
_element_snapshots): the decisions on the IR, what they print, values bit for bit those
of the kernel run as Python, where an element is read and written in one iteration
(k == i) too, and hand-derived gradients."""
import numpy as np

from adjoint import float64, grad, kernel, symbol
from adjoint.codegen import Layout, generate_module
from adjoint.schedule import schedule
from adjoint.schedule.decisions import Interchange, Promotion
from adjoint.sdfg.nodes import LoopRegion, Push, regions, walk

M, N = symbol("M"), symbol("N")


@kernel
def triangular(alpha: float, A: float64[M, M], B: float64[M, N]) -> float:
    for i in range(M):
        for j in range(N):                  # independent: each j its own column
            for k in range(i + 1, M):
                B[i, j] += A[k, i] * B[k, j]
            B[i, j] = alpha * B[i, j]
    return np.sum(B * B)


@kernel
def itself(A: float64[M, M], B: float64[M, N]):
    for i in range(M):
        for j in range(N):
            for k in range(M):              # k == i reads the element it adds into
                B[i, j] += B[k, j] * A[k, i]


@kernel
def private(A: float64[M, M], B: float64[M, N], C: float64[M, N]):
    for i in range(1, M):                   # in order: row i reads row i - 1
        for j in range(N):
            t = 0.0                         # each j its own t: an element per j
            for k in range(i):
                t += B[k, j] * A[i, k]
            C[i, j] = t + C[i - 1, j]


@kernel
def rows(A: float64[N, M], x: float64[M], y: float64[N]):
    for j in range(N):
        for k in range(M):                  # unit stride already: not interchanged
            y[j] += A[j, k] * x[k]


@kernel
def substitution(A: float64[M, M], x: float64[M]):
    for i in range(1, M):
        for k in range(i):                  # k < i: x[i] in a local
            x[i] -= A[i, k] * x[k]


@kernel
def everywhere(A: float64[M, M], x: float64[M]):
    for i in range(1, M):
        for k in range(M):                  # k == i reads x[i]: kept in memory
            x[i] -= A[i, k] * x[k]


def _args(rng, m=7, n=9):
    return 1.5, rng.standard_normal((m, m)), rng.standard_normal((m, n))


def _interchanged(sdfg):
    return [r for r, _ in regions(schedule(sdfg).body)
            if isinstance(r, LoopRegion) and r.schedule.interchange]


def _source(sdfg):
    sdfg = schedule(sdfg)
    return generate_module(Layout(sdfg.symbols, tuple(sdfg.containers.values())), [sdfg], ())


def test_the_parallel_loop_is_interchanged_and_its_pieces_are_simd_lanes():
    sdfg = triangular.specialize(_args(np.random.default_rng(0))).sdfg
    loop, = _interchanged(sdfg)
    assert str(loop.var) == "j" and isinstance(loop.schedule.interchange, Interchange)
    first, second = loop.schedule.interchange.pieces
    assert isinstance(first, LoopRegion) and str(first.var) == "k"
    assert not isinstance(second, LoopRegion)      # the statement after the loop
    source = _source(sdfg)
    k = source.index("for (int64_t ki_k")
    assert source.index("#pragma omp simd", k) < source.index("for (int64_t ki_j", k)


def test_interchanged_values_are_python_s_bit_for_bit():
    rng = np.random.default_rng(1)
    for m, n in ((7, 9), (1, 3), (12, 5)):
        alpha, A, B = _args(rng, m, n)
        want, got = B.copy(), B.copy()
        triangular.py_func(alpha, A, want)
        triangular(alpha, A, got)           # (the loss: NumPy's pairwise sum)
        assert np.array_equal(got, want)
        want, got = B.copy(), B.copy()
        itself.py_func(A, want)
        itself(A, got)
        assert np.array_equal(got, want)
    assert _interchanged(itself.specialize((A, B)).sdfg)


def test_scalars_each_iteration_keeps_are_an_element_each():
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((5, 5)), rng.standard_normal((5, 600))   # three strips
    loop, = _interchanged(private.specialize((A, B, B.copy())).sdfg)
    assert [name for name, _ in loop.schedule.interchange.own] == ["t"]
    assert "sc_x_t[" in _source(private.specialize((A, B, B.copy())).sdfg)
    want, got = B.copy(), B.copy()
    private.py_func(A, B, want)
    private(A, B, got)
    assert np.array_equal(got, want)


def test_a_loop_already_unit_stride_is_not_interchanged():
    B = np.random.default_rng(2).standard_normal((5, 6))
    assert not _interchanged(rows.specialize((B.T.copy(), np.ones(5), np.zeros(6))).sdfg)


def _promoted(sdfg):
    return [p for r, _ in regions(schedule(sdfg).body) if isinstance(r, LoopRegion)
            for p in r.schedule.promoted]


def test_an_element_no_other_access_can_name_is_kept_in_a_local():
    rng = np.random.default_rng(4)
    A, x = rng.standard_normal((9, 9)), rng.standard_normal(9)
    kept, = _promoted(substitution.specialize((A, x)).sdfg)
    assert isinstance(kept, Promotion) and kept.writes and kept.element.data == "x"
    assert "sc_reg0" in _source(substitution.specialize((A, x)).sdfg)
    assert not _promoted(everywhere.specialize((A, x)).sdfg)    # x[k] may be x[i]
    for k in (substitution, everywhere):
        want, got = x.copy(), x.copy()
        k.py_func(A, want)
        k(A, got)
        assert np.array_equal(got, want)


def test_the_reverse_loop_is_interchanged_and_its_gradient_is_the_hand_derived_one():
    """d/dB0 of sum(B^2) with B = alpha (I + T) B0, T[i, k] = A[k, i] for k > i."""
    alpha, A, B = _args(np.random.default_rng(3))
    spec = triangular.specialize((alpha, A, B))
    regions_ = spec.backward(frozenset({"B"}), frozenset({"__return"})).adjoint.regions
    assert any(_interchanged(r.reverse) for r in regions_)
    L = alpha * (np.eye(len(A)) + np.triu(A.T, 1))
    want = 2 * L.T @ (L @ B)
    got = grad(triangular, wrt="B")(alpha, A, B.copy())
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


def test_an_accumulated_element_is_recorded_once_before_its_loop():
    """trmm's record pushes B[i, j] before the loop over k adding into it, not at each
    addition (no reverse partial there reads B[i, j]: B[k, j] has k > i), and its
    reverse pops it after that loop's reverse: the gradient is the hand-derived one."""
    alpha, A, B = _args(np.random.default_rng(5))
    spec = triangular.specialize((alpha, A, B))
    adjoint = spec.backward(frozenset({"alpha", "A", "B"}), frozenset({"__return"})).adjoint
    inner = [r for region in adjoint.regions for r, _ in regions(region.record.body)
             if isinstance(r, LoopRegion) and str(r.var) == "k"]
    assert inner and not any(isinstance(n, Push) for k in inner for n, _ in walk(k.body))
    L = alpha * (np.eye(len(A)) + np.triu(A.T, 1))
    out = L @ B
    g_alpha, g_A, g_B = grad(triangular, wrt=("alpha", "A", "B"))(alpha, A, B.copy())
    np.testing.assert_allclose(g_B, 2 * L.T @ out, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(g_A, np.triu(2 * alpha * out @ B.T, 1).T, rtol=1e-13,
                               atol=1e-13)
    np.testing.assert_allclose(g_alpha, np.sum(2 * out * out) / alpha, rtol=1e-13)
