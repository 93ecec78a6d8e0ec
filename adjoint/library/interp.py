"""``np.interp(x, xp, fp, left=None, right=None)``: piecewise-linear interpolation of the
points ``(xp, fp)`` (``xp`` increasing, as NumPy requires) at each element of ``x``, as
NumPy computes it (``arr_interp``): the interval ``j`` is the last with ``xp[j] <= x``,
found by bisection; ``fp[j]`` at a knot and at the last point, ``left`` / ``right``
(default ``fp[0]`` / ``fp[-1]``) outside; ``slope * (x - xp[j]) + fp[j]`` inside, with
NumPy's retries where that is nan; nan for a nan ``x`` (but ``fp[0]`` or the sides when
there is one point, as NumPy's comparisons give).

Derivatives inside an interval, with ``h = xp[j+1] - xp[j]``, ``r = (x - xp[j]) / h``:
``d/dx = slope``, ``d/dfp[j] = 1 - r``, ``d/dfp[j+1] = r``, ``d/dxp[j] = slope (r - 1)``,
``d/dxp[j+1] = -slope r``; at a knot, the last point or a default side, 1 for that
``fp``. The adjoint and the tangent are nodes of this kind (``mode``) that search again.
"""
import ast
import math
from dataclasses import dataclass

import sympy as sp

from ..sdfg.nodes import LibraryNode
from .base import whole_operand

ONE = sp.Integer(1)


@dataclass(frozen=True, eq=False)
class Interp(LibraryNode):
    """``mode`` "value": ``out = interp(x, xp, fp)``; "vjp": the cotangent ``out`` summed
    into the adjoints ``d`` (of x, xp, fp; None where not carried); "jvp": ``out`` the
    tangent from the tangents ``d``. ``n`` elements of x, ``m`` points; ``left``/``right``
    a constant, or None for the end values."""
    out: str
    x: str
    xp: str
    fp: str
    n: object
    m: object
    mode: str = "value"
    d: tuple = (None, None, None)
    left: float = None
    right: float = None
    line: int = 0

    kind = "interp"

    def accesses(self):
        given = ((self.x, "read"), (self.xp, "read"), (self.fp, "read"))
        derivatives = tuple((c, "sum" if self.mode == "vjp" else "read")
                            for c in self.d if c is not None)
        if self.mode == "vjp":
            return ((self.out, "read"),) + given + derivatives
        return given + derivatives + ((self.out, "write"),)

    def operands(self):
        n, m = sp.Max(0, self.n), sp.Max(0, self.m)
        sizes = (n, m, m)
        return ((self.out, (n, ONE)),) + tuple((c, (k, ONE)) for c, k in zip(
            (self.x, self.xp, self.fp), sizes)) + tuple(
                (c, (k, ONE)) for c, k in zip(self.d, sizes) if c is not None)

    def text(self):
        what = {"value": "interp", "vjp": "interp adjoint", "jvp": "interp tangent"}[self.mode]
        return f"{self.out} = {what}({self.x}, {self.xp}, {self.fp})    [interp {self.n}]"

    def work(self):
        return (self.n, 4)

    # ---- derivatives -------------------------------------------------------------------
    def reverse_reads(self, active):
        return (self.x, self.xp, self.fp) if self.out in active else ()

    def vjp(self, rules):
        rule = self._derivative(rules, "vjp")
        return () if rule is None else (rule,)

    def jvp(self, rules):
        rule = self._derivative(rules, "jvp")
        return (self,) if rule is None else (self, rule)

    def _derivative(self, rules, mode):
        """The node of ``mode`` for the derivatives ``rules`` carries, or None for none."""
        carried = tuple(rules.of(c) if rules.has(c) else None
                        for c in (self.x, self.xp, self.fp))
        if not any(carried):
            return None
        return Interp(rules.of(self.out), self.x, self.xp, self.fp, self.n, self.m, mode,
                      carried, self.left, self.right, self.line)

    # ---- code ---------------------------------------------------------------------------
    def emit(self, gen):
        p = {k: gen.pointer(getattr(self, k)) for k in ("out", "x", "xp", "fp")}
        dx, dxp, dfp = (gen.pointer(c) if c is not None else None for c in self.d)
        left = p["fp"] + "[0]" if self.left is None else repr(float(self.left))
        right = p["fp"] + "[sc_m - 1]" if self.right is None else repr(float(self.right))
        gen.open("")
        gen.emit(f"const int64_t sc_n = {gen.index.doprint(self.n)}, "
                 f"sc_m = {gen.index.doprint(self.m)};")
        gen.open("for (int64_t sc_i = 0; sc_i < sc_n; ++sc_i)")
        gen.emit(f"const double sc_x = {p['x']}[sc_i];")
        gen.emit("int64_t sc_j = -1;        /* -1: left of xp; sc_m: right of it */")
        gen.emit("if (sc_m == 1) sc_j = sc_x < %s[0] ? -1 : sc_x > %s[0] ? 1 : 0;"
                 % (p["xp"], p["xp"]))
        gen.emit("else if (sc_x != sc_x) sc_j = -2;      /* nan */")
        gen.emit(f"else if (sc_x > {p['xp']}[sc_m - 1]) sc_j = sc_m;")
        gen.open(f"else if (sc_x >= {p['xp']}[0])")
        gen.emit("int64_t sc_lo = 0, sc_hi = sc_m;")
        gen.emit("while (sc_lo < sc_hi) { const int64_t sc_mid = sc_lo + ((sc_hi - sc_lo) >> 1);"
                 f" if (sc_x >= {p['xp']}[sc_mid]) sc_lo = sc_mid + 1; else sc_hi = sc_mid; }}")
        gen.emit("sc_j = sc_lo - 1;")
        gen.close()
        if self.mode == "vjp":
            gen.emit(f"const double sc_g = {p['out']}[sc_i];")
        # each case: the value, and the weights of (x, xp[j], xp[j+1], fp[a], fp[b])
        gen.emit("double sc_v = sc_x, sc_wx = 0.0, sc_wxp0 = 0.0, sc_wxp1 = 0.0, "
                 "sc_wf0 = 0.0, sc_wf1 = 0.0; int64_t sc_f0 = 0, sc_f1 = 0;")
        sides = ((f"sc_j == -1 || (sc_m == 1 && sc_j < 0)", left, "0", self.left),
                 (f"sc_j >= sc_m || (sc_m == 1 && sc_j == 1)", right, "sc_m - 1", self.right))
        first = True
        for test, value, index, constant in sides:
            gen.open(f"{'if' if first else 'else if'} ({test})")
            first = False
            gen.emit(f"sc_v = {value};")
            if constant is None:
                gen.emit(f"sc_f0 = {index}; sc_wf0 = 1.0;")
            gen.close()
        gen.open("else if (sc_j >= 0 && (sc_j == sc_m - 1 || %s[sc_j] == sc_x))" % p["xp"])
        gen.emit(f"sc_v = {p['fp']}[sc_j]; sc_f0 = sc_j; sc_wf0 = 1.0;")
        gen.close()
        gen.open("else if (sc_j >= 0)")
        xp, fp = p["xp"], p["fp"]
        gen.emit(f"const double sc_h = {xp}[sc_j + 1] - {xp}[sc_j];")
        gen.emit(f"const double sc_s = ({fp}[sc_j + 1] - {fp}[sc_j]) / sc_h;")
        gen.emit(f"sc_v = sc_s * (sc_x - {xp}[sc_j]) + {fp}[sc_j];")
        gen.open("if (isnan(sc_v))")
        gen.emit(f"sc_v = sc_s * (sc_x - {xp}[sc_j + 1]) + {fp}[sc_j + 1];")
        gen.emit(f"if (isnan(sc_v) && {fp}[sc_j] == {fp}[sc_j + 1]) sc_v = {fp}[sc_j];")
        gen.close()
        gen.emit(f"const double sc_r = (sc_x - {xp}[sc_j]) / sc_h;")
        gen.emit("sc_wx = sc_s; sc_wxp0 = sc_s * (sc_r - 1.0); sc_wxp1 = -sc_s * sc_r;")
        gen.emit("sc_f0 = sc_j; sc_wf0 = 1.0 - sc_r; sc_f1 = sc_j + 1; sc_wf1 = sc_r;")
        gen.close()
        self._finish(gen, p["out"], dx, dxp, dfp)
        gen.close()
        gen.close()

    def _finish(self, gen, out, dx, dxp, dfp):
        """The value, the adjoints summed, or the tangent, from the case's weights."""
        inside = "sc_j >= 0 && sc_j < sc_m - 1"
        if self.mode == "value":
            gen.emit(f"{out}[sc_i] = sc_v;")
            return
        if self.mode == "vjp":
            if dx is not None:
                gen.emit(f"{dx}[sc_i] += sc_g * sc_wx;")
            if dxp is not None:
                gen.emit(f"if ({inside}) {{ {dxp}[sc_j] += sc_g * sc_wxp0; "
                         f"{dxp}[sc_j + 1] += sc_g * sc_wxp1; }}")
            if dfp is not None:
                gen.emit(f"if (sc_wf0 != 0.0) {dfp}[sc_f0] += sc_g * sc_wf0;")
                gen.emit(f"if (sc_wf1 != 0.0) {dfp}[sc_f1] += sc_g * sc_wf1;")
            return
        terms = ["0.0"]
        if dx is not None:
            terms.append(f"sc_wx * {dx}[sc_i]")
        if dfp is not None:
            terms.append(f"sc_wf0 * {dfp}[sc_f0] + sc_wf1 * {dfp}[sc_f1]")
        gen.emit(f"double sc_t = {' + '.join(terms)};")
        if dxp is not None:
            gen.emit(f"if ({inside}) sc_t += sc_wxp0 * {dxp}[sc_j] + "
                     f"sc_wxp1 * {dxp}[sc_j + 1];")
        gen.emit(f"{out}[sc_i] = sc_t;")


# ---- the frontend ----------------------------------------------------------------------------

PARAMETERS = ("x", "xp", "fp", "left", "right", "period")


def call(b, node, args):
    """``np.interp(x, xp, fp, left=None, right=None)``: an Interp node into a new transient
    of x's shape (a number for a number)."""
    from ..frontend.array_calls import _flat, _required
    from ..frontend.array_stores import temporary
    from ..sdfg import State
    if args.get("period") is not None and not _none(args["period"]):
        raise b.src.error(node, f"`{ast.unparse(node)}`: period= is not supported; wrap x "
                                "into one period and pad xp, fp yourself")
    sides = []
    for k in ("left", "right"):
        given = args.get(k)
        if given is None or _none(given):
            sides.append(None)
        elif isinstance(_literal(given), (int, float)) and \
                not isinstance(_literal(given), bool) and math.isfinite(_literal(given)):
            sides.append(float(_literal(given)))
        else:
            raise b.src.error(node, f"`{ast.unparse(node)}`: {k}= must be a finite number "
                                    "constant (or left out: the end value of fp)")
    x = b.expr(_required(b, node, args, "x"))
    xp, fp = (b.expr(_required(b, node, args, k)) for k in ("xp", "fp"))
    for name, v in (("xp", xp), ("fp", fp)):
        if v.rank != 1:
            raise b.src.error(node, f"`{ast.unparse(node)}`: {name} must be a vector")
    m = xp.shape[0]
    b.agree(node, fp.shape[0], m, fp.shape, xp.shape, "fp and xp")
    flat = _flat(b, node, x) if x.rank else x
    operands = [whole_operand(b, node, v, "np.interp's " + k)
                for k, v in (("x", flat if flat.rank else _as_vector(b, node, flat)),
                             ("xp", xp), ("fp", fp))]
    n = operands[0].volume()
    out = temporary(b, node, tuple(x.shape), "__interp")
    b.ex.prelude.append(State((Interp(out.name, *(c.name for c in operands), n, m,
                                      left=sides[0], right=sides[1], line=b.line(node)),),
                              f"interp_{b.line(node)}"))
    return b.container(out)


def _as_vector(b, node, value):
    from ..frontend.array_calls import _new_axis
    return _new_axis(value, 0)


def _literal(node):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return None


def _none(node):
    return isinstance(node, ast.Constant) and node.value is None
