"""Floating-point values as Python computes them: one sympy node per operation, in order.

sympy simplifies while it builds: ``x - x`` becomes 0, ``(a + 1e16) - 1e16`` becomes
``a``, ``exp(log(x))`` becomes ``x``, and the terms of a sum are sorted. All of that is
exact in real arithmetic and none of it in IEEE doubles (inf, nan, rounding). Tasklet
values are therefore built unevaluated: each Python operation is one Add or Mul node of
two operands, in the order written, and the printer (``codegen/printer.py``) prints each
node as one C operation. Operations whose operands are both integers are evaluated as
sympy does: Python's integers and sympy's integer algebra are both exact.

Derivatives (``sympy.diff``) come out evaluated: n-ary sums and products in sympy's
order, which may be simplified and reordered, as long as they are equal wherever the
primal value is finite. Passes that rewrite a tasklet's value go through
:func:`substitute`, which rebuilds nothing it does not replace.

With the engine option ``reassociate`` (``pipeline.py`` sets :func:`reassociating` around
every stage) values are built and printed as sympy evaluates them, the way ``-ffast-math``
treats C: sums regrouped so that a recurrence's own term comes last, constants folded;
faster loop-carried updates (Gauss-Seidel), results equal to rounding for finite values
without cancellation only.

Powers follow what Python or NumPy calls: a scalar's ``x ** y`` is C's ``pow``, and
``x ** 2`` is ``x * x`` (the correctly rounded square, what ``pow`` returns too, save
in rare last-bit cases); an array's ``x ** 0.5`` and ``x ** -1`` are NumPy's ``sqrt``
and ``1 / x``.
"""
import contextlib
import contextvars
import math

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p, log2, log10

# Containers of derivatives (autodiff's adjoints and tangents): what a tasklet writes
# only into them may be reassociated (codegen factors loop-invariant terms out of it).
ADJOINT, TANGENT = "__g_", "__d_"

HALF = sp.S.Half


_REASSOCIATE = contextvars.ContextVar("reassociate", default=False)


@contextlib.contextmanager
def reassociating(on):
    """Within the block, values are built and printed as sympy evaluates them (the engine
    option ``reassociate``) or, off, as Python computes them."""
    token = _REASSOCIATE.set(bool(on))
    try:
        yield
    finally:
        _REASSOCIATE.reset(token)


def _exact(*xs):
    """Whether sympy may evaluate an operation on these operands: on Python integers
    (sympy calls the float 2.0 an integer too) or where reassociation is on."""
    # Floats first: sympy's is_integer of some unevaluated sums of Floats, such as
    # (1.0 - 1*0.0)/(N - 1), raised InconsistentAssumptions in some runs
    return _REASSOCIATE.get() or all(not x.has(sp.Float) and x.is_integer for x in xs)


def add(a, b):
    return a + b if _exact(a, b) else sp.Add(a, b, evaluate=False)


def sub(a, b):
    return a - b if _exact(a, b) else sp.Add(a, neg(b), evaluate=False)


def neg(a):
    """``-a``; sympy has no negative zero, so ``-0.0`` stays a negation."""
    if _exact(a) or a.is_Number and not a.is_zero:
        return -a
    return sp.Mul(sp.S.NegativeOne, a, evaluate=False)


def mul(a, b):
    return a * b if _exact(a, b) else sp.Mul(a, b, evaluate=False)


def div(a, b):
    """``a / b``; two integer constants give their exact quotient (one rounding in C), a
    constant zero divisor sympy's ``zoo``."""
    if b.is_zero and b.is_Number:           # Python raises; the frontend reports it
        return sp.zoo
    if a.is_Integer and b.is_Integer:
        return sp.Rational(a, b)
    if _REASSOCIATE.get():
        return a / b
    return sp.Mul(a, sp.Pow(b, -1, evaluate=False), evaluate=False)


def power(a, b, array=False):
    """``a ** b``: integer powers of integers exactly; otherwise ``pow`` with a float
    exponent, except the squares, and NumPy's square roots and reciprocals of arrays."""
    if _exact(a, b) and b.is_Integer and b >= 0:
        return a ** b
    if a.is_Integer and b.is_Integer:                # 2 ** -1: Python's exact 0.5
        return sp.Rational(1, a ** -b)
    if b.is_Number and float(b) == 2.0:
        return sp.Pow(a, 2, evaluate=False)
    if array and b.is_Number and float(b) == 0.5:
        return sqrt(a)
    if array and b.is_Number and float(b) == -1.0:
        return sp.Pow(a, -1, evaluate=False)
    return sp.Pow(a, sp.Float(b) if b.is_Number else b, evaluate=False)


def sqrt(a):
    return sp.Pow(a, HALF, evaluate=False)


def relation(kind):
    """A comparison: decided now on integers only (``x - x > 0`` is not False for nan)."""
    return lambda a, b: kind(a, b) if _exact(a, b) else kind(a, b, evaluate=False)


def logical(kind):
    """``and``/``or``/``not`` of comparisons: decided now on integers only (``not x > y``
    is not ``x <= y`` for nan)."""
    def build(*args):
        if len(args) == 1 and kind is not sp.Not:
            return args[0]
        return kind(*args, evaluate=False) if _on_data(*args) else kind(*args)
    return build


def select(value, condition, other):
    """``value if condition else other`` (``np.where``, masks, flags)."""
    return sp.Piecewise((value, condition), (other, True), evaluate=not _on_data(condition))


def _on_data(*conditions):
    """Whether conditions read data (real symbols): then sympy must not decide them."""
    return any(not s.is_integer for c in conditions for s in c.free_symbols)


def nonzero(a):
    return relation(sp.Ne)(a, sp.Integer(0))


def reassociable(tasklet):
    """Whether codegen may regroup a tasklet's values: it writes derivatives only (they
    may be rounded differently), or reassociation is on."""
    return _REASSOCIATE.get() or all(m.data.startswith((ADJOINT, TANGENT))
                                     for m, _ in tasklet.outputs)


def factors_of(expr):
    """The factors of a product, through the nesting of its binary nodes."""
    if isinstance(expr, sp.Mul):
        return [f for a in expr.args for f in factors_of(a)]
    return [expr]


def terms_of(expr):
    """The terms of a sum, through the nesting of its binary nodes."""
    if isinstance(expr, sp.Add):
        return [t for a in expr.args for t in terms_of(a)]
    return [expr]


def evaluated(expr):
    """``expr`` rebuilt by sympy's rules, in canonical form: for derivatives, which may
    be simplified, before sympy's common-subexpression search (it takes a product's
    factors as a set, so an unevaluated ``x*x`` would lose one)."""
    memo = {}

    def rebuild(e):
        if e not in memo:
            memo[e] = e.func(*map(rebuild, e.args)) if e.args else e
        return memo[e]
    return rebuild(sp.sympify(expr))


def common_subexpressions(exprs, symbols):
    """(temporaries, expressions): every subexpression that occurs more than once
    computed once into a temporary, and nothing else changed (sympy's ``cse`` also
    regroups sums and products)."""
    counts = {}

    def count(e):
        if e.args and not isinstance(e, sp.Piecewise):
            counts[e] = counts.get(e, 0) + 1
            if counts[e] == 1:
                for a in e.args:
                    count(a)
    for e in exprs:
        count(sp.sympify(e))
    temps, names = [], {}

    def rebuild(e):
        if e in names:
            return names[e]
        if not e.args:
            return e
        with sp.evaluate(False):
            new = e.func(*map(rebuild, e.args))
        if counts.get(e, 0) > 1 and not _negation_of_atom(e):
            names[e] = next(symbols)
            temps.append((names[e], new))
            return names[e]
        return new
    return temps, [rebuild(sp.sympify(e)) for e in exprs]


def _negation_of_atom(e):
    return isinstance(e, sp.Mul) and len(e.args) == 2 and e.args[0] == -1 and e.args[1].is_Atom


def substitute(expr, mapping):
    """``expr`` with symbols replaced, every other node kept as it was."""
    with sp.evaluate(False):
        return sp.sympify(expr).xreplace(mapping)


class _Choice(sp.Function):
    """A maximum or minimum of two values with its own rule for ties and nan: the
    derivative goes to the argument chosen, half to each at a tie (as sympy's ``Max``)."""
    largest = True

    def fdiff(self, argindex=1):
        a, b = self.args
        first = sp.Heaviside(a - b if self.largest else b - a)
        return first if argindex == 1 else 1 - first


class py_max(_Choice):
    """Python's ``max(a, b)``: ``b if b > a else a`` (the first of equals; a nan ``b``
    loses)."""


class py_min(_Choice):
    """Python's ``min(a, b)``: ``b if b < a else a``."""
    largest = False


class np_maximum(_Choice):
    """NumPy's ``maximum``: ``a if a > b or a is nan else b`` (nan propagates; ``b`` of
    equals). Not sympy's ``Max``, which keeps its arguments as a set."""


class np_minimum(_Choice):
    """NumPy's ``minimum``: ``a if a < b or a is nan else b``."""
    largest = False


class np_fmax(_Choice):
    """NumPy's ``fmax``: ``a if a >= b or b is nan else b`` (a nan loses)."""


class np_fmin(_Choice):
    """NumPy's ``fmin``: ``a if a <= b or b is nan else b``."""
    largest = False


class np_power(sp.Function):
    """NumPy's ``power`` with an exponent known only at run time: ``sqrt`` where it is
    0.5 (``-0.0`` stays ``-0.0``, ``-inf`` gives nan), C's ``pow`` otherwise."""
    def fdiff(self, argindex=1):
        a, b = self.args
        return b * a ** (b - 1) if argindex == 1 else sp.log(a) * a ** b


class py_floordiv(sp.Function):
    """``a // b`` on floats as Python and NumPy compute it (from ``fmod``; ``a / b``
    where ``b`` is 0): not ``floor(a / b)``, which rounds first (``1 // 0.1`` is 9)."""
    def fdiff(self, argindex=1):
        return sp.Integer(0)


class py_mod(sp.Function):
    """``a % b`` on floats: ``fmod`` with the sign of ``b``, as Python and NumPy."""
    def fdiff(self, argindex=1):
        a, b = self.args
        return sp.Integer(1) if argindex == 1 else -py_floordiv(a, b)


class np_sign(sp.Function):
    """NumPy's ``sign``: -1.0, 0.0 (for both zeros) or 1.0, nan for nan; derivative zero
    (sympy's ``sign`` says 0 for nan and differentiates to a delta)."""
    def fdiff(self, argindex=1):
        return sp.Integer(0)


class _Rounding(sp.Function):
    """A float rounded to an integral float as C's function of the same name rounds it
    (``np.floor``, ``np.ceil``, ``np.trunc``; ``np.rint``, ``np.round`` to even, as
    ``rint`` in C's default mode); piecewise constant: derivative zero (JAX's too)."""
    def fdiff(self, argindex=1):
        return sp.Integer(0)


np_floor, np_ceil, np_trunc, np_rint = (type(f"np_{name}", (_Rounding,), {})
                                        for name in ("floor", "ceil", "trunc", "rint"))


class np_fmod(sp.Function):
    """C's ``fmod`` (``np.fmod``, ``math.fmod``): ``a - b * trunc(a / b)``, the sign of
    ``a``; not Python's ``%``."""
    def fdiff(self, argindex=1):
        a, b = self.args
        return sp.Integer(1) if argindex == 1 else -(a - np_fmod(a, b)) / b


class np_hypot(sp.Function):
    """C's ``hypot`` (``np.hypot``, ``math.hypot`` of two): ``sqrt(a*a + b*b)`` without
    overflow; inf if either is inf, even a nan other. At the origin, a kink, the
    derivative is the mean of the one-sided ones: zero."""
    def fdiff(self, argindex=1):
        return select(sp.Integer(0), relation(sp.Eq)(self, sp.Integer(0)),
                      self.args[argindex - 1] / self)


class np_cbrt(sp.Function):
    """C's ``cbrt`` (``np.cbrt``): the real cube root, negative for negative numbers (a
    power of 1/3 is nan there)."""
    def fdiff(self, argindex=1):
        return sp.Integer(1) / (3 * self ** 2)


def heaviside(x, h):
    """``np.heaviside(x, h)``: 0 below zero, ``h`` at zero, 1 above, nan for nan."""
    return select(sp.Integer(0), relation(sp.Lt)(x, sp.Integer(0)), select(
        h, relation(sp.Eq)(x, sp.Integer(0)), select(sp.Integer(1),
                                                     relation(sp.Gt)(x, sp.Integer(0)), x)))


def sinc(x):
    """``np.sinc``: NumPy's ``sin(y) / y`` for ``y = pi * x``, x = 0 taken as 1e-20."""
    y = mul(sp.Float(math.pi), select(sp.Float(1e-20), relation(sp.Eq)(x, sp.Integer(0)), x))
    return div(sp.sin(y, evaluate=False), y)


def logaddexp(x, y):
    """``np.logaddexp`` as NumPy computes it (npy_logaddexp): ``x + log(2)`` for equal
    arguments (equal infinities), else the larger plus ``log1p(exp(-|x - y|))``."""
    d = sub(x, y)
    exp, log1p_ = UNARY["exp"], UNARY["log1p"]
    larger = select(add(x, log1p_(exp(neg(d)))), relation(sp.Gt)(d, sp.Integer(0)),
                    select(add(y, log1p_(exp(d))), relation(sp.Le)(d, sp.Integer(0)), d))
    return select(add(x, sp.Float(math.log(2.0))), relation(sp.Eq)(x, y), larger)


class as_float32(sp.Function):
    """The value rounded to float32: NumPy's float32 result of the operation inside, or a
    conversion (``x.astype(np.float32)``, ``np.float32(v)``). The operation is computed in
    double and rounded once, which is float32's correctly rounded result for ``+ - * /``
    and ``sqrt`` (double has more than twice float32's digits). Inserted by
    ``frontend/dtypes.py``; the derivative of a rounding is taken as 1."""
    def fdiff(self, argindex=1):
        return sp.Integer(1)


class as_float64(sp.Function):
    """A float64 value of a float32 one (``x.astype(np.float64)``): exact, printed as its
    argument; only ``frontend/dtypes.py`` reads it, as NumPy's float64 dtype."""
    def fdiff(self, argindex=1):
        return sp.Integer(1)


class ComplexCast(sp.Function):
    """A value converted to a complex dtype (``cls.dtype``: ``x.astype(np.complex128)``,
    ``dtype=np.complex64``); only the frontend reads it, ``frontend/complexes.py``
    splits it into its parts (complex64's rounded to float32)."""
    dtype = None


COMPLEX_CASTS = {}
for _name in ("complex64", "complex128"):
    COMPLEX_CASTS[_name] = globals()[f"as_{_name}"] = type(f"as_{_name}", (ComplexCast,),
                                                           {"dtype": _name})


class _Bits(sp.Function):
    """An integer bit operation (``& | ^ ~ << >>``) as NumPy computes it in its operands'
    dtype (``frontend/dtypes.py`` casts to it); no derivative."""
    c_op = ""

    def _eval_is_integer(self):         # not the class attribute: sympy's deductions
        return True                     # for it depended on the hash seed

    def fdiff(self, argindex=1):
        return sp.Integer(0)


class bit_and(_Bits):
    c_op = "&"


class bit_or(_Bits):
    c_op = "|"


class bit_xor(_Bits):
    c_op = "^"


class bit_not(_Bits):
    c_op = "~"


class shift_left(_Bits):
    """``a << b``: 0 where ``b`` reaches the width (NumPy's, not C's undefined shift)."""


class shift_right(_Bits):
    """``a >> b``: arithmetic for signed values; the sign where ``b`` reaches the width."""


def bits(op, a, b=None):
    """``a op b`` on integers: evaluated where both are constants, as Python does."""
    import operator
    if b is None:
        return sp.Integer(~int(a)) if a.is_Integer else bit_not(a)
    if a.is_Integer and b.is_Integer:
        fn = {bit_and: operator.and_, bit_or: operator.or_, bit_xor: operator.xor,
              shift_left: operator.lshift, shift_right: operator.rshift}[op]
        return sp.Integer(fn(int(a), int(b)))
    return op(a, b)


class IntCast(sp.Function):
    """A value converted to an integer dtype (``cls.dtype``) with NumPy's wrap-around:
    the integer operation inside computed modulo 2**64 and truncated to the width.
    One subclass per dtype (``INT_CASTS``); inserted by ``frontend/dtypes.py``."""
    dtype = None

    def _eval_is_integer(self):
        return True

    def fdiff(self, argindex=1):
        return sp.Integer(0)


INT_CASTS = {}
for _name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
    INT_CASTS[_name] = globals()[f"as_{_name}"] = type(f"as_{_name}", (IntCast,),
                                                       {"dtype": _name})   # picklable


class truncated(IntCast):
    """A float truncated toward zero to an int64, NumPy's ``astype`` of a value in range
    (``np.histogram``'s bins, the only place the engine converts floats to integers):
    printed as C's conversion."""
    dtype = "int64"


class _FloatClass(sp.logic.boolalg.BooleanFunction):
    """NumPy's ``isnan`` / ``isinf`` / ``isfinite`` of one value, printed as C's macro of
    the same name: decided here on numbers and integers only (sympy takes real symbols
    to be finite, so no relation can stand for these)."""
    nargs = 1

    @classmethod
    def eval(cls, x):
        if x.is_integer:
            return sp.sympify(cls.of_integer)
        if x.is_Number or x in (sp.oo, -sp.oo, sp.nan):
            return sp.sympify(bool(cls.test(float(x))))
        return None


class np_isnan(_FloatClass):
    of_integer, test = False, staticmethod(math.isnan)


class np_isinf(_FloatClass):
    of_integer, test = False, staticmethod(math.isinf)


class np_isfinite(_FloatClass):
    of_integer, test = True, staticmethod(math.isfinite)


FLOAT_CLASSES = {"isnan": np_isnan, "isinf": np_isinf, "isfinite": np_isfinite}


def _as_written(function):
    return lambda *args: function(*args, evaluate=False)


def _fold(function):
    """``max(a, b, c)`` as Python takes it: ``max(max(a, b), c)``."""
    def fold(*args):
        out = args[0]
        for x in args[1:]:
            out = function(out, x, evaluate=False)
        return out
    return fold


# Functions of the kernel language by their name in `math` or `numpy`.
UNARY = {name: _as_written(f) for name, f in {
    "sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "exp": sp.exp, "log": sp.log,
    "tanh": sp.tanh, "sinh": sp.sinh, "cosh": sp.cosh, "arctan": sp.atan, "atan": sp.atan,
    "arcsin": sp.asin, "asin": sp.asin, "arccos": sp.acos, "acos": sp.acos, "fabs": sp.Abs,
    "abs": sp.Abs, "absolute": sp.Abs, "log10": log10, "log2": log2, "expm1": expm1,
    "log1p": log1p, "sign": np_sign, "real": sp.re, "imag": sp.im, "conj": sp.conjugate,
    "conjugate": sp.conjugate, "angle": sp.arg, "floor": np_floor, "ceil": np_ceil,
    "trunc": np_trunc, "rint": np_rint, "cbrt": np_cbrt, "erf": sp.erf,
    "erfc": sp.erfc}.items()}
UNARY["sqrt"] = sqrt
UNARY.update({"sinc": sinc, **{name: (lambda c: lambda x: mul(x, sp.Float(c)))(c) for name, c in (
    ("deg2rad", math.pi / 180.0), ("radians", math.pi / 180.0),
    ("rad2deg", 180.0 / math.pi), ("degrees", 180.0 / math.pi))}})
BINARY = {name: _as_written(f) for name, f in {
    "maximum": np_maximum, "minimum": np_minimum, "fmax": np_fmax, "fmin": np_fmin,
    "arctan2": sp.atan2, "atan2": sp.atan2, "fmod": np_fmod, "hypot": np_hypot}.items()}
BINARY["logaddexp"] = logaddexp
BINARY["pow"] = power                                         # math.pow
# np.power on numbers takes NumPy's square root for an exponent of 0.5 even when that
# is data; on arrays only for a constant exponent (array_calls.py)
BINARY["power"] = lambda a, b: power(a, b, array=True) if b.is_Number else np_power(a, b)
ARRAY_POWER = lambda a, b: power(a, b, array=True)       # noqa: E731
BUILTIN = {"max": _fold(py_max), "min": _fold(py_min), "abs": UNARY["abs"]}
