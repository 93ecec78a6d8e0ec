"""Precise errors: unsupported Python (KernelSyntaxError at file:line:col) and bad
arguments (ArgumentError naming the argument).

The kernels with unsupported constructs are module-level functions, decorated inside
the test (the error may come at decoration or at the first call).  The offending line
carries a ``# ERR`` marker; its absolute line number is found with ``inspect``.
"""
import inspect
import os
import re
from math import gamma

import numpy as np
import pytest

from adjoint import ArgumentError, KernelSyntaxError, float32, float64, grad, kernel, symbol

N = symbol("N")


# ----------------------------------------------------------- unsupported constructs

def bad_slice(A: float64[N], T: int) -> float:
    for t in range(T):
        A[::T] = 0.0  # ERR
    return np.sum(A * A)


def bad_try(A: float64[N], T: int) -> float:
    for t in range(T):
        A[t] = 0.5 * A[t]
    try:  # ERR
        return np.sum(A * A)
    finally:
        A[0] = 0.0


def bad_while_else(A: float64[N], T: int) -> float:
    for i in range(N):
        while A[i] > 1.0:  # ERR
            A[i] = A[i] / 2.0
        else:
            A[i] = 0.0
    return np.sum(A * A)


def bad_print(A: float64[N], T: int) -> float:
    for i in range(N):
        A[i] = 2.0 * A[i]
        print(A[i])  # ERR
    return np.sum(A * A)


def bad_list_comprehension(A: float64[N], T: int) -> float:
    s = 0.0
    for t in range(T):
        B = [A[i] * 2.0 for i in range(N)]  # ERR
        s += 1.0
    return s


def bad_unknown_function(A: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(1, N):
            A[i] = A[i - 1] + gamma(A[i])  # ERR
    return np.sum(A * A)


def bad_unknown_numpy_function(A: float64[N], T: int) -> float:
    s = 0.0
    for t in range(T):
        s += np.linalg.norm(A)  # ERR
    return s


def bad_attribute(A: float64[N], T: int) -> float:
    for i in range(N):
        A[i] = A[i] * A.strides[0]  # ERR
    return np.sum(A * A)


def bad_string(A: float64[N], T: int) -> float:
    for i in range(N):
        label = "velocity" * T  # ERR
        A[i] = 2.0 * A[i]
    return np.sum(A * A)


def bad_continuation_line(A: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(1, N):
            A[i] = (0.5 * A[i - 1]
                    + 0.25 * A[i]
                    + gamma(A[i - 1]))  # ERR
    return np.sum(A * A)


def bad_unannotated_slice(A, T):
    for t in range(T):
        for i in range(A.shape[0]):
            A[i] = 0.5 * A[i]
        A[::2] = A[A > 0.5]  # ERR
    return np.sum(A * A)


def bad_step_from_data(A: float64[N], T: int) -> float:
    steps = np.ones(N, dtype=np.int64)
    for t in range(T):
        for i in range(0, N, steps[t]):  # ERR
            A[i] = 0.5 * A[i]
    return np.sum(A * A)


def bad_append(A: float64[N], T: int) -> float:
    totals = []
    for t in range(T):
        if A[t] > 0.5:
            totals.append(np.sum(A) * t)  # ERR
    return totals[-1]


def bad_indices_where(A: float64[N], T: int) -> float:
    i = np.where(A < 0.5)
    return len(i[0]) * 1.0  # ERR


BAD_KERNELS = [bad_slice, bad_try, bad_while_else, bad_print, bad_list_comprehension,
               bad_unknown_function, bad_unknown_numpy_function, bad_attribute,
               bad_string, bad_continuation_line, bad_unannotated_slice, bad_step_from_data,
               bad_append, bad_indices_where]


def marker_line(func):
    lines, first = inspect.getsourcelines(func)
    hits = [first + k for k, line in enumerate(lines) if line.rstrip().endswith("# ERR")]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("func", BAD_KERNELS, ids=lambda f: f.__name__)
def test_unsupported_construct_reports_file_line_col(func):
    A = np.linspace(0.0, 1.0, 6)
    A0 = A.copy()
    with pytest.raises(KernelSyntaxError) as info:
        k = kernel(func)
        k(A, 2)
    message = str(info.value)
    name = re.escape(os.path.basename(__file__))
    where = re.search(name + r":(\d+):(\d+)", message)
    assert where, f"no file:line:col in {message!r}"
    line, col = int(where.group(1)), int(where.group(2))
    assert line == marker_line(func), message
    lines, first = inspect.getsourcelines(func)
    source_line = lines[line - first]
    indent = len(source_line) - len(source_line.lstrip())
    code_end = source_line.index("# ERR")
    assert indent <= col <= code_end + 1, f"column {col} outside the code of the line: {message}"
    assert np.array_equal(A, A0), "a kernel that does not compile must not touch its arguments"


def test_syntax_error_is_raised_again_on_a_second_call():
    with pytest.raises(KernelSyntaxError):
        k = kernel(bad_try)
        k(np.ones(4), 1)
    with pytest.raises(KernelSyntaxError):
        k = kernel(bad_try)
        k(np.ones(4), 1)


# ------------------------------------------------------------------- bad arguments

@kernel
def mixed(x: float64[N], y: float64[N], A: float64[N, N], w: float64[3],
          alpha: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            y[i] = y[i] + alpha * (w[0] * x[i - 1] + w[1] * A[i, i] + w[2] * x[i + 1])
    return np.sum(y * y)


def good_args(n=6):
    rng = np.random.default_rng(7)
    return dict(x=rng.random(n), y=rng.random(n), A=rng.random((n, n)), w=rng.random(3),
                alpha=0.5, T=2)


def call(**changes):
    args = {**good_args(), **changes}
    return list(args.values())


def test_valid_call_baseline():
    """The argument set the error cases start from is itself fine."""
    args = call()
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = mixed(*args)
    want = mixed.py_func(*ref)
    assert abs(float(got) - float(want)) <= 1e-12 * abs(float(want))


def _raises_naming(args, *names, fn=mixed):
    saved = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    with pytest.raises(ArgumentError) as info:
        fn(*args)
    message = str(info.value)
    assert any(re.search(rf"\b{n}\b", message) for n in names), \
        f"message does not name {' or '.join(names)}: {message!r}"
    for a, s in zip(args, saved):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, s), "a rejected call must not touch its arguments"
    return message


def test_wrong_dtype_float32_for_float64():
    _raises_naming(call(y=np.ones(6, dtype=np.float32)), "y")


def test_wrong_dtype_int_array():
    _raises_naming(call(x=np.arange(6)), "x")


def test_wrong_rank():
    _raises_naming(call(A=np.ones(6)), "A")


def test_wrong_rank_too_many_dims():
    _raises_naming(call(w=np.ones((3, 1))), "w")


def test_inconsistent_symbolic_sizes():
    _raises_naming(call(y=np.ones(7)), "x", "y")


def test_inconsistent_sizes_within_one_array():
    _raises_naming(call(A=np.ones((6, 7))), "A")


def test_wrong_fixed_size():
    _raises_naming(call(w=np.ones(4)), "w")


def test_non_contiguous_arrays_it_only_reads_are_read_from_a_copy():
    """A.T, A[:, ::2], Fortran order: as their contiguous copies, the views untouched."""
    A = np.linspace(0.0, 1.0, 72).reshape(6, 12)[:, ::2]
    x = np.linspace(-1.0, 1.0, 12)[::2]
    assert A.shape == (6, 6) and not A.flags.c_contiguous and not x.flags.c_contiguous
    given, copies = call(A=A, x=x), call(A=np.ascontiguousarray(A), x=np.ascontiguousarray(x))
    assert mixed(*given) == mixed(*copies)
    np.testing.assert_array_equal(given[1], copies[1])
    assert mixed(*call(A=np.asfortranarray(copies[2]))) == mixed(*call(A=copies[2]))


def test_non_contiguous_array_it_writes():
    y = np.ones(12)[::2]
    _raises_naming(call(y=y), "y")


def test_too_few_arguments():
    _raises_naming(call()[:-1], "T")


def test_too_many_arguments():
    with pytest.raises(ArgumentError):
        mixed(*call(), 3)


@pytest.mark.parametrize("T", [2.5, 3.0, np.float64(2.0)])
def test_float_for_int_parameter(T):
    _raises_naming(call(T=T), "T")


def test_array_for_scalar_parameter():
    _raises_naming(call(alpha=np.ones(6)), "alpha")


def test_aliased_arrays():
    x = np.ones(6)
    _raises_naming(call(x=x, y=x), "x", "y")


def test_aliased_overlapping_views():
    base = np.ones(7)
    _raises_naming(call(x=base[:6], y=base[1:]), "x", "y")


def test_grad_checks_arguments_too():
    args = call(x=np.ones(6, dtype=np.float32))
    with pytest.raises(ArgumentError) as info:
        grad(mixed, wrt="y")(*args)
    assert re.search(r"\bx\b", str(info.value))


@kernel
def single32(x: float32[N], a: float) -> float:
    for i in range(N):
        x[i] = a * x[i]
    return np.sum(x * x)


def test_wrong_dtype_float64_for_float32():
    _raises_naming([np.ones(5), 2.0], "x", fn=single32)


def mask_and_index_array(A, idx):
    A[A[:, 0] > 0, idx] = 0.0
    return A


def test_a_mask_beside_an_index_array_is_refused():
    """NumPy pairs the mask's indices with the index array's: not the mask over rows."""
    A = np.arange(12.0).reshape(4, 3) - 5.0
    with pytest.raises(KernelSyntaxError, match=r"test_errors.py:\d+:\d+: "):
        kernel(mask_and_index_array)(A, np.array([0, 2, 1, 0]))
