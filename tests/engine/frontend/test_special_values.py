"""The floating-point contract: the compiled forward computes what Python computes.

Primal values follow Python's evaluation exactly -- the operations written, in Python's
order, with IEEE semantics; only rewrites that are exact in floating point. Each case is an
expression (or a few statements) compiled in a scalar loop (operands ``x[i]``, NumPy
scalars in ``py_func``) and on whole arrays (operands ``x``), both in one kernel, and
compared with ``py_func`` bitwise (NaN payloads aside, signs of zeros included) on
special values: signed zeros, subnormals, 1e+-300, inf, nan, and ordinary values.
Algebra that holds for reals but not for floats (``x - x`` is nan for inf; ``x * 0.0`` is
-0.0 for negative x; ``(a + 1e16) - 1e16`` is not ``a``) breaks compensated summation and
is what these tests catch.

Then compensated summation loops (Kahan, Neumaier) and a running ``max`` (Python's builtin
keeps the first operand unless the second is greater: it drops a NaN that comes second),
and random kernels from test_property's generator, restricted to operations NumPy
evaluates exactly like the C library, on arrays sprinkled with special values.
"""
import math
import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import test_property as prop
from adjoint import float64, kernel, symbol
from adjoint import configure
from adjoint.options import options
from float_testing import (MIN_NORMAL, SPECIAL, TINY, assert_same, fill, library_ulps,
                           load_kernels, quiet)
from kernel_testing import rng_for

N = symbol("N")
INF, NAN = math.inf, math.nan


@dataclass(frozen=True)
class Case:
    name: str
    body: str               # statements: {R} the result, {x} {y} {z} operands, {other} locals
    arity: int = 1
    loop_only: bool = False  # statements only a loop can hold (if/else)
    ulps: tuple = (0, 0)    # (loop, array): through NumPy's own loops (exp: 1 ulp from glibc)
    points: tuple = ()      # inputs besides the grid (tuples of ``arity`` numbers)


SUMS = ((1.0, 1e-16), (1e16, 1.0), (0.1, 0.2), (1e300, 1e284), (0.3, 0.1))
# NumPy's exp is its own loop, 1 ulp from glibc's; a log after it turns that into an
# absolute 1e-16, many ulps of a small result (what the cases are after, nan, inf or 0
# for a finite number, is further away than any tolerance)
EXP, LOG_EXP = (1, 1), (1 << 20, 1 << 20)
CASES = [
    # identities of the reals that floats do not have
    Case("x - x", "{R} = {x} - {x}"),
    Case("x * 0.0", "{R} = {x} * 0.0"),
    Case("0.0 * x", "{R} = 0.0 * {x}"),
    Case("x + 0.0", "{R} = {x} + 0.0"),
    Case("0.0 + x", "{R} = 0.0 + {x}"),
    Case("x - 0.0", "{R} = {x} - 0.0"),
    Case("0.0 - x", "{R} = 0.0 - {x}"),
    Case("-(-x)", "{R} = -(-{x})"),
    Case("-x", "{R} = -{x}"),
    Case("x / x", "{R} = {x} / {x}"),
    Case("x * 1.0", "{R} = {x} * 1.0"),
    Case("x * 0.5 * 2.0", "{R} = {x} * 0.5 * 2.0"),
    Case("x * 2.0 * 0.5", "{R} = {x} * 2.0 * 0.5"),
    Case("2 * x * 0.1 * 3", "{R} = 2 * {x} * 0.1 * 3"),
    Case("x / 3.0 * 3.0", "{R} = {x} / 3.0 * 3.0"),
    Case("x / 10.0", "{R} = {x} / 10.0"),
    Case("1.0 / (1.0 / x)", "{R} = 1.0 / (1.0 / {x})"),
    Case("(x + 1e16) - 1e16", "{R} = ({x} + 1e16) - 1e16"),
    Case("x + 1e16 in a local", "{t} = {x} + 1e16\n{R} = {t} - 1e16"),
    # powers and roots: Python's ** on numbers is C's pow; NumPy's on arrays squares for 2,
    # takes sqrt for 0.5 and reciprocals for -1, and has its own pow otherwise (1 ulp)
    # x ** 2 is x * x, the correctly rounded square; C's pow (Python's ** on numbers) is
    # 1 ulp off it at these points: the one documented exception in the loop form
    Case("x ** 2", "{R} = {x} ** 2", ulps=(1, 0),
         points=((9.97040769332877,), (4.1181202626631395,))),
    Case("x * x", "{R} = {x} * {x}"),
    Case("x ** 3", "{R} = {x} ** 3", ulps=(0, 1), points=((8.09861381839129,),)),
    Case("x ** -1", "{R} = {x} ** -1", points=((8.348059529212806,), (2.852701157460022,))),
    Case("x ** 0", "{R} = {x} ** 0"),
    Case("x ** 0.5", "{R} = {x} ** 0.5", points=((7.787583866300881,), (0.9013763968844198,))),
    Case("np.sqrt(x)", "{R} = np.sqrt({x})"),
    Case("np.sqrt(x) ** 2", "{R} = np.sqrt({x}) ** 2"),
    Case("np.sqrt(x * x)", "{R} = np.sqrt({x} * {x})"),
    Case("np.exp(np.log(x))", "{R} = np.exp(np.log({x}))", ulps=EXP),
    Case("np.log(np.exp(x))", "{R} = np.log(np.exp({x}))", ulps=LOG_EXP,
         points=((1000.0,), (-1000.0,), (709.0,), (710.0,))),
    Case("abs(x)", "{R} = abs({x})"),
    Case("np.abs(-x)", "{R} = np.abs(-{x})"),
    # comparisons with nan are false, != true
    Case("x != x", "{R} = np.where({x} != {x}, 1.0, 0.0)"),
    Case("x == x", "{R} = np.where({x} == {x}, 1.0, 0.0)"),
    Case("x >= x", "{R} = np.where({x} >= {x}, 1.0, 0.0)"),
    # two operands
    Case("(x + y) - y", "{R} = ({x} + {y}) - {y}", 2),
    Case("x + y - x", "{R} = {x} + {y} - {x}", 2),
    Case("x * y / y", "{R} = {x} * {y} / {y}", 2),
    Case("x / y * y", "{R} = {x} / {y} * {y}", 2),
    Case("x * y / y in a local", "{t} = {x} * {y}\n{R} = {t} / {y}", 2),
    Case("x - y", "{R} = {x} - {y}", 2),
    Case("-x + y", "{R} = -{x} + {y}", 2),
    Case("(x + y) * (x - y)", "{R} = ({x} + {y}) * ({x} - {y})", 2),
    Case("x * x - y * y", "{R} = {x} * {x} - {y} * {y}", 2),
    # compensated summation: the rounding error of a sum, exactly
    Case("TwoSum",
         "{R} = ({x} - (({x} + {y}) - (({x} + {y}) - {x}))) + ({y} - (({x} + {y}) - {x}))",
         2, points=SUMS),
    Case("TwoSum in statements",
         "{s} = {x} + {y}\n{bb} = {s} - {x}\n{R} = ({x} - ({s} - {bb})) + ({y} - {bb})",
         2, points=SUMS),
    Case("Fast2Sum", "{R} = {y} - (({x} + {y}) - {x})", 2, points=SUMS),
    Case("Fast2Sum in statements", "{s} = {x} + {y}\n{e} = {s} - {x}\n{R} = {y} - {e}", 2,
         points=SUMS),
    Case("Veltkamp split", "{c} = 134217729.0 * {x}\n{hi} = {c} - ({c} - {x})\n{R} = {x} - {hi}"),
    # maxima and minima: Python's max(a, b) is b if b > a else a; np.maximum propagates
    # nan; np.fmax drops it; between 0.0 and -0.0 np.maximum gives the second
    Case("max(x, y)", "{R} = max({x}, {y})", 2, loop_only=True),
    Case("min(x, y)", "{R} = min({x}, {y})", 2, loop_only=True),
    Case("max(x, y, 0.0)", "{R} = max({x}, {y}, 0.0)", 2, loop_only=True),
    Case("np.maximum(x, y)", "{R} = np.maximum({x}, {y})", 2),
    Case("np.minimum(x, y)", "{R} = np.minimum({x}, {y})", 2),
    Case("np.maximum(x, 0.0)", "{R} = np.maximum({x}, 0.0)"),
    Case("np.fmax(x, 1.0)", "{R} = np.fmax({x}, 1.0)"),
    Case("np.fmin(x, 1.0)", "{R} = np.fmin({x}, 1.0)"),
    Case("np.where(x > y, x, y)", "{R} = np.where({x} > {y}, {x}, {y})", 2),
    Case("np.where(~(x > y), x, y)", "{R} = np.where(~({x} > {y}), {x}, {y})", 2),
    Case("if not x > y", "if not {x} > {y}:\n    {R} = {x}\nelse:\n    {R} = {y}", 2,
         loop_only=True),
    Case("if x > y else", "if {x} > {y}:\n    {R} = {x}\nelse:\n    {R} = {y}", 2,
         loop_only=True),
    # numbers in sums and products stay where they are written
    Case("1.5 * (x - y)", "{R} = 1.5 * ({x} - {y})", 2),
    Case("x + (0.25 + y)", "{R} = {x} + (0.25 + {y})", 2),
    Case("(x + 2.0) + 0.5", "{R} = ({x} + 2.0) + 0.5"),
    Case("x - (y + 2.0) - 0.5", "{R} = {x} - ({y} + 2.0) - 0.5", 2),
    # constants computed as Python computes them (doubles, libm), not in exact arithmetic
    Case("x + np.cos(np.sin(0.5))", "{R} = {x} + np.cos(np.sin(0.5))"),
    Case("x * (1e308 * 10.0 / 10.0)", "{R} = {x} * (1e308 * 10.0 / 10.0)"),
    Case("x * (1e-200 * 1e-200 * 1e200)", "{R} = {x} * (1e-200 * 1e-200 * 1e200)"),
    Case("x + (0.1 + 0.2)", "{R} = {x} + (0.1 + 0.2)"),
    # three operands: association
    Case("(x + y) + z", "{R} = ({x} + {y}) + {z}", 3),
    Case("x + (y + z)", "{R} = {x} + ({y} + {z})", 3),
    Case("x + y + z - y", "{R} = {x} + {y} + {z} - {y}", 3),
    Case("(x * y) * z", "{R} = ({x} * {y}) * {z}", 3),
    Case("x * (y * z)", "{R} = {x} * ({y} * {z})", 3),
    Case("x * y + x * z", "{R} = {x} * {y} + {x} * {z}", 3),
    Case("x * (y + z)", "{R} = {x} * ({y} + {z})", 3),
]
OPERANDS = "xyz"
LIBRARY = re.compile(r"\*\*|np\.(exp|log|sin|cos)")    # what the C library computes


# ---- the kernels ----------------------------------------------------------------------------
def statements(case, form, loop):
    """The case's statements for one form: its operands and result, its locals suffixed."""
    mapping = {v: f"{v}{form}[i]" if loop else f"{v}{form}" for v in OPERANDS[:case.arity]}
    mapping["R"] = f"R{form}[i]" if loop else f"R{form}[:]"
    return fill(case.body, mapping, str(form)).splitlines()


def source(k, case):
    """Kernel ``case<k>``: the loop form writes R0 from x0, y0, ...; the array form R1."""
    forms = (0,) if case.loop_only else (0, 1)
    params = [f"R{f}" for f in forms] + [f"{v}{f}" for f in forms
                                         for v in OPERANDS[:case.arity]]
    lines = ["@kernel", f"def case{k}({', '.join(p + ': float64[N]' for p in params)}):",
             "    for i in range(N):"]
    lines += ["        " + s for s in statements(case, 0, True)]
    if not case.loop_only:
        lines += ["    " + s for s in statements(case, 1, False)]
    return "\n".join(lines) + "\n\n"


MODULE = load_kernels([source(k, c) for k, c in enumerate(CASES)], "special_values")
GRIDS = {1: SPECIAL,
         2: (0.0, -0.0, TINY, -TINY, MIN_NORMAL, 1e-300, 1e300, -1e300, INF, -INF, NAN, 1.0,
             -1.0, 0.1, 3.0, 1e16),
         3: (0.0, -0.0, TINY, 1e300, INF, -INF, NAN, 1.0, 0.1, 1e16, -1e16)}


def points(case):
    """One array per operand: the grid's every combination, the case's points and ordinary
    values of many magnitudes."""
    rng = rng_for(case.name, "points")
    grid = GRIDS[case.arity]
    combos = np.array(np.meshgrid(*[grid] * case.arity, indexing="ij")).reshape(case.arity, -1)
    shape = (case.arity, 32)
    ordinary = rng.standard_normal(shape) * 10.0 ** rng.uniform(-5, 5, shape)
    extra = np.array(case.points, dtype=float).reshape(-1, case.arity).T
    return tuple(np.concatenate(parts) for parts in zip(combos, extra, ordinary))


# ---- the expression cases -------------------------------------------------------------------
FORMS = [(k, form) for k, case in enumerate(CASES)
         for form in (("loop",) if case.loop_only else ("loop", "array"))]


@pytest.mark.parametrize("k, form", FORMS,
                         ids=[f"{CASES[k].name.replace(' ', '')}-{form}" for k, form in FORMS])
def test_expression_matches_python(k, form):
    case = CASES[k]
    inputs = points(case)
    forms = 1 if case.loop_only else 2
    n = inputs[0].size
    compiled = [np.zeros(n) for _ in range(forms)] + [a.copy() for _ in range(forms)
                                                      for a in inputs]
    python = [a.copy() for a in compiled]
    kernel_ = getattr(MODULE, f"case{k}")
    kernel_(*compiled)
    quiet(kernel_.py_func, *python)
    f = 0 if form == "loop" else 1
    ulps = max(case.ulps[f], library_ulps() if LIBRARY.search(case.body) else 0)
    assert_same(compiled[f], python[f], inputs, f"`{case.name}` ({form})", ulps=ulps)


# ---- loops: compensated sums and a running maximum ------------------------------------------
@kernel
def kahan_sum(x: float64[N]) -> float:
    s = 0.0
    c = 0.0
    for i in range(N):
        y = x[i] - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


@kernel
def kahan_compact(x: float64[N]) -> float:
    s = 0.0
    c = 0.0
    for i in range(N):
        t = s + (x[i] - c)
        c = (t - s) - (x[i] - c)
        s = t
    return s


@kernel
def neumaier_sum(x: float64[N]) -> float:
    s = 0.0
    c = 0.0
    for i in range(N):
        t = s + x[i]
        if abs(s) >= abs(x[i]):
            c += (s - t) + x[i]
        else:
            c += (x[i] - t) + s
        s = t
    return s + c


@kernel
def plain_sum(x: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s = s + x[i]
    return s


@kernel
def running_max(x: float64[N]) -> float:
    m = x[0]
    for i in range(1, N):
        m = max(m, x[i])
    return m


@kernel
def running_min(x: float64[N]) -> float:
    m = x[0]
    for i in range(1, N):
        m = min(m, x[i])
    return m


LOOPS = [kahan_sum, kahan_compact, neumaier_sum, running_max, running_min]


def loop_inputs():
    rng = rng_for("loops")
    wide = rng.standard_normal(200) * 10.0 ** rng.uniform(-12, 12, 200)
    return {"tiny terms": np.array([1.0] + [1e-16] * 200),
            "cancelling": np.array([1e16, 1.0, -1e16, 1.0, 3.0, 1e-3] * 20),
            "wide": wide,
            "inf": np.array([1.0, 2.0, INF, 3.0]),
            "inf and -inf": np.array([1.0, INF, -INF, 3.0]),
            "nan first": np.array([NAN, 1.0, 2.0]),
            "nan later": np.array([1.0, NAN, 2.0, -5.0]),
            "zeros": np.array([-0.0, 0.0, -0.0]),
            "negative zeros": np.array([-0.0, -0.0]),
            "subnormals": np.array([TINY, -TINY, TINY, 1e-310])}


@pytest.mark.parametrize("data", list(loop_inputs()))
@pytest.mark.parametrize("k", LOOPS, ids=lambda k: k.__name__)
def test_loop_matches_python(k, data):
    x = loop_inputs()[data]
    got = k(x.copy())
    want = quiet(k.py_func, x.copy())
    assert_same(np.array([got]), np.array([want]), (), f"{k.__name__} on {data}: {x[:6]}")


@pytest.mark.parametrize("data", list(loop_inputs()))
def test_a_running_sum_is_within_the_rounding_of_a_sum(data):
    """``s = s + x[i]`` is reduced in vector lanes and on threads: another order of the same
    additions, within n * eps * sum |x| of Python's, with inf and nan where Python has them."""
    x = loop_inputs()[data]
    got, want = plain_sum(x.copy()), quiet(plain_sum.py_func, x.copy())
    if not np.isfinite(want):
        assert_same(np.array([got]), np.array([want]), (), f"plain_sum on {data}")
    else:
        assert abs(got - want) <= x.size * np.finfo(float).eps * np.sum(np.abs(x)), (got, want)


# ---- random kernels on special values (test_property's generator) ---------------------------
# Only what NumPy computes exactly as the C library does (no tanh, no exp: NumPy's own
# loops), and no sums over arrays (NumPy adds pairwise); the arrays are compared, the
# returned number (np.sum) is not.
UNARY = ("np.sin({})", "np.cos({})", "({}) / (1.0 + ({}) ** 2)", "np.sqrt(1.0 + ({}) ** 2)",
         "np.log(1.0 + ({}) ** 2)", "(({}) + 1e16) - 1e16", "({}) * 0.0 + ({})",
         "({}) - ({})", "np.maximum({}, 0.5)", "abs({})")
SLICES = ["x[1:] = x[1:] + 0.5 * np.sin(x[:-1])",
          "y[:-1] -= 0.25 * y[1:] * s",
          "A[1:, :] += 0.5 * np.sin(A[:-1, :])",
          "B[:, 1:] = 0.5 * (B[:, 1:] + A[:, :-1] * y[1:])",
          "A *= 0.5 + 0.25 * np.cos(B)",
          "B[::2, :] = np.cos(B[::2, :]) * x[::2, None]",
          "x[::-1] = 0.5 * x + 0.25 * x[::-1]",
          "B[:] = (A + B) - A",
          "y[:] = (y + 1e16) - 1e16 + y * 0.0",
          "A[:] = np.maximum(A, B) - np.minimum(A, 0.0)"]
ROW_SLICES = ["A[{i}, :] = 0.5 * A[{i}, :] + 0.3 * np.sin(B[{i}, :])",
              "B[{i}, 1:] += 0.5 * B[{i}, :-1] * y[1:]",
              "x[{i}] = x[{i}] - x[{i}] + 0.1 * A[{i}, 0]"]


class ExactGenerator(prop.Generator):
    """test_property's kernels, drawing from the tables above instead of its own, and with
    its updates that call tanh (``*=``, statements written twice) made exact too. Running
    sums (``acc += ...``, ``A[0, 0] += ...`` in a loop) are reduced in vector lanes and on
    threads, within rounding only (docs/kernel-language.md): updates scale the old value
    instead (``x = 0.5 * x + v``), which is evaluated as written."""
    TABLES = {id(prop.UNARY): UNARY, id(prop.SLICES): SLICES, id(prop.ROW_SLICES): ROW_SLICES}

    def pick(self, choices):
        return super().pick(self.TABLES.get(id(choices), choices))

    def _assign(self, scope, depth):
        name = self.array(scope)
        target = f"{name}[{', '.join(self.index(d, scope) for d in prop.ARRAYS[name])}]"
        op = self.pick(["=", "+=", "*="])
        value = self.expr(scope, self.integer(1, 2))
        if op == "*=":
            value = f"0.5 + 0.25 * np.cos({value})"
        if op == "+=":
            return f"{target} = 0.5 * {target} + {value}"
        return f"{target} {op} {value}"

    def _acc(self, scope, depth):
        return f"acc = 0.5 * acc + 0.1 * {self.expr(scope, 1)}"

    def _twice(self, scope, depth):
        statement = self._assign(scope, depth)
        return f"{statement}; {statement}"


BATCH, EXAMPLES = 10, 6
CHECKED = {"kernels": 0}


@st.composite
def special_batches(draw):
    bodies = [ExactGenerator(draw).block([], 0, draw(st.integers(1, 3))) for _ in range(BATCH)]
    sizes = (draw(st.integers(3, 6)), draw(st.integers(3, 6)))
    return bodies, sizes, draw(st.integers(1, 2)), draw(st.integers(0, 2 ** 32 - 1))


def sprinkled(rng, shape):
    """Ordinary values with one or two special ones at random places."""
    a = 0.5 * rng.standard_normal(shape)
    flat = a.reshape(-1)
    for _ in range(rng.integers(1, 3)):
        flat[rng.integers(flat.size)] = SPECIAL[rng.integers(len(SPECIAL))]
    return a


def check_special_batch(bodies, sizes, steps, seed):
    module = prop.load(prop.module_source(bodies), "special")
    rng = np.random.default_rng(seed)
    n, m = sizes
    per_kernel = [(sprinkled(rng, (n, m)), sprinkled(rng, (n, m)), sprinkled(rng, n),
                   sprinkled(rng, m), 0.5 + 0.5 * rng.random()) for _ in bodies]
    work = [a.copy() if isinstance(a, np.ndarray) else a for args in per_kernel for a in args]
    module.batch(*work, steps)
    for k, args in enumerate(per_kernel):
        ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        quiet(getattr(module, f"g{k}").py_func, *ref, steps)
        for name, got, want, given in zip(prop.FLOATS, work[5 * k:5 * k + 4], ref[:4], args):
            assert_same(got, want, (given,), f"kernel g{k}: {name}\n{prop._listing(module, k)}")
        CHECKED["kernels"] += 1


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(special_batches())
def _special_property(batch):
    check_special_batch(*batch)


def test_random_kernels_on_special_values():
    if library_ulps():
        pytest.skip("the GPU's sin, cos, log and pow are not glibc's")
    saved = options.cflags
    # quick to compile; as IEEE as the default flags (no fast-math, no contraction)
    configure(cflags=("-O0", "-std=c99", "-ffp-contract=off", "-fopenmp"))
    try:
        _special_property()
    finally:
        configure(cflags=saved)
    assert CHECKED["kernels"] >= BATCH * EXAMPLES, CHECKED


# ---- the opt-in: adjoint.configure(reassociate=True) ---------------------------------------
@kernel
def sweep(A: float64[N], B: float64[N]):
    for i in range(1, N - 1):
        A[i] = (A[i - 1] + A[i] + A[i + 1]) / 3.0
        B[i] = B[i] - B[i]


def test_reassociation_is_an_option_that_regroups_sums():
    """Off (the default): Python's order and ``x - x``; on: sympy's algebra, the terms on
    the row's neighbours added last (the recurrence waits on A[i - 1] only at the end),
    and results equal to rounding where they are finite."""
    A = np.array([1.0, 0.3, 2.0, 0.7, 1.1, 0.2])
    B = np.array([0.0, np.inf, 1.0, np.nan, 2.0, 0.0])
    want = [A.copy(), B.copy()]
    quiet(sweep.py_func, *want)
    saved = options.reassociate
    try:
        for on in (False, True):
            configure(reassociate=on)
            got = [A.copy(), B.copy()]
            sweep(*got)
            if on:
                np.testing.assert_allclose(got[0], want[0], rtol=1e-15)
                assert np.array_equal(got[1], np.zeros(6))          # inf - inf "is" 0
            else:
                assert_same(got[0], want[0])
                assert_same(got[1], want[1])
            source = sweep.specialize((A, B)).forward.source
            update = next(line for line in source.splitlines() if "v_A[i_i] =" in line)
            if on:      # A[i - 1] (c_in0) and A[i + 1] (c_in2) after A[i] (c_in1)
                assert update.index("c_in1") < update.index("c_in0"), update
            else:
                assert update.strip() == "v_A[i_i] = (c_in0 + c_in1 + c_in2)/3.0;", update
    finally:
        configure(reassociate=saved)
