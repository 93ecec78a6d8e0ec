"""Tests that catch deliberate mutations of the engine (issue #19, "Tests").

Each mutation was applied to the engine alone, the test files covering the mutated
module were run, and the mutation was reverted. Where none of them failed, a test here
now does; each such test passes on the engine and fails on its mutant.

| mutation | where | caught by |
|---|---|---|
| partial x1.001 where the expression divides | partials: partial | test_gradients |
| d(a*b)/db dropped, a and b connectors | partials: partial | test_gradients, test_gather |
| pop of a scalar skipped, push kept | reverse: _Reverser.tasklet | test_gradients, test_records |
| per-iteration push and pop dropped | reverse: _record, region | test_records, test_control_flow |
| snapshot push and restore dropped | reverse: _record, region | test_records, test_corpus_more |
| push and pop inside nested loops dropped | reverse: _record_nodes, tasklet | test_gradients |
| reads after a whole write ignored | reverse: _after_full_writes | test_records, test_property |
| writes in the first reader's loop unpushed | reverse: _pushed | test_gradients |
| self-covered readers of other elements | reverse: _self_covered | test_corpus_more |
| max claimed, an earlier region reads acc | reverse: _claims | **maximum_read_before** |
| max claimed, its region read acc first | reverse: _claims | **maximum_read_before** |
| per-iteration push, not the first access | reverse: _sole_writer | **pushes_nothing** |
| an argument's first write keeps its adjoint | reverse: _first_writes | test_gradients |
| gather piece ending at hi one short | gather: _range | test_gather, test_gradients |
| edge row test one row too wide | gather: _inside | test_gather, test_gradients |
| gathered nest allowed one below the spread | gather: _rewrite | test_gather (then abort) |
| term run on a piece one past its stop | gather: _applies | test_gather (then segfault) |
| band alignment one short | gather: _joined | test_gather |
| lattice lag one short | gather: _lag | test_gather |
| bound >= -1 accepted, both sides | bounds: _access_checks | test_bounds |
| bound >= -1 accepted, lower side only | bounds: _access_checks | **index_one_before_the_start** |
| downward loop's lowest value one too high | bounds: minimum | **index_one_before_the_start** |
| c*Min(a, b) >= 0 from one case | bounds: _by_cases | **index_one_before_the_start** |
| a - c*b printed as c*b - a | printer: _print_Add | test_special_values, test_gradients |
| first-touch box one row too many | first_touch: _box | test_first_touch |
| slotted pops in the pushes' order | c: _use_slots | test_gradients, test_parallel |
| parallel tape block of pops one off | c: _taped_parallel | test_gradients (then segfault) |
| min's identity 1e300, max's -1e300 | array_reductions: IDENTITY | **infinities_and_huge_values** |
| max's identity 0 | array_reductions: IDENTITY | test_arrays |
| re-run reads a value changed before it | remat: _eligible | test_remat |
| tangent of a product drops one operand | forward: _matmul | test_tangent, test_matmul |
| revolve advances one iteration short | revolve: _reverse | test_memory |
| parallel loop check ignoring reads | parallel: _parallel_loop | test_parallel, test_gradients |

Bold: the tests of this file (by part of their name).

Found on the way: test_records' reductions were written with Python's ``max``, which is
not a reduction to the engine (``py_max`` is not ``self_update``'s ``np_maximum``): they
recorded step by step and never reached the ``_claims`` conditions they describe. They,
and the kernels below, now use ``np.maximum``.
"""
import numpy as np
import pytest

from adjoint import BoundsError, float64, grad, kernel, symbol
from kernel_testing import arg_names, assert_arrays_close, fd_gradient, run_reference

N = symbol("N")
M = symbol("M")


def assert_gradient_matches_fd(k, args, wrt):
    """Every entry of grad w.r.t. ``wrt`` against central differences of ``py_func``."""
    index_of = {n: i for i, n in enumerate(arg_names(k))}
    loss = lambda a: run_reference(k, a)[0]            # noqa: E731
    got = grad(k, wrt=wrt)(*args)
    assert_arrays_close(got, fd_gradient(loss, args, index_of, wrt), 1e-6, what=wrt)


# ---- a max reduction reversed from its final value (reverse.py: _claims) -------------------
@kernel
def read_then_maximum(x: float64[N]) -> float:
    m = x[0] * x[1]
    s = m * m                       # an earlier region's partial reads m before the loop
    for i in range(2, x.shape[0]):
        m = np.maximum(m, x[i])
    return s + m


@kernel
def read_then_maximum_inside(x: float64[N]) -> float:
    m = x[0] * x[1]
    s = m * m
    if x.shape[0] > 2:               # the loop is in the same region as the read
        for i in range(2, x.shape[0]):
            m = np.maximum(m, x[i])
    return s + m


@pytest.mark.parametrize("k", [read_then_maximum, read_then_maximum_inside],
                         ids=lambda k: k.__name__)
def test_a_maximum_read_before_its_reduction_is_restored(k):
    """``s = m * m``'s reverse needs the ``m`` from before the reduction raised it (1, not
    5): the reduction must record, not be reversed from its final value."""
    assert_gradient_matches_fd(k, (np.array([1.0, 1.0, 0.5, 5.0, 2.5]),), "x")


# ---- scalars pushed once per iteration (reverse.py: _per_iteration) ------------------------
@kernel
def square_in_steps(x: float64[N], y: float64[N]) -> float:
    for i in range(N):
        s = x[i] + 1.0               # pushes nothing: no partial reads this value ...
        s = s * s                    # ... but this one's reads the s before it
        y[i] = s + x[i]
    return np.sum(y)


def test_a_scalar_whose_first_write_pushes_nothing_is_pushed_per_write():
    """Only ``s = s * s`` pushes, and it is not the iteration's first access to ``s``:
    pushing ``s`` at the end of each iteration instead would give its reverse the
    squared value."""
    assert_gradient_matches_fd(square_in_steps, (np.linspace(0.5, 2.0, 5), np.zeros(5)), "x")


# ---- bounds proven too loosely (analysis/bounds.py) ----------------------------------------
@kernel
def behind(A: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s += A[i - 1] * 2.0
    return s


@kernel
def behind_downwards(A: float64[N]) -> float:
    s = 0.0
    for i in range(N - 1, -1, -1):
        s += A[i - 1] * 2.0
    return s


@kernel
def clamped(A: float64[N]) -> float:
    return A[min(N, 5) - 1]


def test_an_index_one_before_the_start_wraps_or_raises_as_python_does():
    """``A[i - 1]`` reaches -1 at i = 0, upwards or downwards: Python reads ``A[-1]``, so
    does the kernel (never the memory before the array); ``A[min(N, 5) - 1]`` does at
    N = 0 (``Min(N, 5) - 1 >= 0`` needs both cases, not one), where Python raises."""
    for k in (behind, behind_downwards):
        A = np.arange(7.0)
        assert k(A) == k.py_func(A) == 2.0 * np.sum(A)
    with pytest.raises(BoundsError, match="can be negative"):
        clamped(np.zeros(0))
    for n in (3, 7):
        assert clamped(np.arange(float(n))) == clamped.py_func(np.arange(float(n)))


def periodic_jacobian(x):
    """Lorenz-96's Jacobian as DAPPER writes it: neighbours by negative indices."""
    M = len(x)
    F = np.zeros((M, M))
    for i in range(M):
        F[i, i] = -1.0
        F[i, i - 2] = -x[i - 1]
        F[i, np.mod(i + 1, M)] = x[i - 1]
        F[i, i - 1] = x[np.mod(i + 1, M)] - x[i - 2]
    return np.sum(F * F * np.arange(M * M).reshape(M, M)), F


def periodic_loss(x):
    value, _ = periodic_jacobian(x)
    return value


def test_negative_neighbours_in_loops_wrap_in_reads_and_writes():
    x = np.random.default_rng(8).standard_normal(6)
    k = kernel(periodic_jacobian)
    value, F = k(x)
    want, F_want = periodic_jacobian(x)
    assert value == want and np.array_equal(F, F_want)
    g = grad(kernel(periodic_loss), "x")(x)
    d = np.random.default_rng(9).standard_normal(6)
    h = 1e-6
    fd = (periodic_jacobian(x + h * d)[0] - periodic_jacobian(x - h * d)[0]) / (2 * h)
    assert np.sum(g * d) == pytest.approx(fd, rel=1e-7)
    with pytest.raises(BoundsError, match=r"index `i - 2` is outside its axis"):
        k(np.ones(1))                       # Python: IndexError at x[-2] of one element


# ---- reductions' identities (frontend/array_reductions.py) ---------------------------------
@kernel
def column_extremes(A: float64[N, M], lo: float64[M], hi: float64[M]):
    lo[:] = np.min(A, axis=0)
    hi[:] = np.max(A, axis=0)


def test_min_and_max_reach_infinities_and_huge_values():
    """Columns of infinities and of values near the largest double: a finite identity
    (or one of the wrong sign) shows there, bitwise."""
    A = np.array([[np.inf, -np.inf, 1.7e308, -1.7e308, 3.0],
                  [np.inf, -np.inf, 1.0e308, -1.0e308, -2.0]])
    got = (A.copy(), np.zeros(5), np.zeros(5))
    column_extremes(*got)
    _, want = run_reference(column_extremes, (A, np.zeros(5), np.zeros(5)))
    for name, g, w in zip(("lo", "hi"), got[1:], want[1:]):
        assert np.array_equal(g, w), f"{name}: {g} != {w}"
