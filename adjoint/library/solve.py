"""``np.linalg.solve(a, b)`` (``b`` a vector or a matrix) and ``np.linalg.inv(a)`` (the
solve of the identity): LU with partial pivoting (LAPACK dgetrf/dgetrs, or loops); a
complex system as the real one of twice its size (``_complex``). A
singular matrix (a pivot exactly zero, as LAPACK and NumPy decide) stops the call with
LinAlgError.

Derivatives on matrices, for ``x = op(a)^{-1} b`` (``op`` transposes when ``trans``):
adjoint ``w = op(a)^{-T} xbar``, ``bbar += w``, ``op(a)bar -= w x^T``; tangent
``dx = op(a)^{-1} (db - op(da) x)``.
"""
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..sdfg.nodes import LibraryNode
from .base import at, copy_loop, elementwise, matrix, whole_operand
from .matmul import MatMul
from .trsm import substitute

PROTOTYPE = """/* LAPACKE dgetrf / dgetrs with 64-bit integers (row-major: 101) */
int64_t {0}(int, int64_t, int64_t, double *, int64_t, int64_t *);
int64_t {1}(int, char, int64_t, int64_t, const double *, int64_t, const int64_t *,
            double *, int64_t);
"""


@dataclass(frozen=True, eq=False)
class Solve(LibraryNode):
    """``out = op(a)^{-1} @ b``: ``a`` n x n, ``b`` and ``out`` of ``shape`` (n,) or (n, k);
    ``lu`` (n x n) and ``piv`` (n int64) hold the factorisation. ``a_dims``, ``b_dims``:
    the operands' (rows, cols) as declared where they are other symbols that the call
    checks equal (a kernel specialised on its arguments' shapes)."""
    out: str
    a: str
    b: str
    lu: str
    piv: str
    shape: tuple
    trans: bool = False
    line: int = 0
    a_dims: tuple = None
    b_dims: tuple = None

    kind = "solve"
    failure = "np.linalg.solve: the matrix is singular"

    @property
    def n(self):
        return self.shape[0]

    def accesses(self):
        return ((self.a, "read"), (self.b, "read"), (self.lu, "write"), (self.piv, "write"),
                (self.out, "write"))

    def operands(self):
        dims = matrix(self.shape)
        return ((self.out, dims), (self.a, self.a_dims or (self.n, self.n)),
                (self.b, self.b_dims or dims), (self.lu, (self.n, self.n)))

    def invalid(self, containers):
        piv = containers[self.piv]
        if piv.dtype != np.int64 or piv.shape != (self.n,):
            return f"the pivots {self.piv} are not {self.n} int64"
        return None

    def text(self):
        a = f"{self.a}.T" if self.trans else self.a
        return f"{self.out} = solve({a}, {self.b})    [solve {' x '.join(map(str, self.shape))}]"

    def work(self):
        return (self.n, self.n, self.n)

    # ---- derivatives -------------------------------------------------------------------
    def reverse_reads(self, active):
        if self.out not in active:
            return ()
        return ((self.a,) if {self.a, self.b} & active else ()) + \
            ((self.out,) if self.a in active else ())

    def vjp(self, d):
        if not (d.has(self.a) or d.has(self.b)):
            return ()
        w = d.scratch(f"{self.out}_w", self.shape)
        nodes = [self._solve(d, w, d.of(self.out), not self.trans, "w")]
        dims, vec, line = matrix(self.shape), at(len(self.shape)), self.line
        if d.has(self.b):
            nodes.append(elementwise((d.of(self.b), vec), dims, lambda i, j, x: x,
                                     [(w, vec)], line, accumulate=True))
        if d.has(self.a):           # op(a)bar -= w x^T: a's adjoint += (-w) x^T or x (-w)^T
            nodes.append(elementwise((w, vec), dims, lambda i, j, x: -x, [(w, vec)], line))
            left, right = (self.out, w) if self.trans else (w, self.out)
            nodes.append(MatMul(d.of(self.a), self.a_dims or (self.n, self.n), left, dims,
                                right, dims, False, True, True, line))
        return tuple(nodes)

    def jvp(self, d):
        if not (d.has(self.a) or d.has(self.b)):
            return (self,)
        rhs, rhs_dims = d.of(self.b), self.b_dims
        dims, vec, line = matrix(self.shape), at(len(self.shape)), self.line
        nodes = [self]
        if d.has(self.a):           # r = db - op(da) x
            rhs, rhs_dims = d.scratch(f"{self.out}_r", self.shape), None
            nodes.append(MatMul(rhs, dims, d.of(self.a), self.a_dims or (self.n, self.n),
                                self.out, dims, self.trans, False, False, line))
            if d.has(self.b):
                nodes.append(elementwise((rhs, vec), dims, lambda i, j, r, db: db - r,
                                         [(rhs, vec), (d.of(self.b), vec)], line))
            else:
                nodes.append(elementwise((rhs, vec), dims, lambda i, j, r: -r,
                                         [(rhs, vec)], line))
        nodes.append(self._solve(d, d.of(self.out), rhs, self.trans, "t", rhs_dims))
        return tuple(nodes)

    def _solve(self, d, out, b, trans, tag, b_dims=None):
        """Another solve with a (its own factorisation buffers, named by ``tag``)."""
        lu = d.scratch(f"{self.out}_{tag}lu", (self.n, self.n))
        piv = d.scratch(f"{self.out}_{tag}piv", (self.n,), np.int64)
        return Solve(out, self.a, b, lu, piv, self.shape, trans, self.line, self.a_dims, b_dims)

    # ---- code ---------------------------------------------------------------------------
    def prototypes(self, library):
        return (PROTOTYPE.format(library.symbol("LAPACKE_dgetrf"),
                                 library.symbol("LAPACKE_dgetrs")),)

    def emit(self, gen):
        """a into lu and b into out, lu factored, out solved in place."""
        n, k = (gen.index.doprint(x) for x in matrix(self.shape))
        out, lu, piv = gen.pointer(self.out), gen.pointer(self.lu), gen.pointer(self.piv)
        gen.open("")
        gen.emit(f"const int64_t sc_n = {n}, sc_k = {k};")
        copy_loop(gen, self.lu, self.a, "sc_n * sc_n")
        copy_loop(gen, self.out, self.b, "sc_n * sc_k")
        if gen.library:
            gen.open("if (sc_n > 0)")
            gen.emit(f"if ({gen.library.symbol('LAPACKE_dgetrf')}(101, sc_n, sc_n, {lu}, sc_n, "
                     f"{piv}) != 0) {gen.fail(self.line)}")
            gen.emit(f"if (sc_k > 0) {gen.library.symbol('LAPACKE_dgetrs')}(101, "
                     f"'{'T' if self.trans else 'N'}', sc_n, sc_k, {lu}, sc_n, {piv}, {out}, "
                     "sc_k);")
            gen.close()
        else:
            self._loops(gen, out, lu, piv)
        gen.close()

    def _loops(self, gen, out, lu, piv):
        """lu = L U of a with its rows swapped (row c with piv[c], in order), then
        op(a) x = b by substitution: L, U for a; U^T, L^T and the swaps undone last
        for a^T."""
        at = lambda i, j: f"{lu}[({i}) * sc_n + ({j})]"      # noqa: E731
        gen.open("for (int64_t sc_c = 0; sc_c < sc_n; ++sc_c)")
        gen.emit("int64_t sc_p = sc_c;")
        gen.emit(f"double sc_best = fabs({at('sc_c', 'sc_c')});")
        gen.emit(f"for (int64_t sc_r = sc_c + 1; sc_r < sc_n; ++sc_r) "
                 f"if (fabs({at('sc_r', 'sc_c')}) > sc_best) "
                 f"{{ sc_best = fabs({at('sc_r', 'sc_c')}); sc_p = sc_r; }}")
        gen.emit(f"{piv}[sc_c] = sc_p;")
        gen.emit(f"if (sc_p != sc_c) for (int64_t sc_j = 0; sc_j < sc_n; ++sc_j) {{ const double "
                 f"sc_t = {at('sc_c', 'sc_j')}; {at('sc_c', 'sc_j')} = {at('sc_p', 'sc_j')}; "
                 f"{at('sc_p', 'sc_j')} = sc_t; }}")
        gen.emit(f"const double sc_d = {at('sc_c', 'sc_c')};")
        gen.emit(f"if (sc_d == 0.0) {gen.fail(self.line)}")
        gen.open("for (int64_t sc_r = sc_c + 1; sc_r < sc_n; ++sc_r)")
        gen.emit(f"const double sc_l = {at('sc_r', 'sc_c')} /= sc_d;")
        gen.emit(f"for (int64_t sc_j = sc_c + 1; sc_j < sc_n; ++sc_j) "
                 f"{at('sc_r', 'sc_j')} -= sc_l * {at('sc_c', 'sc_j')};")
        gen.close()
        gen.close()
        swap = (f"{{ const int64_t sc_p = {piv}[sc_c]; if (sc_p != sc_c) for (int64_t sc_j = 0; "
                f"sc_j < sc_k; ++sc_j) {{ const double sc_t = {out}[sc_c * sc_k + sc_j]; "
                f"{out}[sc_c * sc_k + sc_j] = {out}[sc_p * sc_k + sc_j]; "
                f"{out}[sc_p * sc_k + sc_j] = sc_t; }} }}")
        if not self.trans:
            gen.emit(f"for (int64_t sc_c = 0; sc_c < sc_n; ++sc_c) {swap}")
            substitute(gen, out, lu, True, False, unit=True)
            substitute(gen, out, lu, False, False)
        else:
            substitute(gen, out, lu, False, True)
            substitute(gen, out, lu, True, True, unit=True)
            gen.emit(f"for (int64_t sc_c = sc_n - 1; sc_c >= 0; --sc_c) {swap}")


def _node(b, node, a_value, b_value, what):
    """A Solve of ``a_value`` and ``b_value`` (array expressions) into a new transient."""
    from ..frontend.array_stores import temporary
    from ..frontend.complexes import is_complex
    from ..frontend.dtypes import promote, value_dtype
    from ..sdfg import Container, State
    if is_complex(promote(value_dtype(b, a_value), value_dtype(b, b_value))):
        return _complex(b, node, a_value, b_value, what)
    a = whole_operand(b, node, a_value, what)
    rhs = whole_operand(b, node, b_value, what)
    if a_value.rank != 2:
        raise b.src.error(node, f"{what} takes a square matrix (2-D)")
    b.agree(node, a_value.shape[0], a_value.shape[1], a_value.shape, a_value.shape, "matrix")
    b.agree(node, a_value.shape[1], b_value.shape[0], a_value.shape, b_value.shape)
    n, shape = a_value.shape[0], (a_value.shape[0],) + tuple(b_value.shape[1:])
    out = temporary(b, node, shape, "__solve")
    lu = temporary(b, node, (n, n), "__lu")
    piv = b.kernel.new_transient("__piv").name
    b.kernel.containers[piv] = Container(piv, np.dtype(np.int64), (n,), True)
    b.ex.prelude.append(State((Solve(out.name, a.name, rhs.name, lu.name, piv, shape,
                                     line=b.line(node), a_dims=matrix(a.shape),
                                     b_dims=matrix(rhs.shape)),), f"solve_{b.line(node)}"))
    return b.container(out)


def _complex(b, node, a_value, b_value, what):
    """A complex system as the real one of twice its size, [[Re a, -Im a], [Im a, Re a]]
    [Re x; Im x] = [Re b; Im b] (whose adjoint and tangent are the real Solve's); each
    block reads ``a`` at indices modulo n, so every read is in bounds."""
    from ..frontend.array_shapes import ArrayExpr
    from ..frontend.functions import python_mod
    from ..sdfg import arithmetic as fp
    if a_value.rank != 2:
        raise b.src.error(node, f"{what} takes a square matrix (2-D)")
    n = a_value.shape[0]

    def block(index):
        i, j = index
        a = a_value.at((python_mod(i, n), python_mod(j, n)))
        upper, left = sp.Lt(i, n), sp.Lt(j, n)
        return fp.select(sp.re(a, evaluate=False), sp.Eq(upper, left),
                         fp.select(fp.neg(sp.im(a, evaluate=False)), upper,
                                   sp.im(a, evaluate=False)))

    def stacked(index):
        x = b_value.at((python_mod(index[0], n),) + tuple(index[1:]))
        return fp.select(sp.re(x, evaluate=False), sp.Lt(index[0], n),
                         sp.im(x, evaluate=False))
    parts = _node(b, node, ArrayExpr((2 * n, 2 * n), block),
                  ArrayExpr((2 * n,) + tuple(b_value.shape[1:]), stacked), what)
    return ArrayExpr((n,) + tuple(b_value.shape[1:]), lambda index: fp.add(
        parts.at(index), fp.mul(parts.at((index[0] + n,) + tuple(index[1:])), sp.I)))


def call(b, node, args):
    """``np.linalg.solve(a, b)``: ``b`` a vector (n,) or a matrix (n, k)."""
    from ..frontend.array_calls import _required
    a_value = b.expr(_required(b, node, args, "a"))
    b_value = b.expr(_required(b, node, args, "b"))
    return _node(b, node, a_value, b_value, "np.linalg.solve")


def inverse(b, node, args):
    """``np.linalg.inv(a)``: the solve of the identity."""
    from ..frontend.array_calls import _required
    from ..frontend.array_shapes import ArrayExpr
    from ..sdfg import arithmetic as fp
    a_value = b.expr(_required(b, node, args, "a"))
    if a_value.rank != 2:
        raise b.src.error(node, "np.linalg.inv takes a square matrix (2-D)")
    n = a_value.shape[0]
    eye = ArrayExpr((n, n), lambda index: fp.select(sp.Integer(1), sp.Eq(index[0], index[1]),
                                                    sp.Integer(0)))
    return _node(b, node, a_value, eye, "np.linalg.inv")
