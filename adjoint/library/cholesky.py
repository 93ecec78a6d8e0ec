"""``np.linalg.cholesky(a)``: the lower factor ``L`` with ``L @ L.T == a`` (LAPACK dpotrf,
or the unblocked factorisation as loops). Like NumPy it reads the lower triangle of
``a`` only; a matrix that is not positive definite stops the call with LinAlgError.

Derivatives on matrices (Murray 2016, "Differentiation of the Cholesky decomposition"),
with ``Phi(X)`` the lower triangle of ``X`` with its diagonal halved:

- tangent ``dL = L Phi(L^{-1} dA L^{-T})``, ``dA`` the symmetric matrix of the lower
  triangle of the tangent;
- adjoint ``S = L^{-T} Phi(L^T Lbar) L^{-1}``; the lower triangle of ``a`` takes
  ``Phi(S + S^T)`` (off the diagonal an element stands for itself and its mirror).
"""
from dataclasses import dataclass

import sympy as sp

from ..sdfg.nodes import LibraryNode
from .base import elementwise, matrix, whole_operand
from .matmul import MatMul
from .trsm import Trsm

PROTOTYPE = """/* LAPACK dpotrf with 64-bit integers (Fortran interface: the length of uplo last) */
void {0}(const char *, const int64_t *, double *, const int64_t *, int64_t *, size_t);
"""


def _phi(i, j, x):
    """Phi(X)[i, j]: the lower triangle, the diagonal halved."""
    return sp.Piecewise((x, i > j), (x / 2, sp.Eq(i, j)), (0, True))


@dataclass(frozen=True, eq=False)
class Cholesky(LibraryNode):
    """``out = cholesky(a)``: the lower factor of the n x n matrix ``a`` (zeros above).
    ``a_dims``: a's (rows, cols) as declared where they are other symbols that the call
    checks equal to n (a kernel specialised on its arguments' shapes)."""
    out: str
    a: str
    n: object
    line: int = 0
    a_dims: tuple = None

    kind = "cholesky"
    failure = "np.linalg.cholesky: the matrix is not positive definite"

    def accesses(self):
        return ((self.a, "read"), (self.out, "write"))

    def operands(self):
        return ((self.out, (self.n, self.n)), (self.a, self.a_dims or (self.n, self.n)))

    def text(self):
        return f"{self.out} = cholesky({self.a})    [cholesky {self.n}]"

    def work(self):
        return (self.n, self.n, self.n)

    # ---- derivatives -------------------------------------------------------------------
    def reverse_reads(self, active):
        return (self.out,) if self.out in active and self.a in active else ()

    def vjp(self, d):
        if not d.has(self.a):
            return ()
        n, L, line = self.n, self.out, self.line
        square = (n, n)
        p, y = d.scratch(f"{L}_p", square), d.scratch(f"{L}_y", square)
        ij = lambda i, j: (i, j)        # noqa: E731
        return (
            MatMul(p, square, L, square, d.of(L), square, True, False, False, line),  # L^T Lbar
            elementwise((p, ij), square, lambda i, j, x: _phi(i, j, x), [(p, ij)], line),
            Trsm(y, square, p, L, n, True, True, True, line),       # L^{-T} Phi(.)
            Trsm(p, square, y, L, n, True, False, False, line),     # ... L^{-1}: S
            elementwise((d.of(self.a), ij), square, lambda i, j, x, xt: _phi(i, j, x + xt),
                        [(p, ij), (p, lambda i, j: (j, i))], line, accumulate=True))

    def jvp(self, d):
        if not d.has(self.a):
            return (self,)
        n, L, line = self.n, self.out, self.line
        square = (n, n)
        q, y = d.scratch(f"{L}_q", square), d.scratch(f"{L}_y", square)
        ij = lambda i, j: (i, j)        # noqa: E731
        sym = lambda i, j, x, xt: sp.Piecewise((x, i >= j), (xt, True))     # noqa: E731
        return (
            self,
            elementwise((q, ij), square, sym, [(d.of(self.a), ij),
                                               (d.of(self.a), lambda i, j: (j, i))], line),
            Trsm(y, square, q, L, n, True, False, True, line),      # L^{-1} dA
            Trsm(q, square, y, L, n, True, True, False, line),      # ... L^{-T}
            elementwise((q, ij), square, lambda i, j, x: _phi(i, j, x), [(q, ij)], line),
            MatMul(d.of(L), square, L, square, q, square, line=line))

    # ---- code ---------------------------------------------------------------------------
    def prototypes(self, library):
        return (PROTOTYPE.format(library.symbol("dpotrf_")),)

    def emit(self, gen):
        """The lower triangle of a into out (zeros above), then factored in place."""
        n = gen.index.doprint(self.n)
        out, a = gen.pointer(self.out), gen.pointer(self.a)
        gen.open("")
        gen.emit(f"const int64_t sc_n = {n};")
        gen.open("for (int64_t sc_i = 0; sc_i < sc_n; ++sc_i)")
        gen.emit(f"for (int64_t sc_j = 0; sc_j < sc_n; ++sc_j) {out}[sc_i * sc_n + sc_j] = "
                 f"sc_j <= sc_i ? {a}[sc_i * sc_n + sc_j] : 0.0;")
        gen.close()
        if gen.library:     # LAPACK's column-major upper triangle is our row-major lower
            gen.emit("int64_t sc_info = 0;")
            gen.emit(f'if (sc_n > 0) {gen.library.symbol("dpotrf_")}("U", &sc_n, {out}, &sc_n, '
                     '&sc_info, 1);')
            gen.emit(f"if (sc_info != 0) {gen.fail(self.line)}")
        else:
            self._loops(gen, out)
        gen.close()

    def _loops(self, gen, out):
        """Column by column: L[j, j] = sqrt(A[j, j] - sum_k L[j, k]^2), then the column
        below it; a pivot that is not positive fails as LAPACK's does (a nan goes on into
        the factor, as there: NumPy returns it)."""
        at = lambda i, j: f"{out}[({i}) * sc_n + ({j})]"      # noqa: E731
        gen.open("for (int64_t sc_j = 0; sc_j < sc_n; ++sc_j)")
        gen.emit(f"double sc_d = {at('sc_j', 'sc_j')};")
        gen.emit(f"for (int64_t sc_k = 0; sc_k < sc_j; ++sc_k) "
                 f"sc_d -= {at('sc_j', 'sc_k')} * {at('sc_j', 'sc_k')};")
        gen.emit(f"if (sc_d <= 0.0) {gen.fail(self.line)}")
        gen.emit("sc_d = sqrt(sc_d);")
        gen.emit(f"{at('sc_j', 'sc_j')} = sc_d;")
        gen.open("for (int64_t sc_i = sc_j + 1; sc_i < sc_n; ++sc_i)")
        gen.emit(f"double sc_s = {at('sc_i', 'sc_j')};")
        gen.emit(f"for (int64_t sc_k = 0; sc_k < sc_j; ++sc_k) "
                 f"sc_s -= {at('sc_i', 'sc_k')} * {at('sc_j', 'sc_k')};")
        gen.emit(f"{at('sc_i', 'sc_j')} = sc_s / sc_d;")
        gen.close()
        gen.close()


def call(b, node, args):
    """``np.linalg.cholesky(a)`` of a square matrix: a Cholesky node into a new transient."""
    from ..frontend.array_calls import _required
    from ..frontend.array_stores import temporary
    from ..sdfg import State
    value = b.expr(_required(b, node, args, "a"))
    a = whole_operand(b, node, value, "np.linalg.cholesky")
    if value.rank != 2:
        raise b.src.error(node, "np.linalg.cholesky takes a square matrix (2-D)")
    b.agree(node, value.shape[0], value.shape[1], value.shape, value.shape, "matrix")
    n = value.shape[0]
    out = temporary(b, node, (n, n), "__cholesky")
    b.ex.prelude.append(State((Cholesky(out.name, a.name, n, b.line(node), matrix(a.shape)),),
                              f"cholesky_{b.line(node)}"))
    return b.container(out)
