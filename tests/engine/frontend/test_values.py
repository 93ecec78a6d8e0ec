"""Values from outside a kernel's body (issue 20): functions as values (lambdas passed to
helpers, function-valued defaults, nested functions and closures), decorated functions
(compiled with their wrapper), bound methods of model objects (``self``'s attributes),
methods of objects at module level (their branches decided dead holding what kernels
cannot run), and module-level arrays and NumPy functions imported by name. Each is checked
forward against the function run as Python and in reverse and forward mode against central
differences."""
import functools
import inspect
import types

import numpy as np
import pytest
from numpy import tanh, zeros

from adjoint import grad, kernel, vjp
from adjoint.errors import KernelSyntaxError
import values_helpers
from kernel_testing import check_vjp_and_jvp, fd_directional, inner, rng_for

FORCE = 8.0


# ---- functions as values --------------------------------------------------------------------
def l96_dxdt(x):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + FORCE


def rk4(f, x, t, dt):
    k1 = dt * f(x, t)
    k2 = dt * f(x + k1 / 2, t + dt / 2)
    k3 = dt * f(x + k2 / 2, t + dt / 2)
    k4 = dt * f(x + k3, t + dt)
    return x + (k1 + 2 * (k2 + k3) + k4) / 6


def l96_step(x0, t, dt):
    return rk4(lambda x, t: l96_dxdt(x), x0, t, dt)


def l96_steps(x0, dt):
    x = x0.copy()
    for k in range(3):
        x = rk4(lambda x, t: l96_dxdt(x), x, 0.1 * k, dt)
    return np.sum(x * x)


def square(v):
    return v * v


def energy(x, f=square):
    return np.sum(f(x))


def smooth(x, mode=square, g=np.cos):      # function-valued defaults of the kernel itself
    half = lambda y: 0.5 * y                # noqa: E731  (a lambda bound to a name)
    return energy(half(x)) + energy(x, np.sin) + np.sum(mode(x + 1.0)) + energy(x, f=g)


def apply(f, x):
    return np.sum(f(x) * x)


def closes_over_locals(x, c):
    s = 2.0 * c

    def scaled(y):
        return s * y + c                    # the caller's locals, as a closure reads them
    return apply(scaled, x) + apply(lambda y: np.exp(-s * y), x)


def make_tendency(rate, weights):
    def tendency(x):
        return rate * x - weights @ x       # cells: a number and an array
    return tendency


cell_tendency = make_tendency(0.5, np.array([[1.0, 0.2, 0.0], [0.1, 1.0, 0.3],
                                             [0.0, 0.4, 1.0]]))


def uses_cells(x):
    return np.sum(cell_tendency(x) ** 2)


def rng_args(name, *shapes):
    rng = rng_for(name)
    return rng, tuple(rng.random(s) + 0.5 for s in shapes)


def check(func, args, rng, bitwise=True):
    k = kernel(func)
    got, want = k(*args), func(*args)
    if bitwise:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-13)
    check_vjp_and_jvp(k, func, args, rng)


def test_rk4_with_a_lambda_as_python():
    rng, (x,) = rng_args("rk4", 8)
    check(l96_step, (x, 0.0, 0.01), rng)
    check(l96_steps, (x, 0.01), rng, bitwise=False)


def test_function_defaults_and_named_lambdas():
    rng, (x,) = rng_args("defaults", 5)
    check(smooth, (x,), rng, bitwise=False)
    check(lambda x: smooth(x, np.exp), (x,), rng, bitwise=False)
    np.testing.assert_allclose(kernel(smooth)(x, np.tanh, square), smooth(x, np.tanh, square),
                               rtol=1e-14)       # functions passed from Python


def test_nested_functions_close_over_the_callers_locals():
    rng, (x,) = rng_args("closure", 6)
    check(closes_over_locals, (x, 0.3), rng, bitwise=False)


def test_closure_cells_of_module_level_functions():
    rng, (x,) = rng_args("cells", 3)
    check(uses_cells, (x,), rng, bitwise=False)


# ---- module-level arrays, NumPy by name -----------------------------------------------------
LV_R = np.array([1.0, 0.72, 1.53, 1.27])
LV_A = np.array([[1.0, 1.09, 1.52, 0.0], [0.0, 1.0, 0.44, 1.36],
                 [2.33, 0.0, 1.0, 0.47], [1.21, 0.51, 0.35, 1.0]])


def lv_dxdt(x):
    return LV_R * x * (1 - x @ LV_A.T)


def lv_loss(x, dt):
    y = x + dt * lv_dxdt(x)
    return np.sum(tanh(y) + zeros(4) + LV_A[0, 1] * y)


def test_module_level_arrays_and_numpy_by_name():
    rng, (x,) = rng_args("lv", 4)
    x = x * 0.3
    check(lv_dxdt, (x,), rng, bitwise=False)
    check(lv_loss, (x, 0.1), rng, bitwise=False)


def test_module_level_arrays_are_read_at_every_call():
    global LV_R
    x = np.full(4, 0.2)
    k = kernel(lv_dxdt)
    saved = LV_R
    try:
        first = k(x)
        LV_R = LV_R * 2.0                      # rebound: Python reads the new array
        np.testing.assert_allclose(k(x), lv_dxdt(x), rtol=1e-13)
        LV_R[0] = 5.0                          # changed in place
        np.testing.assert_allclose(k(x), lv_dxdt(x), rtol=1e-13)
        assert not np.allclose(first, k(x))
    finally:
        LV_R = saved


def forced(x):
    return np.sum(FORCE * x * x) + values_helpers.RATE * x[0]


def squares(x):
    return np.sum(square(x))


class Forcing:
    def __init__(self, F):
        self.F = F

    def tendency(self, x):
        return np.sum(self.F * x)

    def step(self, x):
        return x[0] + 0.1 * self.tendency(x)


def test_numbers_and_functions_from_outside_are_read_at_every_call():
    """A number from outside is a constant of the compiled code: changed after a call, the
    next call compiles anew and sees it, as Python does (it saw the first value: a silent
    wrong answer), in forward calls, gradients and through a method's ``self``."""
    global FORCE, square
    x = np.linspace(0.1, 0.4, 4)
    k = kernel(forced)
    saved, saved_rate, saved_square = FORCE, values_helpers.RATE, square
    try:
        assert k(x) == pytest.approx(forced(x), rel=1e-14)
        FORCE = 10.0
        values_helpers.RATE = 2.0
        assert k(x) == pytest.approx(forced(x), rel=1e-14)
        np.testing.assert_allclose(grad(k, "x")(x), 2 * FORCE * x + [2.0, 0, 0, 0], rtol=1e-14)
        calls = kernel(squares)
        assert calls(x) == pytest.approx(np.sum(x * x), rel=1e-14)
        square = np.exp                         # a helper rebound at module level
        assert calls(x) == pytest.approx(np.sum(np.exp(x)), rel=1e-14)
    finally:
        FORCE, values_helpers.RATE, square = saved, saved_rate, saved_square
    model = Forcing(8.0)
    stepper = kernel(model.step)                 # reads self.tendency: a new object per read
    for _ in range(3):
        assert stepper(x) == pytest.approx(x[0] + 0.1 * 8.0 * np.sum(x), rel=1e-14)
    assert len(stepper.specializations) == 1              # compiled once, not at every call
    t = kernel(model.tendency)
    assert t(x) == pytest.approx(8.0 * np.sum(x), rel=1e-14)
    model.F = 3.0
    assert t(x) == pytest.approx(3.0 * np.sum(x), rel=1e-14)
    assert k(x) == pytest.approx(forced(x), rel=1e-14)     # back to the first: its code


PERIODIC = False


def boundaries(arr, grid, edge=None):
    """Shallow-water's enforce_boundaries: a string argument, a module-level flag."""
    assert grid in ("h", "u", "v")
    if PERIODIC:
        arr[:, 0] = arr[:, -2]
    elif grid == "u":
        arr[:, -2] = 0.0
    if grid == "v" and edge is not None:
        arr[-2, :] = edge
    return np.sum(arr * arr)


def test_strings_none_and_flags_are_constants_of_the_specialisation():
    global PERIODIC
    k = kernel(boundaries)
    for args in (("h",), ("u",), ("v", 2.5), ("v", None), ("u", None)):
        a, b = np.ones((4, 5)), np.ones((4, 5))
        assert k(a, *args) == boundaries(b, *args) and np.array_equal(a, b), args
    np.testing.assert_array_equal(grad(k, "arr")(np.ones((3, 3)), "u"),
                                  [[2.0, 0.0, 2.0]] * 3)
    try:
        PERIODIC = True                        # read again: the next call compiles anew
        a, b = np.arange(20.0).reshape(4, 5), np.arange(20.0).reshape(4, 5)
        assert k(a, "u") == boundaries(b, "u") and np.array_equal(a, b)
    finally:
        PERIODIC = False
    with pytest.raises(KernelSyntaxError, match=r"`assert 'x' in \('h', 'u', 'v'\)` always fails"):
        k(np.ones((3, 3)), "x")


def test_gradients_with_module_level_arrays():
    """``grad`` differentiates the arguments; the hidden arrays are not among them."""
    rng, (x,) = rng_args("lv grad", 4)
    x = x * 0.3
    k = kernel(lv_loss)
    g = grad(k, "x")(x, 0.1)
    d = rng.standard_normal(4)
    want = fd_directional(lambda xs: lv_loss(*xs), (x, 0.1), {"x": 0}, {"x": d})
    assert inner(g, d) == pytest.approx(want, rel=1e-7)
    assert k.specialize((x, 0.1)).floating == ["x", "dt"]


LV_A_T = LV_A.T                                 # strided: read through a contiguous copy


def lv_transposed(x):
    return x @ LV_A_T + LV_A_T[1]


def test_strided_module_level_arrays():
    rng, (x,) = rng_args("lv transposed", 4)
    check(lv_transposed, (x,), rng, bitwise=False)


def writes_module_array(x):
    LV_R[0] = x[0]
    return np.sum(x)


def test_writing_a_module_level_array_is_refused_naming_the_line():
    with pytest.raises(KernelSyntaxError, match="'LV_R' is an array from outside") as info:
        kernel(writes_module_array)(np.ones(4))
    line = writes_module_array.__code__.co_firstlineno + 1
    assert f"test_values.py:{line}:" in str(info.value)


# ---- methods of model objects ---------------------------------------------------------------
class Shifted:
    """A Lorenz-96-like model in DAPPER's style: parameters and a coupling matrix as
    attributes, a helper method."""

    def __init__(self, n, F):
        self.F = F
        self.offsets = (1, -2, -1)
        self.M = np.eye(n) * 0.1 + np.diag(np.full(n - 1, 0.05), 1)

    def shift(self, x, n):
        return np.roll(x, -n)

    def dxdt(self, x):
        a, b, c = self.offsets
        return (self.shift(x, a) - self.shift(x, b)) * self.shift(x, c) - x + self.F \
            - self.M @ x

    def loss(self, x, dt):
        y = x + dt * self.dxdt(x)
        return np.sum(y * y)

    def writes(self, x):
        self.last = x
        return np.sum(x)

    def writes_array(self, x):
        self.M[0, 0] = x[0]
        return np.sum(x)


def test_bound_methods_read_self_as_python():
    model = Shifted(6, 8.0)
    rng, (x,) = rng_args("method", 6)
    check(model.dxdt, (x,), rng, bitwise=False)
    check(model.loss, (x, 0.05), rng, bitwise=False)


def test_an_objects_arrays_are_read_at_every_call():
    model = Shifted(6, 8.0)
    x = np.linspace(0.1, 0.6, 6)
    k = kernel(model.dxdt)
    k(x)
    model.M[0, 0] = 3.0
    np.testing.assert_allclose(k(x), model.dxdt(x), rtol=1e-13)


def test_writing_self_is_refused_naming_the_line():
    model = Shifted(6, 8.0)
    with pytest.raises(KernelSyntaxError, match="writes an attribute") as info:
        kernel(model.writes)(np.ones(6))
    line = Shifted.writes.__code__.co_firstlineno + 1
    assert f"test_values.py:{line}:" in str(info.value)
    with pytest.raises(KernelSyntaxError, match="'self.M' is an array from outside") as info:
        kernel(model.writes_array)(np.ones(6))
    line = Shifted.writes_array.__code__.co_firstlineno + 1
    assert f"test_values.py:{line}:" in str(info.value)


# ---- decorated functions --------------------------------------------------------------------
def ens_compatible(f):
    """DAPPER's idea: a tendency written for (variables, members) applied to (members,
    variables) ensembles by transposing in and out."""
    @functools.wraps(f)
    def wrapper(x, *args, **kwargs):
        return f(x.T, *args, **kwargs).T
    return wrapper


@ens_compatible
def l63_dxdt(x, sigma, beta=8.0 / 3):
    d = np.zeros_like(x)
    d[0] = sigma * (x[1] - x[0])
    d[1] = x[0] * (28.0 - x[2]) - x[1]
    d[2] = x[0] * x[1] - beta * x[2]
    return d


def ensemble_step(E, dt):
    return E + dt * l63_dxdt(E, 10.0, beta=2.5)


def test_decorated_functions_compile_with_their_wrapper():
    rng, (E,) = rng_args("ens", (5, 3))
    check(l63_dxdt, (E, 10.0), rng)
    check(ensemble_step, (E, 0.01), rng)


@functools.lru_cache(maxsize=None)
def cached(x):
    return x


def test_a_wrapper_without_source_is_refused():
    with pytest.raises(KernelSyntaxError, match="wrapper has no Python source"):
        kernel(cached)


# ---- NumPy functions: diag, average, tile ---------------------------------------------------
def lv_jacobian(x):
    """LotkaVolterra's d2x_dtdx in its style: np.diag both ways."""
    J = np.diag(LV_R - LV_R * (x @ LV_A.T)) - (LV_R * x)[:, None] * LV_A
    return J + np.diag(np.diag(J, k=1), k=1) + np.diag(x[1:], k=-1)


def diagonals(A, v):
    return np.sum(np.diag(A) * np.diag(A, 1)[0]) + np.sum(np.diag(A, -2)) \
        + np.sum(np.diag(v, 2) @ A.T * 0.5)


def averages(A, w, v):
    return np.average(A) + np.sum(np.average(A, axis=0, weights=w) ** 2) \
        + np.average(v, weights=v * v) + np.sum(np.average(A, axis=1, weights=A * A))


def tiles(x, A):
    return np.sum(np.tile(x, 3) * np.tile(x, (2, 1)).sum(axis=0)[0]) + \
        np.sum(np.tile(A, (2, 3)) ** 2) + np.sum(np.tile(x, (2, 1, 2))[1, 0] * x[0])


def test_diag():
    rng, (x,) = rng_args("diag", 4)
    check(lv_jacobian, (x * 0.3,), rng, bitwise=False)
    rng, (A, v) = rng_args("diag2", (4, 5), 3)
    np.testing.assert_array_equal(kernel(superdiagonal)(A), superdiagonal(A))   # index maps
    check(diagonals, (A, v), rng, bitwise=False)


def superdiagonal(A):
    return np.diag(A, 1) + 0.0


def test_average():
    rng, (A, w, v) = rng_args("average", (4, 3), 4, 5)
    check(averages, (A, w, v), rng, bitwise=False)


def test_tile():
    rng, (x, A) = rng_args("tile", 3, (2, 2))
    check(tiles, (x, A), rng, bitwise=False)


def test_functions_as_arguments_of_a_kernel():
    """A function passed from Python is a constant of the specialisation (keyed by it)."""
    rng, (x,) = rng_args("function argument", 8)
    k = kernel(rk4)
    f = lambda x, t: l96_dxdt(x) * (1.0 + t)         # noqa: E731
    got = k(f, x, 0.5, 0.01)
    np.testing.assert_array_equal(got, rk4(f, x, 0.5, 0.01))
    np.testing.assert_array_equal(k(cell_rate, x[:3], 0.5, 0.01),
                                  rk4(cell_rate, x[:3], 0.5, 0.01))
    _, pullback = vjp(k, f, x, 0.5, 0.01)
    d = rng.standard_normal(8)
    want = fd_directional(lambda xs: np.sum(rk4(f, xs[0], 0.5, 0.01) * d), (x,), {"x": 0},
                          {"x": d})
    assert inner(pullback({"return": d})["x"], d) == pytest.approx(want, rel=1e-7)


def cell_rate(x, t):
    return cell_tendency(x) * t


def ndindex_loops(A, B):
    s = 0.0
    for i, j in np.ndindex(A.shape):
        s += A[i, j] * B[j, i]
    for idx in np.ndindex(2, 3):
        A[idx] = A[idx] * 2.0 + s
    return s + np.sum(A * A)


def test_ndindex_loops():
    rng, (A, B) = rng_args("ndindex", (3, 4), (4, 3))
    k = kernel(ndindex_loops)
    a1, a2 = A.copy(), A.copy()
    assert k(a1, B) == pytest.approx(ndindex_loops(a2, B), rel=1e-14)     # a running sum
    np.testing.assert_allclose(a1, a2, rtol=1e-14)
    check_vjp_and_jvp(k, ndindex_loops, (A, B), rng)


class Config:
    RATE = 0.25
    WEIGHTS = np.array([1.0, 2.0, 3.0])

    @classmethod
    def scaled(cls, x):
        return cls.RATE * x * cls.WEIGHTS

    @staticmethod
    def plain(x):
        return x * x


def uses_classes(x):
    return np.sum(Config.scaled(x) + Config.plain(x)) * Config.RATE


def test_classes_and_their_methods():
    rng, (x,) = rng_args("classes", 3)
    check(uses_classes, (x,), rng, bitwise=False)
    check(Config.scaled, (x,), rng)


# ---- refusals -------------------------------------------------------------------------------
def calls_cached(x):
    return np.sum(cached(x))


def printing(f):
    @functools.wraps(f)
    def wrapper(x):
        print("called")
        return f(x)
    return wrapper


@printing
def printed(x):
    return x * 2.0


def calls_printed(x):
    return np.sum(printed(x))


def counts_args(f):
    @functools.wraps(f)
    def wrapper(x, *args):
        return f(x, *args) * len(args)
    return wrapper


@counts_args
def counted(x, y):
    return x * y


def calls_counted(x):
    return np.sum(counted(x, 2.0))


def test_decorators_kernels_cannot_follow_are_refused_naming_the_line():
    with pytest.raises(KernelSyntaxError, match="`cached` is wrapped by a decorator whose "
                                                "wrapper has no Python source") as info:
        kernel(calls_cached)(np.ones(3))
    assert f"test_values.py:{calls_cached.__code__.co_firstlineno + 1}:" in str(info.value)
    with pytest.raises(KernelSyntaxError, match="print") as info:
        kernel(calls_printed)(np.ones(3))
    line = printing.__code__.co_firstlineno + 3          # the wrapper's print
    assert f"test_values.py:{line}:" in str(info.value), str(info.value)
    assert f"called at {__file__}:{calls_printed.__code__.co_firstlineno + 1}" in \
        str(info.value)
    with pytest.raises(KernelSyntaxError, match=r"\*args\) is used other than forwarded"):
        kernel(calls_counted)(np.ones(3))


def passes_self(self_like, x):
    return np.sum(x)


class UsesSelf:
    def total(self, x):
        return passes_self(self, x)


def test_self_as_a_value_is_refused_naming_the_line():
    with pytest.raises(KernelSyntaxError, match="`self` is used as a value") as info:
        kernel(UsesSelf().total)(np.ones(3))
    assert f"test_values.py:{UsesSelf.total.__code__.co_firstlineno + 1}:" in str(info.value)


class Coupled:
    """VL20/LorenzUV's style: ``unpack`` returns the sizes and parameters with the state's
    parts; a nested ``md`` gives indices."""

    def __init__(self, nX=6, F=10, alpha=1):
        self.nX, self.F, self.alpha = nX, F, alpha

    def unpack(self, x):
        return self.nX, self.F, self.alpha, x[:self.nX], x[self.nX:]

    def dxdt(self, x):
        nX, F, alpha, X, theta = self.unpack(x)
        d = np.zeros_like(x)
        d[:nX] = np.roll(X, -1) * theta - alpha * X + F
        d[nX:] = X * np.roll(theta, 1)
        return d

    def jacobian(self, x):
        nX, F, alpha, X, theta = self.unpack(x)

        def md(i):
            return np.mod(i, nX)

        J = np.zeros((2 * nX, 2 * nX))
        for k in range(nX):
            J[k, md(k + 1)] = theta[k] * x[md(k - 1)]
            J[k, k + nX] = x[md(k + 1)] + F
        return J


def test_integers_returned_by_methods_and_index_functions():
    model = Coupled()
    rng, (x,) = rng_args("coupled", 12)
    check(model.dxdt, (x,), rng)
    check(model.jacobian, (x,), rng)


# ---- DAPPER's integrator style: stages and noise as defaults, branches decided by them ------
def rk(f, x, t, dt, stages=4, s=0):
    if s > 0:
        W = s * np.sqrt(dt) * RANDOM.standard_normal(x.shape)   # never runs: s is 0
    else:
        W = 0
    if stages >= 1: k1 = dt * f(x, t) + W                        # noqa: E701
    if stages >= 2: k2 = dt * f(x + k1 / 2.0, t + dt / 2.0) + W  # noqa: E701
    if stages == 4:
        k3 = dt * f(x + k2 / 2.0, t + dt / 2.0) + W
        k4 = dt * f(x + k3, t + dt) + W
    if stages == 1:
        y = x + k1
    elif stages == 2:
        y = x + k2
    elif stages == 4:
        y = x + (k1 + 2.0 * (k2 + k3) + k4) / 6.0
    else:
        raise NotImplementedError
    return y


RANDOM = np.random.default_rng(0)


def staged(x, dt):
    return rk(lambda x, t: values_helpers.decay(x), x, 0.0, dt) + \
        rk(lambda x, t: values_helpers.decay(x, reverse=True) * t, x, 1.0, dt, stages=2)


def test_branches_decided_by_defaults_and_module_attributes():
    rng, (x,) = rng_args("staged", 4)
    check(staged, (x, 0.1), rng)


def test_shapes_of_views_and_sums_of_shapes():
    def parts(x):
        U, V = x[:4], x[4:]
        assert V.shape[-1] == 2 * len(U), "V is twice U"
        pad = np.ones(2 * len(U) + 1)                 # a size, not a sum of shapes
        return U * V.reshape(V.shape[:-1] + (4, 2)).sum(-1) * U.size + np.sum(pad[:4] * U)
    rng, (x,) = rng_args("shapes", 12)
    check(parts, (x,), rng)


def early_return(x, mode=1):
    if mode == 1:
        return np.sum(x * x)            # what Python runs: the rest is never lowered
    print("unreachable")
    return 0.0


def test_a_decided_branch_that_returns_ends_the_kernel():
    rng, (x,) = rng_args("early", 5)
    check(early_return, (x,), rng, bitwise=False)


def autonomous_step(x0, dt):
    return rk4(lambda x, t: l96_dxdt(x), x0, np.nan, dt)     # t is never needed


def test_arguments_no_one_reads_are_not_evaluated():
    rng, (x,) = rng_args("autonomous", 8)
    check(autonomous_step, (x, 0.01), rng)


class FloatSize:
    n = 2.5

    def head(self, x):
        return np.sum(x[:self.n])


def test_messages_name_what_comes_from_outside():
    with pytest.raises(KernelSyntaxError, match="'self.n' is the float 2.5 from outside") \
            as info:
        kernel(FloatSize().head)(np.ones(4))
    assert f"test_values.py:{FloatSize.head.__code__.co_firstlineno + 1}:" in str(info.value)


def passes_on(f, x, t):
    return f(x, np.sqrt(t)) + f(x, t)          # a call in the argument: evaluated


def test_an_argument_with_a_call_in_it_is_evaluated():
    rng, (x,) = rng_args("passes on", 3)
    check(lambda x, t: passes_on(lambda y, s: y * 2.0, x, t), (x, 0.5), rng)


# ---- methods of objects at module level (benchpress' `bench = util.Benchmark(...)`) ----------
LOADED_AS_BOHRIUM = False           # benchpress' util.bh_is_loaded_as_np


class Benchmark:
    def __init__(self):
        self.args = None                # read only where LOADED_AS_BOHRIUM
        self.flushes = 0
        self.scale = 0.5
        self.dtype = "float64"

    def flush(self, ignore_no_flush_arg=False):
        if LOADED_AS_BOHRIUM:
            if ignore_no_flush_arg or not self.args.no_flush:
                self.flushes += 1
                print("flushed")

    def scaled(self, x):
        if self.dtype == "float32":
            return x.astype(np.float32)
        return self.scale * x

    def count(self):
        self.flushes = self.flushes + 1

    def report(self, x):
        print(x)


bench = Benchmark()


def flushed_sum(x, n, w=2.0):
    s = 0.0
    for i in range(n):
        s += np.sum(bench.scaled(x)) * w + i
        bench.flush()
    return s


def _with_a_closure_object():
    mine = Benchmark()

    def run(x):
        mine.flush()
        return mine.scaled(x * x)
    return run


closure_method = _with_a_closure_object()


def test_methods_of_module_level_and_closure_objects():
    """Their dead branches (a module-level flag False) hold what kernels cannot run:
    writes of attributes, attributes the object lacks, print."""
    rng, (x,) = rng_args("methods", 5)
    check(lambda x: flushed_sum(x, 3), (x,), rng, bitwise=False)
    check(closure_method, (x,), rng)


def counts_flushes(x):
    bench.count()
    return np.sum(x)


def reports(x):
    bench.report(x)
    return np.sum(x)


@pytest.mark.parametrize("f, text, message", [
    (counts_flushes, "self.flushes = self.flushes + 1",
     r"writes an attribute.*\(in count\(\), called "),
    (reports, "print(x)", r"print.*\(in report\(\), called at ")], ids=["mutation", "print"])
def test_a_method_needing_the_object_is_refused_naming_it(f, text, message):
    lines, first = inspect.getsourcelines(Benchmark)
    line = first + next(k for k, s in enumerate(lines) if text in s)
    with pytest.raises(KernelSyntaxError, match=rf"test_values.py:{line}:.*{message}"):
        kernel(f)(np.ones(3))


def test_a_live_branch_of_a_method_is_lowered(monkeypatch):
    """With the module flag true, flush's branch runs, and what it needs is refused."""
    monkeypatch.setattr(bench, "args", types.SimpleNamespace())
    monkeypatch.setitem(globals(), "LOADED_AS_BOHRIUM", True)
    with pytest.raises(KernelSyntaxError, match=r"SimpleNamespace object has no attribute "
                                                r"'no_flush'.*\(in flush\(\), called at "):
        kernel(flushed_sum)(np.ones(3), 2)
