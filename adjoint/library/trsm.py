"""``out = op(t)^{-1} b`` or ``b op(t)^{-1}``: a triangular solve (BLAS dtrsm, or loops).

Not a NumPy function: the derivative rules of factorisations (``cholesky.py``) solve
with their triangular factor this way. It has no derivative rules of its own.
"""
from dataclasses import dataclass

from ..sdfg.nodes import LibraryNode
from .base import copy_loop

PROTOTYPE = """/* row-major cblas dtrsm with 64-bit integers */
void {0}(int, int, int, int, int, int64_t, int64_t, double, const double *, int64_t,
         double *, int64_t);
"""


@dataclass(frozen=True, eq=False)
class Trsm(LibraryNode):
    """``out = op(t)^{-1} @ b`` (``left``) or ``b @ op(t)^{-1}``: ``t`` an n x n matrix of
    which only the ``lower`` (else upper) triangle is read, its diagonal included;
    ``op`` transposes when ``trans``; ``b`` and ``out`` are (rows, cols) matrices."""
    out: str
    dims: tuple
    b: str
    t: str
    n: object
    lower: bool = True
    trans: bool = False
    left: bool = True
    line: int = 0

    kind = "triangular solve"

    def accesses(self):
        return ((self.b, "read"), (self.t, "read"), (self.out, "write"))

    def operands(self):
        return ((self.out, self.dims), (self.b, self.dims), (self.t, (self.n, self.n)))

    def invalid(self):
        if (self.dims[0] if self.left else self.dims[1]) != self.n:
            return f"{self.dims} does not match the triangle's size {self.n}"
        return None

    def text(self):
        t = f"{'tril' if self.lower else 'triu'}({self.t}){'.T' if self.trans else ''}"
        solve = f"solve({t}, {self.b})" if self.left else f"{self.b} @ inv({t})"
        return f"{self.out} = {solve}    [trsm {' x '.join(map(str, self.dims))}]"

    def work(self):
        return self.dims + (self.n,)

    def prototypes(self, library):
        return (PROTOTYPE.format(library.symbol("cblas_dtrsm")),)

    def emit(self, gen):
        m, k = (gen.index.doprint(x) for x in self.dims)
        n = gen.index.doprint(self.n)
        gen.open("")
        copy_loop(gen, self.out, self.b, f"{m} * {k}")
        x, t = gen.pointer(self.out), gen.pointer(self.t)
        if gen.library:
            gen.emit(f"{gen.library.symbol('cblas_dtrsm')}(101, {141 if self.left else 142}, "
                     f"{122 if self.lower else 121}, {112 if self.trans else 111}, 131, "
                     f"{m}, {k}, 1.0, {t}, {n}, {x}, {k});")
        else:
            self._loops(gen, m, k, n, x, t)
        gen.close()

    def _loops(self, gen, m, k, n, x, t):
        """Substitution, row by row: op(t) is lower when exactly one of ``lower`` and
        ``trans`` holds; a right solve is a left one with op(t) transposed."""
        op = (lambda i, j: f"{t}[({j}) * {n} + ({i})]") if self.trans else \
            (lambda i, j: f"{t}[({i}) * {n} + ({j})]")
        lower = self.lower != self.trans
        if self.left:           # op(t) X = B: rows of X in order of the triangle
            order = "sc_i = 0; sc_i < sc_n; ++sc_i" if lower else \
                "sc_i = sc_n - 1; sc_i >= 0; --sc_i"
            span = "sc_j = 0; sc_j < sc_i; ++sc_j" if lower else \
                "sc_j = sc_i + 1; sc_j < sc_n; ++sc_j"
            gen.emit(f"const int64_t sc_n = {n}, sc_k = {k};")
            gen.open(f"for (int64_t {order})")
            gen.open(f"for (int64_t {span})")
            gen.emit(f"const double sc_l = {op('sc_i', 'sc_j')};")
            gen.emit(f"for (int64_t sc_c = 0; sc_c < sc_k; ++sc_c) "
                     f"{x}[sc_i * sc_k + sc_c] -= sc_l * {x}[sc_j * sc_k + sc_c];")
            gen.close()
            gen.emit(f"const double sc_d = {op('sc_i', 'sc_i')};")
            gen.emit(f"for (int64_t sc_c = 0; sc_c < sc_k; ++sc_c) "
                     f"{x}[sc_i * sc_k + sc_c] /= sc_d;")
            gen.close()
            return
        # X op(t) = B: column j of X once the columns it depends on are known
        order = "sc_j = sc_n - 1; sc_j >= 0; --sc_j" if lower else \
            "sc_j = 0; sc_j < sc_n; ++sc_j"
        span = "sc_i = sc_j + 1; sc_i < sc_n; ++sc_i" if lower else \
            "sc_i = 0; sc_i < sc_j; ++sc_i"
        gen.emit(f"const int64_t sc_n = {n}, sc_m = {m};")
        gen.open("for (int64_t sc_r = 0; sc_r < sc_m; ++sc_r)")
        gen.emit(f"double *const sc_x = {x} + sc_r * sc_n;")
        gen.open(f"for (int64_t {order})")
        gen.emit("double sc_s = sc_x[sc_j];")
        gen.emit(f"for (int64_t {span}) sc_s -= sc_x[sc_i] * {op('sc_i', 'sc_j')};")
        gen.emit(f"sc_x[sc_j] = sc_s / {op('sc_j', 'sc_j')};")
        gen.close()
        gen.close()
