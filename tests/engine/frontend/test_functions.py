"""Every function of the kernel language: forward against the plain-Python run, gradient
against central differences.

Each function gets one kernel holding all the ways to write it (``forms``): in a scalar
loop with NumPy (``A[i] = np.arcsin(B[i])``), with ``math`` (``math.asin(B[i])``) or a
builtin, and on whole arrays (``A[:] = np.arcsin(B)``), each form writing its own output
from its own inputs. One compile serves every form's test id.

Forward: compared with ``py_func`` bitwise (NaN payloads aside, signs of zeros included)
on special points -- signed zeros, subnormals, 1e+-300, inf, nan, domain edges -- and
ordinary values. The generated C calls the C library (glibc), like ``math`` does; NumPy
has its own loops for some functions (SIMD, on arrays and on NumPy scalars alike), up to
1 ulp from glibc (tanh 2) on this kind of machine. A NumPy form is held to bitwise where
NumPy agrees with the C library on the test's inputs, and to those ulps where it does
not; ``math`` and builtin forms, and exact operations, always to bitwise.

Gradient: ``grad`` w.r.t. every form's inputs at interior points against a fourth-order
central difference of ``py_func``'s outputs, entry by entry (each output element depends
on its own inputs only), rtol 1e-6.
"""
import ctypes
import ctypes.util
import functools
import math
from dataclasses import dataclass

import numpy as np
import pytest

from adjoint import grad
from float_testing import (SPECIAL, TINY, assert_same, library_ulps, load_kernels,
                           mismatches, quiet)
from kernel_testing import fd_atol, seed_for

GRAD_RTOL = 1e-6
H = 1e-4
# NumPy's own loops: how many ulps from glibc they may be (measured on an AVX-512 machine
# with NumPy 2.4 over 20,000 points each: tan, exp, sinh, cosh, arctan, arcsin, arccos,
# log10, log2, expm1, log1p, arctan2, power 1 ulp, tanh 2; sin, cos, log, sqrt agree).
NUMPY_ULPS = {"tanh": 2}
LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
C_NAMES = {name: name for name in ("sin", "cos", "tan", "exp", "log", "log10", "log2", "log1p",
                                   "expm1", "sqrt", "tanh", "sinh", "cosh")}
C_NAMES.update(arctan="atan", arcsin="asin", arccos="acos", arctan2="atan2", power="pow")


@dataclass(frozen=True)
class Form:
    id: str
    template: str           # "np.arcsin({0})": operands {0}, {1}
    loop: bool              # in the scalar loop (operands B[i]) or on whole arrays (B)
    numpy: str = ""         # the NumPy function py_func evaluates it with, if any


@dataclass(frozen=True)
class Fn:
    name: str
    forms: tuple
    interior: tuple         # gradient points: (lo, hi) per operand
    special: tuple = ()     # forward points besides SPECIAL (numbers, or pairs)
    arity: int = 1
    avoid: object = None    # interior points to leave out: a predicate on the operands
    safe: float = 0.5       # replaces forward points where a form raises (math domain)
    zero_ties: bool = True  # False: which zero it picks between zeros is not asserted


def unary(name, math_name=None, builtin=None, aliases=(), loop=True, **kw):
    """The forms of a function of one argument: np.<name> in a loop (unless ``loop`` is
    False: array-only functions) and on arrays, math.<math_name> and builtin(...) in a loop,
    NumPy aliases on arrays."""
    forms = [Form("loop", f"np.{name}({{0}})", True, name)] if loop else []
    forms.append(Form("array", f"np.{name}({{0}})", False, name))
    if math_name:
        forms.append(Form("math", f"math.{math_name}({{0}})", True))
    if builtin:
        forms += [Form("builtin", f"{builtin}({{0}})", True), Form("builtin-array",
                                                                   f"{builtin}({{0}})", False)]
    forms += [Form(f"np.{a}", f"np.{a}({{0}})", False, name) for a in aliases]
    return Fn(name, tuple(forms), **kw)


def binary(name, template, math_name=None, numpy="", **kw):
    """The forms of an operation of two arguments written by ``template``."""
    forms = (Form("loop", template, True, numpy), Form("array", template, False, numpy))
    if math_name:
        forms += (Form("math", f"math.{math_name}({{0}}, {{1}})", True),)
    return Fn(name, forms + tuple(kw.pop("extra", ())), arity=2, **kw)


def away_from_zero(x, *_):
    return abs(x) > 0.05


def away_from_tie(x, y):
    return abs(x - y) > 0.05


def away_from_jumps(x, y):
    q = x / y
    return abs(q - round(q)) > 0.02


PI2 = 1.5707963267948966
FUNCTIONS = [
    unary("sin", math_name="sin", interior=((-3.0, 3.0),), special=(PI2, 3.141592653589793,
                                                                     1e22, 2.0 ** 60)),
    unary("cos", math_name="cos", interior=((-3.0, 3.0),), special=(PI2, 1e22)),
    unary("tan", math_name="tan", interior=((-1.2, 1.2),), special=(PI2, -PI2, 1e22)),
    unary("exp", math_name="exp", interior=((-3.0, 3.0),),
          special=(709.782712893384, 709.79, -708.4, -745.1, -745.2, 1e-10)),
    unary("log", math_name="log", interior=((0.1, 5.0),),
          special=(1.0 + 2.0 ** -52, 1.0 - 2.0 ** -53, 2.718281828459045, 1.7976931348623157e308)),
    unary("log10", math_name="log10", interior=((0.1, 5.0),), special=(10.0, 1000.0, 1e-5, 1e23)),
    unary("log2", math_name="log2", interior=((0.1, 5.0),),
          special=(2.0, 1024.0, 2.0 ** -1074, 7.0)),
    unary("log1p", math_name="log1p", interior=((-0.9, 3.0),),
          special=(-1.0 + 2.0 ** -53, -1.0 - 2.0 ** -52, 1e-20, -1e-20, 2.0 ** -30)),
    unary("expm1", math_name="expm1", interior=((-3.0, 3.0),),
          special=(1e-20, -1e-20, 2.0 ** -30, 709.78, 709.79, -40.0)),
    unary("sqrt", math_name="sqrt", interior=((0.1, 5.0),), special=(2.0, 4.0, 1e-320)),
    unary("tanh", math_name="tanh", interior=((-3.0, 3.0),), special=(20.0, -20.0, 1e-10)),
    unary("sinh", math_name="sinh", interior=((-3.0, 3.0),),
          special=(710.4, 710.5, -711.0, 1e-10)),
    unary("cosh", math_name="cosh", interior=((-3.0, 3.0),),
          special=(710.4, 710.5, -711.0, 1e-10)),
    unary("arctan", math_name="atan", aliases=("atan",), interior=((-3.0, 3.0),),
          special=(1e20, -1e20, 1e-10)),
    unary("arcsin", math_name="asin", aliases=("asin",), interior=((-0.9, 0.9),),
          special=(1.0 - 2.0 ** -53, -1.0 + 2.0 ** -53, 1.0 + 2.0 ** -52, 1e-10)),
    unary("arccos", math_name="acos", aliases=("acos",), interior=((-0.9, 0.9),),
          special=(1.0 - 2.0 ** -53, -1.0 + 2.0 ** -53, 1.0 + 2.0 ** -52, 1e-10)),
    unary("fabs", math_name="fabs", interior=((-2.0, 2.0),), avoid=away_from_zero),
    unary("abs", builtin="abs", aliases=("absolute",), interior=((-2.0, 2.0),),
          avoid=away_from_zero),
    # whole-array functions only (docs/kernel-language.md)
    unary("square", loop=False, interior=((-2.0, 2.0),), special=(1.4e154, 1.5e-162)),
    unary("negative", loop=False, interior=((-2.0, 2.0),)),
    unary("reciprocal", loop=False, interior=((0.3, 3.0),), special=(3.0, 1e-310)),
    binary("arctan2", "np.arctan2({0}, {1})", math_name="atan2", numpy="arctan2",
           interior=((-2.0, 2.0), (-2.0, 2.0)), avoid=lambda y, x: abs(y) > 0.05,
           extra=(Form("np.atan2", "np.atan2({0}, {1})", False, "arctan2"),)),
    binary("power", "np.power({0}, {1})", math_name="pow", numpy="power",
           interior=((0.5, 3.0), (-2.0, 2.0)),
           special=((-8.0, 1.0 / 3.0), (-2.0, 3.0), (2.0, 1024.0), (2.0, -1075.0), (10.0, 0.5),
                    (1.0, float("nan")), (-1.0, float("inf")), (0.5, float("-inf"))),
           extra=(Form("operator", "{0} ** {1}", True),
                  Form("operator-array", "{0} ** {1}", False, "power"),
                  Form("builtin", "pow({0}, {1})", True),
                  Form("np.pow", "np.pow({0}, {1})", False, "power"))),
    binary("maximum", "np.maximum({0}, {1})", interior=((-2.0, 2.0), (-2.0, 2.0)),
           avoid=away_from_tie),
    binary("minimum", "np.minimum({0}, {1})", interior=((-2.0, 2.0), (-2.0, 2.0)),
           avoid=away_from_tie),
    # fmax, fmin and clip between 0.0 and -0.0: NumPy's scalar loops return the first,
    # its array loops the second (C's fmax leaves it open), so that sign is not asserted.
    binary("fmax", "np.fmax({0}, {1})", interior=((-2.0, 2.0), (-2.0, 2.0)),
           avoid=away_from_tie, zero_ties=False),
    binary("fmin", "np.fmin({0}, {1})", interior=((-2.0, 2.0), (-2.0, 2.0)),
           avoid=away_from_tie, zero_ties=False),
    Fn("max", (Form("loop", "max({0}, {1})", True), Form("three", "max({0}, {1}, 0.25)", True)),
       interior=((-2.0, 2.0), (-2.0, 2.0)), arity=2,
       avoid=lambda x, y: away_from_tie(x, y) and abs(x - 0.25) > 0.05 and abs(y - 0.25) > 0.05),
    Fn("min", (Form("loop", "min({0}, {1})", True), Form("three", "min({0}, {1}, 0.25)", True)),
       interior=((-2.0, 2.0), (-2.0, 2.0)), arity=2,
       avoid=lambda x, y: away_from_tie(x, y) and abs(x - 0.25) > 0.05 and abs(y - 0.25) > 0.05),
    binary("where", "np.where({0} > {1}, {0}, 2.0 * {1})", interior=((-2.0, 2.0), (-2.0, 2.0)),
           avoid=away_from_tie),
    binary("clip", "np.clip({0}, -0.5, {1})", interior=((-2.0, 2.0), (0.0, 2.0)),
           avoid=lambda x, y: abs(x + 0.5) > 0.05 and abs(x - y) > 0.05, zero_ties=False,
           extra=(Form("lower", "np.clip({0}, -0.5, None)", True),
                  Form("upper", "np.clip({0}, None, {1})", False))),
    binary("floordiv", "{0} // {1}", interior=((0.1, 5.0), (0.3, 2.0)), avoid=away_from_jumps,
           special=((1.0, 0.1), (-1.0, 0.1), (0.1, 0.01), (5.0, -0.5), (1e300, 1e-300))),
    binary("mod", "{0} % {1}", interior=((0.1, 5.0), (0.3, 2.0)), avoid=away_from_jumps,
           special=((1.0, 0.1), (-1.0, 0.1), (0.1, 0.01), (-0.0, 1.0), (0.0, -1.0),
                    (5.0, -0.5), (-1e-300, 1.0), (1e300, 1e-300))),
    Fn("float", (Form("loop", "float({0})", True),), interior=((-2.0, 2.0),)),
    Fn("constants", (Form("loop", "{0} * math.pi + math.e", True),
                     Form("thirteenth", "math.pi / 13.0 * {0}", True),
                     Form("seventh", "math.pi * {0} / 7.0", True),
                     Form("array", "np.pi * {0} - np.e", False),
                     Form("two-pi", "2.0 * np.pi * {0}", False)),
       interior=((-2.0, 2.0),)),
]
BY_NAME = {fn.name: fn for fn in FUNCTIONS}
CASES = [(fn.name, form.id) for fn in FUNCTIONS for form in fn.forms]
OPERANDS = "BC"


# ---- the kernels ----------------------------------------------------------------------------
def operands(fn, k, loop):
    return [f"{x}{k}[i]" if loop else f"{x}{k}" for x in OPERANDS[:fn.arity]]


def source(fn):
    """One kernel: form k writes A<k> from B<k> (and C<k>); it returns the outputs' sum."""
    n = len(fn.forms)
    params = [f"A{k}" for k in range(n)] + [f"{x}{k}" for k in range(n)
                                             for x in OPERANDS[:fn.arity]]
    lines = ["@kernel", f"def {fn.name}_kernel({', '.join(p + ': float64[N]' for p in params)})"
                        " -> float:"]
    loop = [(k, f) for k, f in enumerate(fn.forms) if f.loop]
    if loop:
        lines.append("    for i in range(N):")
        lines += [f"        A{k}[i] = {f.template.format(*operands(fn, k, True))}"
                  for k, f in loop]
    lines += [f"    A{k}[:] = {f.template.format(*operands(fn, k, False))}"
              for k, f in enumerate(fn.forms) if not f.loop]
    lines.append("    return " + " + ".join(f"np.sum(A{k})" for k in range(n)))
    return "\n".join(lines) + "\n\n"


MODULE = load_kernels([source(fn) for fn in FUNCTIONS], "functions")


def kernel_of(fn):
    return getattr(MODULE, f"{fn.name}_kernel")


# ---- inputs ---------------------------------------------------------------------------------
def interior(fn, n, salt):
    """``n`` points inside each operand's interval, away from kinks and jumps."""
    rng = np.random.default_rng(seed_for(fn.name, salt))
    points = []
    while len(points) < n:
        p = tuple(rng.uniform(lo, hi) for lo, hi in fn.interior)
        if fn.avoid is None or fn.avoid(*p):
            points.append(p)
    return tuple(np.array(column) for column in zip(*points))


def forward_points(fn):
    """Special points and ordinary ones: one array per operand."""
    ordinary = interior(fn, 24, "forward")
    if fn.arity == 1:
        special = np.array(SPECIAL + tuple(fn.special))
        return (np.concatenate([special, ordinary[0]]),)
    grid = (0.0, -0.0, TINY, 1e-300, 1e300, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0, 0.5,
            -2.5, 3.0)
    pairs = [(a, b) for a in grid for b in grid] + list(fn.special)
    return tuple(np.concatenate([np.array(c), o]) for c, o in zip(zip(*pairs), ordinary))


def scalar_of(form, values):
    """The form on single numbers as py_func evaluates it (NumPy scalars), or None where it
    raises (math's domain errors)."""
    env = {"np": np, "math": math}
    names = [f"v{k}" for k in range(len(values))]
    try:
        return quiet(eval, form.template.format(*names), env,
                     dict(zip(names, map(np.float64, values))))
    except (ValueError, OverflowError, ZeroDivisionError):
        return None


def form_inputs(fn, form):
    """The forward points, those where the form raises in Python replaced by ``fn.safe``."""
    points = [a.copy() for a in forward_points(fn)]
    for k in range(points[0].size):
        if scalar_of(form, [a[k] for a in points]) is None:
            for a in points:
                a[k] = fn.safe
    return points


def libm(name, *arrays):
    """The C library's function elementwise (what the generated C calls)."""
    f = getattr(LIBM, C_NAMES[name])
    f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double] * len(arrays)
    return np.array([f(*map(float, v)) for v in zip(*arrays)])


def tolerance(fn, form, inputs, python):
    """0 (bitwise), or the ulps of NumPy's own loop where Python's result ``python`` is not
    the C library's on these inputs (at least the GPU's, for the C library's functions)."""
    ulps = library_ulps() if fn.name in C_NAMES else 0
    if form.numpy not in C_NAMES or not mismatches(python, libm(form.numpy, *inputs)):
        return ulps
    return max(ulps, NUMPY_ULPS.get(form.numpy, 1))


# ---- runs (one compile per function and direction, shared by its forms) ---------------------
def arguments(fn, inputs):
    n = inputs[0][0].size
    return [np.zeros(n) for _ in fn.forms] + [a.copy() for per_form in inputs for a in per_form]


@functools.lru_cache(maxsize=None)
def forward(name):
    """(inputs per form, compiled outputs, Python outputs)."""
    fn = BY_NAME[name]
    inputs = [form_inputs(fn, form) for form in fn.forms]
    k = kernel_of(fn)
    compiled, python = arguments(fn, inputs), arguments(fn, inputs)
    k(*compiled)
    quiet(k.py_func, *python)
    return inputs, compiled[:len(fn.forms)], python[:len(fn.forms)]


def wrt_names(fn):
    return tuple(f"{x}{k}" for k in range(len(fn.forms)) for x in OPERANDS[:fn.arity])


@functools.lru_cache(maxsize=None)
def gradient(name):
    """(gradients by input name, finite differences by input name, largest |output|) at
    interior points."""
    fn = BY_NAME[name]
    points = interior(fn, 12, "gradient")
    inputs = [points for _ in fn.forms]
    args = arguments(fn, inputs)
    names = wrt_names(fn)
    got = dict(zip(names, grad(kernel_of(fn), wrt=names)(*args)))
    outputs = arguments(fn, inputs)
    quiet(kernel_of(fn).py_func, *outputs)
    scale = max(float(np.max(np.abs(a))) for a in outputs[:len(fn.forms)])
    return got, {n: differences(fn, args, n) for n in names}, scale


def differences(fn, args, name):
    """d A<k>[i] / d name[i] by a fourth-order central difference of py_func."""
    n_out = len(fn.forms)
    position = n_out + wrt_names(fn).index(name)
    form = int(name[1:])

    def out(step):
        shifted = [a.copy() for a in args]
        shifted[position] = shifted[position] + step
        quiet(kernel_of(fn).py_func, *shifted)
        return shifted[form]
    return (8.0 * (out(H) - out(-H)) - (out(2 * H) - out(-2 * H))) / (12.0 * H)


# ---- the tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("name, form_id", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_forward_matches_python(name, form_id):
    fn = BY_NAME[name]
    k = [f.id for f in fn.forms].index(form_id)
    inputs, compiled, python = forward(name)
    form, want = fn.forms[k], python[k]
    if not fn.zero_ties:
        ties = np.all([x == 0.0 for x in inputs[k]], axis=0) & (compiled[k] == 0.0)
        want = np.where(ties, compiled[k], want)
    assert_same(compiled[k], want, inputs[k], f"{name} as `{form.template}` "
                f"({'loop' if form.loop else 'array'})",
                ulps=tolerance(fn, form, inputs[k], python[k]))


@pytest.mark.parametrize("name, form_id", CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_gradient_matches_finite_differences(name, form_id):
    fn = BY_NAME[name]
    k = [f.id for f in fn.forms].index(form_id)
    got, want, scale = gradient(name)
    for x in OPERANDS[:fn.arity]:
        n = f"{x}{k}"
        np.testing.assert_allclose(got[n], want[n], rtol=GRAD_RTOL, atol=fd_atol(scale, H),
                                   err_msg=f"{name} as `{fn.forms[k].template}`: d/d{x}")
