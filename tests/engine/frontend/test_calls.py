"""Calls to other kernels (inlined) and kernels that return arrays or tuples.

Forward results against the kernels run as plain Python (callees run as Python too),
gradients against central differences, and KernelSyntaxError / BoundsError naming the
call's line for calls that do not fit the callee.
"""
import functools
import inspect
import os
import re
from math import gamma

import numpy as np
import pytest

from adjoint import (AdjointError, ArgumentError, BoundsError, KernelSyntaxError, float32,
                     float64, grad, jvp, kernel, symbol, value_and_grad, vjp)
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar,
                            check_vjp_and_jvp, copy_args, fd_atol, fd_directional, inner, random_direction, rng_for,
                            run_reference)

N = symbol("N")
M = symbol("M")


# ------------------------------------------------------------------------------ callees

@kernel
def laplacian(u: float64[N], out: float64[N], c: float):
    for i in range(1, N - 1):
        out[i] = c * (u[i - 1] - 2.0 * u[i] + u[i + 1])


@kernel
def energy(u: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s += u[i] * u[i]
    return 0.5 * s


@kernel
def scale_in_place(x, a):                   # unannotated: types from the call
    x *= a
    a = a * 2.0                             # a number: the caller's value does not change
    return a


@kernel
def relax(x: float64[N], sweeps: int, omega: float = 0.5):
    for k in range(sweeps):
        for i in range(1, N - 1):
            x[i] = (1.0 - omega) * x[i] + omega * 0.5 * (x[i - 1] + x[i + 1])


@kernel
def moments(x: float64[N]):
    m = np.mean(x)
    return m, np.sum((x - m) ** 2)


@kernel
def normalised(A: float64[N, M]):
    return A / np.sqrt(np.sum(A * A))


@kernel
def first_half(x: float64[N]):
    return x[: N // 2]


@kernel
def damped_until_small(x: float64[N], tol: float) -> float:
    n = 0.0
    while np.max(np.abs(x)) > tol:
        x *= 0.5
        n += 1.0
    return n


@kernel
def energy_of_laplacian(u: float64[N], c: float) -> float:
    w = np.zeros_like(u)
    laplacian(u, w, c)                      # nested: a kernel calling a kernel
    return energy(w)


# ------------------------------------------------------------------------------- callers

@kernel
def diffuse(u: float64[N], w: float64[N], c: float, T: int) -> float:
    for t in range(T):
        laplacian(u, w, c)
        u[1:-1] += 0.1 * w[1:-1]
    e = energy(u)
    return e + 2.0 * energy(w[1:]) + energy_of_laplacian(u, c)


def make_diffuse(rng, n=9):
    return rng.random(n), np.zeros(n), 0.3 + 0.1 * rng.random(), 3


@kernel
def rows_and_views(A: float64[N, M], b: float64[M], a: float) -> float:
    for i in range(N):
        laplacian(A[i], b, a)               # a row of A (a view) and a whole array
        A[i, :] += 0.5 * b
    r = scale_in_place(A[1:, ::2], a)       # a strided view, written through
    s = scale_in_place(b, 0.5 * a)
    relax(A[0], 2)                          # default argument
    relax(A.T[1], 1, omega=0.25)            # keyword argument, column through .T
    return np.sum(A * A) + r + s + a


def make_rows_and_views(rng, n=4):
    return rng.random((n, n + 2)), rng.random(n + 2), 0.4 + 0.2 * rng.random()


@kernel
def tuples_and_arrays(A: float64[N, M], x: float64[M]) -> float:
    m, v = moments(x)
    B = normalised(A)
    y = first_half(x)                       # a view of x
    y[0] = y[0] + m
    C = normalised(A + 1.0)                 # computed argument: a temporary
    total = 0.0
    for i in range(N):
        mi, vi = moments(A[i])
        total += mi * vi
    return v + np.sum(B * C) + total + np.sum(x * x)


def make_tuples_and_arrays(rng, n=3):
    return rng.random((n, n + 2)), rng.random(n + 2)


@kernel
def calls_in_control_flow(x: float64[N], y: float64[N], tol: float) -> float:
    s = 0.0
    for i in range(3):
        if energy(x) > 0.1:
            s += energy(y)
        y *= 1.5
    n = damped_until_small(y, tol)
    while energy(x) > tol:
        x *= 0.8
    return s + n + np.sum(x) + np.sum(y)


def make_calls_in_control_flow(rng, n=5):
    # keep the data away from the thresholds (no decision within reach of the differences)
    while True:
        x, y = 0.2 + rng.random(n), 0.2 + rng.random(n)
        tol = 0.3
        ex, ey = 0.5 * np.sum(x * x), 0.5 * np.sum(y * y)
        xs = [0.5 * np.sum((x * 0.8 ** k) ** 2) for k in range(40)]
        ys = [np.max(np.abs(y * 1.5 ** 3 * 0.5 ** k)) for k in range(40)]
        if ex > 0.2 and min(abs(v - tol) for v in xs + ys) > 0.02 and ey > 0.01:
            return x, y, tol


@kernel
def shrink(x: float64[N], tol: float) -> float:
    """Halve x until it is small (a docstring, a while loop, a break)."""
    n = 0.0
    while np.max(np.abs(x)) > tol:
        x *= 0.5
        n += 1.0
        if n > 20.0:
            break
    return n


@kernel
def axpy(a: float, x, y):
    y += a * x
    return len(x) + x.shape[0] * 0.5


@kernel
def partial_sum(x: float64[N], k: int) -> float:
    s = 0.0
    for i in range(k):
        s += x[i] * x[i]
    return s


@kernel
def masked_fill(x, m):
    x[m > 0.5] = 0.0


@kernel
def branches_aliases_masks(A: float64[N, M], v: float64[M], tol: float) -> float:
    total = 0.0
    for i in range(N):
        if A[i, 0] > 0.5:                       # a call in a branch on data
            total += shrink(A[i], tol)
        else:
            axpy(0.5, v, A[i])
    r = axpy(2.0, A[1:][::2, 0], A[:-1:2, 1])   # views of views
    axpy(1.0, v, v)                             # the same array twice: y += a * y
    for i in range(1, N):
        total += partial_sum(A[i], min(i + 1, M))
    masked_fill(v, v > 0.7)                     # a computed mask as an argument
    return total + r + np.sum(A * A) + np.sum(v)


def make_branches_aliases_masks(rng, n=5, gap=1e-3):
    while True:
        A, v, tol = rng.random((n, 4)), rng.random(4), 0.1 + 0.05 * rng.random()
        halvings = [np.max(np.abs(A[i])) * 0.5 ** k for i in range(n) for k in range(25)]
        if away_from(A[:, 0], [0.5], gap) and away_from(2.0 * v, [0.7], gap) and \
                away_from(halvings, [tol], gap):
            return A, v, tol


def away_from(values, points, gap):
    return all(np.min(np.abs(np.asarray(values) - p)) > gap for p in points)


CASES = [
    ("branches_aliases_masks", branches_aliases_masks, make_branches_aliases_masks,
     ("A", "v")),
    ("diffuse", diffuse, make_diffuse, ("u", "w", "c")),
    ("rows_and_views", rows_and_views, make_rows_and_views, ("A", "b", "a")),
    ("tuples_and_arrays", tuples_and_arrays, make_tuples_and_arrays, ("A", "x")),
    ("calls_in_control_flow", calls_in_control_flow, make_calls_in_control_flow, ("x", "y")),
]


@pytest.mark.parametrize("name, k, make, wrt", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_python(name, k, make, wrt):
    args = make(rng_for(name))
    want, want_args = run_reference(k, args)
    got_args = copy_args(args)
    got = k(*got_args)
    assert_close_scalar(got, want, 1e-12, what=f"{name}: return value")
    for a, g, w in zip(args, got_args, want_args):
        if isinstance(a, np.ndarray):
            assert_arrays_close(g, w, 1e-12, what=f"{name}: arrays")


@pytest.mark.parametrize("name, k, make, wrt", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(name, k, make, wrt):
    rng = rng_for(name, salt="grad")
    args = make(rng)
    grads = grad(k, wrt=wrt)(*args)
    index_of = {n: i for i, n in enumerate(arg_names(k))}
    f = lambda a: run_reference(k, a)[0]  # noqa: E731
    for w, g in zip(wrt, grads):
        d = random_direction(rng, args[index_of[w]])
        want = fd_directional(f, args, index_of, {w: d})
        assert_close_scalar(inner(g, d), want, 1e-6, fd_atol(f(args)),
                            what=f"{name}: <grad {w}, d>")


def test_callee_locals_are_renamed_apart():
    sdfg = kernel(diffuse).specialize(make_diffuse(rng_for("x"))).sdfg
    inlined = [c for c in sdfg.containers if c.startswith("s_")]
    assert len(inlined) >= 3          # energy's `s`, once per call site, none shared


def test_scalars_pass_by_value_and_arrays_by_reference():
    @kernel
    def caller(x: float64[N], a: float) -> float:
        b = a
        r = scale_in_place(x, b)          # doubles its own copy of b
        q = scale_in_place(x, 2)          # an int the callee reassigns: a number of its own
        return b + 10.0 * r + q

    x = np.arange(1.0, 5.0)
    got_x, want_x = x.copy(), x.copy()
    got = caller(got_x, 3.0)
    want = caller.py_func(want_x, 3.0)
    assert got == want == 3.0 + 60.0 + 4.0
    np.testing.assert_array_equal(got_x, want_x)
    np.testing.assert_array_equal(got_x, 6.0 * x)


def test_inlined_lines_are_the_call_line():
    @kernel
    def short(x: float64[N], y: float64[M]) -> float:
        laplacian(x, y, 1.0)  # CALL
        return np.sum(y)

    line = marker_line(short, "# CALL")
    with pytest.raises(BoundsError) as info:
        short(np.ones(5), np.ones(4))
    assert f":{line}:" in str(info.value), str(info.value)


# ------------------------------------------------------------------- kernels returning arrays

@kernel
def step_and_energy(u: float64[N], c: float):
    v = u.copy()
    v[1:-1] = u[1:-1] + c * (u[2:] - 2.0 * u[1:-1] + u[:-2])
    return v, 0.5 * np.sum(v * v)


@kernel
def only_array(A: float64[N, M]):
    A[0] = 2.0 * A[0]
    return np.tanh(A).T


def test_tuple_return_call_and_reference():
    u = rng_for("tuple").random(7)
    v, e = step_and_energy(u.copy(), 0.2)
    rv, re_ = step_and_energy.py_func(u.copy(), 0.2)
    assert isinstance(v, np.ndarray) and v.shape == (7,) and isinstance(e, float)
    assert_arrays_close(v, rv, 1e-14)
    assert_close_scalar(e, float(re_), 1e-14)


def test_array_return_call_writes_arguments_too():
    A = rng_for("array").random((3, 4))
    got_A, want_A = A.copy(), A.copy()
    got = only_array(got_A)
    want = only_array.py_func(want_A)
    assert got.shape == (4, 3)
    assert_arrays_close(got, want, 1e-14)
    assert_arrays_close(got_A, want_A, 1e-14)


def test_vjp_of_tuple_return_matches_finite_differences():
    rng = rng_for("vjp tuple")
    u, c = rng.random(6), 0.3
    outs, pullback = vjp(step_and_energy, u, c)
    assert set(outs) == {"return"} and len(outs["return"]) == 2
    v, e = step_and_energy.py_func(u.copy(), c)
    assert_arrays_close(outs["return"][0], v, 1e-14)
    cot = {"return0": rng.standard_normal(6), "return1": 0.7}
    back = pullback({"return": (cot["return0"], cot["return1"])})
    by_name = pullback(cot)                     # the elements' names are aliases
    assert all(np.array_equal(back[n], by_name[n]) for n in back)
    with pytest.raises(ArgumentError, match="a tuple of 2"):
        pullback({"return": cot["return0"]})
    with pytest.raises(ArgumentError, match="not both"):
        pullback({"return": (cot["return0"], 0.7), "return1": 0.7})

    def phi(args):
        v, e = step_and_energy.py_func(*copy_args(args))
        return inner(cot["return0"], v) + cot["return1"] * float(e)
    index_of = {"u": 0, "c": 1}
    for name, value in (("u", u), ("c", c)):
        d = random_direction(rng, value)
        want = fd_directional(phi, (u, c), index_of, {name: d})
        assert_close_scalar(inner(back[name], d), want, 1e-7, fd_atol(phi((u, c))),
                            what=f"<pullback {name}, d>")


def test_vjp_of_array_return_and_written_argument():
    rng = rng_for("vjp array")
    A = rng.random((3, 4))
    outs, pullback = vjp(only_array, A)
    assert set(outs) == {"A", "return"} and outs["return"].shape == (4, 3)
    cot = {"A": rng.standard_normal((3, 4)), "return": rng.standard_normal((4, 3))}
    back = pullback(cot)

    def phi(args):
        work = copy_args(args)
        r = only_array.py_func(*work)
        return inner(cot["A"], work[0]) + inner(cot["return"], r)
    d = rng.standard_normal(A.shape)
    want = fd_directional(phi, (A,), {"A": 0}, {"A": d})
    assert_close_scalar(inner(back["A"], d), want, 1e-7, fd_atol(phi((A,))))


def test_jvp_of_tuple_return_is_consistent_with_vjp():
    rng = rng_for("jvp tuple")
    u, c = rng.random(6), 0.3
    tangents = {"u": rng.standard_normal(6), "c": 0.5}
    outs, dots = jvp(step_and_energy, (u, c), tangents)
    assert set(dots) == {"return"} and dots["return"][0].shape == (6,)
    _, pullback = vjp(step_and_energy, u, c)
    cot = (rng.standard_normal(6), -0.4)
    back = pullback({"return": cot})
    forward = inner(cot[0], dots["return"][0]) + cot[1] * dots["return"][1]
    reverse = inner(back["u"], tangents["u"]) + back["c"] * tangents["c"]
    assert_close_scalar(forward, reverse, 1e-12)


def test_grad_needs_a_single_number():
    with pytest.raises(AdjointError, match="return0, return1"):
        grad(step_and_energy, wrt="u")(np.ones(5), 0.1)
    with pytest.raises(AdjointError, match="not one number"):
        value_and_grad(only_array, wrt="A")(np.ones((2, 3)))


def test_kernel_returning_a_call_returns_its_values():
    @kernel
    def forward_moments(x: float64[N]):
        x[0] = 1.0
        return moments(x)

    x = rng_for("ret call").random(5)
    got = forward_moments(x.copy())
    want = forward_moments.py_func(x.copy())
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        assert_close_scalar(g, float(w), 1e-14)


# --------------------------------------------------------------------------------- errors

def marker_line(func, marker="# ERR"):
    lines, first = inspect.getsourcelines(getattr(func, "__wrapped__", func))
    hits = [first + k for k, line in enumerate(lines) if line.rstrip().endswith(marker)]
    assert len(hits) == 1
    return hits[0]


def too_many(x: float64[N]) -> float:
    return energy(x, x)  # ERR


def too_few(x: float64[N], w: float64[N]) -> float:
    laplacian(x, w)  # ERR
    return np.sum(w)


def unknown_keyword(x: float64[N]) -> float:
    relax(x, 2, omga=0.1)  # ERR
    return np.sum(x)


def array_for_number(x: float64[N], w: float64[N]) -> float:
    laplacian(x, w, x)  # ERR
    return np.sum(w)


def number_for_array(x: float64[N], w: float64[N]) -> float:
    laplacian(x, 1.0, 2.0)  # ERR
    return np.sum(w)


def float_for_int(x: float64[N], a: float) -> float:
    relax(x, a)  # ERR
    return np.sum(x)


def wrong_rank(A: float64[N, N], w: float64[N]) -> float:
    laplacian(A, w, 1.0)  # ERR
    return np.sum(w)


@kernel
def single_precision(x: float32[N]) -> float:
    return np.sum(x)


def wrong_dtype(x: float64[N]) -> float:
    return single_precision(x)  # ERR


def returns_nothing_used(x: float64[N], w: float64[N]) -> float:
    return laplacian(x, w, 1.0)  # ERR


def tuple_used_as_number(x: float64[N]) -> float:
    return 2.0 * moments(x)  # ERR


def unpack_count(x: float64[N]) -> float:
    a, b, c = moments(x)  # ERR
    return a


def effect_inside_expression(x: float64[N]) -> float:
    s = x[0] + scale_in_place(x, 2.0)  # ERR
    return s


def effect_in_augmented_element(x: float64[N]) -> float:
    x[0] += scale_in_place(x, 2.0)  # ERR
    return np.sum(x)


def array_declared_float(x: float64[N]) -> float:
    return normalised(x[None, :])  # ERR


def plain_helper(v):
    return 2.0 * v


def calls_plain_function(x: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s += plain_helper(x[i])  # ERR
    return s


def calls_itself(x: float64[N]) -> float:
    return calls_itself(x)  # ERR


CALL_ERRORS = [too_many, too_few, unknown_keyword, array_for_number, number_for_array,
               float_for_int, wrong_rank, wrong_dtype, returns_nothing_used,
               tuple_used_as_number, unpack_count, effect_inside_expression,
               effect_in_augmented_element, array_declared_float, calls_itself]


@pytest.mark.parametrize("func", CALL_ERRORS, ids=lambda f: f.__name__)
def test_call_errors_name_the_call_line(func):
    k = kernel(func)
    args = [np.linspace(0.1, 1.0, 4) if p != "A" else np.ones((4, 4))
            for p in inspect.signature(func).parameters]
    if "a" in inspect.signature(func).parameters:
        args[-1] = 0.5
    with pytest.raises(KernelSyntaxError) as info:
        k(*args)
    message = str(info.value)
    where = re.search(re.escape(os.path.basename(__file__)) + r":(\d+):(\d+)", message)
    assert where and int(where.group(1)) == marker_line(func), message


def plain_laplace(u, out):                       # plain Python helpers, as real code has
    out[1:-1] = u[:-2] - 2.0 * u[1:-1] + u[2:]


def plain_energy(u):
    return 0.5 * np.sum(u * u)


def plain_weighted(u):
    s = 0.0
    for i in range(len(u)):
        s += plain_helper(u[i]) * i
    return s


def calls_plain_helpers(u: float64[N], tmp: float64[N], dt: float) -> float:
    plain_laplace(u, tmp)
    u[1:-1] += dt * np.maximum(tmp[1:-1], 0.0)
    return plain_energy(u) + plain_weighted(u)


def test_plain_python_functions_are_inlined_like_kernels():
    k = kernel(calls_plain_helpers)
    u, tmp = np.sin(np.linspace(0.0, 3.0, 9)), np.zeros(9)
    got, want = [u.copy(), tmp.copy()], [u.copy(), tmp.copy()]
    assert k(*got, 0.1) == k.py_func(*want, 0.1)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    g = grad(k, wrt="u")(u.copy(), tmp.copy(), 0.1)
    fd = [(k.py_func(u + e, tmp.copy(), 0.1) - k.py_func(u - e, tmp.copy(), 0.1)) / 2e-6
          for e in 1e-6 * np.eye(9)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def calls_a_builtin(x: float64[N]) -> float:
    return gamma(x[0])  # ERR


def test_a_function_without_python_source_is_named():
    with pytest.raises(KernelSyntaxError, match="`gamma` has no Python source") as info:
        kernel(calls_a_builtin)(np.ones(3))
    assert f":{marker_line(calls_a_builtin)}:" in str(info.value)


@kernel
def mutual_a(x: float64[N]) -> float:
    return mutual_b(x)


@kernel
def mutual_b(x: float64[N]) -> float:
    return mutual_a(x) + 1.0  # ERR


def test_mutual_recursion_is_rejected():
    with pytest.raises(KernelSyntaxError, match="recursion") as info:
        mutual_a(np.ones(3))
    assert f":{marker_line(mutual_b)}:" in str(info.value)


@kernel
def broken_callee(x: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s += x[i] @ x[i]  # ERR
    return s


def test_error_inside_a_callee_names_its_line_and_the_call():
    @kernel
    def caller(x: float64[N]) -> float:
        return broken_callee(x)  # CALL

    with pytest.raises(KernelSyntaxError) as info:
        caller(np.ones(3))
    message = str(info.value)
    assert f":{marker_line(broken_callee)}:" in message
    assert f"called at {__file__}:{marker_line(caller, '# CALL')}" in message, message


def test_messages_use_the_callees_own_names():
    @kernel
    def callee(values: float64[N], factor: int):
        for k in range(N):
            values[k] = values[k] * factor[0]

    @kernel
    def caller(x: float64[N]):
        callee(x, 2)

    with pytest.raises(KernelSyntaxError) as info:
        caller(np.ones(3))
    assert "factor" in str(info.value) and "factor_" not in str(info.value)


def test_declared_sizes_that_differ_are_checked_per_call():
    @kernel
    def square_only(A: float64[N, N]) -> float:
        return np.sum(A)

    @kernel
    def caller(B: float64[N, M]) -> float:
        return square_only(B)  # CALL

    assert caller(np.ones((3, 3))) == 9.0
    with pytest.raises(BoundsError) as info:
        caller(np.ones((3, 4)))
    assert f":{marker_line(caller, '# CALL')}:" in str(info.value)
    assert "square_only" in str(info.value)


@kernel
def reads_b(L: float64[N, N], b: float64[N], x: float64[N]):
    for i in range(N):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


def test_cotangent_of_an_array_the_kernel_only_reads_is_its_own():
    rng = rng_for("read-only output")
    L = np.tril(rng.random((4, 4))) + 2.0 * np.eye(4)
    b, x = rng.random(4), np.zeros(4)
    outs, pullback = vjp(reads_b, L, b, x)
    assert set(outs) == {"x"}
    cx, cb = rng.standard_normal(4), rng.standard_normal(4)
    both, alone = pullback({"x": cx, "b": cb}), pullback({"x": cx})
    assert_arrays_close(both["b"], alone["b"] + cb, 1e-14)
    assert_arrays_close(both["L"], alone["L"], 1e-14)
    with pytest.raises(ArgumentError, match="only reads"):
        pullback({"y": cx})


# ---- f(*A): an array's rows or a tuple spread into named parameters -----------------------
def _ikeda_parts(x, y):
    s = 1 + x**2 + y**2
    t = 0.4 - 6 / s
    return s, t, x * np.cos(t) - y * np.sin(t), x * np.sin(t) + y * np.cos(t)


def ikeda_like(x, u):
    """DAPPER's Ikeda step style: ``aux(*x)`` on a state of two values."""
    s, t, x1, y1 = _ikeda_parts(*x)
    return np.array([1 + u * x1, u * y1])


def _affine(a, b, c):
    return a * b + c


def spread_forms(x, c):
    return _affine(*x, c=c) + _affine(*(x[1], 2.0), c)


@pytest.mark.parametrize("k, make", [
    (ikeda_like, lambda r: (r.standard_normal(2) * 0.5, 0.9)),
    (spread_forms, lambda r: (r.standard_normal(2), 1.5))],
    ids=["rows", "tuple_and_keyword"])
def test_a_starred_argument_spreads_into_the_parameters(k, make):
    args = make(rng_for(k.__name__))
    np.testing.assert_array_equal(kernel(k)(*copy_args(args)), k(*copy_args(args)))
    check_vjp_and_jvp(kernel(k), k, args, rng_for(k.__name__, 1))


def test_a_starred_array_of_another_length_fails_naming_the_call():
    line = ikeda_like.__code__.co_firstlineno + 2
    with pytest.raises(BoundsError, match=rf"test_calls.py:{line}:.*x.shape\[0\]=3"):
        kernel(ikeda_like)(np.ones(3), 0.9)


def _two_stars(x, y):
    return _affine(*x, *y)


def test_two_starred_arguments_are_refused_naming_the_line():
    with pytest.raises(KernelSyntaxError, match=r"test_calls.py:\d+:\d+: `_affine\(\*x, \*y\)`"):
        kernel(_two_stars)(np.ones(2), np.ones(1))


def _turn(x, y):
    return 1.0 + 0.9 * (x * np.cos(0.4) - y), 0.9 * (x + y * np.sin(0.4))


def _transposed(func):
    @functools.wraps(func)
    def wrapper(x, *args):
        return np.asarray(func(x.T, *args)).T       # DAPPER's ens_compatible
    return wrapper


@_transposed
def _map_step(x, scale):
    return _turn(x[0] * scale, x[1])


def _stacked_values(x):
    return np.stack(_turn(x[0], x[1])) + np.array(_turn(x[1], x[0]))


@pytest.mark.parametrize("f", [_map_step, _stacked_values], ids=["decorated", "stacked"])
def test_a_returned_tuple_used_as_an_array(f):
    rng = rng_for(f.__name__)
    args = (rng.standard_normal(2), 1.5) if f is _map_step else (rng.standard_normal((2, 3)),)
    np.testing.assert_allclose(kernel(f)(*copy_args(args)), f(*copy_args(args)), rtol=1e-15)
    check_vjp_and_jvp(kernel(f), f, args, rng)


def _boxcar(x, n, method="direct"):
    """A helper with a string default that picks its branch (DAPPER's boxcar)."""
    if method == "manual":
        return x * n
    return np.roll(x, 1) * n


def _filtered(x):
    return _boxcar(x, 2.0) + _boxcar(x, 3.0, method="manual")


def test_a_string_default_of_a_callee_is_a_constant_it_compares():
    x = np.arange(4.0)
    assert np.array_equal(kernel(_filtered)(x), _filtered(x))
