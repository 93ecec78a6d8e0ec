"""Complex values as pairs of real ones (after dtypes are decided, before rounding).

The frontend builds complex values as it builds real ones: a complex array is a
container of dtype complex128 (complex64) whose elements its connectors read, ``1j`` is
``sp.I``, ``.real``/``np.conj``/``np.angle`` are sympy's ``re``/``conjugate``/``arg``.
:func:`realify` then makes the kernel real: a complex container becomes one of its parts'
dtype with a last axis of two (real, imaginary), which is how NumPy lays it out in memory,
so arguments are passed as they are (``runtime/arguments.py`` views them as such); every
tasklet reads both parts of a complex element and writes both parts of its value, each
part an expression of real operations (:func:`parts`). Everything after the frontend
(bounds, differentiation, codegen, CUDA) sees real arithmetic only, so derivatives with
respect to the parts come for free; ``api.py`` turns them into complex ones (JAX's
convention, docs/kernel-language.md).
"""
from dataclasses import replace

import numpy as np
import sympy as sp

from ..sdfg import arithmetic as fp
from ..sdfg.nodes import Container, LibraryNode, MapScope, Memlet, Tasklet
from ..sdfg.visit import Transformer

ZERO = sp.S.Zero
COMPONENT = {np.dtype(np.complex128): np.dtype(np.float64),
             np.dtype(np.complex64): np.dtype(np.float32)}
# complex-only functions: on real operands too they need their parts
PARTS_OF = (sp.re, sp.im, sp.conjugate, sp.arg, fp.ComplexCast)


class ComplexError(Exception):
    """An operation on complex values the kernel language does not have (with the line)."""


def is_complex(dtype):
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


def realify(body, containers):
    """(body, containers) with every complex container stored as its real parts and every
    tasklet computing in real arithmetic. Raises ComplexError (message, line)."""
    complex_names = {n for n, c in containers.items() if is_complex(c.dtype)}
    if not complex_names and not _any_complex_function(body):
        return body, containers
    out = dict(containers)
    for name in complex_names:
        c = containers[name]
        out[name] = replace(c, dtype=COMPONENT[c.dtype], shape=c.shape + (sp.Integer(2),),
                            complex=True)
    return _Realify(complex_names, out).region(body), out


def _any_complex_function(body):
    from ..sdfg.nodes import tasklets
    return any(e.has(sp.I, *PARTS_OF) for t, _, _ in tasklets(body) for _, e in t.outputs)


class _Realify(Transformer):
    """Each tasklet as tasklets of one output each (what every pass after the frontend
    takes): a complex element's two parts one after the other, in the order where the
    second does not read the part the first wrote, or the second through a temporary
    (``z[i] = z[i] * w`` reads both parts for each)."""

    def __init__(self, complex_names, containers):
        super().__init__()
        self.complex, self.containers = complex_names, containers
        self.in_map = False

    def state(self, state):
        return replace(state, nodes=tuple(n for node in state.nodes for n in self.node(node)))

    def node(self, node):
        if isinstance(node, Tasklet):
            return self._tasklet(node)
        if isinstance(node, MapScope):
            self.in_map = True
            try:
                return [replace(node, body=tuple(n for t in node.body for n in self.node(t)))]
            finally:
                self.in_map = False
        if isinstance(node, LibraryNode):
            touched = sorted(n for n, _ in node.accesses() if n in self.complex)
            if touched:
                raise ComplexError(f"{node.kind} of the complex array {touched[0]!r}: not "
                                   "supported for complex values; write it as loops or sums "
                                   "of elements", node.line)
        return [node]

    def _tasklet(self, t):
        inputs, pairs = [], {}
        for conn, m in t.inputs:
            if m.data in self.complex:
                re, im = (sp.Symbol(f"{conn.name}_{k}", real=True) for k in "ri")
                inputs += [(re, _part(m, 0)), (im, _part(m, 1))]
                pairs[conn] = (re, im)
            else:
                inputs.append((conn, m))
        (m, e), = t.outputs
        re, im = Parts(pairs, t.line)(e)
        if m.data not in self.complex:
            if im != ZERO and m.data.startswith("__"):     # an engine's temporary
                raise ComplexError("a complex value reaches an operation computed in real "
                                   "numbers (a BLAS or LAPACK call's operand); take its "
                                   ".real, .imag or abs(), or write the operation as loops",
                                   t.line)
            if im != ZERO:
                raise ComplexError(f"a complex value is stored into the real array "
                                   f"{m.data!r}; store its .real, .imag or abs() (NumPy "
                                   "drops the imaginary part with a ComplexWarning)", t.line)
            return [t] if not pairs and re is e else [self._one(inputs, m, re, t.line)]
        # reads[k]: whether the other part's value reads part k of the target
        reads = {k: any(x.data == m.data and x.subset[-1] == k for c, x in inputs
                        if c in value.free_symbols) for k, value in ((1, re), (0, im))}
        first, second = (0, re), (1, im)
        if reads[0]:                    # the imaginary part reads the real one: it goes first
            first, second = second, first
        if not reads[first[0]]:
            return [self._one(inputs, _part(m, k), v, t.line) for k, v in (first, second)]
        held = self._temporary(m)                   # both read both: one part waits
        return [self._one(inputs, held, im, t.line), self._one(inputs, _part(m, 0), re, t.line),
                Tasklet(((HELD, held),), ((_part(m, 1), HELD),), t.line)]

    def _one(self, inputs, m, value, line):
        free = getattr(value, "free_symbols", ())
        return Tasklet(tuple((c, x) for c, x in inputs if c in free), ((m, value),), line)

    def _temporary(self, m):
        """Where an imaginary part waits: a scalar, or in a map an element per point (which
        analysis/contraction.py makes each point's own scalar)."""
        target = self.containers[m.data]
        name = f"__cpart{len(self.containers)}"
        shape = target.shape[:-1] if self.in_map else ()
        self.containers[name] = Container(name, target.dtype, shape, True)
        return Memlet(name, m.subset if self.in_map else ())


HELD = sp.Symbol("__held", real=True)


def _part(m, k):
    return Memlet(m.data, m.subset + (sp.Integer(k),), m.wcr)


class Parts:
    """``(real, imaginary)`` of a tasklet value over complex connectors (``pairs``: connector
    -> its parts' connectors), each built of real operations in the order NumPy's complex
    arithmetic takes them; the imaginary part exactly ``ZERO`` for a real value."""

    def __init__(self, pairs, line):
        self.pairs, self.line, self.memo = pairs, line, {}
        self.atoms = (sp.I, *PARTS_OF, *pairs)

    def __call__(self, e):
        if e not in self.memo:
            self.memo[e] = self._parts(e) if isinstance(e, sp.Basic) and e.has(*self.atoms) \
                else (e, ZERO)
        return self.memo[e]

    def error(self, what):
        return ComplexError(f"{what} of complex values is not supported (the kernel language "
                            "has + - * / **, abs, np.real/imag/conj/angle/exp/log/sqrt/sin/"
                            "cos and == / != on them); take .real, .imag or abs() first",
                            self.line)

    def _parts(self, e):
        if e in self.pairs:
            return self.pairs[e]
        if e is sp.I:
            return ZERO, sp.S.One
        if isinstance(e, sp.Add):
            out = self(e.args[0])
            for a in e.args[1:]:
                out = _add(out, self(a))
            return out
        if isinstance(e, sp.Mul):
            return self._product(e.args)
        if isinstance(e, (sp.Pow, fp.np_power)):
            return self._power(e)
        if isinstance(e, sp.Piecewise):
            conds = [self._condition(c) for _, c in e.args]
            branches = [self(v) for v, _ in e.args]
            return tuple(_select([b[k] for b in branches], conds) for k in (0, 1))
        if isinstance(e, sp.core.relational.Relational):
            return self._condition(e), ZERO
        if isinstance(e, fp.ComplexCast):
            re, im = self(e.args[0])
            if e.dtype == "complex64":
                re, im = (x if x == ZERO else fp.as_float32(x, evaluate=False)
                          for x in (re, im))
            return re, im
        args = [self(a) for a in e.args]
        real = [a for a, _ in args]
        if isinstance(e, (sp.re, sp.im, sp.conjugate, sp.arg, sp.Abs)):
            re, im = args[0]
            if isinstance(e, sp.re):
                return re, ZERO
            if isinstance(e, sp.im):
                return im, ZERO
            if isinstance(e, sp.conjugate):
                return re, _neg(im)
            if isinstance(e, sp.arg):
                return sp.atan2(_zero_float(im), re, evaluate=False), ZERO
            return (sp.Abs(re, evaluate=False) if im == ZERO else
                    fp.np_hypot(re, im, evaluate=False)), ZERO
        if all(im == ZERO for _, im in args):
            return _rebuilt(e, real), ZERO
        return self._function(e, args)

    def _function(self, e, args):
        if isinstance(e, fp._Choice):
            raise _unordered(self.line)
        if len(args) != 1:
            raise self.error(f"`{type(e).__name__}`")
        (a, b), = args
        exp, cos, sin, cosh, sinh = (lambda x, f=f: f(x, evaluate=False)
                                     for f in (sp.exp, sp.cos, sp.sin, sp.cosh, sp.sinh))
        if isinstance(e, sp.exp):                    # e^a (cos b, sin b)
            r = exp(a)
            return fp.mul(r, cos(b)), fp.mul(r, sin(b))
        if isinstance(e, sp.log):                    # (log |z|, arg z)
            return sp.log(fp.np_hypot(a, b, evaluate=False), evaluate=False), \
                sp.atan2(b, a, evaluate=False)
        if isinstance(e, sp.sin):
            return fp.mul(sin(a), cosh(b)), fp.mul(cos(a), sinh(b))
        if isinstance(e, sp.cos):
            return fp.mul(cos(a), cosh(b)), fp.neg(fp.mul(sin(a), sinh(b)))
        raise self.error(f"`{type(e).__name__}`")

    def _product(self, factors):
        out = None
        for f in factors:
            if isinstance(f, sp.Pow) and f.exp is sp.S.NegativeOne:    # a quotient
                out = _divide(out or (sp.S.One, ZERO), self(f.base))
            else:
                out = self(f) if out is None else _multiply(out, self(f))
        return out

    def _power(self, e):
        base, exponent = e.args
        z, w = self(base), self(exponent)
        if z[1] == ZERO and w[1] == ZERO:
            return _rebuilt(e, [z[0], w[0]]), ZERO
        if w[1] == ZERO and w[0].is_Integer and abs(int(w[0])) <= 16:
            n = int(w[0])
            out = (sp.S.One, ZERO)
            for _ in range(abs(n)):                  # NumPy multiplies out small powers
                out = z if out == (sp.S.One, ZERO) else _multiply(out, z)
            return out if n >= 0 else _divide((sp.S.One, ZERO), out)
        if w[1] == ZERO:                             # polar: |z|^p (cos p arg z, sin p arg z)
            r = fp.np_hypot(z[0], _zero_float(z[1]), evaluate=False)
            angle = sp.atan2(_zero_float(z[1]), z[0], evaluate=False)
            scale = fp.sqrt(r) if w[0] == sp.S.Half else sp.Pow(r, w[0], evaluate=False)
            turned = fp.mul(w[0], angle)
            return (fp.mul(scale, sp.cos(turned, evaluate=False)),
                    fp.mul(scale, sp.sin(turned, evaluate=False)))
        # a complex exponent: exp(w log z)
        log_z = sp.log(base, evaluate=False)
        return self(sp.exp(sp.Mul(exponent, log_z, evaluate=False), evaluate=False))

    def _condition(self, c):
        if not isinstance(c, sp.Basic) or not c.has(*self.atoms):
            return c
        if isinstance(c, (sp.Eq, sp.Ne)):
            (ar, ai), (br, bi) = self(c.args[0]), self(c.args[1])
            kind = type(c)
            re = kind(ar, br, evaluate=False)
            if ai == ZERO and bi == ZERO:
                return re
            im = kind(_zero_float(ai), _zero_float(bi), evaluate=False)
            return sp.And(re, im, evaluate=False) if kind is sp.Eq else \
                sp.Or(re, im, evaluate=False)
        if isinstance(c, sp.core.relational.Relational):
            parts = [self(a) for a in c.args]
            if any(im != ZERO for _, im in parts):
                raise _unordered(self.line)
            return _rebuilt(c, [re for re, _ in parts])
        if isinstance(c, sp.logic.boolalg.BooleanFunction):
            return c.func(*(self._condition(a) for a in c.args), evaluate=False)
        return c


def _unordered(line):
    return ComplexError("complex values have no order (`<`, `>`, max, min); compare their "
                        ".real or abs()", line)


def _rebuilt(e, args):
    if all(a is b for a, b in zip(args, e.args)):
        return e
    return e.func(*args, evaluate=False)


def _zero_float(x):
    return sp.Float(0.0) if x == ZERO else x


def _neg(x):
    return ZERO if x == ZERO else fp.neg(x)


def _add(p, q):
    return tuple(y if x == ZERO else x if y == ZERO else fp.add(x, y) for x, y in zip(p, q))


def _mul(x, y):
    return ZERO if ZERO in (x, y) else fp.mul(x, y)


def _sub(x, y):
    return _neg(y) if x == ZERO else x if y == ZERO else fp.sub(x, y)


def _multiply(p, q):
    """(a + ib)(c + id) = (ac - bd) + i(ad + bc), NumPy's order."""
    (a, b), (c, d) = p, q
    return _sub(_mul(a, c), _mul(b, d)), _add((_mul(a, d),), (_mul(b, c),))[0]


def _divide(p, q):
    """(a + ib) / (c + id): by a real divisor part by part; else over c² + d² (NumPy uses
    Smith's algorithm: results agree to a few ulps away from overflow)."""
    (a, b), (c, d) = p, q
    if d == ZERO:
        return (fp.div(a, c) if a != ZERO else ZERO), (fp.div(b, c) if b != ZERO else ZERO)
    norm = fp.add(fp.mul(c, c), fp.mul(d, d))
    re = _add((_mul(a, c),), (_mul(b, d),))[0]
    im = _sub(_mul(b, c), _mul(a, d))
    return (fp.div(re, norm) if re != ZERO else ZERO), (fp.div(im, norm) if im != ZERO else ZERO)


def _select(values, conds):
    if all(v == ZERO for v in values):
        return ZERO
    return sp.Piecewise(*[(v, c) for v, c in zip(values, conds)], evaluate=False)
