"""Two matrix-vector products of one matrix, or two rank-1 updates of one, in one pass
over it.

Made by ``analysis/blas.py: paired`` from two ``MatMul`` nodes whose ``gemv()`` names the
same matrix (``r @ A`` and ``A @ p``; ``A @ y1`` and ``A.T @ y2``), or which both add
an outer product to one matrix (the second accumulating: the adjoint of two products of
one matrix, ``gA += g1 p^T`` and ``gA += r g2^T``), after
differentiation and on the CPU only, so it has no derivative rules and no CUDA code:
each row of the matrix, read once, feeds both products, a dot product with the row
(``A @ x``) or an update of the whole output (``A.T @ x``), which halves the memory
traffic of two BLAS dgemv calls. Rows go four at a time, so that ``A.T @ x`` loads
and stores its output once per four rows. The sums run in another order than BLAS's:
the results agree to rounding. Two rank-1 updates write each row once, ``out[i, :] =
(out[i, :] + x1[i] y1) + x2[i] y2`` in the two updates' order (the first assigning
where first touch made it so: no zeros before), not two dger passes reading and
writing all of it.
"""
from dataclasses import dataclass

from ..sdfg.nodes import LibraryNode

ROWS = 4        # rows per pass over the outputs of transposed products


@dataclass(frozen=True, eq=False)
class MatVecPair(LibraryNode):
    """``first`` and ``second``, MatMuls of one matrix with a vector each, in one pass."""
    first: object
    second: object
    line: int = 0

    kind = "matvec pair"

    def accesses(self):
        return self.first.accesses() + self.second.accesses()

    def operands(self):
        return self.first.operands() + self.second.operands()

    def text(self):
        return f"{self.first.text()}  with  {self.second.text()}    [one pass]"

    def work(self):
        return (2,) + self.first.work()

    def prototypes(self, library):
        return ()

    def emit(self, gen):
        """Zero the outputs assigned, then rows in blocks of ROWS (the rest one at a time):
        per block a dot product per row for each plain product and one update of the
        output for each transposed one, in one simd loop over the columns. Rank-1
        updates: see _updates."""
        if self.first.gemv() is None:
            self._updates(gen)
            return
        matrix, (rows, cols), _, _, _, _ = self.first.gemv()
        rows, cols = (gen.index.doprint(n) for n in (rows, cols))
        products = [self._product(gen, p) for p in (self.first, self.second)]
        for trans, _, _, out, incy, accumulate in products:
            if trans and not accumulate:
                gen.emit(f"for (int64_t sc_j = 0; sc_j < {cols}; ++sc_j) "
                         f"{out}[sc_j * {incy}] = 0.0;")
        gen.open("/* two products, one pass over the matrix */")     # a block of its own
        gen.emit("int64_t sc_i = 0;")
        a = gen.pointer(matrix)
        for block in (ROWS, 1):
            gen.open(f"for (; sc_i + {block} <= {rows}; sc_i += {block})")
            self._rows(gen, block, a, cols, products)
            gen.close()
        gen.close()

    @staticmethod
    def _product(gen, product):
        _, _, trans, x, incx, incy = product.gemv()
        return (trans, gen.pointer(x), gen.index.doprint(incx), gen.pointer(product.out),
                gen.index.doprint(incy), product.accumulate)

    @staticmethod
    def _rows(gen, block, a, cols, products):
        rows = range(block)
        for r in rows:
            gen.emit(f"const double *restrict sc_a{r} = {a} + (sc_i + {r}) * {cols};")
        sums = []
        for k, (trans, x, incx, _, _, _) in enumerate(products):
            for r in rows:
                if trans:
                    gen.emit(f"const double sc_t{k}_{r} = {x}[(sc_i + {r}) * {incx}];")
                else:
                    gen.emit(f"double sc_s{k}_{r} = 0.0;")
                    sums.append(f"sc_s{k}_{r}")
        gen.emit(f"#pragma omp simd reduction(+:{', '.join(sums)})" if sums else
                 "#pragma omp simd")
        gen.open(f"for (int64_t sc_j = 0; sc_j < {cols}; ++sc_j)")
        for k, (trans, x, incx, out, incy, _) in enumerate(products):
            if trans:
                terms = " + ".join(f"sc_a{r}[sc_j] * sc_t{k}_{r}" for r in rows)
                gen.emit(f"{out}[sc_j * {incy}] += {terms};")
            else:
                for r in rows:
                    gen.emit(f"sc_s{k}_{r} += sc_a{r}[sc_j] * {x}[sc_j * {incx}];")
        gen.close()
        for k, (trans, _, _, out, incy, accumulate) in enumerate(products):
            for r in rows if not trans else ():
                target = f"{out}[(sc_i + {r}) * {incy}]"
                gen.emit(f"{target} {'+=' if accumulate else '='} sc_s{k}_{r};")

    def _updates(self, gen):
        """Each row of out once, both outer products added (the first assigned unless it
        accumulates), in one simd loop over the columns."""
        rows, cols = (gen.index.doprint(n) for n in self.first.op_dims()[::2])
        ldc = gen.index.doprint(self.first.out_dims[1])
        (x1, incx1, y1, incy1), (x2, incx2, y2, incy2) = (
            [gen.pointer(v) if k % 2 == 0 else gen.index.doprint(v)
             for k, v in enumerate(p.outer())] for p in (self.first, self.second))
        gen.open(f"for (int64_t sc_i = 0; sc_i < {rows}; ++sc_i) "
                 "/* two rank-1 updates, one pass */")
        gen.emit(f"double *restrict sc_row = {gen.pointer(self.first.out)} + sc_i * {ldc};")
        gen.emit(f"const double sc_t0 = {x1}[sc_i * {incx1}], sc_t1 = {x2}[sc_i * {incx2}];")
        first = f"sc_t0 * {y1}[sc_j * {incy1}]"
        first = f"(sc_row[sc_j] + {first})" if self.first.accumulate else first
        gen.emit("#pragma omp simd")
        gen.emit(f"for (int64_t sc_j = 0; sc_j < {cols}; ++sc_j) "
                 f"sc_row[sc_j] = {first} + sc_t1 * {y2}[sc_j * {incy2}];")
        gen.close()
