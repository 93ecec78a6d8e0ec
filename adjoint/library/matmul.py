"""``out (+)= op(a) @ op(b)``: the matrix product (BLAS dgemm, dgemv for a vector, dger for
an outer product added to out, dsyrk for a matrix times its own transpose, or an i-k-j
loop nest).

Made by ``frontend/array_matmul.py`` (``@``, ``np.dot``, ``np.matmul``, ``einsum``) and by
``analysis/blas.py`` (loop nests that are products). Its adjoints and tangents are
products again: ``abar += gout op(b)^T``, ``bbar += op(a)^T gout``;
``d(op(a) op(b)) = op(da) op(b) + op(a) op(db)``.
"""
from dataclasses import dataclass, replace

from ..sdfg.nodes import LibraryNode

PROTOTYPE = """/* row-major cblas dgemm with 64-bit integers (OpenBLAS for Python packaging) */
void {0}(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
         const double *, int64_t, double, double *, int64_t);
#define sc_dgemm {0}
"""
GEMV = """/* row-major cblas dgemv: a matrix times a vector, which dgemm with one column does at
   half its speed */
void {0}(int, int, int64_t, int64_t, double, const double *, int64_t, const double *,
         int64_t, double, double *, int64_t);
#define sc_dgemv {0}
"""
SYRK = """/* row-major cblas dsyrk: one triangle of a a^T (or a^T a), half dgemm's work, as NumPy
   does for a @ a.T */
void {0}(int, int, int, int64_t, int64_t, double, const double *, int64_t, double, double *,
         int64_t);
#define sc_dsyrk {0}
"""
GER = """/* row-major cblas dger: out += x y^T, the rank-1 update a vector product's adjoint is */
void {0}(int, int64_t, int64_t, double, const double *, int64_t, const double *, int64_t,
         double *, int64_t);
#define sc_dger {0}
"""


@dataclass(frozen=True, eq=False)
class MatMul(LibraryNode):
    """``out (+)= op(a) @ op(b)`` on whole float64 containers (BLAS gemm).

    Each operand is seen as a row-major matrix of the stored ``(rows, cols)`` given
    in its ``*_dims`` (a vector is a 1 x n row or an n x 1 column); ``trans_*``
    transposes it. ``accumulate`` adds to ``out`` instead of overwriting it."""
    out: str
    out_dims: tuple
    a: str
    a_dims: tuple
    b: str
    b_dims: tuple
    trans_a: bool = False
    trans_b: bool = False
    accumulate: bool = False
    line: int = 0

    kind = "matmul"
    device_kernel = True        # CUDA: sc_matmul, one thread per element of out

    def op_dims(self):
        """(M, K, N) of the product op(a) (M x K) times op(b) (K x N)."""
        (ar, ac), (br, bc) = self.a_dims, self.b_dims
        m, k = (ac, ar) if self.trans_a else (ar, ac)
        n = br if self.trans_b else bc
        return m, k, n

    # ---- what it touches -------------------------------------------------------------
    def accesses(self):
        return ((self.a, "read"), (self.b, "read"),
                (self.out, "sum" if self.accumulate else "write"))

    def operands(self):
        return ((self.out, self.out_dims), (self.a, self.a_dims), (self.b, self.b_dims))

    def text(self):
        t = lambda x, flag: f"{x}.T" if flag else x     # noqa: E731
        op = "+=" if self.accumulate else "="
        return (f"{self.out} {op} {t(self.a, self.trans_a)} @ {t(self.b, self.trans_b)}"
                f"    [matmul {' x '.join(map(str, self.op_dims()))}]")

    def work(self):
        return (2,) + self.op_dims()

    # ---- derivatives -------------------------------------------------------------------
    def reverse_reads(self, active):
        """d(ab) = da b + a db: a's adjoint reads b, b's reads a."""
        if self.out not in active:
            return ()
        return tuple([self.b] * (self.a in active) + [self.a] * (self.b in active))

    def vjp(self, d):
        """a's adjoint += gout op(b)^T, b's += op(a)^T gout (the reverse zeroes gout after,
        unless the product accumulated into out)."""
        g, nodes = d.of(self.out), []
        if d.has(self.a):
            nodes.append(MatMul(d.of(self.a), self.a_dims, self.b, self.b_dims, g,
                                self.out_dims, self.trans_b, True, True, self.line)
                         if self.trans_a else
                         MatMul(d.of(self.a), self.a_dims, g, self.out_dims, self.b,
                                self.b_dims, False, not self.trans_b, True, self.line))
        if d.has(self.b):
            nodes.append(MatMul(d.of(self.b), self.b_dims, g, self.out_dims, self.a,
                                self.a_dims, True, self.trans_a, True, self.line)
                         if self.trans_b else
                         MatMul(d.of(self.b), self.b_dims, self.a, self.a_dims, g,
                                self.out_dims, not self.trans_a, False, True, self.line))
        return tuple(nodes)

    def assigning(self, name):
        """The product assigned to out rather than added (an outer product: one pass
        writing out, no zeros before dger's read and write of every element)."""
        return replace(self, accumulate=False) if name == self.out else None

    def jvp(self, d):
        """d(op(a) op(b)) = op(da) op(b) + op(a) op(db), before the product itself. (A
        product writes a fresh transient once, so its output is varied only through a or b.)"""
        nodes = []
        if d.has(self.a):
            nodes.append(replace(self, out=d.of(self.out), a=d.of(self.a)))
        if d.has(self.b):
            nodes.append(replace(self, out=d.of(self.out), b=d.of(self.b),
                                 accumulate=self.accumulate or bool(nodes)))
        return tuple(nodes) + (self,)

    # ---- code ---------------------------------------------------------------------------
    def prototypes(self, library):
        if self.gemv() is not None:
            return (GEMV.format(library.symbol("cblas_dgemv")),)
        if self.ger() is not None:
            return (GER.format(library.symbol("cblas_dger")),)
        if self.syrk():
            return (SYRK.format(library.symbol("cblas_dsyrk")),)
        return (PROTOTYPE.format(library.symbol("cblas_dgemm")),)

    def ger(self):
        """(x, its stride, y, its stride) when the product adds an outer product of two
        vectors to out (``abar += g x^T``: dger), else None."""
        return self.outer() if self.accumulate else None

    def outer(self):
        """(x, its stride, y, its stride) when the product is the outer product of two
        vectors, out (+)= x y^T, else None."""
        _, k, _ = self.op_dims()
        if k != 1:
            return None
        (_, lda), (_, ldb) = self.a_dims, self.b_dims
        return self.a, (1 if self.trans_a else lda), self.b, (ldb if self.trans_b else 1)

    def syrk(self):
        """Whether the product assigns a matrix times its own transpose (``a @ a.T``,
        ``a.T @ a``: dsyrk and a mirrored triangle; not when adding to out, whose other
        triangle dsyrk would leave as it was)."""
        return self.a == self.b and self.trans_a != self.trans_b and not self.accumulate \
            and self.gemv() is None and self.ger() is None

    def gemv(self):
        """(matrix, its stored dims, transposed, vector, its stride, out's stride) when one
        side of the product is a vector (``A @ x``, ``y @ A``: dgemv), else None."""
        m, _, n = self.op_dims()
        (_, lda), (_, ldb), (_, ldc) = self.a_dims, self.b_dims, self.out_dims
        if n == 1:                      # out (m x 1) = op(a) x, x the column op(b)
            return self.a, self.a_dims, self.trans_a, self.b, (1 if self.trans_b else ldb), ldc
        if m == 1:                      # out^T (n x 1) = op(b)^T x, x the row op(a)
            return self.b, self.b_dims, not self.trans_b, self.a, \
                (lda if self.trans_a else 1), 1
        return None

    def emit(self, gen):
        """BLAS dgemv, dger, dsyrk or dgemm when a BLAS library is linked, else (and for an
        outer product assigned) a loop nest in i-k-j order."""
        m, k, n = (gen.index.doprint(x) for x in self.op_dims())
        lda, ldb = (gen.index.doprint(d[1]) for d in (self.a_dims, self.b_dims))
        ldc = gen.index.doprint(self.out_dims[1])
        a, b, c = (gen.pointer(x) for x in (self.a, self.b, self.out))
        beta = "1.0" if self.accumulate else "0.0"
        vector = self.gemv() if gen.library else None
        outer = self.ger() if gen.library and vector is None else None
        if outer is not None:
            x, incx, y, incy = outer
            incx, incy = (gen.index.doprint(v) for v in (incx, incy))
            gen.emit(f"sc_dger(101, {m}, {n}, 1.0, {gen.pointer(x)}, {incx}, {gen.pointer(y)}, "
                     f"{incy}, {c}, {ldc});")
            return
        if vector is not None:
            matrix, (rows, cols), trans, x, incx, incy = vector
            rows, cols, lda, incx, incy = (gen.index.doprint(v) for v in
                                           (rows, cols, cols, incx, incy))
            gen.emit(f"sc_dgemv(101, {112 if trans else 111}, {rows}, {cols}, 1.0, "
                     f"{gen.pointer(matrix)}, {lda}, {gen.pointer(x)}, {incx}, {beta}, {c}, "
                     f"{incy});")
            return
        if gen.library and self.syrk():
            gen.emit(f"sc_dsyrk(101, 121, {112 if self.trans_a else 111}, {m}, {k}, 1.0, {a}, "
                     f"{lda}, 0.0, {c}, {ldc});")
            gen.emit(f"for (int64_t sc_i = 1; sc_i < {m}; ++sc_i) "
                     f"for (int64_t sc_j = 0; sc_j < sc_i; ++sc_j) "
                     f"{c}[sc_i * {ldc} + sc_j] = {c}[sc_j * {ldc} + sc_i];")
            return
        if gen.library and (k != "1" or self.accumulate):  # an outer product assigned: the
            # loops, one pass writing out (dgemm with one column runs at half their speed)
            gen.emit(f"sc_dgemm(101, {112 if self.trans_a else 111}, "
                     f"{112 if self.trans_b else 111}, "
                     f"{m}, {n}, {k}, 1.0, {a}, {lda}, {b}, {ldb}, {beta}, {c}, {ldc});")
            return
        at = f"{a}[sc_k * {lda} + sc_i]" if self.trans_a else f"{a}[sc_i * {lda} + sc_k]"
        bt = f"{b}[sc_j * {ldb} + sc_k]" if self.trans_b else f"{b}[sc_k * {ldb} + sc_j]"
        gen.open(f"for (int64_t sc_i = 0; sc_i < {m}; ++sc_i)")
        if self.outer() is not None and not self.accumulate:    # each element written once
            gen.emit("const int64_t sc_k = 0;")
            gen.emit(f"const double sc_a = {at};")
            gen.emit(f"for (int64_t sc_j = 0; sc_j < {n}; ++sc_j) "
                     f"{c}[sc_i * {ldc} + sc_j] = sc_a * {bt};")
            gen.close()
            return
        if not self.accumulate:
            gen.emit(f"for (int64_t sc_j = 0; sc_j < {n}; ++sc_j) {c}[sc_i * {ldc} + sc_j] = 0.0;")
        gen.open(f"for (int64_t sc_k = 0; sc_k < {k}; ++sc_k)")
        gen.emit(f"const double sc_a = {at};")
        gen.emit(f"for (int64_t sc_j = 0; sc_j < {n}; ++sc_j) "
                 f"{c}[sc_i * {ldc} + sc_j] += sc_a * {bt};")
        gen.close()
        gen.close()

    def emit_cuda(self, host):
        """One launch of the preamble's sc_matmul, a thread per element of out."""
        m, k, n = (host.index.doprint(x) for x in self.op_dims())
        lda, ldb = (host.index.doprint(d[1]) for d in (self.a_dims, self.b_dims))
        ldc = host.index.doprint(self.out_dims[1])
        index = {c.name: j for j, c in enumerate(host.layout.containers)}
        c, a, b = (f"(double *)sc_data[{index[x]}]" for x in (self.out, self.a, self.b))
        host.open("")
        host.emit(f"const int64_t sc_m = {m}, sc_n = {n};")
        host.open("if (sc_m > 0 && sc_n > 0)")
        host.emit("dim3 sc_grid, sc_block;")
        host.emit("sc_config(sc_n, sc_m, 1, sc_max_blocks, &sc_grid, &sc_block);")
        host.emit(f"SC_LAUNCH(sc_matmul, sc_grid, sc_block, {c}, {a}, {b}, sc_m, sc_n, {k}, "
                  f"{lda}, {ldb}, {ldc}, {int(self.trans_a)}, {int(self.trans_b)}, "
                  f"{int(self.accumulate)});")
        host.emit("SC_TRY(cudaGetLastError());")
        host.close()
        host.close()
        host.plan(self, "-> sc_matmul (matrix product), one thread per element")
