"""Decide which local variables are integers (index aliases) and which are float scalars."""
import ast

INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow)


def classify_locals(fn: ast.FunctionDef, int_names, params, returns_int=None, int_arrays=()):
    """Return (integer locals, float locals).

    A local is an integer alias when it is assigned by plain assignment from an
    integer expression, once, or several times in straight-line code (unrolled loops
    count as such): it is then substituted into the indices that use it. Every other local is a float64 scalar container.
    ``returns_int(call, k)`` says whether a function a call calls returns an integer
    (element ``k`` of its tuple, or None): ``nU, J, U = self.unpack(x)``, ``n = size(x)``.
    An element of one of the integer arrays ``int_arrays`` that ``fn`` only reads
    (``j = idx[i]``) is an integer expression too: substituted where it is used, it
    reads the value the assignment read, as nothing writes the array meanwhile.
    """
    arrays = read_only(fn, int_arrays)
    sites, loop_vars = {}, set()
    for node in ast.walk(fn):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
            loop_vars.add(node.target.id)
        for t, value in _targets(node):
            if isinstance(t, ast.Name) and t.id not in params and t.id not in loop_vars:
                sites.setdefault(t.id, []).append((node, value))
    ints = set(int_names) | loop_vars
    changed = True
    unrolled = _in_unrolled_loops(fn)
    candidates = {n for n, s in sites.items()
                  if all(isinstance(node, ast.Assign) for node, _ in s)
                  and (len(s) == 1 or all(node in unrolled for node, _ in s))}
    int_locals = set()
    while changed:
        changed = False
        for name in sorted(candidates - int_locals):
            if all(is_integer_expression(value, ints | int_locals, returns_int, arrays)
                   for _, value in sites[name]):
                int_locals.add(name)
                changed = True
    return int_locals, sorted(set(sites) - int_locals - loop_vars)


def _in_unrolled_loops(fn):
    """The statements of ``fn`` outside any construct but unrolled loops
    (loops.unrolls_literally): straight-line code, where a name assigned several times is
    rebound in Python's order (``ki = 0 if kr == 1 else 1`` in two such loops)."""
    from .loops import unrolls_literally
    out, todo = set(), [(s, True) for s in fn.body]
    while todo:
        node, straight = todo.pop()
        if isinstance(node, ast.stmt) and straight:
            out.add(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        inner = straight and isinstance(node, ast.For) and unrolls_literally(node)
        todo.extend((c, inner and c in node.body) for c in ast.iter_child_nodes(node))
    return out


def _targets(node):
    """(target name node, the value it gets or None) for each name ``node`` assigns:
    ``x = y = e`` gives both ``e``, ``a, b = e1, e2`` pairs them up, ``n, m = A.shape``
    gives ``A.shape[k]``, ``a, b = f(...)`` gives None (float locals)."""
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [(node.target, node.value)]
    if not isinstance(node, ast.Assign):
        return []
    pairs = []
    for t in node.targets:
        if not isinstance(t, (ast.Tuple, ast.List)):
            pairs.append((t, node.value))
            continue
        values = [None] * len(t.elts)
        if isinstance(node.value, ast.Call):
            values = [_Result(node.value, k) for k in range(len(t.elts))]
        elif isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == len(t.elts):
            values = node.value.elts
        elif isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            values = [ast.Subscript(node.value, ast.Constant(k), ast.Load())
                      for k in range(len(t.elts))]
        pairs += list(zip(t.elts, values))
    return pairs


class _Result:
    """Element ``k`` of the tuple a call returns (``a, b = f(...)``)."""
    def __init__(self, call, k):
        self.call, self.k = call, k


def read_only(fn, arrays):
    """The names of ``arrays`` that ``fn`` uses only as ``A[...]`` reads, ``A.shape`` (and
    size, ndim) and operands of arithmetic (``x[idx + 1]``): never written, rebound,
    passed to a call or bound to another name."""
    used = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name) and child.id in arrays:
                reads = isinstance(child.ctx, ast.Load) and (
                    (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                     and (node.value is child or node.slice is child))
                    or isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare))
                    or (isinstance(node, ast.Attribute) and node.attr in ("shape", "size",
                                                                          "ndim")))
                used[child.id] = used.get(child.id, True) and reads
    return {name for name in arrays if used.get(name, True)}


def is_integer_expression(node, ints, returns_int=None, arrays=()):
    """Whether ``node`` is an integer expression of the names ``ints``, of calls
    ``returns_int`` says return integers and of elements of the integer ``arrays``."""
    def recurse(n):
        return is_integer_expression(n, ints, returns_int, arrays)
    if isinstance(node, _Result):
        return bool(returns_int and returns_int(node.call, node.k))
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return node.id in ints
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and recurse(node.operand)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, INT_OPS) and recurse(node.left) and recurse(node.right)
    if isinstance(node, ast.IfExp):          # `0 if kr == 1 else 1`, its test not on data
        return recurse(node.body) and recurse(node.orelse) and _integer_condition(
            node.test, lambda n: is_integer_expression(n, ints, returns_int))
    if isinstance(node, ast.Subscript):      # A.shape[k], idx[i, j + 1]
        if isinstance(node.value, ast.Name) and node.value.id in arrays:
            index = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return all(recurse(i) for i in index)
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id == "len":
            return True
        if node.func.id in ("min", "max", "int"):
            return all(recurse(a) for a in node.args) or \
                node.func.id == "int" and _through_floats(node, ints)
        if node.func.id == "round" and len(node.args) == 1:
            return _through_floats(node, ints)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("ceil", "floor") and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "math":
        return _through_floats(node, ints)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in INT_FUNCTIONS:
        return all(recurse(a) for a in node.args)
    if isinstance(node, ast.Call):
        return bool(returns_int and returns_int(node, None))
    return False


def _through_floats(node, ints):
    """Whether ``node`` (``int(np.ceil(a * (n - 1) / 2))``) computes an integer from the
    integers ``ints``, sizes and constants only: Python's value at the call's sizes
    (``ExpressionBuilder._python_integer``)."""
    functions = {id(n.func.value if isinstance(n.func, ast.Attribute) else n.func)
                 for n in ast.walk(node) if isinstance(n, ast.Call)}     # int, np.ceil
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript) and not (isinstance(n.value, ast.Attribute)
                                                 and n.value.attr == "shape"):
            return False
        if isinstance(n, ast.Name) and n.id not in ints and id(n) not in functions and \
                not _a_size_of(n, node):
            return False
    return True


def _a_size_of(name, node):
    """Whether ``name`` appears in ``node`` only as ``name.shape`` or ``len(name)``."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.value is name:
            return n.attr in ("shape", "size", "ndim")
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" \
                and name in n.args:
            return True
    return False


def _integer_condition(node, integer):
    """Whether ``node`` is a comparison of integer expressions (``integer``), or ``and``,
    ``or`` and ``not`` of them."""
    if isinstance(node, ast.Compare):
        return all(integer(n) for n in [node.left] + list(node.comparators))
    if isinstance(node, ast.BoolOp):
        return all(_integer_condition(v, integer) for v in node.values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _integer_condition(node.operand, integer)
    return False


INT_FUNCTIONS = ("mod", "remainder", "floor_divide")     # np.mod(i, M) of integers
