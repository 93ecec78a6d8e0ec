"""Whole-array NumPy kernels: forward against ``py_func``, gradients against central
differences (float64), the copies NumPy's overlap semantics need (and only those),
and KernelSyntaxError / BoundsError for shapes that do not match.
"""
import inspect
import os
import re

import numpy as np
import pytest

from adjoint import BoundsError, KernelSyntaxError, float64, grad, jvp, kernel, symbol, vjp
from adjoint.corpus.arrays import CASES, CASES_BY_NAME
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar,
                            assert_untouched, copy_args, fd_atol, fd_directional, inner,
                            random_direction, rng_for, run_reference, snapshot)

N = symbol("N")
M = symbol("M")
GRAD_RTOL = 1e-6


def check_forward(case, args):
    want_ret, want_args = run_reference(case.kernel, args)
    got_args = copy_args(args)
    got_ret = case.kernel(*got_args)
    assert_close_scalar(float(got_ret), want_ret, 1e-12, what=f"{case.name}: return value")
    names = arg_names(case.kernel)
    for name, a, got, want in zip(names, args, got_args, want_args):
        if isinstance(a, np.ndarray):
            assert_arrays_close(got, want, 1e-12, what=f"{case.name}: array {name!r}")
    for name in case.writes:
        k = names.index(name)
        assert not np.array_equal(want_args[k], args[k]), f"{name} not written by py_func"


def loss_of(k):
    return lambda args: run_reference(k, args)[0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_matches_python(case):
    check_forward(case, case.make_args(rng_for(case.name)))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_grad_matches_finite_differences(case):
    rng = rng_for(case.name, salt="grad")
    args = case.make_args(rng)
    saved = snapshot(args)
    grads = grad(case.kernel, wrt=case.wrt)(*args)
    assert_untouched(args, saved, "grad")
    index_of = {n: k for k, n in enumerate(arg_names(case.kernel))}
    f = loss_of(case.kernel)
    for name, g in zip(case.wrt, grads):
        a = args[index_of[name]]
        assert np.shape(g) == np.shape(a), f"gradient wrt {name!r} has shape {np.shape(g)}"
        d = random_direction(rng, a)
        want = fd_directional(f, args, index_of, {name: d})
        assert_close_scalar(inner(g, d), want, GRAD_RTOL, fd_atol(f(args)),
                            what=f"{case.name}: <grad {name}, d>")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_jvp_matches_vjp(case):
    """<J t, c> from forward mode equals <t, J^T c> from reverse mode."""
    rng = rng_for(case.name, salt="jvp")
    args = case.make_args(rng)
    names = arg_names(case.kernel)
    tangents = {a: random_direction(rng, args[names.index(a)]) for a in case.wrt}
    outs, dots = jvp(case.kernel, args, tangents)
    _, pullback = vjp(case.kernel, *args)
    cot = {w: rng.standard_normal(outs[w].shape) for w in case.writes}
    cot["return"] = float(rng.standard_normal())
    back = pullback(cot)
    forward = sum(inner(cot[w], dots[w]) for w in cot)
    reverse = sum(inner(back[a], tangents[a]) for a in case.wrt)
    assert_close_scalar(forward, reverse, 1e-10, 1e-12, what=f"{case.name}: jvp vs vjp")


@pytest.mark.parametrize("name, sizes", [("jacobi2d_slices", (3, 5, 9)),
                                         ("overlapping_shifts", (2, 6, 9)),
                                         ("stepped_slices", (4, 8)),
                                         ("softmax_rows", (1, 6))])
def test_sizes_stay_symbolic(name, sizes):
    case = CASES_BY_NAME[name]
    for n in sizes:
        check_forward(case, case.make_args(rng_for(name, salt=n), n=n))


# ------------------------------------------------- copies only where NumPy needs them

def copies(k, *args):
    sdfg = kernel(k).specialize(args).sdfg
    return sorted(c for c in sdfg.containers if c.startswith("__copy"))


def shift_right(x: float64[N]):
    x[1:] = x[:-1]


def even_from_odd(x: float64[N]):
    x[::2] = x[1::2]


def scale_in_place(A: float64[N, M]):
    A[:] = 2.0 * A * A + 1.0


def first_row_read(A: float64[N, M]):
    A[:] = 2.0 * A + A[0]            # rows after the first read the old first row


def first_from_second_half(x: float64[N]):
    x[0:3] = x[3:6] + x[N - 3:]


def rows_shift(A: float64[N, M], i: int):
    A[i, 1:] = A[i + 1, :-1]


def cols_shift(A: float64[N, M]):
    A[:, 1:] += A[:, :-1]


def reversal(x: float64[N]):
    x[:] = x[::-1]


@pytest.mark.parametrize("func, needs_copy", [
    (shift_right, True), (even_from_odd, False), (scale_in_place, False),
    (first_row_read, True), (rows_shift, False), (cols_shift, True), (reversal, True),
    (first_from_second_half, True)])     # disjoint only when N >= 6: not provable
def test_copy_only_when_accesses_overlap(func, needs_copy):
    x, A = np.arange(8.0), np.arange(12.0).reshape(3, 4)
    args = (A, 0) if func is rows_shift else (A,) if "A" in inspect.signature(func).parameters \
        else (x,)
    assert bool(copies(func, *args)) == needs_copy
    want, got = copy_args(args), copy_args(args)
    kernel(func).py_func(*want)
    kernel(func)(*got)
    for g, w in zip(got, want):
        if isinstance(g, np.ndarray):
            assert np.array_equal(g, w), func.__name__


# --------------------------------------------------------------- shape errors

def mismatched_slices(A: float64[N], B: float64[N]) -> float:
    A[1:] = B + 1.0  # ERR
    return np.sum(A)


def mismatched_operands(a: float64[4], b: float64[5]) -> float:
    s = np.sum(a * 2.0 + b)  # ERR
    return s


def mismatched_axis_reduction(A: float64[N, M], x: float64[M - 1]) -> float:
    y = np.sum(A, axis=0) * 2.0
    y += x  # ERR
    return np.sum(y)


def mismatched_mask(A: float64[N, M], B: float64[N + 1, M]) -> float:
    A[B > 0.0] = 1.0  # ERR
    return np.sum(A)


def array_returned(A: float64[N]) -> float:
    return A * 2.0  # ERR


def mask_read(A: float64[N]) -> float:      # np.sum, np.prod, np.mean of A[m] run
    s = np.max(A[A > 0.0])  # ERR
    return s


def runtime_step(A: float64[N], k: int) -> float:
    A[::k] = 0.0  # ERR
    return np.sum(A)


def loop_sized_temporary(A: float64[N]) -> float:
    s = 0.0
    for i in range(1, N):
        t = A[:i] * 2.0  # ERR
        s += np.sum(t)
    return s


def scalar_needed(A: float64[N], B: float64[N]) -> float:
    for i in range(N):
        A[i] = B[1:] * 2.0  # ERR
    return np.sum(A)


def view_after_its_loop(A: float64[N, M]) -> float:
    s = 0.0
    for i in range(N):
        row = A[i]
        row *= 2.0
    for i in range(N):
        s += np.sum(row)  # ERR
    return s


def index_past_a_slice(A: float64[N]) -> float:     # was: read A[i], NumPy raises
    s = 0.0
    for i in range(1, N):
        s += A[:i][i]  # ERR
    return s


ARRAY_ERRORS = [index_past_a_slice, mismatched_slices, mismatched_operands, mismatched_axis_reduction,
                mismatched_mask, array_returned, mask_read, runtime_step, loop_sized_temporary,
                scalar_needed, view_after_its_loop]


def marker_line(func):
    lines, first = inspect.getsourcelines(func)
    hits = [first + k for k, line in enumerate(lines) if line.rstrip().endswith("# ERR")]
    assert len(hits) == 1
    return hits[0]


def call_args(func):
    """Arguments of the annotated types (the error comes before any size is checked)."""
    out = []
    for p in inspect.signature(func).parameters.values():
        if p.annotation is int:
            out.append(2)
        else:
            shape = [int(n) if n.is_Integer else 4 for n in p.annotation.shape]
            out.append(np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape))
    return out


@pytest.mark.parametrize("func", ARRAY_ERRORS, ids=lambda f: f.__name__)
def test_array_errors_name_the_line(func):
    with pytest.raises(KernelSyntaxError) as info:
        kernel(func)(*call_args(func))
    message = str(info.value)
    where = re.search(re.escape(os.path.basename(__file__)) + r":(\d+):(\d+)", message)
    assert where, f"no file:line:col in {message!r}"
    assert int(where.group(1)) == marker_line(func), message


def test_mismatch_message_shows_shapes():
    with pytest.raises(KernelSyntaxError, match=r"\(N - 1,\).*\(N,\)"):
        kernel(mismatched_slices)(np.ones(4), np.ones(4))


# ------------------------------------------------------- shapes checked at call time

@kernel
def unannotated_sum(a, b):
    a[:] = a + 2.0 * b
    return np.sum(a * a)


@kernel
def halves(x: float64[N], y: float64[N]) -> float:
    y[: N // 2] = x[::2] * 1.0
    return np.sum(y * y)


def test_sizes_that_only_the_call_decides():
    a, b = np.arange(5.0), np.ones(5)
    want = unannotated_sum.py_func(a.copy(), b)
    assert_close_scalar(unannotated_sum(a, b), want, 1e-12, what="equal sizes")
    with pytest.raises(BoundsError, match="do not match"):
        unannotated_sum(np.ones(5), np.ones(4))
    x = np.arange(6.0)
    y = np.zeros(6)
    halves(x, y)
    assert np.array_equal(y[:3], x[::2])
    with pytest.raises(BoundsError, match=r"test_arrays\.py:\d+"):
        halves(np.ones(7), np.ones(7))      # x[::2] has 4 elements, y[:3] three


# ------------------------------------------------------------ a few exact answers

@kernel
def relax(u: float64[N], f: float64[N], tol: float) -> float:
    r = np.zeros_like(u)
    r[1:-1] = f[1:-1] - (2.0 * u[1:-1] - u[:-2] - u[2:])
    while np.max(np.abs(r)) > tol:
        u[1:-1] += 0.4 * r[1:-1]
        r[1:-1] = f[1:-1] - (2.0 * u[1:-1] - u[:-2] - u[2:])
    return np.sum(u * u)


def test_reductions_in_a_while_condition():
    f = 0.1 * rng_for("relax").random(9)
    want_u, got_u = np.zeros(9), np.zeros(9)
    want = relax.py_func(want_u, f, 1e-6)
    assert_close_scalar(relax(got_u, f, 1e-6), want, 1e-12, what="relax")
    assert_arrays_close(got_u, want_u, 1e-12, what="relaxed u")


@kernel
def column_stats(A: float64[N, M], out: float64[4, M]) -> float:
    out[0] = np.max(A, axis=0)
    out[1] = np.min(A, axis=0)
    out[2] = A.prod(axis=0)
    out[3, :] = np.std(A, axis=0, ddof=1)
    return np.mean(A)


def test_reductions_with_axis_and_ddof():
    A = rng_for("stats").standard_normal((5, 3))
    out = np.zeros((4, 3))
    assert_close_scalar(column_stats(A, out), A.mean(), 1e-12, what="mean")
    want = np.stack([A.max(0), A.min(0), A.prod(0), A.std(0, ddof=1)])
    assert_arrays_close(out, want, 1e-12, what="column statistics")


def test_max_gives_the_derivative_to_one_of_tied_elements():
    """At a tie the maximum is not differentiable; the engine's derivative (a valid
    subgradient) goes whole to the last tied element in loop order."""
    @kernel
    def top(x: float64[N]) -> float:
        return np.max(x)
    g = grad(top, wrt="x")(np.array([1.0, 3.0, 3.0, 2.0]))
    assert_arrays_close(g, np.array([0.0, 0.0, 1.0, 0.0]), 0, what="d max")


@kernel
def clamp_both_ways(x: float64[N], y: float64[N]):
    y[:] = np.maximum(x, 0.5) + np.minimum(0.2, x) + np.clip(x, 0.0, 1.0)


def test_maxima_and_minima_propagate_nan_as_numpy_does():
    x = np.array([0.1, np.nan, 0.9, -1.0])
    y = np.zeros(4)
    clamp_both_ways(x, y)
    want = np.maximum(x, 0.5) + np.minimum(0.2, x) + np.clip(x, 0.0, 1.0)
    np.testing.assert_array_equal(y, want)


def _last_of_first(x, k):
    return x[:k][k - 1] + x[1:][0]


def test_index_into_a_slice_is_checked_per_call():
    k = kernel(_last_of_first)
    x = np.arange(5.0)
    assert k(x, 3) == _last_of_first(x, 3)
    with pytest.raises(BoundsError, match="outside the axis of length k"):
        k(x, 0)                  # x[:0][-1]: NumPy raises IndexError


def pair_energy(pos, w):
    """Pairwise separations from columns sliced with constant bounds (extent Min(1, n))."""
    x = pos[:, 0:1]
    y = pos[:, 1:2]
    dx = x.T - x
    dy = y.T - y
    r2 = dx ** 2 + dy ** 2 + 0.5
    return np.sum(w * w.T / np.sqrt(r2)) + np.sum(np.where(x > y, x, y.T))


def test_extents_that_are_one_at_the_call_broadcast():
    from kernel_testing import check_vjp_and_jvp
    rng = np.random.default_rng(5)
    pos, w = rng.random((6, 3)), rng.random((6, 1))
    k = kernel(pair_energy)
    assert_close_scalar(k(pos, w), pair_energy(pos, w), 1e-13)
    check_vjp_and_jvp(k, pair_energy, (pos, w), rng, rel=1e-6)
    (spec,) = k.specializations
    assert len(spec.sdfg.decisions) == 2            # Min(1, n) == 1, Min(2, n) - 1 == 1


def test_an_extent_that_is_not_one_at_another_call_compiles_anew():
    rng = np.random.default_rng(6)
    k = kernel(pair_energy)
    pos, w = rng.random((6, 3)), rng.random((6, 1))
    assert_close_scalar(k(pos, w), pair_energy(pos, w), 1e-13)
    wide = rng.random((6, 1))                       # pos[:, 1:2] is empty: NumPy refuses
    with pytest.raises(BoundsError, match=r"test_arrays.py:\d+: .*`dy = y.T - y`|do not match"):
        k(wide, w)
    with pytest.raises(ValueError):
        pair_energy(wide, w)
    assert len(k.specializations) == 2
    pos = rng.random((4, 2))                        # 1 again: the first one's conditions hold
    assert_close_scalar(k(pos, w[:4]), pair_energy(pos, w[:4]), 1e-13)
    assert len(k.specializations) == 2


def test_a_specialisations_decisions_are_checked_before_it_runs():
    rng = np.random.default_rng(7)
    k = kernel(pair_energy)
    pos, w = rng.random((6, 3)), rng.random((6, 1))
    spec, binding, args = k.bound((pos, w))
    assert any("is 1 at these sizes" in c.message for c in spec.forward.checks)


def scaled_by_leading_columns(A, k):
    return np.sum(A[:, :k] * A)


def test_one_kernel_with_an_extent_one_at_one_call_and_not_at_another():
    rng = np.random.default_rng(8)
    A = rng.random((5, 4))
    k = kernel(scaled_by_leading_columns)
    for cols in (1, 4, 1):                          # broadcasts; equal; broadcasts again
        assert_close_scalar(k(A, cols), scaled_by_leading_columns(A, cols), 1e-13)
    assert len(k.specializations) == 2              # the same types, two decisions
    with pytest.raises(BoundsError, match="do not match"):
        k(A, 2)                                     # NumPy: operands could not be broadcast
