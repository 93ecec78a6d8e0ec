"""NumPy 2's dtypes for tasklet values and temporaries (NEP 50), float32 rounding and
integer wrap-around.

Every value has a dtype: a connector its container's, an element of an integer array
that array's, a conversion (``as_float32``, ``as_float64``, ``as_int32``...) the one it
names. Python numbers are NEP 50's *weak* scalars (``WEAK_INT``, ``WEAK_FLOAT``): they
take the dtype of the array they meet (``x32 * 2.0`` is float32), and so do float
arguments and the scalar locals that only ever hold Python numbers (``dt``,
``s = 0.5 * dt``); an operation's dtype is NumPy's ``result_type`` of its operands'
(float32 with float64 is float64, an int32 array with a float one float64).

Temporaries whose dtype the code does not name (a name bound to an expression, scalar
locals, the engine's copies and reductions) take the dtype of the values stored into
them: a fixpoint over the kernel, as a loop may store into a local what it reads from
it. Those that end up float32 or an integer dtype get it; the others stay float64 (a
mask or a weak value stored there is held exactly, as before).

Then every operation is computed in its dtype as NumPy computes it: a float32 one on
operands converted to float32 (a weak ``0.1`` becomes ``float32(0.1)``), its result
rounded once (``as_float32``, printed as a cast of the double result); an integer one
inside a cast to its dtype (``INT_CASTS``, printed as arithmetic modulo 2**64 truncated
to the width: NumPy's wrap-around); integers meeting floats converted (``as_float64``).

Complex values follow the same rules (``1j`` is ``WEAK_COMPLEX``; ``re``, ``im``, ``abs``
and ``arg`` of a complex value have its parts' dtype); once the dtypes are decided,
``complexes.realify`` writes them out as their real parts, which are then rounded as
any float64 or float32 value.
"""
import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

from ..errors import KernelSyntaxError
from ..sdfg import arithmetic as fp
from ..sdfg.nodes import MapScope, Tasklet
from ..sdfg.visit import Transformer
from .complexes import COMPONENT, PARTS_OF, ComplexError, is_complex, realify


class Weak:
    """A Python number's kind (NEP 50's weak scalars); not an np.dtype, which would
    compare equal to the strings and None that name float64."""
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"weak {self.name}"


WEAK_INT, WEAK_FLOAT, WEAK_COMPLEX = Weak("int"), Weak("float"), Weak("complex")
FLOAT32, FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
COMPLEX128 = np.dtype(np.complex128)
_WEAK_VALUE = {WEAK_INT: 0, WEAK_FLOAT: 0.0, WEAK_COMPLEX: 0j}
# Functions of complex values whose value is real: the parts' dtype (complexes.COMPONENT)
_REAL_OF = (sp.re, sp.im, sp.Abs, sp.arg)

# Functions whose value has their operands' dtype (integers stay integers); the others
# of sdfg/arithmetic.py (sin, exp, hypot, ...) give floats (NumPy's loops: int -> float64).
_SAME_TYPE = (sp.Abs, fp.np_sign, fp.py_max, fp.py_min, fp.np_maximum, fp.np_minimum,
              fp.np_fmax, fp.np_fmin, fp.py_floordiv, fp.py_mod, fp.np_fmod)
# Operations whose result is one of their operands, so rounding it again changes nothing.
_EXACT = (sp.Abs, fp.np_sign, fp.py_max, fp.py_min, fp.np_maximum, fp.np_minimum,
          fp.np_fmax, fp.np_fmin, sp.Piecewise, fp._Rounding)


class DtypeError(Exception):
    """An operation NumPy refuses for its operands' dtypes (reported with the line)."""


def is32(dtype):
    return isinstance(dtype, np.dtype) and dtype == FLOAT32


def same(a, b):
    """Equal dtypes (np.dtype's ``==`` takes None and "float" for float64)."""
    return a is b or isinstance(a, np.dtype) and isinstance(b, np.dtype) and a == b


def promote(*dtypes):
    """NumPy 2's result dtype (NEP 50): strong dtypes by ``np.result_type``, weak ones
    only deciding between int and float; None (not yet known) is left out."""
    known = [d for d in dtypes if d is not None]
    strong = [d for d in known if isinstance(d, np.dtype)]
    weak = [d for d in known if not isinstance(d, np.dtype)]
    if not strong:
        return next((w for w in (WEAK_COMPLEX, WEAK_FLOAT, WEAK_INT) if w in weak), None)
    return np.result_type(*strong, *(_WEAK_VALUE[w] for w in weak))


def floating(dtype):
    """The dtype of a float function (``np.sin``, ``/``) of a value of ``dtype``."""
    if dtype is None or dtype in (WEAK_FLOAT, WEAK_COMPLEX) or isinstance(dtype, np.dtype) \
            and dtype.kind in "fc":
        return dtype
    if dtype is WEAK_INT:
        return WEAK_FLOAT
    return FLOAT32 if dtype.itemsize <= 2 else FLOAT64      # int16 -> float32 as NumPy


def dtype_of(expr, of_symbol, memo=None):
    """The dtype of a tasklet value; ``of_symbol`` gives a symbol's (connectors)."""
    memo = {} if memo is None else memo
    if expr not in memo:
        memo[expr] = _dtype(expr, of_symbol, memo)
    return memo[expr]


def _dtype(e, of_symbol, memo):
    if e is sp.I:
        return WEAK_COMPLEX
    if isinstance(e, sp.Integer):
        return WEAK_INT
    if isinstance(e, (sp.Number, sp.NumberSymbol)):
        return WEAK_FLOAT
    if isinstance(e, sp.Symbol):
        return WEAK_INT if e.is_integer else of_symbol(e)
    if isinstance(e, fp.as_float32):
        return FLOAT32
    if isinstance(e, fp.as_float64):
        return FLOAT64
    if isinstance(e, (fp.IntCast, fp.ComplexCast)):
        return np.dtype(e.dtype)
    if not isinstance(e, sp.Expr):
        return None                                 # conditions
    if all(s.is_integer for s in e.free_symbols) and not e.has(sp.Float, sp.I) and \
            not _divides(e):                                    # n / 2 is a float
        return WEAK_INT     # sizes, loop variables, int(idx[k]) (a load): Python ints
    if isinstance(e, sp.Piecewise):
        return promote(*(dtype_of(a.expr, of_symbol, memo) for a in e.args))
    args = [dtype_of(a, of_symbol, memo) for a in e.args]
    if isinstance(e, _REAL_OF):
        return _real(promote(*args))
    if isinstance(e, sp.Pow):
        d = promote(*args)
        negative = e.exp.is_number and e.exp.is_negative
        return floating(d) if negative or not e.exp.is_integer else d
    if isinstance(e, fp._Bits):
        if any(a is WEAK_FLOAT or isinstance(a, np.dtype) and a.kind == "f" for a in args):
            raise DtypeError(f"`{e}`: bit operations need integers (NumPy refuses floats)")
        return promote(*args)
    if isinstance(e, (sp.Add, sp.Mul)) or isinstance(e, _SAME_TYPE):
        return promote(*args)
    return floating(promote(*args))                 # sin, exp, atan2, hypot, ...


def _real(dtype):
    """The dtype of a complex value's parts (a real value's own)."""
    if dtype is WEAK_COMPLEX:
        return WEAK_FLOAT
    return COMPONENT[dtype] if is_complex(dtype) else dtype


def _divides(e):
    """Whether ``e`` holds a true division (``n / 2``: ``n * 2**-1``, or the rational 1/2)."""
    return any(not r.is_Integer for r in e.atoms(sp.Rational)) or \
        any(p.exp.is_negative for p in e.atoms(sp.Pow))


def rounded(expr, of_symbol):
    """``expr`` with every operation computed in its dtype as NumPy computes it: float32
    operations on operands converted to float32 and rounded once (``as_float32``),
    integer ones wrapping at their width (``INT_CASTS``), integers meeting floats
    converted (``as_float64``); weak operations as they were."""
    memo = {}

    def rebuild(e):
        d = dtype_of(e, of_symbol, memo)
        if not e.args or isinstance(e, AppliedUndef):
            return e
        if isinstance(e, (fp.as_float32, fp.as_float64, fp.IntCast)):
            inner = rebuild(e.args[0])
            if same(dtype_of(e.args[0], of_symbol, memo), d):
                return inner                            # converted to what it is
            return e.func(inner, evaluate=False)
        if isinstance(e, sp.Piecewise):
            pairs = [(convert(rebuild(a.expr), a.expr, d), rebuild(a.cond)) for a in e.args]
            return _integral(sp.Piecewise(*pairs, evaluate=False), d)
        if isinstance(e, sp.core.relational.Relational):
            common = promote(*(dtype_of(x, of_symbol, memo) for x in e.args))
            a, b = (convert(rebuild(x), x, common) for x in e.args)
            return e.func(a, b, evaluate=False)
        if not isinstance(e, sp.Expr):                  # and, or, not of comparisons
            return e.func(*map(rebuild, e.args))
        if is32(d):
            return _rounded_op(e)
        if isinstance(e, sp.Pow):                       # the exponent as it is
            return _integral(_same_node(e, [convert(rebuild(e.base), e.base, d), e.exp]), d)
        negation = isinstance(e, sp.Mul) and len(e.args) == 2 and e.args[0] == -1   # -b, a - b
        return _integral(_same_node(e, [a if negation and k == 0 else convert(rebuild(a), a, d)
                                        for k, a in enumerate(e.args)]), d)

    def convert(new, old, target):
        """An operand converted to its operation's dtype."""
        d = dtype_of(old, of_symbol, memo)
        if same(d, target) or target is None or target is WEAK_INT:
            return new
        if is32(target):
            if isinstance(new, sp.Integer) and abs(int(new)) <= 2 ** 24:
                return new                              # exact in float32
            if isinstance(new, (sp.Number, sp.NumberSymbol)):
                return sp.Float(float(np.float32(float(new))), precision=53)
            return fp.as_float32(new, evaluate=False)
        if isinstance(new, sp.Integer) and isinstance(target, np.dtype) and target.kind in "iu":
            info = np.iinfo(target)
            if not info.min <= int(new) <= info.max:
                raise DtypeError(f"the Python integer {new} is out of the range of {target} "
                                 "(NumPy raises OverflowError)")
        if d is WEAK_INT and (target is WEAK_FLOAT or target.kind == "f") and any(
                not s.is_integer for s in new.free_symbols):
            return fp.as_float64(new, evaluate=False)   # an int local: not C's int division
        if not isinstance(d, np.dtype) or not isinstance(target, np.dtype):
            return new                                  # Python numbers: exact here
        if target.kind == "f":
            return fp.as_float64(new, evaluate=False) if d.kind in "iu" else new
        return fp.INT_CASTS[target.name](new, evaluate=False)

    def _rounded_op(e):
        if isinstance(e, sp.Pow):
            base, exp = rebuild(e.base), e.exp
            if not (exp.is_Integer or exp is sp.S.Half or exp == -sp.S.Half):
                exp = convert(rebuild(exp), exp, FLOAT32)
            node = sp.Pow(convert(base, e.base, FLOAT32), exp, evaluate=False)
        elif isinstance(e, sp.Mul):
            # a quotient a / b is Mul(a, Pow(b, -1)): one division, rounded once
            factors = [sp.Pow(convert(rebuild(f.base), f.base, FLOAT32), -1, evaluate=False)
                       if _reciprocal(f) else convert(rebuild(f), f, FLOAT32) for f in e.args]
            node = sp.Mul(*factors, evaluate=False)
            if len(factors) == 2 and factors[0] == -1:
                return node                             # a negation: exact
        else:
            node = _same_node(e, [convert(rebuild(a), a, FLOAT32) for a in e.args])
        return node if isinstance(e, _EXACT) else fp.as_float32(node, evaluate=False)

    return rebuild(sp.sympify(expr))


def _integral(node, dtype):
    """An integer operation of ``dtype`` in its cast (which the printer computes it in)."""
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return fp.INT_CASTS[dtype.name](node, evaluate=False)
    return node


def _reciprocal(factor):
    return isinstance(factor, sp.Pow) and factor.exp is sp.S.NegativeOne


def _same_node(e, args):
    if all(a is b for a, b in zip(args, e.args)):
        return e
    with sp.evaluate(False):
        return e.func(*args)


def value_dtype(b, value):
    """The dtype of an array value of the frontend (``ArrayExpr``) as far as it is known
    while building: named by its creation, its container's, or its elements'."""
    from .array_shapes import AXES, number
    from .array_stores import tasklet_body
    if value.dtype is not None:
        return value.dtype
    if value.view is not None and value.view.container.name not in _inferred(b.kernel):
        return value.view.container.dtype
    inputs, expr = tasklet_body(b.ex, lambda: number(value.at(AXES[:value.rank])))
    return _stored_dtype(b.kernel, inputs, expr)


def _stored_dtype(kernel, inputs, expr):
    weak = {a.name for a in kernel.arguments if a.kind == "float"}
    found = {n: COMPLEX128 if n in kernel.complex_stored else None for n in _inferred(kernel)}
    d = dtype_of(expr, _symbol_dtypes(Tasklet(inputs, ()), kernel.containers, found, weak))
    return d if isinstance(d, np.dtype) else np.dtype(np.int64) if d is WEAK_INT else \
        COMPLEX128 if d is WEAK_COMPLEX else FLOAT64


def note_store(kernel, name, inputs, expr):
    """Remember that a temporary whose dtype is decided later holds complex values, for
    the choices made while building (``value_dtype``: a product of complex operands is
    no BLAS call). The builder's ``note_store`` (array_stores.py calls it)."""
    if name not in _inferred(kernel) or name in kernel.complex_stored:
        return
    try:
        stored = _stored_dtype(kernel, inputs, expr)
    except DtypeError:          # reported with its line by the dtype pass after lowering
        return
    if is_complex(stored):
        kernel.complex_stored.add(name)


def _inferred(kernel):
    return {n for n, c in kernel.containers.items() if c.transient and n not in kernel.typed}


# ---- the pass over a kernel ---------------------------------------------------------------
def assign(body, containers, inferred, weak, filename="<kernel>"):
    """(body, containers) with the dtypes of the ``inferred`` containers (names) decided
    by the values stored into them and every float32 operation rounded as NumPy rounds
    it. ``weak`` names the containers holding Python numbers (float arguments)."""
    stores = list(_stores(body))
    if not _typed(stores, containers):
        return body, containers                     # float64 throughout: nothing to decide
    found = {name: None for name in inferred}
    summed = {m.data for t in stores for m, _ in t.outputs if m.wcr}
    changed = True
    while changed:                  # dtypes only rise (None < weak < float32 < float64)
        changed = False
        for t in stores:
            of = _symbol_dtypes(t, containers, found, weak)
            for m, expr in t.outputs:
                d = _checked(lambda: dtype_of(expr, of), filename, t.line)
                if m.data in found:
                    new = promote(found[m.data], d)
                    if m.data in summed and isinstance(new, np.dtype) and new.kind in "iu":
                        new = promote(new, np.dtype(np.int64))  # NumPy sums ints in int64
                    if not same(new, found[m.data]):
                        found[m.data], changed = new, True
    out = dict(containers)
    for name, d in found.items():
        if d is WEAK_COMPLEX:
            d = found[name] = COMPLEX128
        if is32(d) or isinstance(d, np.dtype) and d.kind in "iuc":
            out[name] = _with_dtype(containers[name], d)
        elif d is WEAK_INT and containers[name].is_scalar:     # a Python int: int64 is exact
            out[name] = _with_dtype(containers[name], np.dtype(np.int64))
    try:
        body, out = realify(body, out)
    except ComplexError as exc:
        raise KernelSyntaxError(exc.args[0], filename, exc.args[1], 1) from None
    found = {n: COMPONENT.get(d, d) if is_complex(d) else d for n, d in found.items()}
    return _Rounding(out, found, weak, filename).region(body), out


def _checked(fn, filename, line):
    try:
        return fn()
    except DtypeError as exc:
        raise KernelSyntaxError(str(exc), filename, line, 1) from None


def _typed(stores, containers):
    """Whether anything in the kernel is not float64: float32 or integer data in values,
    conversions, bit operations."""
    if any(c.dtype == FLOAT32 or is_complex(c.dtype) for c in containers.values()):
        return True
    for t in stores:
        if any(containers[m.data].dtype.kind in "iu" for m in
               [m for _, m in t.inputs] + [m for m, _ in t.outputs]):
            return True
        if any(e.has(fp.as_float32, fp._Bits, sp.I, *PARTS_OF) for _, e in t.outputs):
            return True
    return False


def _with_dtype(container, dtype):
    from dataclasses import replace
    return replace(container, dtype=dtype)


def _stores(body):
    from ..sdfg.nodes import tasklets
    return (t for t, _, _ in tasklets(body))


def _symbol_dtypes(tasklet, containers, found, weak):
    """A connector's dtype: its container's; weak where it holds Python numbers (a float
    argument, or a scalar local only Python numbers are stored into)."""
    memlets = dict(tasklet.inputs)

    def of(symbol):
        name = memlets[symbol].data if symbol in memlets else None
        if name is None:
            return WEAK_FLOAT
        if name in weak:
            return WEAK_FLOAT
        if name in found:
            d = found[name]
            if not isinstance(d, np.dtype):         # held exactly (ints in int64)
                return (d or WEAK_FLOAT) if containers[name].is_scalar else \
                    COMPLEX128 if d is WEAK_COMPLEX else FLOAT64
            return d if is32(d) or d.kind in "iuc" else FLOAT64
        return containers[name].dtype
    return of


class _Rounding(Transformer):
    def __init__(self, containers, found, weak, filename):
        super().__init__()
        self.containers, self.found, self.weak = containers, found, weak
        self.filename = filename

    def node(self, node):
        if isinstance(node, Tasklet):
            return self._tasklet(node)
        if isinstance(node, MapScope):
            from dataclasses import replace
            return replace(node, body=tuple(self._tasklet(t) if isinstance(t, Tasklet) else t
                                            for t in node.body))
        return node

    def _tasklet(self, t):
        of = _symbol_dtypes(t, self.containers, self.found, self.weak)
        outputs = _checked(lambda: tuple((m, rounded(e, of)) for m, e in t.outputs),
                           self.filename, t.line)
        if all(a is b for (_, a), (_, b) in zip(outputs, t.outputs)):
            return t
        from dataclasses import replace
        return replace(t, outputs=outputs)
