"""``@``, ``np.dot``, ``np.matmul``, ``.dot``: matrix products as MatMul library nodes.

Operands that are whole float64 containers (or the transpose of one) are used in
place; anything else (slices, expressions, float32) is first stored into a float64
temporary. The product goes into a new transient that the rest of the statement
reads. NumPy's rules for 1-D operands: a left vector is a row, a right vector a
column, and the result drops that axis (vector @ vector is a number).
"""
from ..sdfg import MatMul, State
from .array_shapes import AXES, ONE, ArrayExpr, fmt_shape
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
