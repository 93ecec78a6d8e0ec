"""Masked selections ``A[mask]`` where NumPy's result does not depend on their size:
elementwise expressions of them stored back under the same mask, and reductions of them,
also through a name bound to the selection (``v = data[m]`` ... ``v.mean()``)."""
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


def inline_selection(stmts, k, is_mask, tree):
    """``stmts`` from ``k + 1`` on with the name that ``stmts[k]`` binds to a masked
    selection (``values = data[mask]``) replaced by the selection, or None. Sound where
    nothing the selection reads is written before the name's last use and the name is
    bound once and read nowhere else in the function (``tree``): NumPy's copy then holds
    what the selection reads there. What the uses do with it is the masks' usual rules."""
    stmt = stmts[k]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Subscript)
            and not isinstance(stmt.value.slice, (ast.Tuple, ast.Slice))
            and is_mask(stmt.value.slice)):
        return None
    name, rest = stmt.targets[0].id, stmts[k + 1:]
    uses = [j for j, s in enumerate(rest) if name in _names(s)]
    everywhere = sum(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree))
    here = sum(isinstance(n, ast.Name) and n.id == name for s in stmts[k:] for n in ast.walk(s))
    if not uses or everywhere != here:
        return None
    read = _names(stmt.value)
    if any(_writes(s) & (read | {name}) for s in rest[:uses[-1] + 1]):
        return None

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id == name and isinstance(node.ctx, ast.Load):
                return ast.copy_location(copy.deepcopy(stmt.value), node)
            return node
    return [ast.fix_missing_locations(Substitute().visit(copy.deepcopy(s))) for s in rest]


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _writes(stmt):
    """Names ``stmt`` may write: assigned, stored into, or passed to a call other than
    NumPy's (which may write its arguments in place)."""
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, (ast.Subscript, ast.Attribute)) and \
                not isinstance(n.ctx, ast.Load):
            out |= _names(n.value)
        elif isinstance(n, ast.Call) and not (isinstance(n.func, ast.Attribute)
                                              and isinstance(n.func.value, ast.Name)
                                              and n.func.value.id in ("np", "numpy")):
            out |= set().union(*(_names(a) for a in n.args), set())
    return out
