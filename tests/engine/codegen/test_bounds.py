"""Index bounds: proven statically where possible, checked once per call otherwise."""
import numpy as np
import pytest
import sympy as sp

from adjoint import BoundsError, float64, kernel, symbol
from adjoint.analysis.bounds import index_checks, minimum
from adjoint.sdfg.nodes import LoopRegion

N = symbol("N")


@kernel
def shifted(A: float64[N]) -> float:
    for i in range(N):
        A[i] = A[i + 1] * 2.0          # reads past the end on the last iteration
    return A[0]


@kernel
def stencil(A: float64[N, N], B: float64[N, N]):
    for i in range(1, N - 1):
        for j in range(i, N - 1):
            B[i, j] = A[i - 1, j + 1] + A[i + 1, j - 1]


@kernel
def strided(A, n):
    s = 0.0
    for i in range(0, n, n // 3):
        s += A[i]
    return s


@pytest.mark.c_source
def test_affine_accesses_are_proven_for_all_sizes():
    stencil(np.zeros((5, 5)), np.zeros((5, 5)))
    spec = stencil.specializations[0]
    assert spec.forward.checks == ()
    assert "every index proven in bounds" in stencil.explain()
    assert "if (" not in spec.forward.source.split("sc_entry0(")[1].split("sc_run(")[0]


def test_unprovable_access_raises_naming_the_line():
    with pytest.raises(BoundsError) as err:
        shifted(np.zeros(6))
    line = shifted.__wrapped__.__code__.co_firstlineno + 3
    assert f":{line}: A[i + 1]: index i + 1 can reach the size N" in str(err.value)
    assert "N=6" in str(err.value)


def test_runtime_checks_are_exact_not_conservative():
    A = np.arange(10.0)
    assert strided(A.copy(), 9) == strided.py_func(A.copy(), 9)
    with pytest.raises(BoundsError, match="range"):
        strided(A.copy(), 2)              # n // 3 == 0: Python raises ValueError too
    with pytest.raises(BoundsError, match="can reach the size"):
        strided(A.copy(), 14)        # visits 0, 4, 8, 12


def test_minimum_eliminates_triangular_loops():
    i, j = sp.symbols("i j", integer=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    outer = LoopRegion(i, sp.Integer(0), n, sp.Integer(1), None)
    inner = LoopRegion(j, sp.Integer(0), i, sp.Integer(1), None)
    assert minimum(j - 0, [outer, inner]) == 0
    assert sp.simplify(minimum(n - 1 - j, [outer, inner]) - 1) == 0   # j <= i - 1 <= n - 2
    assert minimum(i * j, [outer, inner]) is None                   # not affine: give up


def test_checks_list_only_unproven_conditions():
    spec = shifted.specialize((np.zeros(3),))
    checks = index_checks(spec.sdfg)
    assert [c.message for c in checks] == [
        "A[i + 1]: index i + 1 can reach the size N of dimension 0",
        "A[0]: index 0 can reach the size N of dimension 0"]      # N may be 0
    with pytest.raises(BoundsError, match="A\\[0\\]"):
        kernel(shifted.__wrapped__)(np.zeros(0))


def test_the_quick_sign_query_agrees_with_simplification():
    from adjoint.analysis.bounds import _nonnegative
    n, m = sp.Symbol("n", integer=True, positive=True), sp.Symbol("m", integer=True)
    for bound in (n - 1, n - 2, 2 * n - n - 1, sp.Max(n, 3) - 3, sp.floor(n / 2) * 2 - n + 1,
                  (n + 1) ** 2 - n ** 2 - 2 * n - 1, m - m, -n, sp.Min(n, 4) - 5):
        # never weaker than simplification; cases on Min/Max prove Max(n, 3) - 3 >= 0 too
        assert _nonnegative(bound) >= bool(sp.simplify(bound).is_nonnegative), bound
    assert _nonnegative(sp.Max(n, 3) - 3) and not _nonnegative(sp.Min(n, 4) - 5)
    assert _nonnegative(n - sp.Min(3, n)) and not _nonnegative(n - sp.Max(3, n))


def guarded_gather(x, idx, y):
    """NPBench scattering_self_energies: ``E - w`` under its guard, beside an index array."""
    s = 0.0
    for e in range(x.shape[0]):
        for w in range(y.shape[0]):
            for a in range(idx.shape[0]):
                if e - w >= 0:
                    s += x[e - w, idx[a]] * y[w]
    return s


def test_a_guarded_index_beside_an_index_array_is_checked_under_its_guard():
    x, idx, y = np.arange(12.0).reshape(4, 3), np.array([2, 0, 1]), np.linspace(1.0, 2.0, 3)
    assert kernel(guarded_gather)(x, idx, y) == pytest.approx(guarded_gather(x, idx, y))
    with pytest.raises(BoundsError, match="idx"):
        kernel(guarded_gather)(x, np.array([0, 3]), y)
