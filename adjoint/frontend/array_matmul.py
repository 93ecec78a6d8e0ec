"""``@``, ``np.dot``, ``np.matmul``, ``.dot``: matrix products as MatMul library nodes;
``np.outer`` and ``np.einsum`` (products summed over dropped indices, BLAS when the
contraction is a matrix product).

Operands that are whole float64 containers (or the transpose of one) are used in
place; anything else (slices, expressions, float32) is first stored into a float64
temporary. The product goes into a new transient that the rest of the statement
reads. NumPy's rules for 1-D operands: a left vector is a row, a right vector a
column, and the result drops that axis (vector @ vector is a number).
"""
from ..sdfg import MatMul, State
from ..sdfg import arithmetic as fp
from .array_shapes import AXES, ONE, ArrayExpr, fmt_shape, transpose
from .array_stores import store, temporary


def matmul(b, node, left, right):
    if not (1 <= left.rank <= 2 and 1 <= right.rank <= 2):
        raise b.src.error(node, f"matrix product of shapes {fmt_shape(left.shape)} and "
                                f"{fmt_shape(right.shape)}: only 1-D and 2-D operands are "
                                "supported (batched products: write the loop)")
    a, a_dims, trans_a = _operand(b, node, left, column=False)
    c, c_dims, trans_c = _operand(b, node, right, column=True)
    m, k = (a_dims[1], a_dims[0]) if trans_a else a_dims
    k2, n = (c_dims[1], c_dims[0]) if trans_c else c_dims
    b.agree(node, k, k2, left.shape, right.shape)
    shape = (m,) * (left.rank == 2) + (n,) * (right.rank == 2)
    out = temporary(b, node, shape, "__matmul") if shape else b.kernel.new_transient("__dot")
    node_ = MatMul(out.name, (m, n), a, a_dims, c, c_dims, trans_a, trans_c,
                   line=b.line(node))
    b.ex.prelude.append(State((node_,), f"matmul_{b.line(node)}"))
    if not shape:
        return ArrayExpr((), lambda index: b.ex._read(out.name, ()))
    return b.container(out)


def _operand(b, node, value, column):
    """(container name, stored (rows, cols), transposed) for one operand."""
    view = value.view
    if view is not None and view.container.dtype.name == "float64":
        c = view.container
        if view.is_whole(value.shape):
            return c.name, _dims(c.shape, column), False
        if value.rank == 2 and view.subset == (AXES[1], AXES[0]) and \
                tuple(reversed(value.shape)) == c.shape:
            return c.name, c.shape, True
    tmp = temporary(b, node, value.shape, "__operand")
    b.ex.prelude += store(b, b.container(tmp), lambda p, old: value.at(p), b.line(node))
    return tmp.name, _dims(tmp.shape, column), False


def _dims(shape, column):
    if len(shape) == 2:
        return tuple(shape)
    return (shape[0], ONE) if column else (ONE, shape[0])


def outer(b, node, left, right):
    """``np.outer``: every product of the flattened operands, elementwise (no BLAS)."""
    if left.rank != 1 or right.rank != 1:
        raise b.src.error(node, "np.outer takes two 1-D arrays here")
    return ArrayExpr((left.shape[0], right.shape[0]),
                     lambda index: fp.mul(left.at((index[0],)), right.at((index[1],))))


def einsum(b, node, spec, operands):
    """``np.einsum`` of one or two operands with explicit or implicit output: a product
    over every index, summed over the indices the output drops; a two-operand
    contraction that is a matrix product goes to :func:`matmul`."""
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
    from .array_reductions import reduction
    return reduction(b, node, "sum", full, dropped, False)


def _parse_einsum(b, node, spec, count):
    text = spec.replace(" ", "")
    if "." in text or not all(c.isalpha() or c in ",->" for c in text):
        raise b.src.error(node, f"einsum subscripts {spec!r}: letters, commas and -> only "
                                "(no ellipsis)")
    left, _, right = text.partition("->")
    inputs = left.split(",")
    if len(inputs) != count or count not in (1, 2):
        raise b.src.error(node, f"einsum {spec!r} with {count} operands: one or two operands, "
                                "one subscript each")
    every = "".join(inputs)
    output = right if "->" in text else "".join(sorted(c for c in set(every)
                                                          if every.count(c) == 1))
    if len(set(output)) != len(output) or set(output) - set(every):
        raise b.src.error(node, f"einsum output {output!r}: each letter once, from the inputs")
    return inputs, output


def _as_matmul(b, node, inputs, output, operands):
    """'ik,kj->ij' and its transposed variants as one matrix product (BLAS)."""
    if len(inputs) != 2 or any(len(s) != 2 for s in inputs) or len(output) != 2:
        return None
    (a, c), (d, e) = inputs
    shared = set(inputs[0]) & set(inputs[1])
    if len(shared) != 1 or set(output) != set(inputs[0] + inputs[1]) - shared:
        return None
    k = shared.pop()
    left = operands[0] if c == k else transpose(operands[0], [1, 0])
    right = operands[1] if d == k else transpose(operands[1], [1, 0])
    i, j = (a if c == k else c), (e if d == k else d)
    product = matmul(b, node, left, right)
    return product if output == i + j else transpose(product, [1, 0])
