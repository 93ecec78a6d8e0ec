"""``scipy.linalg.lapack.dgtsv(dl, d, du, b)[3]``: the solution ``x`` of the tridiagonal
system ``T x = b`` (``T``: sub-diagonal ``dl``, n - 1; diagonal ``d``, n; super-diagonal
``du``, n - 1), by Gaussian elimination with partial pivoting as LAPACK's dgtsv does it
(row ``i`` and ``i + 1`` swapped where ``|dl[i]| > |d[i]|``), LAPACK's own dgtsv where it
is linked. A pivot exactly zero (dgtsv's ``info > 0``) stops the call with LinAlgError.

Derivatives, with ``T^T`` the system of diagonals (du, d, dl): adjoint ``w = T^{-T}
xbar``, ``bbar += w``, ``dbar[i] -= w[i] x[i]``, ``dlbar[i] -= w[i + 1] x[i]``, ``dubar[i]
-= w[i] x[i + 1]``; tangent ``dx = T^{-1} (db - dT x)``.
"""
import ast
from dataclasses import dataclass

import sympy as sp

from ..sdfg.nodes import LibraryNode
from .base import copy_loop, elementwise, whole_operand

PROTOTYPE = """/* LAPACK dgtsv with 64-bit integers (Fortran interface) */
void {0}(const int64_t *, const int64_t *, double *, double *, double *, double *,
         const int64_t *, int64_t *);
"""
ONE = sp.Integer(1)


@dataclass(frozen=True, eq=False)
class Tridiagonal(LibraryNode):
    """``out = T^{-1} b`` for the tridiagonal ``T`` of ``dl``, ``d``, ``du``; ``n`` the
    order; ``factor`` (4 n) holds the factorisation (the diagonals as elimination leaves
    them and the second super-diagonal pivoting fills); ``lengths``: dl's, d's, du's and
    b's as their containers declare them (the call checks them against n - 1 and n)."""
    out: str
    dl: str
    d: str
    du: str
    b: str
    factor: str
    n: object
    line: int = 0
    lengths: tuple = None

    kind = "tridiagonal"
    failure = "scipy.linalg.lapack.dgtsv: the matrix is singular (a zero pivot)"

    def accesses(self):
        return ((self.dl, "read"), (self.d, "read"), (self.du, "read"), (self.b, "read"),
                (self.factor, "write"), (self.out, "write"))

    def operands(self):
        n = self.n                        # allocated: a negative size counts as 0
        lengths = self.lengths or (sp.Max(0, n - 1), sp.Max(0, n), sp.Max(0, n - 1),
                                   sp.Max(0, n))
        return ((self.out, (sp.Max(0, n), ONE)), (self.factor, (sp.Max(0, 4 * n), ONE)),
                *((c, (k, ONE)) for c, k in zip((self.dl, self.d, self.du, self.b), lengths)))

    def invalid(self, containers):
        return None             # operands() covers every container it touches

    def text(self):
        return (f"{self.out} = dgtsv({self.dl}, {self.d}, {self.du}, {self.b})    "
                f"[tridiagonal {self.n}]")

    def work(self):
        return (self.n,)

    # ---- derivatives -------------------------------------------------------------------
    def reverse_reads(self, active):
        if self.out not in active:
            return ()
        diagonals = (self.dl, self.d, self.du)
        return diagonals + ((self.out,) if set(diagonals) & active else ())

    def vjp(self, rules):
        diagonals = (self.dl, self.d, self.du)
        if not any(rules.has(c) for c in diagonals + (self.b,)):
            return ()
        n, line = self.n, self.line
        w = rules.scratch(f"{self.out}_w", (n,))
        nodes = [self._solve(rules, w, rules.of(self.out), transposed=True)]
        if rules.has(self.b):
            nodes.append(_map(rules.of(self.b), n, lambda i: (i,), lambda x: x, [w], line))
        minus = lambda w_, x: -w_ * x                       # noqa: E731
        if rules.has(self.d):
            nodes.append(_map(rules.of(self.d), n, lambda i: (i,), minus, [w, self.out], line))
        if rules.has(self.dl):
            nodes.append(_map(rules.of(self.dl), n - 1, lambda i: (i,), minus,
                              [w, self.out], line, (lambda i: (i + 1,), lambda i: (i,))))
        if rules.has(self.du):
            nodes.append(_map(rules.of(self.du), n - 1, lambda i: (i,), minus,
                              [w, self.out], line, (lambda i: (i,), lambda i: (i + 1,))))
        return tuple(nodes)

    def jvp(self, rules):
        diagonals = (self.dl, self.d, self.du)
        if not any(rules.has(c) for c in diagonals + (self.b,)):
            return (self,)
        n, line, x = self.n, self.line, self.out
        r = rules.scratch(f"{self.out}_r", (n,))
        nodes = [self, _map(r, n, lambda i: (i,), lambda *v: v[0] if v else sp.Integer(0),
                            [rules.of(self.b)] if rules.has(self.b) else [], line,
                            accumulate=False)]
        minus = lambda t, v: -t * v                         # noqa: E731
        if rules.has(self.d):             # r -= dd * x
            nodes.append(_map(r, n, lambda i: (i,), minus, [rules.of(self.d), x], line))
        if rules.has(self.dl):            # r[i + 1] -= ddl[i] x[i]
            nodes.append(_map(r, n - 1, lambda i: (i + 1,), minus, [rules.of(self.dl), x],
                              line))
        if rules.has(self.du):            # r[i] -= ddu[i] x[i + 1]
            nodes.append(_map(r, n - 1, lambda i: (i,), minus, [rules.of(self.du), x], line,
                              (lambda i: (i,), lambda i: (i + 1,))))
        nodes.append(self._solve(rules, rules.of(self.out), r, transposed=False))
        return tuple(nodes)

    def _solve(self, rules, out, b, transposed):
        """Another solve with T (or T^T: the off-diagonals swapped), its own work."""
        factor = rules.scratch(f"{self.out}_{'t' if transposed else 'n'}factor", (4 * self.n,))
        dl, du = (self.du, self.dl) if transposed else (self.dl, self.du)
        lengths = self.lengths and ((self.lengths[2], self.lengths[1], self.lengths[0])
                                    if transposed else self.lengths[:3]) + (sp.Max(0, self.n),)
        return Tridiagonal(out, dl, self.d, du, b, factor, self.n, self.line, lengths)

    # ---- code ---------------------------------------------------------------------------
    def prototypes(self, library):
        return (PROTOTYPE.format(library.symbol("dgtsv_")),)

    def emit(self, gen):
        """The diagonals into work (dl, d, du, then the second super-diagonal), b into
        out; eliminated and solved in place."""
        n = gen.index.doprint(self.n)
        out, work = gen.pointer(self.out), gen.pointer(self.factor)
        gen.open("")
        gen.emit(f"const int64_t sc_n = {n};")
        gen.emit(f"double *sc_dl = {work}, *sc_d = {work} + sc_n, *sc_du = {work} + 2 * sc_n, "
                 f"*sc_du2 = {work} + 3 * sc_n;")
        for name, pointer, count in ((self.dl, "sc_dl", "sc_n - 1"), (self.d, "sc_d", "sc_n"),
                                     (self.du, "sc_du", "sc_n - 1"), (self.b, None, "sc_n")):
            if pointer is None:
                copy_loop(gen, self.out, name, count)
            else:
                gen.emit(f"for (int64_t sc_q = 0; sc_q < {count}; ++sc_q) "
                         f"{pointer}[sc_q] = {gen.pointer(name)}[sc_q];")
        if gen.library:
            gen.emit("int64_t sc_info = 0; const int64_t sc_one = 1;")
            gen.emit(f"if (sc_n > 0) {gen.library.symbol('dgtsv_')}(&sc_n, &sc_one, sc_dl, "
                     f"sc_d, sc_du, {out}, &sc_n, &sc_info);")
            gen.emit(f"if (sc_info != 0) {gen.fail(self.line)}")
        else:
            self._loops(gen, out)
        gen.close()

    def _loops(self, gen, x):
        """Row i against row i + 1, top to bottom: eliminate dl[i] with row i as the pivot
        row, or swap the rows first where |dl[i]| > |d[i]| (row i then has a second
        super-diagonal du2[i]); then back substitution."""
        gen.open("for (int64_t sc_i = 0; sc_i + 1 < sc_n; ++sc_i)")
        gen.emit("sc_du2[sc_i] = 0.0;")
        gen.open("if (fabs(sc_d[sc_i]) >= fabs(sc_dl[sc_i]))")
        gen.emit(f"if (sc_d[sc_i] == 0.0) {gen.fail(self.line)}")
        gen.emit("const double sc_f = sc_dl[sc_i] / sc_d[sc_i];")
        gen.emit("sc_d[sc_i + 1] -= sc_f * sc_du[sc_i];")
        gen.emit(f"{x}[sc_i + 1] -= sc_f * {x}[sc_i];")
        gen.close()
        gen.open("else")
        gen.emit("const double sc_f = sc_d[sc_i] / sc_dl[sc_i];")
        gen.emit("sc_d[sc_i] = sc_dl[sc_i];")
        gen.emit("const double sc_t = sc_d[sc_i + 1];")
        gen.emit("sc_d[sc_i + 1] = sc_du[sc_i] - sc_f * sc_t;")
        gen.open("if (sc_i + 2 < sc_n)")
        gen.emit("sc_du2[sc_i] = sc_du[sc_i + 1];")
        gen.emit("sc_du[sc_i + 1] = -sc_f * sc_du2[sc_i];")
        gen.close()
        gen.emit("sc_du[sc_i] = sc_t;")
        gen.emit(f"const double sc_b = {x}[sc_i];")
        gen.emit(f"{x}[sc_i] = {x}[sc_i + 1];")
        gen.emit(f"{x}[sc_i + 1] = sc_b - sc_f * {x}[sc_i + 1];")
        gen.close()
        gen.close()
        gen.open("if (sc_n > 0)")
        gen.emit(f"if (sc_d[sc_n - 1] == 0.0) {gen.fail(self.line)}")
        gen.emit(f"{x}[sc_n - 1] /= sc_d[sc_n - 1];")
        gen.emit(f"if (sc_n > 1) {x}[sc_n - 2] = ({x}[sc_n - 2] - sc_du[sc_n - 2] * "
                 f"{x}[sc_n - 1]) / sc_d[sc_n - 2];")
        gen.emit(f"for (int64_t sc_i = sc_n - 3; sc_i >= 0; --sc_i) {x}[sc_i] = ({x}[sc_i] - "
                 f"sc_du[sc_i] * {x}[sc_i + 1] - sc_du2[sc_i] * {x}[sc_i + 2]) / sc_d[sc_i];")
        gen.close()


def _map(out, count, at, value, inputs, line, reads=None, accumulate=True):
    """``out[at(i)] (+)= value(inputs[0][i], ...)`` for i < count; ``reads``: each input's
    subset function (default ``(i,)``)."""
    reads = reads or [lambda i: (i,)] * len(inputs)
    return elementwise((out, lambda i, j: at(i)), (count, ONE),
                       lambda i, j, *xs: value(*xs),
                       [(c, (lambda r: lambda i, j: r(i))(r)) for c, r in zip(inputs, reads)],
                       line, accumulate)


# ---- the frontend ----------------------------------------------------------------------------

PARAMETERS = ("dl", "d", "du", "b")
RETURNS = "(du2, d, du, x, info)"


def call(b, node, args, element):
    """``dgtsv(dl, d, du, b)[element]``: x (element 3), a Tridiagonal node into a new
    transient; dgtsv's other keywords (overwrite_*) change nothing the kernel sees."""
    from ..frontend.array_calls import _required
    from ..frontend.array_stores import temporary
    from ..sdfg import State
    if element != 3:
        raise b.src.error(node, f"`{_short(node)}`: dgtsv returns {RETURNS}; only x "
                                "(element [3]) is supported")
    values = [b.expr(_required(b, node, args, p)) for p in PARAMETERS]
    for p, v in zip(PARAMETERS, values):
        if v.rank != 1:
            raise b.src.error(node, f"`{_short(node)}`: dgtsv's {p} must be a vector "
                                    f"(got {v.rank} dimensions); one right-hand side only")
    n = values[1].shape[0]
    b.agree(node, values[0].shape[0], n - 1, values[0].shape, (n - 1,), "dl and d")
    b.agree(node, values[2].shape[0], n - 1, values[2].shape, (n - 1,), "du and d")
    b.agree(node, values[3].shape[0], n, values[3].shape, (n,), "b and d")
    dl, d, du, rhs = (whole_operand(b, node, v, "dgtsv's " + p)
                      for p, v in zip(PARAMETERS, values))
    out = temporary(b, node, (n,), "__dgtsv")
    factor = temporary(b, node, (4 * n,), "__dgtsv_factor")
    lengths = tuple(c.volume() for c in (dl, d, du, rhs))
    b.ex.prelude.append(State((Tridiagonal(out.name, dl.name, d.name, du.name, rhs.name,
                                           factor.name, n, b.line(node), lengths),),
                              f"tridiagonal_{b.line(node)}"))
    return b.container(out)


def _short(node):
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
