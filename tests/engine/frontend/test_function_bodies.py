"""The rest of ordinary function bodies: string literals used as comments, imports,
functions defined in the body (``def``, ``f = lambda ...``), inlined at each call.

Forward results against the function run as plain Python, gradients against central
differences; what stays unsupported is refused naming the line."""
import functools

import numpy as np
import pytest

from adjoint import AssertionFailed, BoundsError, KernelSyntaxError, kernel, vjp
from kernel_testing import check_vjp_and_jvp, copy_args, fd_atol, fd_directional, inner, rng_for


def commented(u):
    """The docstring."""
    s = np.sum(u * u)
    """A string used as a comment, as real code does."""
    'another one'
    return s * 2.0


def nested_def(u, c):
    def smooth(x, w=0.25):          # a default, evaluated when the def runs
        return w * x[:-2] + (1.0 - 2.0 * w) * x[1:-1] + w * x[2:]

    def energy(x):
        return np.sum(x * x)
    v = smooth(u)
    v = smooth(v, 0.5)
    return energy(v) * c


def lambdas(u):
    sq = lambda x: x * x                  # noqa: E731
    shift = lambda x, k: x[k:] - x[:-k]   # noqa: E731
    return np.sum(sq(shift(u, 2))) + np.sum(sq(u))


def _piecewise(x):
    if x > 1.0:
        return 2.0 * x
    elif x < -1.0:
        return -x
    return x * x


def returns_in_branches(u):
    """A helper choosing among returns (``if/elif`` with a final return): one
    conditional expression, as Python evaluates it."""
    s = 0.0
    for i in range(u.shape[0]):
        s += _piecewise(u[i])
    return s


def imports_inside(u):
    """Imports among the body's own statements, as scripts write them."""
    import math
    import numpy
    from scipy.special import expit as sigmoid
    from scipy import special
    return numpy.sum(sigmoid(u) * special.erf(u)) + math.exp(u[0])


def test_an_import_in_a_loop_or_a_missing_name_is_refused_naming_the_line():
    def nested(u):
        for k in range(2):
            import math
        return u[0]

    def missing(u):
        from numpy import no_such_function
        return u[0]
    for f, message, line in ((nested, "`import math` \\(Import\\) is not supported", 2),
                             (missing, "cannot import name 'no_such_function' from 'numpy'", 1)):
        with pytest.raises(KernelSyntaxError, match=message) as info:
            kernel(f)(np.ones(3))
        assert f":{f.__code__.co_firstlineno + line}:" in str(info.value)


CASES = [(commented, lambda r: (r.random(6),)),
         (imports_inside, lambda r: (r.standard_normal(6),)),
         (nested_def, lambda r: (r.random(8), 1.5)),
         (lambdas, lambda r: (r.random(7),)),
         (returns_in_branches, lambda r: (r.uniform(-3, 3, 9),))]


@pytest.mark.parametrize("f, make", CASES, ids=[c[0].__name__ for c in CASES])
def test_forward_and_gradient_as_python(f, make):
    rng = rng_for(f.__name__)
    args = make(rng)
    assert kernel(f)(*args) == pytest.approx(f(*args), rel=1e-14)
    outs, pullback = vjp(kernel(f), *args)
    back = pullback({"return": 1.0})
    d = {"u": rng.standard_normal(args[0].shape)}
    want = fd_directional(lambda xs: f(*xs), args, {"u": 0}, d)
    assert inner(back["u"], d["u"]) == pytest.approx(want, rel=1e-7, abs=fd_atol(f(*args)))


def closures(u, dt, n):
    c = 2.0
    step = lambda x: x + dt * c * (x * x)       # noqa: E731 (reads the body's dt and c)

    def steps(x):
        for k in range(n):
            x = step(x)
        return x
    return np.sum(steps(u) * u)


def test_closures_read_the_enclosing_names():
    args = (np.linspace(0.1, 0.9, 5), 0.05, 3)
    assert kernel(closures)(*args) == pytest.approx(closures(*args), rel=1e-14)
    _, pullback = vjp(kernel(closures), *args)
    back = pullback({"return": 1.0})
    d = {"u": np.cos(np.arange(5.0)), "dt": 0.7}
    want = fd_directional(lambda xs: closures(*xs), args, {"u": 0, "dt": 1}, d)
    got = inner(back["u"], d["u"]) + back["dt"] * d["dt"]
    assert got == pytest.approx(want, rel=1e-7, abs=fd_atol(closures(*args)))


def decorated_inside(u):
    @staticmethod
    def f(x):
        return x
    return np.sum(f(u))


def test_decorated_local_function_is_refused_naming_the_line():
    with pytest.raises(KernelSyntaxError, match="decorated functions") as info:
        kernel(decorated_inside)(np.ones(3))
    line = decorated_inside.__code__.co_firstlineno + 2
    assert f"test_function_bodies.py:{line}:" in str(info.value), str(info.value)


def _doubled(f):
    @functools.wraps(f)
    def wrapper(x):
        return 2.0 * f(x)
    return wrapper


@_doubled
def doubled_sin(x):
    return np.sin(x)


def calls_decorated(u):
    return np.sum(doubled_sin(u))       # was: compiled without the decorator (sin, not 2 sin)


class Model:
    F = 8.0

    def rhs(self, x):
        return np.sum(x * self.F)


def test_decorated_functions_and_methods_compile_what_python_runs():
    """Refused before (the engine would have compiled the insides alone); now the wrapper
    and self are compiled too (test_values.py has the rest)."""
    u = np.linspace(0.1, 0.9, 3)
    assert kernel(calls_decorated)(u) == pytest.approx(calls_decorated(u), rel=1e-14)
    np.testing.assert_array_equal(kernel(doubled_sin)(u), doubled_sin(u))
    assert kernel(Model().rhs)(u) == pytest.approx(Model().rhs(u), rel=1e-14)


def conditional_values(x, y, c, n):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * 2.0 if x[i] > c else -x[i] * y[i]     # on data: C's c ? a : b
    z = (x * 2.0 if n > 0 else y) * (x if x[0] > 0.5 else y)   # arrays, number conditions
    return s + np.sum(z * z)


@pytest.mark.parametrize("x0, n", [(0.2, 1), (0.9, 0)], ids=["first", "second"])
def test_conditional_expressions_as_python(x0, n):
    rng = rng_for(f"ifexp {x0}")
    x, y = rng.random(6), rng.random(6)
    x[0] = x0
    args = (x, y, 0.5, n)
    assert kernel(conditional_values)(*args) == pytest.approx(conditional_values(*args),
                                                              rel=1e-14)
    check_vjp_and_jvp(kernel(conditional_values), conditional_values, args, rng)


def guarded_neighbours(x, y):
    """Boundaries written as choices: Python evaluates only the branch the integer test
    picks, so ``x[i + 1]`` at the last i is never read (it was refused as out of bounds)."""
    n = x.shape[0]
    for i in range(n):
        y[i] = (x[i + 1] if i < n - 1 else 0.0) - 2.0 * x[i] + (x[i - 1] if i > 0 else x[0])
    return np.sum(y * y)


def test_a_choice_on_an_integer_test_reads_only_the_branch_taken():
    rng = rng_for("guarded")
    args = (rng.random(7), np.zeros(7))
    got, want = copy_args(args), copy_args(args)
    # the elements bitwise; the sum within rounding (SIMD lanes add in another order)
    assert kernel(guarded_neighbours)(*got) == pytest.approx(guarded_neighbours(*want),
                                                              rel=1e-15)
    np.testing.assert_array_equal(got[1], want[1])
    check_vjp_and_jvp(kernel(guarded_neighbours), guarded_neighbours, args, rng)


def checked_sizes(x, k):
    assert x.shape[0] > k, "x must be longer than k"
    assert k >= 0
    return x[k] * 2.0


def checked_data(x):
    assert x[0] > 0.0
    return x[0]


def test_asserts_on_sizes_are_checked_per_call():
    k = kernel(checked_sizes)
    assert k(np.arange(4.0), 2) == 4.0
    with pytest.raises(BoundsError, match="assert failed: `x.shape\\[0\\] > k`: x must be"):
        k(np.arange(4.0), 4)


def string_of_springs(pos, force):
    """An assert on data in a loop (pythran's wave.py checks a spring's length so)."""
    for i in range(1, pos.shape[0]):
        dx = pos[i] - pos[i - 1]
        assert dx != 0, "two mass points coincide"
        assert i < pos.shape[0]                      # a loop variable: checked too
        force[i] = -2.5 * dx + 1.0 / dx
    return np.sum(force * pos)


def test_an_assert_on_data_is_checked_where_python_checks_it():
    rng = rng_for("springs")
    pos = np.cumsum(rng.random(9) + 0.5)
    args = (pos, np.zeros(9))
    got, want = copy_args(args), copy_args(args)
    assert kernel(string_of_springs)(*got) == string_of_springs(*want)
    np.testing.assert_array_equal(got[1], want[1])
    check_vjp_and_jvp(kernel(string_of_springs), string_of_springs, args, rng)
    assert kernel(checked_data)(np.ones(2)) == 1.0


def test_a_failed_assert_raises_assertion_error_naming_line_and_message():
    pos = np.array([0.0, 1.0, 3.0, 3.0, 5.0])
    line = string_of_springs.__code__.co_firstlineno + 4
    for run in (lambda p, f: kernel(string_of_springs)(p, f),
                lambda p, f: vjp(kernel(string_of_springs), p, f)):
        with pytest.raises(AssertionFailed, match=f"test_function_bodies.py:{line}: assert "
                                                  "failed: `dx != 0`: two mass points"):
            run(pos, np.zeros(5))
    with pytest.raises(AssertionError):                  # Python's type, as Python raises
        kernel(checked_data)(-np.ones(2))
    assert kernel(string_of_springs)(pos[:3], np.zeros(3)) == \
        string_of_springs(pos[:3], np.zeros(3))          # and the next call runs


def iterations(A, x, y):
    s = 0.0
    for row in A:                 # rows: views, written through
        row *= 2.0
        s += np.sum(row * row)
    for i, v in enumerate(x):     # elements: numbers
        s += v * i
    for a, b in zip(x, y):        # the shorter length
        s += a * b
    return s


def test_iteration_over_arrays_as_python():
    rng = rng_for("iterations")
    args = (rng.random((3, 4)), rng.random(5), rng.random(6))
    got, want = [a.copy() for a in args], [a.copy() for a in args]
    assert kernel(iterations)(*got) == pytest.approx(iterations(*want), rel=1e-14)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    check_vjp_and_jvp(kernel(iterations), iterations, args, rng)


def _match(b1, b2):
    if b1 + b2 == 3:
        return 1
    else:
        return 0


def pairs(seq, table):
    """NPBench nussinov's helper style: an integer from if/else returns."""
    table[0] = _match(seq[0], seq[1])
    for i in range(1, seq.shape[0] - 1):
        table[i] = table[i - 1] + _match(seq[i], seq[i + 1])


def test_integer_helper_with_returns_in_both_branches():
    seq = rng_for("pairs").integers(0, 4, 40).astype(np.int32)
    got, want = np.zeros(39, np.int32), np.zeros(39, np.int32)
    kernel(pairs)(seq, got)
    pairs(seq, want)
    np.testing.assert_array_equal(got, want)


def _early(x):
    if x > 0.0:
        y = 2.0 * x
        return y
    return x


def early_return(u):
    return np.sum(u) + _early(u[0])


def test_a_return_after_other_statements_in_a_branch_is_refused_naming_the_line():
    line = _early.__code__.co_firstlineno + 3
    with pytest.raises(KernelSyntaxError, match=rf"test_function_bodies.py:{line}:.*last "
                                                "statement"):
        kernel(early_return)(np.ones(3))
