"""Compiled forward kernels against the kernel run as plain Python (``py_func``)."""
import numpy as np
import pytest

from adjoint.corpus.loops import CASES, CASES_BY_NAME
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar, copy_args,
                            rng_for, run_reference)


def rtol_for(case):
    return 1e-4 if case.float32 else 1e-12


def check_forward(case, args):
    """Run compiled and reference on copies of ``args``; compare return and every array."""
    want_ret, want_args = run_reference(case.kernel, args)
    got_args = copy_args(args)
    got_ret = case.kernel(*got_args)
    rtol = rtol_for(case)
    assert got_ret is not None and np.ndim(got_ret) == 0, f"return value {got_ret!r}"
    assert_close_scalar(float(got_ret), want_ret, rtol, what=f"{case.name}: return value")
    for name, a, got, want in zip(arg_names(case.kernel), args, got_args, want_args):
        if isinstance(a, np.ndarray):
            assert got.dtype == a.dtype and got.shape == a.shape
            assert_arrays_close(got, want, rtol, what=f"{case.name}: array {name!r}")
    # The reference really did update the arrays the case says it writes (so the
    # comparison above checks the in-place updates, not just untouched inputs).
    names = arg_names(case.kernel)
    for name in case.writes:
        k = names.index(name)
        assert not np.array_equal(want_args[k], args[k]), f"{name} not written by py_func"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_matches_python(case):
    args = case.make_args(rng_for(case.name))
    check_forward(case, args)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_twice_same_result(case):
    """A second call (compiled code cached) gives the same result on fresh inputs."""
    args = case.make_args(rng_for(case.name, salt=1))
    a1, a2 = copy_args(args), copy_args(args)
    r1 = case.kernel(*a1)
    r2 = case.kernel(*a2)
    assert float(r1) == float(r2)
    for x, y in zip(a1, a2):
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("name, sizes", [
    ("jacobi2d", (6, 11, 6)),
    ("trisolv", (5, 9)),
    ("back_substitution", (3, 10)),
    ("red_black", (10, 13)),          # even and odd N: the strided sweeps change parity
    ("gemm", (3, 6)),
    ("column_recurrence", (4, 9)),
    ("smooth_unannotated", (5, 9)),   # unannotated: specialised on dtype/rank, not size
    ("leapfrog", (4, 15)),
    ("diffuse32", (8, 21)),
])
def test_sizes_stay_symbolic(name, sizes):
    """One kernel called at several sizes is right at every size."""
    case = CASES_BY_NAME[name]
    for n in sizes:
        args = case.make_args(rng_for(name, salt=n), n=n)
        check_forward(case, args)


def test_degenerate_loops_run_zero_times():
    """Sizes where some loops are empty (N = 2 leaves no interior points)."""
    case = CASES_BY_NAME["jacobi2d"]
    check_forward(case, case.make_args(rng_for("tiny"), n=3))
    args = case.make_args(rng_for("tiny"), n=2)
    got = copy_args(args)
    ret = case.kernel(*got)
    want_ret, want = run_reference(case.kernel, args)
    assert_close_scalar(float(ret), want_ret, 1e-12, what="return")
    for g, w in zip(got, want):
        if isinstance(g, np.ndarray):
            assert np.array_equal(g, w)


def test_zero_time_steps():
    case = CASES_BY_NAME["sor1d"]
    u, f, omega, _ = case.make_args(rng_for("zero-steps"))
    got = u.copy()
    ret = case.kernel(got, f, omega, 0)
    assert np.array_equal(got, u)
    assert_close_scalar(float(ret), float(np.sum(u * u)), 1e-12, what="return")


def test_forward_updates_caller_array_in_place():
    case = CASES_BY_NAME["prefix_sum"]
    (x,) = case.make_args(rng_for("in-place"))
    want = np.cumsum(x)                      # independent of the kernel
    case.kernel(x)
    assert_arrays_close(x, want, 1e-12, what="prefix sum")
