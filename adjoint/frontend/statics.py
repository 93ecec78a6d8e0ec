"""Values a kernel knows when compiling that are not numbers: ``None``, slices, and tuples
and lists of them and of integers (Veros' ``sp1 = (slice(2, -2), slice(1 + n, -2 + n or
None))``, ``shape = list(A.shape)``), with Python's own semantics, evaluated as Python
would when the kernel is specialised.

A name bound to one holds a ``StaticValue``; each statement that reads the name sees the
value written out (``substituted``), so the rest of the frontend lowers ``A[2:-2, 1:-3]``,
``np.zeros([n, m + 2])`` or ``None`` as if the code said so. Generator expressions and
list comprehensions over a sequence known when compiling (``(f(a) for a in (x, y))``,
``for n in range(-1, 3)``) are their elements written out (``expanded``).
"""
import ast
import builtins
import copy
import operator

import sympy as sp

from ..errors import KernelSyntaxError
from ..sdfg.nodes import index_loads
from .expressions import IntValue


class StaticValue:
    """Binding of a name to a value known when compiling: None, a slice, a tuple or a
    list (Python objects; integers in them are sympy integer expressions). ``where``:
    the loops and run-time branches around the binding (``KernelBuilder.static_where``);
    it changes only there."""
    def __init__(self, value, where=((), ())):
        self.value, self.where = value, where


class NotStatic(Exception):
    """The expression is not a value known when compiling."""


def is_static(value):
    """Whether ``value`` (from ``evaluate``) is one this module binds (a string too: a
    default ``method="direct"`` that the callee compares): not a plain integer, which the
    frontend's integer locals hold."""
    return value is None or isinstance(value, (slice, tuple, list, str))


def kind(value):
    """How an error names a static value."""
    return "None" if value is None else f"a {type(value).__name__}"


def evaluate(ex, node):
    """The value of ``node`` when it is known when compiling, else NotStatic."""
    method = _EVALUATE.get(type(node))
    if method is None:
        return _integer(ex, node)
    return method(ex, node)


def _integer(ex, node):
    """An integer expression of sizes, int arguments and loop variables, else NotStatic.
    Calls to the program's functions are tried only where their source returns an integer
    expression (``wrap(p, o, w)``; lowering another inlines it), and an integer read from
    an array is data, not known when compiling."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and
             ex.kernel.callee_of(n) is not None]
    if not isinstance(node, (ast.Name, ast.Constant, ast.BinOp, ast.UnaryOp, ast.Subscript,
                             ast.Call)) or not all(ex.kernel.returns_integer(n) for n in calls):
        raise NotStatic
    reads, prelude = dict(ex.reads), list(ex.prelude)
    try:
        value = ex.index(node)      # a call as an index writes nothing (calls.call_index)
    except KernelSyntaxError:
        value = None
    if value is None or ex.reads != reads or len(ex.prelude) != len(prelude) and not calls \
            or index_loads(value):
        ex.reads.clear()                # what the attempt read is not the statement's
        ex.reads.update(reads)
        ex.prelude[:] = prelude
        for n in calls:                 # nor the calls it inlined
            ex.kernel.forget_call(n)
        raise NotStatic
    return value


def _constant(ex, node):
    if node.value is None or isinstance(node.value, str):
        return node.value
    if isinstance(node.value, int) and not isinstance(node.value, bool):
        return sp.Integer(node.value)
    raise NotStatic


def _name(ex, node):
    binding = ex.scope.get(node.id)
    if isinstance(binding, StaticValue):
        return binding.value
    if isinstance(binding, IntValue):
        return binding.expr
    return _integer(ex, node)


def _sequence(ex, node):
    items = [evaluate(ex, e) for e in node.elts if not isinstance(e, ast.Starred)]
    if len(items) != len(node.elts):
        raise NotStatic
    return tuple(items) if isinstance(node, ast.Tuple) else items


def _attribute(ex, node):
    """``A.shape``: the tuple of A's sizes (A a name or a chain of them)."""
    if node.attr != "shape" or not isinstance(node.value, (ast.Name, ast.Attribute)):
        raise NotStatic
    try:
        return tuple(ex.kernel.array_shape(ex, node.value))
    except KernelSyntaxError:
        raise NotStatic from None


def _subscript(ex, node):
    """An element or a slice of a sequence known when compiling (``A.shape[:2]``)."""
    try:
        seq = evaluate(ex, node.value)
    except NotStatic:
        return _integer(ex, node)
    if not isinstance(seq, (tuple, list)):
        raise NotStatic
    key = evaluate(ex, node.slice) if not isinstance(node.slice, ast.Slice) else \
        slice(*(None if p is None else evaluate(ex, p)
                for p in (node.slice.lower, node.slice.upper, node.slice.step)))
    if isinstance(key, sp.Expr) and not key.is_Integer:
        raise NotStatic         # CX[k] in a loop: an item chosen when running (expressions)
    try:
        return seq[python_key(ex, node, key)]
    except IndexError:
        raise ex.src.error(node, f"`{ast.unparse(node)}`: index out of range (the sequence "
                                 f"has {len(seq)} elements)") from None


def python_key(ex, node, key):
    """A subscript's key with its integers as Python ints (they must be constants)."""
    def as_int(v):
        if v is None:
            return None
        if not isinstance(v, sp.Integer):
            raise ex.src.error(node, f"`{ast.unparse(node)}`: a sequence known when compiling "
                                     "takes constant indices")
        return int(v)
    if isinstance(key, slice):
        return slice(as_int(key.start), as_int(key.stop), as_int(key.step))
    return as_int(key)


def _truth(ex, node, value):
    """Python's truth of a value known when compiling; integers must be decided."""
    if value is None:
        return False
    if isinstance(value, (tuple, list)):
        return bool(value)
    if isinstance(value, slice):
        return True
    if value.is_zero is None:
        raise ex.src.error(node, f"`{ast.unparse(node)}`: cannot tell whether {value} is zero "
                                 "when compiling; write it without `or`/`and`")
    return not value.is_zero


def _boolop(ex, node):
    """``x or None``, ``a and b``: Python's, the operand that decides."""
    values = [evaluate(ex, v) for v in node.values]
    for value, item in zip(values[:-1], node.values):
        if _truth(ex, item, value) == isinstance(node.op, ast.Or):
            return value
    return values[-1]


def _call(ex, node):
    name = ex._builtin_name(node.func)
    if name is None or node.keywords:
        return _integer(ex, node)
    args = [evaluate(ex, a) for a in node.args]
    if name == "slice" and 1 <= len(args) <= 3:
        if any(a is not None and not isinstance(a, sp.Expr) for a in args):
            raise ex.src.error(node, f"`{ast.unparse(node)}`: a slice's start, stop and step "
                                     "are integers or None")
        return slice(*args)
    if name in ("tuple", "list") and len(args) == 1 and isinstance(args[0], (tuple, list)):
        return getattr(builtins, name)(args[0])
    if name == "range" and 1 <= len(args) <= 3:
        if not all(isinstance(a, sp.Integer) for a in args):
            raise NotStatic
        return tuple(sp.Integer(k) for k in range(*map(int, args)))
    if name == "len" and len(args) == 1 and isinstance(args[0], (tuple, list)):
        return sp.Integer(len(args[0]))
    raise NotStatic


def _binop(ex, node):
    """Sequences joined (``A.shape[:2] + (3,)``) or repeated; integers as integers."""
    try:
        left, right = evaluate(ex, node.left), evaluate(ex, node.right)
    except NotStatic:
        return _integer(ex, node)
    if isinstance(left, (tuple, list)) or isinstance(right, (tuple, list)):
        if isinstance(node.op, ast.Add) and type(left) is type(right):
            return left + right
        if isinstance(node.op, ast.Mult) and isinstance(right, sp.Integer):
            return left * int(right)
        raise NotStatic
    if not (isinstance(left, sp.Expr) and isinstance(right, sp.Expr)):
        raise NotStatic
    at = ast.BinOp(written(ex.kernel, ex.scope, left, node), node.op,
                   written(ex.kernel, ex.scope, right, node))
    return _integer(ex, ast.copy_location(at, node))    # Python's // and % of integers


def _generated(ex, node):
    """``(e for v in seq)``, ``[e for ...]`` over a known sequence: its elements' values."""
    return tuple(evaluate(ex, e) for e in expanded(ex, node))


_EVALUATE = {ast.GeneratorExp: _generated, ast.ListComp: _generated, ast.Constant: _constant,
             ast.Name: _name, ast.Tuple: _sequence, ast.List: _sequence,
             ast.Attribute: _attribute, ast.Subscript: _subscript,
             ast.BoolOp: _boolop, ast.Call: _call, ast.BinOp: _binop}


def static_value(ex, node):
    """``node``'s value when it is one this module binds (None, a slice, a sequence),
    else NotStatic (numbers and arrays are the rest of the frontend's)."""
    value = evaluate(ex, node)
    if not is_static(value):
        raise NotStatic
    return value


# ---- a value written out -----------------------------------------------------------------

def written(kernel, scope, value, at, subscript=False):
    """The expression of ``value`` at ``at``'s place; inside a subscript a slice is a
    ``Slice`` and a tuple the subscript's axes. An integer that is not a constant is a
    hidden name bound to it in ``scope``."""
    def put(node):
        return ast.copy_location(node, at)
    if value is None or isinstance(value, str):
        return put(ast.Constant(value))
    if isinstance(value, slice):
        parts = [None if p is None else written(kernel, scope, p, at)
                 for p in (value.start, value.stop, value.step)]
        if subscript:
            return put(ast.Slice(*parts))
        return put(ast.Call(put(ast.Name("slice", ast.Load())),
                            [p or put(ast.Constant(None)) for p in parts], []))
    if isinstance(value, (tuple, list)):
        elts = [written(kernel, scope, v, at, subscript) for v in value]
        return put(ast.Tuple(elts, ast.Load()) if isinstance(value, tuple) or subscript
                   else ast.List(elts, ast.Load()))
    if isinstance(value, sp.Integer):
        number = put(ast.Constant(abs(int(value))))
        return number if value >= 0 else put(ast.UnaryOp(ast.USub(), number))
    kernel._counter += 1
    name = f"__static{kernel._counter}"
    scope[name] = IntValue(value)
    return put(ast.Name(name, ast.Load()))


def substituted(kernel, node):
    """``node`` (an expression or a simple statement) with every name bound to a static
    value read in it written out; nested functions and lambdas keep their names."""
    scope = kernel.scope

    def static(n):
        return isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and \
            isinstance(scope.get(n.id), StaticValue)

    if not any(static(n) for n in ast.walk(node)):
        return node

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, n):
            if static(n):
                return written(kernel, scope, scope[n.id].value, n)
            return n

        def visit_Subscript(self, n):
            keys = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            keys = [written(kernel, scope, scope[k.id].value, k, True) if static(k)
                    else self.visit(k) for k in keys]
            if isinstance(n.slice, ast.Tuple):     # A[s, 0]: s one axis, as in Python
                n.slice = ast.copy_location(ast.Tuple(keys, ast.Load()), n.slice)
            else:
                n.slice = keys[0]
            n.value = self.visit(n.value)
            return n

        def visit_Lambda(self, n):
            return n

        def visit_FunctionDef(self, n):
            return n
    return ast.fix_missing_locations(Substitute().visit(copy.deepcopy(node)))


# ---- generators over known sequences ------------------------------------------------------

def expanded(ex, node):
    """The element expressions of ``(e for v in seq)`` or ``[e for v in seq]`` where ``seq``
    is a tuple or list written out, or a sequence known when compiling (``range(-1, 3)``):
    ``e`` with ``v`` replaced by each item. None for anything else."""
    if not isinstance(node, (ast.GeneratorExp, ast.ListComp)) or len(node.generators) != 1:
        return None
    gen = node.generators[0]
    names = _target_names(gen.target)
    if gen.ifs or gen.is_async or names is None:
        raise ex.src.error(node, f"`{ast.unparse(node)}`: a generator the kernel writes out "
                                 "has one `for name in ...` (or `for a, b in zip(...)`) and "
                                 "no `if`")
    if _is_zip(ex, gen.iter) and isinstance(gen.target, ast.Tuple):    # zip(xs, ys, ...)
        columns = [_items(ex, node, a) for a in gen.iter.args]
        if len(names) != len(columns):
            raise ex.src.error(node, f"`{ast.unparse(node)}` unpacks {len(columns)} "
                                     f"sequences into {len(names)} names")
        rows = [dict(zip(names, row)) for row in zip(*columns)]
    elif isinstance(gen.target, ast.Name):
        rows = [{names[0]: item} for item in _items(ex, node, gen.iter)]
    else:
        raise ex.src.error(node, f"`{ast.unparse(node)}`: a generator unpacks only the "
                                 "rows of `zip(...)`")
    return [_replaced(node.elt, row) for row in rows]


def loop_rows(ex, stmt):
    """``for t in seq`` over a sequence known when compiling (a tuple or list written out
    or read from outside, ``zip``/``enumerate`` of them, ``range`` of constants inside
    those): one {name: item expression} per iteration, nested targets unpacked
    (``for k, (cx, cy) in enumerate(C)``); None for any other loop."""
    it = stmt.iter
    try:
        if _is_zip(ex, it) and it.args:
            rows = [ast.Tuple(list(r), ast.Load()) for r in
                    zip(*(_static_items(ex, a) for a in it.args))]
        elif isinstance(it, ast.Call) and ex._builtin_name(it.func) == "enumerate" and \
                len(it.args) == 1 and not it.keywords:
            rows = [ast.Tuple([ast.Constant(k), e], ast.Load())
                    for k, e in enumerate(_static_items(ex, it.args[0]))]
        elif isinstance(it, (ast.Tuple, ast.List)) or isinstance(it, ast.Name) and \
                isinstance(ex.scope.get(it.id), StaticValue):
            rows = _static_items(ex, it)
        else:
            return None
    except NotStatic:
        return None
    out = []
    for row in rows:
        bound = {}
        if not _unpacked(stmt.target, row, bound):
            return None
        out.append(bound)
    return out


def _static_items(ex, node):
    if isinstance(node, (ast.Tuple, ast.List)) and \
            not any(isinstance(e, ast.Starred) for e in node.elts):
        return list(node.elts)
    seq = evaluate(ex, node)
    if not isinstance(seq, (tuple, list)):
        raise NotStatic
    return [written(ex.kernel, ex.scope, v, node) for v in seq]


def _unpacked(target, item, bound):
    """Bind the names of ``target`` to the parts of the expression ``item``."""
    if isinstance(target, ast.Name):
        bound[target.id] = item
        return True
    if isinstance(target, ast.Tuple) and isinstance(item, (ast.Tuple, ast.List)) and \
            len(target.elts) == len(item.elts):
        return all(_unpacked(t, e, bound) for t, e in zip(target.elts, item.elts))
    return False


def replaced(tree, items):
    """``tree`` with each name of ``items`` read in it replaced by its item."""
    return _replaced(tree, items)


def _target_names(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]
    return None


def _is_zip(ex, node):
    return isinstance(node, ast.Call) and ex._builtin_name(node.func) == "zip" and \
        not node.keywords


def _items(ex, node, seq_node):
    """The item expressions of a tuple or list written out, or of a sequence known when
    compiling (``range(-1, 3)``, a name bound to a tuple)."""
    if isinstance(seq_node, (ast.Tuple, ast.List)) and \
            not any(isinstance(e, ast.Starred) for e in seq_node.elts):
        return list(seq_node.elts)
    try:
        seq = evaluate(ex, seq_node)
    except NotStatic:
        seq = None
    if not isinstance(seq, (tuple, list)):
        raise ex.src.error(node, f"`{ast.unparse(node)}`: a generator runs over a tuple, "
                                 "a list or a range known when compiling")
    return [written(ex.kernel, ex.scope, v, seq_node) for v in seq]


def _replaced(tree, items):
    """``tree`` with each name of ``items`` read in it replaced by its item."""
    class Replace(ast.NodeTransformer):
        def visit_Name(self, n):
            if n.id in items and isinstance(n.ctx, ast.Load):
                return ast.copy_location(copy.deepcopy(items[n.id]), n)
            return n
    return ast.fix_missing_locations(Replace().visit(copy.deepcopy(tree)))


# ---- comparisons ---------------------------------------------------------------------------

def comparison(ex, node):
    """A Compare decided when compiling, or None: ``x is None`` / ``x is not None`` (true
    only of None), comparisons of strings and ``in`` of known values as Python compares
    them (``grid == "u"``, ``grid in ("h", "u")``: defaults and constant arguments), ``in``
    of an integer in known integers (``dim in [2, 3, 4]``: an integer condition), and
    ``==`` / ``!=`` between sequences (``a.shape == b.shape``: equal lengths and every size
    equal, an integer condition)."""
    identity = any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
    if len(node.ops) != 1:
        if identity:
            raise ex.src.error(node, f"`{ast.unparse(node)}`: write `is`/`is not` on its own")
        return None
    op, right = node.ops[0], node.comparators[0]
    if identity:
        left, other = node.left, right
        if not _is_none(ex, other):
            left, other = other, left
        if not _is_none(ex, other):
            raise ex.src.error(node, f"`{ast.unparse(node)}`: `is` and `is not` compare with "
                                     "None only")
        same = _is_none(ex, left)
        return sp.true if same == isinstance(op, ast.Is) else sp.false
    try:
        a, b = evaluate(ex, node.left), evaluate(ex, right)
    except NotStatic:
        return None
    if type(op) in PYTHON and _known(a) and _known(b) and (isinstance(a, str) or
                                                           isinstance(b, str)
                                                           or type(op) in (ast.In, ast.NotIn)):
        return sp.true if PYTHON[type(op)](a, b) else sp.false      # grid == "u", k in (1, 2)
    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(a, sp.Expr) and \
            isinstance(b, (tuple, list)) and all(isinstance(v, sp.Expr) for v in b):
        member = sp.Or(*(sp.Eq(a, v) for v in b))       # dim in [2, 3, 4], dim an int
        return member if isinstance(op, ast.In) else sp.Not(member)
    if not isinstance(op, (ast.Eq, ast.NotEq)):
        return None
    if not (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))):
        return None
    if type(a) is not type(b) or len(a) != len(b) or \
            any(not isinstance(x, sp.Expr) or not isinstance(y, sp.Expr) for x, y in zip(a, b)):
        equal = sp.true if a == b else sp.false
    else:
        equal = sp.And(*(sp.Eq(x, y) for x, y in zip(a, b)))
    return equal if isinstance(op, ast.Eq) else sp.Not(equal)


PYTHON = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
          ast.NotIn: lambda a, b: a not in b}


def _known(value):
    """Whether Python's comparison of ``value`` is its comparison when the kernel runs:
    no symbolic integer (a size, a loop variable) in it."""
    if isinstance(value, (tuple, list)):
        return all(_known(v) for v in value)
    return not (isinstance(value, sp.Expr) and value.free_symbols)


def _is_none(ex, node):
    try:
        return evaluate(ex, node) is None
    except NotStatic:
        return False
