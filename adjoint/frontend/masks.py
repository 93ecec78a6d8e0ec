"""Masked selections ``A[mask]`` where NumPy's result does not depend on their size:
elementwise expressions of them stored back under the same mask, and reductions of them."""
import ast
import copy

from ..sdfg import arithmetic as fp
from .array_shapes import fmt_shape

ELEMENTWISE = set(fp.UNARY) | set(fp.BINARY) | {"where", "clip", "abs", "absolute"}


def unmasked(mask_node, value, is_array):
    """``value`` (an AST) with each read ``X[mask]`` of the same mask replaced by ``X``,
    where that is what NumPy computes element by element (``A[m] = B[m] ** -1.5 + c``):
    operators, numbers and NumPy's elementwise functions around the masked reads, any
    other operand a number (``is_array(node)`` false). None where the value does
    anything else (``np.sum(B[m])``, ``B[m] * x`` with an array ``x``)."""
    key = ast.dump(mask_node)

    class Unmask(ast.NodeTransformer):
        ok = True

        def visit(self, node):
            if isinstance(node, ast.expr) and not _reads_mask(node, key):
                if not isinstance(node, ast.Constant) and is_array(node):
                    self.ok = False
                return node
            if isinstance(node, ast.Subscript) and ast.dump(node.slice) == key:
                return node.value
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Attribute) and
                                                   node.func.attr in ELEMENTWISE
                                                   and not node.keywords):
                self.ok = False
                return node
            if not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.operator,
                                     ast.unaryop, ast.Attribute, ast.Name, ast.Load)):
                self.ok = False
                return node
            return self.generic_visit(node)
    unmask = Unmask()
    out = unmask.visit(copy.deepcopy(value))
    return out if unmask.ok and _reads_mask(value, key) else None


def _reads_mask(node, key):
    return any(isinstance(n, ast.Subscript) and ast.dump(n.slice) == key for n in ast.walk(node))


def masked_operand(b, node):
    """(values, mask) of a masked selection ``A[m]``, or of an elementwise expression of
    selections by one mask (``data[m] + 1.0``): the values over the whole arrays and the
    mask of their shape. None for any other expression."""
    masks = {ast.dump(n.slice): n.slice for n in ast.walk(node)
             if isinstance(n, ast.Subscript) and not isinstance(n.slice, ast.Tuple)
             and b._is_mask(n.slice)}
    if len(masks) != 1:
        return None
    mask_node, = masks.values()
    whole = unmasked(mask_node, node, lambda n: b.expr(n).rank > 0)
    if whole is None:
        return None
    values, mask = b.expr(whole), b.expr(mask_node)
    if mask.rank != values.rank:
        raise b.src.error(node, f"the mask of `{ast.unparse(node)}` has shape "
                                f"{fmt_shape(mask.shape)}, the array {fmt_shape(values.shape)}"
                                "; reduce over a mask of the array's shape")
    for n, m in zip(values.shape, mask.shape):
        b.agree(node, n, m, values.shape, mask.shape, "array and mask")
    return values, mask
