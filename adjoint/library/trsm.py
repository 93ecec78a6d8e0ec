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

    def invalid(self, containers):
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
        gen.emit(f"const int64_t sc_n = {n}, sc_m = {m}, sc_k = {k};")
        copy_loop(gen, self.out, self.b, "sc_m * sc_k")
        x, t = gen.pointer(self.out), gen.pointer(self.t)
        if gen.library:
            gen.emit(f"if (sc_m > 0 && sc_k > 0) "
                     f"{gen.library.symbol('cblas_dtrsm')}(101, {141 if self.left else 142}, "
                     f"{122 if self.lower else 121}, {112 if self.trans else 111}, 131, "
                     f"sc_m, sc_k, 1.0, {t}, sc_n, {x}, sc_k);")
        elif self.left:
            substitute(gen, x, t, self.lower, self.trans)
        else:
            self._right(gen, x, t)
        gen.close()

    def _right(self, gen, x, t):
        """X op(t) = B, row by row: column j of X once the columns it depends on are."""
        op = _element(t, self.trans)
        lower = self.lower != self.trans        # op(t) is lower triangular
        order = "sc_j = sc_n - 1; sc_j >= 0; --sc_j" if lower else \
            "sc_j = 0; sc_j < sc_n; ++sc_j"
        span = "sc_i = sc_j + 1; sc_i < sc_n; ++sc_i" if lower else \
            "sc_i = 0; sc_i < sc_j; ++sc_i"
        gen.open("for (int64_t sc_r = 0; sc_r < sc_m; ++sc_r)")
        gen.emit(f"double *const sc_x = {x} + sc_r * sc_n;")
        gen.open(f"for (int64_t {order})")
        gen.emit("double sc_s = sc_x[sc_j];")
        gen.emit(f"for (int64_t {span}) sc_s -= sc_x[sc_i] * {op('sc_i', 'sc_j')};")
        gen.emit(f"sc_x[sc_j] = sc_s / {op('sc_j', 'sc_j')};")
        gen.close()
        gen.close()


def _element(t, trans):
    """C of element (i, j) of op(t), t row-major n x n (``sc_n``)."""
    if trans:
        return lambda i, j: f"{t}[({j}) * sc_n + ({i})]"
    return lambda i, j: f"{t}[({i}) * sc_n + ({j})]"


def substitute(gen, x, t, lower, trans, unit=False):
    """C solving op(t) X = X in place, X row-major ``sc_n`` x ``sc_k``, by substitution
    row by row (``unit``: t's diagonal taken as ones, as LU's L)."""
    op = _element(t, trans)
    lower = lower != trans                      # op(t) is lower triangular
    order = "sc_i = 0; sc_i < sc_n; ++sc_i" if lower else "sc_i = sc_n - 1; sc_i >= 0; --sc_i"
    span = "sc_j = 0; sc_j < sc_i; ++sc_j" if lower else "sc_j = sc_i + 1; sc_j < sc_n; ++sc_j"
    gen.open(f"for (int64_t {order})")
    gen.open(f"for (int64_t {span})")
    gen.emit(f"const double sc_l = {op('sc_i', 'sc_j')};")
    gen.emit(f"for (int64_t sc_c = 0; sc_c < sc_k; ++sc_c) "
             f"{x}[sc_i * sc_k + sc_c] -= sc_l * {x}[sc_j * sc_k + sc_c];")
    gen.close()
    if not unit:
        gen.emit(f"const double sc_d = {op('sc_i', 'sc_i')};")
        gen.emit(f"for (int64_t sc_c = 0; sc_c < sc_k; ++sc_c) "
                 f"{x}[sc_i * sc_k + sc_c] /= sc_d;")
    gen.close()
