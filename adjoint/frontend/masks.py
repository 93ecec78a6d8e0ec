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


def mask_last(b, node):
    """``node`` (an AST) with each ``A[i, m, j]`` (one mask, integers before it, integers
    and slices after) written ``A[i, :, j][m]``: the same elements, the mask over the
    leading axes of the view, as a masked selection ``A[m]`` has it. With an index array
    among them NumPy pairs it with the mask's indices instead: left as it is."""
    def number(item):
        return not isinstance(item, (ast.Slice, ast.Constant)) and b.expr(item).rank == 0 \
            or isinstance(item, ast.Constant) and isinstance(item.value, int)

    class Rewrite(ast.NodeTransformer):
        def visit_Subscript(self, sub):
            self.generic_visit(sub)
            if not isinstance(sub.slice, ast.Tuple):
                return sub
            items = sub.slice.elts
            masks = [k for k, item in enumerate(items) if b._is_mask(item)]
            if len(masks) != 1 or not all(number(item) for item in items[:masks[0]]) or \
                    not all(isinstance(item, ast.Slice) or number(item)
                            for item in items[masks[0] + 1:]):
                return sub
            k = masks[0]
            whole = [ast.Slice()] * b.expr(items[k]).rank
            view = ast.Subscript(sub.value, ast.Tuple(items[:k] + whole + items[k + 1:],
                                                      ast.Load()), ast.Load())
            return ast.copy_location(ast.Subscript(view, items[k], sub.ctx), sub)
    return ast.fix_missing_locations(Rewrite().visit(copy.deepcopy(node)))


def masked_operand(b, node):
    """(values, mask) of a masked selection ``A[m]``, or of an elementwise expression of
    selections by one mask (``data[m] + 1.0``): the values over the whole arrays and the
    mask of their shape. None for any other expression."""
    node = mask_last(b, node)                       # x[m, d]: x[:, d][m]
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


def indices_as_mask(b, tree, stmt):
    """``i = np.where(c)`` / ``i = np.nonzero(c)`` (the indices where ``c`` holds, a tuple of
    arrays whose length the data decides) as ``i = c``, where every use of ``i`` indexes an
    array (``x[i] = 0.0``, ``pos[i, d] *= -1``): NumPy selects the same elements with the
    mask (a 1-D one where ``i`` stands among other indices, whose tuple-in-a-tuple NumPy
    reads as one index array). Any other use is refused."""
    name = stmt.targets[0].id
    mask = b.expr(stmt.value.args[0])
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)):
            continue
        up = parents.get(id(n))
        whole = isinstance(up, ast.Subscript) and up.slice is n
        among = isinstance(up, ast.Tuple) and isinstance(parents.get(id(up)), ast.Subscript) \
            and parents[id(up)].slice is up and mask.rank == 1
        if not (whole or among):
            raise b.src.error(n, f"`{name}` holds `{ast.unparse(stmt.value)}`, the indices "
                                 "where the condition holds (their number depends on the "
                                 "data): use it only to index arrays (`x[i] = 0.0`, "
                                 "`x[i, d] *= -1`, a 1-D condition among other indices), or "
                                 "use the mask itself, or np.where(c, x, y)")
    return ast.copy_location(ast.Assign(stmt.targets, stmt.value.args[0]), stmt)
