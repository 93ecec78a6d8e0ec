"""``@``, ``np.dot``, ``np.matmul``, ``.dot``: matrix products as MatMul library nodes
or as loops; ``np.outer`` and ``np.einsum`` (products summed over dropped indices, BLAS
when the contraction is a matrix product).

A product of 1-D and 2-D operands whose sizes are known on entry is a MatMul (BLAS):
operands that are whole float64 containers (or the transpose of one) are used in
place, anything else (slices, expressions, float32) is first stored into a float64
temporary, and the product goes into a new transient that the rest of the statement
reads. A stack of matrices times one matrix (``(..., m, k) @ (k, n)``) is one MatMul
too, the stack's rows taken as one matrix's. Everything else (complex operands too:
no zgemm) is a *contraction*, a
``wcr="sum"`` map over the operands' elements in place (no copies): a dot product
(vector @ vector: a loop, which vectorises; a call would gain nothing), operands
whose sizes depend on loop variables (``A[i, :j] @ A[:j, j]``: the sum is a loop over
``j`` elements) and batched products with a stack on the right. NumPy's rules: a left
vector is a row, a right vector a column, and the result drops that axis (vector @
vector is a number); batch axes broadcast.
"""
import ast

import sympy as sp

from ..library.matmul import MatMul
from ..sdfg import State
from ..sdfg import arithmetic as fp
from .array_reductions import mean, reduction
from .array_shapes import (AXES, ONE, ArrayExpr, broadcast_to, fmt_shape, number, reshape,
                           transpose, volume)
from .complexes import is_complex
from .dtypes import FLOAT32, FLOAT64, is32, promote, value_dtype
from .array_stores import store, temporary


def product(b, node):
    """``left @ right`` as written: an operand that is a number times a matrix used in
    place (``alpha * A @ x``, ``A.T @ (beta * B)``) has the number applied to the product
    instead, ``alpha * (A @ x)`` (dgemv's alpha; NumPy's ``alpha * A`` writes a scaled
    copy of A first). The same sum in another rounding, as BLAS's own order is."""
    left, left_factor = _factored(b, node.left)
    right, right_factor = _factored(b, node.right)
    out = matmul(b, node, left, right)
    for factor in (left_factor, right_factor):
        if factor is not None:
            out = b.combine(node, fp.mul, [factor, out])
    return out


def _factored(b, node):
    """(matrix, number) where ``node`` is a number times a float64 matrix a product can
    read in place, else (its value, None)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return b.expr(node), None
    x, y = b.expr(node.left), b.expr(node.right)
    for number_, matrix in ((x, y), (y, x)):
        if number_.rank == 0 and not number_.boolean and matrix.rank == 2 and \
                _in_place(matrix):
            return matrix, number_
    return b.combine(node, fp.mul, [x, y]), None


def _in_place(value):
    """Whether a product reads ``value`` where it is (``_operand``): a whole float64
    container or the transpose of one."""
    view = value.view
    return view is not None and view.container.dtype.name == "float64" and (
        view.is_whole(value.shape) or view.subset == (AXES[1], AXES[0]) and
        tuple(reversed(value.shape)) == view.container.shape)


def matmul(b, node, left, right):
    if not (left.rank and right.rank):
        raise b.src.error(node, f"matrix product of shapes {fmt_shape(left.shape)} and "
                                f"{fmt_shape(right.shape)}: operands must be arrays (for a "
                                "number, multiply with *)")
    if max(left.rank, right.rank) > 2 and _is_dot(node):
        raise b.src.error(node, f"np.dot of shapes {fmt_shape(left.shape)} and "
                                f"{fmt_shape(right.shape)}: for arrays of more than two "
                                "dimensions write @ or np.matmul (a stack of products) or "
                                "np.einsum (np.dot's sum over the last and second-to-last "
                                "axes)")
    b.agree(node, left.shape[-1], right.shape[-2 if right.rank > 1 else -1], left.shape,
            right.shape)
    if left.rank == right.rank == 1 or not _known_on_entry(b, left.shape + right.shape) \
            or right.rank > 2 or is_complex(promote(value_dtype(b, left),
                                                    value_dtype(b, right))):
        return contraction(b, node, left, right)
    if left.rank > 2:
        return _stacked(b, node, left, right)
    a, a_dims, trans_a = _operand(b, node, left, column=False)
    c, c_dims, trans_c = _operand(b, node, right, column=True)
    m = a_dims[1] if trans_a else a_dims[0]
    n = c_dims[0] if trans_c else c_dims[1]
    shape = (m,) * (left.rank == 2) + (n,) * (right.rank == 2)
    return _in_dtype(b, _product(b, node, shape, (m, n), (a, a_dims, trans_a),
                                 (c, c_dims, trans_c)), left, right)


def _product(b, node, shape, dims, a, c):
    """``a @ c`` (each (name, dims, transposed)) into a new transient of ``shape``."""
    out = temporary(b, node, shape, "__matmul", dtype=FLOAT64)     # BLAS: float64
    product = MatMul(out.name, dims, a[0], a[1], c[0], c[1], a[2], c[2], line=b.line(node))
    b.ex.prelude.append(State((product,), f"matmul_{b.line(node)}"))
    return b.container(out)


def _stacked(b, node, left, right):
    """``(..., m, k) @ (k, n)`` (or ``@ (k,)``) as one MatMul: in C order the stack's
    rows are the rows of one ``(... * m, k)`` matrix, used in place when ``left`` is a
    whole container in its own order (``np.reshape(A, (NR, NQ, 1, NP))``)."""
    rows, k = _count(left.shape[:-1]), _count(left.shape[-1:])
    if _in_order(b, left):
        a = left.view.container
        b.agree(node, rows * k, a.volume(), left.shape, a.shape, "matrix product")
        a = a.name
    else:
        a = _copy(b, node, left).name
    c, c_dims, trans_c = _operand(b, node, right, column=True)
    n = c_dims[0] if trans_c else c_dims[1]
    shape = left.shape[:-1] + (n,) * (right.rank == 2)
    return _in_dtype(b, _product(b, node, shape, (rows, n), (a, (rows, k), False),
                                 (c, c_dims, trans_c)), left, right)


def _in_dtype(b, product, left, right):
    """The float64 product of float32 operands rounded to float32, the dtype NumPy's
    product has (computed in float64 by dgemm, so more exactly than NumPy's sgemm)."""
    if not is32(promote(value_dtype(b, left), value_dtype(b, right))):
        return product
    return ArrayExpr(product.shape, lambda index: fp.as_float32(product.at(index),
                                                                evaluate=False), dtype=FLOAT32)


def _count(sizes):
    """The number of elements of a shape (a size below zero counts as 0, as allocated)."""
    return sp.Mul(*(sp.Max(0, n) for n in sizes))


def _in_order(b, value):
    """Whether ``value`` is all of a float64 container's elements in C order (the whole
    container, perhaps reshaped)."""
    view = value.view
    if view is None or view.container.dtype.name != "float64" or \
            not _same_volume(b, value.shape, view.container.shape):
        return False
    return reshape(b.container(view.container), value.shape).view == view


def _same_volume(b, shape, other):
    """Whether two shapes have as many elements: proven, or checked on entry (a reshape
    of an argument, ``np.reshape(A, (NR, NQ, 1, NP))``, assumes its volumes agree)."""
    difference = sp.expand(volume(shape) - volume(other))
    if sp.simplify(_count(shape) - _count(other)) == 0 or difference == 0:
        return True
    checked = {condition for condition, _, _ in b.kernel.arrays.assumptions}
    return sp.Eq(difference, 0) in checked or sp.Eq(-difference, 0) in checked


def contraction(b, node, left, right):
    """``sum_k left[..., m, k] * right[..., k, n]`` as a sum reduction over ``k``: a map
    over (batch, m, k, n) in that order, so that the innermost loop runs along rows of
    ``right`` and of the result (C order), and a matrix-vector product's along ``left``'s."""
    batch = b.broadcast_shape(node, [left.shape[:-2], right.shape[:-2]])
    nb, m, n = len(batch), int(left.rank > 1), int(right.rank > 1)
    if m:
        left = broadcast_to(left, batch + left.shape[-2:])
    if n:
        right = broadcast_to(right, batch + right.shape[-2:])

    def at(q):
        k = q[nb + m]
        return fp.mul(number(left.at(q[:nb + m] + (k,) if m else (k,))),
                      number(right.at(q[:nb] + (k,) + q[nb + m + 1:] if n else (k,))))
    shape = batch + left.shape[-1 - m:] + right.shape[-1:] * n
    return reduction(b, node, "sum", ArrayExpr(shape, at), (nb + m,), False)


def _is_dot(node):
    """``np.dot(a, b)`` or ``a.dot(b)``, whose rule for N-D operands is not matmul's."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "dot"


def _known_on_entry(b, sizes):
    symbols = set(b.kernel.symbols)
    return all(sp.sympify(n).free_symbols <= symbols for n in sizes)


def _operand(b, node, value, column):
    """(container name, stored (rows, cols), transposed) for one operand."""
    if _in_place(value):
        c = value.view.container
        return c.name, _dims(c.shape, column), not value.view.is_whole(value.shape)
    tmp = _copy(b, node, value)
    return tmp.name, _dims(tmp.shape, column), False


def _copy(b, node, value):
    """``value`` stored into a new float64 temporary of its shape."""
    tmp = temporary(b, node, value.shape, "__operand", dtype=FLOAT64)
    b.ex.prelude += store(b, b.container(tmp), lambda p, old: value.at(p), b.line(node))
    return tmp


def _dims(shape, column):
    """A matrix's (rows, cols) as allocated (sizes below zero count as 0)."""
    if len(shape) == 2:
        return _count(shape[:1]), _count(shape[1:])
    return (_count(shape), ONE) if column else (ONE, _count(shape))


def outer(b, node, left, right):
    """``np.outer``: every product of the flattened operands, elementwise (no BLAS)."""
    if left.rank != 1 or right.rank != 1:
        raise b.src.error(node, "np.outer takes two 1-D arrays here")
    return ArrayExpr((left.shape[0], right.shape[0]),
                     lambda index: fp.mul(left.at((index[0],)), right.at((index[1],))))


def einsum(b, node, spec, operands):
    """``np.einsum`` with explicit or implicit output: a product over every index, summed
    over the indices the output drops (any number of operands, as NumPy's einsum without
    ``optimize``); a two-operand contraction that is a (batched) matrix product goes to
    :func:`matmul`."""
    inputs, output = _parse_einsum(b, node, spec, len(operands))
    sizes = {}
    for letters, value in zip(inputs, operands):
        if len(letters) != value.rank:
            raise b.src.error(node, f"einsum subscripts {letters!r} for an operand of shape "
                                    f"{fmt_shape(value.shape)}")
        for letter, n in zip(letters, value.shape):
            if letter in sizes:
                b.agree(node, sizes[letter], n, value.shape, value.shape)
            sizes.setdefault(letter, n)
    product = _as_matmul(b, node, inputs, output, operands)
    if product is not None:
        return product
    letters = list(output) + sorted(set("".join(inputs)) - set(output))

    def at(index):
        where = dict(zip(letters, index))
        factors = [operand.at(tuple(where[c] for c in subs))
                   for subs, operand in zip(inputs, operands)]
        value = factors[0]
        for factor in factors[1:]:
            value = fp.mul(value, factor)
        return value
    full = ArrayExpr(tuple(sizes[c] for c in letters), at)
    dropped = tuple(range(len(output), len(letters)))
    return reduction(b, node, "sum", full, dropped, False)


def _parse_einsum(b, node, spec, count):
    text = spec.replace(" ", "")
    if "." in text or not all(c.isalpha() or c in ",->" for c in text):
        raise b.src.error(node, f"einsum subscripts {spec!r}: letters, commas and -> only "
                                "(no ellipsis)")
    left, _, right = text.partition("->")
    inputs = left.split(",")
    if len(inputs) != count:
        raise b.src.error(node, f"einsum {spec!r} has {len(inputs)} subscripts and {count} "
                                "operands: one subscript per operand")
    every = "".join(inputs)
    output = right if "->" in text else "".join(sorted(c for c in set(every)
                                                          if every.count(c) == 1))
    if len(set(output)) != len(output) or set(output) - set(every):
        raise b.src.error(node, f"einsum output {output!r}: each letter once, from the inputs")
    return inputs, output


def _as_matmul(b, node, inputs, output, operands):
    """A two-operand einsum summing one index ``k`` that is a matrix product, batched
    over the indices both operands and the output share ('ik,kj->ij', 'ij,j->i',
    'bik,bkj->bij', their transposed variants): ``(batch, m, k) @ (batch, k, n)``."""
    if len(inputs) != 2 or any(len(set(s)) != len(s) for s in inputs):
        return None
    shared = set(inputs[0]) & set(inputs[1])
    summed = shared - set(output)
    batch = [c for c in output if c in shared]
    rows, cols = ([c for c in s if c not in shared] for s in inputs)
    if len(summed) != 1 or len(rows) > 1 or len(cols) > 1 or \
            set(output) != set(batch + rows + cols) or batch and not (rows and cols):
        return None
    k = summed.pop()
    left = _ordered(operands[0], inputs[0], batch + rows + [k])
    right = _ordered(operands[1], inputs[1], batch + [k] + cols)
    return _ordered(matmul(b, node, left, right), batch + rows + cols, list(output))


def _ordered(value, letters, order):
    """``value``, whose axes are ``letters``, with its axes in ``order``."""
    perm = [list(letters).index(c) for c in order]
    return value if perm == sorted(perm) else transpose(value, perm)


def covariance(b, node, m, rowvar, ddof):
    """``np.cov(m)``: rows are variables (columns with ``rowvar=False``), as NumPy computes
    it: the rows centred on their means, their product with its transpose (a MatMul),
    times ``1 / (observations - ddof)``; a 1-D ``m`` is one variable (a number)."""
    if m.rank > 2:
        raise b.src.error(node, "np.cov takes a 1-D or 2-D array")
    x = reshape(m, (ONE,) + tuple(m.shape)) if m.rank == 1 else \
        m if rowvar else transpose(m, (1, 0))
    centre = broadcast_to(mean(b, node, x, (1,), True), x.shape)
    centred = b.container(_copy(b, node, ArrayExpr(
        x.shape, lambda i: fp.sub(number(x.at(i)), centre.at(i)))))
    product = matmul(b, node, centred, transpose(centred, (1, 0)))
    factor = fp.div(ONE, x.shape[1] - ddof)
    if m.rank == 1:
        return ArrayExpr((), lambda index: fp.mul(product.at((0, 0)), factor))
    return ArrayExpr(product.shape, lambda index: fp.mul(product.at(index), factor))
