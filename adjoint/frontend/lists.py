"""Lists grown by ``append`` (``Ps = []`` ... ``for i in range(I): Ps.append(P)``).

A list whose appends run unconditionally, in counted loops, has a length the loops'
trip counts give: it is one array of that length (``GrowingList.data``, a transient
whose first axis is the final length, set when the kernel is built), each append a
store at the list's length at that point, an integer expression of the loop variables:
``base + iteration * appends per iteration + appends before it in the iteration``. A read
of the list (``np.array(xs)``, ``xs[-1]``, ``len(xs)``, ``for v in xs``, ``sum(xs)``,
``return xs``, a number stored into an element) reads the array's first ``length`` rows
there; other uses of a list (``xs * 2`` repeats it in Python, a store into an element that
is an array rebinds it) are refused naming the line. The kernel returns a
returned list as a list (``SDFG.lists``).
"""
import ast
import copy
from dataclasses import replace

import numpy as np
import sympy as sp

from ..errors import KernelSyntaxError
from ..sdfg.nodes import trips
from .array_shapes import AXES, View, ViewValue
from .array_stores import assign_view, stored_dtype, stored_value, temporary
from .arrays import ArrayBuilder
from .expressions import RESULT, ExpressionBuilder
from .functions import floordiv
from .outside import NUMPY_NAME

INT64 = np.dtype(np.int64)


class GrowingList:
    """Binding of a name to a list grown by append: its array (None before the first
    append), the shape of its elements, its length at the statement being lowered."""

    def __init__(self, kernel, name, stmt):
        kernel._counter += 1
        self.name, self.stmt = name, stmt
        self.data = f"__list{kernel._counter}"      # the array's name (scope and container)
        self.size = f"__listn{kernel._counter}"      # its length where it is read
        self.element = None                          # shape of the appended values
        # the array's first axis until the final length is known (finish)
        self.placeholder = sp.Symbol(f"__listlen{kernel._counter}", integer=True,
                                     nonnegative=True)
        self.length = sp.Integer(0)
        self.depth, self.branches = len(kernel.loops), len(kernel.branches)
        self.counted = {}           # id(loop frame) -> (appends it counted, start, per iteration)
        kernel.grown.append(self)


def grows(tree, name):
    """Whether ``name.append(...)`` occurs in ``tree``: ``name = []`` binds a growing list."""
    return any(append_of(n) == name for n in ast.walk(tree))


def append_of(node):
    """The list name ``node`` appends to (``xs.append(v)``, a statement), or None."""
    if isinstance(node, ast.Expr):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "append" and isinstance(node.func.value, ast.Name) and \
            len(node.args) == 1 and not node.keywords:
        return node.func.value.id
    return None


def is_list(node):
    """Whether ``node`` makes a new list to grow: ``[]``, ``[a, b]``, ``list()``."""
    return isinstance(node, ast.List) and \
        not any(isinstance(e, ast.Starred) for e in node.elts) or \
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "list" and not node.args and not node.keywords


def grown_lists(tree, stmt):
    """[(name, list)] of the assignment ``stmt`` when it binds names to new lists that
    ``tree`` appends to (``Ps = []``, ``Ps, hist = [], []``: every value a list), else []."""
    if len(stmt.targets) != 1:
        return []
    target, value = stmt.targets[0], stmt.value
    pairs = [(target, value)] if isinstance(target, ast.Name) else \
        list(zip(target.elts, value.elts)) if isinstance(target, ast.Tuple) and \
        isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts) else []
    if not pairs or not all(isinstance(t, ast.Name) and is_list(v) and grows(tree, t.id)
                            for t, v in pairs):
        return []               # lists known when compiling (statics.py)
    names = {t.id for t, _ in pairs}
    if any(isinstance(n, ast.Name) and n.id in names for _, v in pairs for n in ast.walk(v)):
        return []               # xs = [xs[-1]]: the elements read the names' old values
    return pairs


def appending(name, value):
    """The statement ``name.append(value)``, placed at ``value``."""
    call = ast.Call(ast.Attribute(ast.Name(name, ast.Load()), "append", ast.Load()), [value],
                    [])
    return ast.fix_missing_locations(ast.copy_location(ast.Expr(ast.copy_location(call, value)),
                                                       value))


def _key(kernel, node):
    return node.lineno + kernel.src.first_line - 1, node.col_offset


def live(kernel):
    return [b for b in kernel.scope.values() if isinstance(b, GrowingList)]


# ---- loops ----------------------------------------------------------------------------------
def enter_loop(kernel, stmt, frame):
    """At a counted loop's start (its variable bound, its frame pushed): each live list
    appended to in the body gets its length in the iteration, ``start + iteration *
    appends per iteration``."""
    region = frame.region
    for g in live(kernel):
        keys = []
        per = _count(kernel, g, stmt.body, keys, stmt)
        if not keys:
            continue
        loose = sp.sympify(per).free_symbols & {f.region.var for f in kernel.loops
                                                if f.region is not None}
        if loose:
            raise _error(kernel, keys[0][1], g, "the number of appends in each iteration "
                         f"depends on the loop variable {sorted(map(str, loose))[0]!r}")
        step = region.step
        iteration = (region.var - region.start) / step if abs(step) == 1 else \
            floordiv(region.var - region.start, step)
        g.counted[id(frame)] = ({k for k, _ in keys}, g.length, per)
        g.length = g.length + iteration * per


def leave_loop(kernel, frame):
    """After a counted loop: its lists' lengths grown by trip count times appends."""
    region = frame.region
    for g in live(kernel):
        entry = g.counted.pop(id(frame), None)
        if entry is not None:
            _, start, per = entry
            g.length = start + trips(region.start, region.stop, region.step) * per


def _count(kernel, g, body, keys, loop):
    """The appends to ``g`` one run of ``body`` makes (an integer expression), their
    (key, node) added to ``keys``; a loop, branch or jump that makes the count depend on
    the data is an error at its first append."""
    total = sp.Integer(0)
    for stmt in body:
        if append_of(stmt) == g.name:
            keys.append((_key(kernel, stmt.value), stmt))
            total += 1
            continue
        inner = [n for n in ast.walk(stmt) if append_of(n) == g.name]
        if not inner:
            continue
        if isinstance(stmt, ast.For):
            total += _count_loop(kernel, g, stmt, keys, loop)
        elif isinstance(stmt, ast.If):
            taken = kernel._decided_branch(stmt)
            if taken is None:
                raise _error(kernel, inner[0], g, "it runs under an `if`, so the list's "
                             "length would depend on the condition")
            total += _count(kernel, g, taken, keys, loop)
        elif isinstance(stmt, ast.Try):
            total += _count(kernel, g, stmt.body + stmt.orelse + stmt.finalbody, keys, loop)
        else:
            what = "a `while` loop" if isinstance(stmt, ast.While) else f"`{type(stmt).__name__}`"
            raise _error(kernel, inner[0], g, f"it runs in {what}, whose trip count is not "
                         "known before it runs")
    if keys and jumps_out(body):
        raise _error(kernel, keys[0][1], g, "its loop may `break`, `continue` or `return`")
    return total


def _count_loop(kernel, g, stmt, keys, loop):
    """Appends of a nested loop: its trip count times its body's."""
    copies = kernel.unrolled(stmt)
    if copies is not None:
        return _count(kernel, g, copies, keys, loop)
    inner = []
    per = _count(kernel, g, stmt.body, inner, loop)
    keys += inner
    assigned = {n.id for n in ast.walk(ast.Module(loop.body, [])) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    read = {n.id for n in ast.walk(stmt.iter) if isinstance(n, ast.Name)}
    if read & assigned:
        raise _error(kernel, inner[0][1], g, f"its loop's `{ast.unparse(stmt.iter)}` reads "
                     f"{sorted(read & assigned)[0]!r}, computed in the loop around it")
    return _trips(kernel, stmt, inner[0][1], g) * per


def _trips(kernel, stmt, node, g):
    """The number of iterations of the loop ``stmt``: ``range(...)`` or over arrays."""
    it = stmt.iter
    ex = ExpressionBuilder(kernel, kernel.scope)
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
            it.func.id == "range" and not it.keywords and 1 <= len(it.args) <= 3:
        bounds = [ex.index(a, "a range() bound") for a in it.args]
        start, stop, step = (sp.Integer(0), bounds[0], sp.Integer(1)) if len(bounds) == 1 \
            else (bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else sp.Integer(1))
        return trips(start, stop, step)
    arrays = it.args if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
        it.func.id in ("enumerate", "zip") else [it]
    b, counts = ArrayBuilder(ex), []
    for a in arrays:
        grown = kernel.scope.get(a.id) if isinstance(a, ast.Name) else None
        value = None if isinstance(grown, GrowingList) else b.expr(a)
        if value is not None and not value.rank:
            raise _error(kernel, node, g, f"its loop over `{ast.unparse(it)}` has no trip "
                         "count known before it runs")
        counts.append(grown.length if value is None else value.shape[0])
    return sp.Min(*counts)


def jumps_out(body):
    """Whether ``body`` (a loop's) returns, or breaks or continues its own loop."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Return, ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.For, ast.While)):
            todo.extend(n for n in ast.walk(node) if isinstance(n, ast.Return))
        elif not isinstance(node, (ast.FunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _error(kernel, node, g, why):
    return kernel.src.error(node, f"`{ast.unparse(node).strip()}`: {why}. A list grown by "
                            "append in a kernel has a length its loops' trip counts give "
                            "(every append unconditional, in `for` loops); otherwise store "
                            f"each value into an array of the loop's length ({g.name} = "
                            f"np.zeros(n) ... {g.name}[i] = v) and keep a mask of the ones "
                            "that count (keep[i] = cond, then np.sum(x * keep))")


# ---- appends --------------------------------------------------------------------------------
def append(kernel, stmt):
    """``xs.append(v)``: ``v`` stored at the list's length, which grows by one."""
    g = kernel.scope[stmt.value.func.value.id]
    node = stmt.value.args[0]
    frames = kernel.loops[g.depth:]
    for f in frames:
        entry = g.counted.get(id(f))
        if entry is None or _key(kernel, stmt.value) not in entry[0]:
            why = "it runs in a `while` loop, whose trip count is not known before it runs" \
                if f.region is None else "it runs in a function called in the list's loop"
            raise _error(kernel, stmt, g, why)
    if len(kernel.branches) > g.branches:
        raise _error(kernel, stmt, g, "it runs under an `if`, so the list's length would "
                     "depend on the condition")
    b = ArrayBuilder(ExpressionBuilder(kernel, kernel.scope))
    value = stored_value(b, node)
    shape = tuple(value.shape)
    if g.element is None:
        loose = set().union(*(sp.sympify(n).free_symbols for n in shape)) - \
            set(kernel.symbols)
        if loose:
            raise kernel.src.error(node, f"`{ast.unparse(stmt).strip()}`: the value's shape "
                                         f"depends on {sorted(map(str, loose))[0]}; the values "
                                         "appended to a list in a kernel have one shape")
        g.element = shape
        temporary(b, node, (g.placeholder,) + shape, "__list", g.data,
                  INT64 if not shape and _integer(kernel, node) else stored_dtype(value))
    elif len(shape) != len(g.element) or \
            any(sp.simplify(a - e) != 0 for a, e in zip(shape, g.element)):
        raise kernel.src.error(node, f"`{ast.unparse(stmt).strip()}`: the values appended to "
                                     f"{g.name!r} have one shape in a kernel; this one's "
                                     "differs from the first's")
    c = kernel.containers[g.data]
    if c.dtype == INT64 and not _integer(kernel, node):     # [0, 1.5]: floats, as NumPy's
        c = kernel.containers[g.data] = replace(c, dtype=np.dtype(np.float64))
        kernel.typed.discard(g.data)
    if value.view is not None and value.rank:
        _check_not_written(kernel, stmt, node, g)
    dest = b.load(View(c, (g.length,) + AXES[:len(shape)]), shape)
    regions = assign_view(b, stmt, dest, value, None, b.line(stmt))
    g.length = g.length + 1
    return regions


def _integer(kernel, node):
    """Whether ``node`` is an integer expression (``k * k``, ``idx[i]``): a list of them is
    a list of Python ints, an int64 array."""
    try:
        ExpressionBuilder(kernel, kernel.scope).index(node)
    except KernelSyntaxError:
        return False
    return True


def _check_not_written(kernel, stmt, node, g):
    """An array appended as memory (a name, a view) is the list's element in Python, not
    a copy: refused where the code writes that array in place other than between its
    binding and the append (the list would see the change)."""
    root = node
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    if not isinstance(root, ast.Name):
        return
    name, ok, at = root.id, set(), (stmt.lineno, stmt.col_offset)
    for block in _blocks(kernel.src.tree):
        if any((s.lineno, s.col_offset) == at for s in block):
            k = next(i for i, s in enumerate(block) if (s.lineno, s.col_offset) == at)
            bound = [i for i, s in enumerate(block[:k]) if isinstance(s, ast.Assign) and
                     any(isinstance(t, ast.Name) and t.id == name for t in s.targets)]
            if bound:
                ok = {id(n) for s in block[bound[-1] + 1:k] for n in ast.walk(s)}
    for n in ast.walk(kernel.src.tree):
        if id(n) not in ok and _writes(n, name):
            raise kernel.src.error(node, f"`{ast.unparse(stmt).strip()}`: the list holds "
                                         f"{name!r} itself, which line "
                                         f"{n.lineno + kernel.src.first_line - 1} changes in "
                                         f"place; append a copy ({ast.unparse(node)}.copy())")
    return


def _blocks(tree):
    for n in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list):
                yield block


def _writes(node, name):
    """Whether statement ``node`` writes the array ``name`` in place."""
    def base(t):
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        return t
    if isinstance(node, ast.AugAssign):
        t = node.target
        return isinstance(base(t), ast.Name) and base(t).id == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) and isinstance(base(t), ast.Name) and
                   base(t).id == name for t in node.targets)
    return False


# ---- reads ----------------------------------------------------------------------------------
READERS = {"len", "sum", "max", "min", "enumerate", "zip"}
NUMPY_READERS = {"array", "asarray", "stack", "sum", "mean", "max", "min", "prod", "std",
                 "var", "amax", "amin", "cumsum", "median"}


def substituted(kernel, node):
    """``node`` (a statement or its header) with each read of a growing list written as
    its array's first ``length`` rows; ``return xs`` noted (the kernel returns a list)."""
    names = {n for n, b in kernel.scope.items() if isinstance(b, GrowingList)}
    if not names or not any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node)):
        return node
    node = copy.deepcopy(node)
    parents = {id(c): p for p in ast.walk(node) for c in ast.iter_child_nodes(p)}
    if isinstance(node, ast.Return) and getattr(kernel, "returning", None) is None:
        if isinstance(node.value, ast.Tuple):
            kernel.listed = {f"{RESULT}{k}" for k, v in enumerate(node.value.elts)
                             if isinstance(v, ast.Name) and v.id in names}
        elif isinstance(node.value, ast.Name) and node.value.id in names:
            kernel.listed = {RESULT}

    class Reads(ast.NodeTransformer):
        def visit_Call(self, n):
            """``sum(xs)``, ``max(xs)``, ``min(xs)``: NumPy's over the first axis;
            ``np.stack(xs)``: the array itself."""
            self.generic_visit(n)
            f, args = n.func, n.args
            if isinstance(f, ast.Attribute) and f.attr == "stack" and len(args) == 1 and \
                    _listed(args[0]) and all(k.arg == "axis" and isinstance(
                        k.value, ast.Constant) and k.value.value == 0 for k in n.keywords):
                return ast.copy_location(ast.Call(ast.Attribute(f.value, "array", ast.Load()),
                                                  args, []), n)
            if not (isinstance(f, ast.Name) and f.id in ("sum", "max", "min") and
                    f.id not in kernel.src.globals and len(args) == 1 and not n.keywords and
                    _listed(args[0])):
                return n
            if f.id != "sum" and len(kernel.scope[args[0].id].shape) > 1:
                raise kernel.src.error(n, f"`{ast.unparse(n)}` compares arrays, which Python "
                                          f"refuses; use np.{f.id}(..., axis=0)")
            if f.id != "sum":           # Python's max of numbers (a nan loses but first)
                return n
            kernel.src = replace(kernel.src, globals={**kernel.src.globals, NUMPY_NAME: np})
            return ast.copy_location(ast.Call(
                ast.Attribute(ast.Name(NUMPY_NAME, ast.Load()), f.id, ast.Load()), args,
                [ast.keyword("axis", ast.Constant(0))]), n)

        def visit_Name(self, n):
            g = kernel.scope.get(n.id)
            if not isinstance(g, GrowingList) or not isinstance(n.ctx, ast.Load):
                return n
            parent = parents.get(id(n))
            if isinstance(parent, ast.Attribute) and parent.attr == "append" and \
                    isinstance(parents.get(id(parent)), ast.Call) and \
                    isinstance(node, ast.Expr) and node.value is parents.get(id(parent)):
                return n
            if isinstance(parent, ast.Attribute):
                raise kernel.src.error(n, f"`{ast.unparse(parent)}`: a list grown in a kernel "
                                          "takes `append` only (one value at a time, in "
                                          "counted loops)")
            if not _read_as_array(kernel, n, parents):
                raise kernel.src.error(n, f"`{ast.unparse(parent or n)}`: {n.id!r} is a list "
                                          "grown by append, read in a kernel as an array of "
                                          "its values: np.array(xs), xs[k], len(xs), "
                                          "`for v in xs`, sum(xs), np.sum(xs) or `return "
                                          "xs`; write np.array(xs) where array arithmetic is "
                                          "meant")
            if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load) \
                    and g.element:
                raise kernel.src.error(n, f"`{ast.unparse(parent)} = ...`: the elements of "
                                          f"{n.id!r} are arrays, which Python's list holds "
                                          "themselves (a store rebinds one, `+=` changes it "
                                          "in place for every name of it); make the array "
                                          f"first ({n.id} = np.array({n.id})) and store into "
                                          "it")
            if g.element is None:       # nothing appended yet: an empty list of numbers
                raise kernel.src.error(n, f"{n.id!r} is read before anything is appended to "
                                          "it; kernels read lists grown by append after their "
                                          "first append")
            c = kernel.containers[g.data]
            kernel.scope[g.size] = ViewValue(g.size, View(c, AXES[:len(c.shape)]),
                                             (g.length,) + g.element, False)
            read = ast.copy_location(ast.Name(g.size, ast.Load()), n)
            read.listed = True
            return read

    return ast.fix_missing_locations(Reads().visit(node))


def _listed(node):
    """Whether ``node`` is a list's read, written by :func:`substituted`."""
    return getattr(node, "listed", False)


def _read_as_array(kernel, n, parents):
    """Whether the list ``n`` is used where its array of values means the same."""
    parent = parents.get(id(n))
    if isinstance(parent, ast.Subscript) and parent.value is n:
        if isinstance(parent.slice, ast.Slice):     # xs[-3:]: a list again
            return _read_as_array(kernel, parent, parents)
        return True
    if isinstance(parent, ast.For) and parent.iter is n:
        return True
    if isinstance(parent, ast.Return):
        return True
    if isinstance(parent, ast.Tuple) and isinstance(parents.get(id(parent)), ast.Return):
        return True
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is n or \
            isinstance(parent, ast.Call) and n in parent.args and \
            isinstance(parent.func, ast.Name) and parent.func.id == "zip":
        f = parent.func
        if isinstance(f, ast.Name) and f.id in READERS and f.id not in kernel.src.globals:
            return True
        if isinstance(f, ast.Attribute) and f.attr in NUMPY_READERS and \
                ExpressionBuilder(kernel, kernel.scope)._module(f.value) is not None:
            return True
    return False


def finish(kernel):
    """When the kernel is built: each list's array gets its final length in place of its
    placeholder (in every container whose shape took it from the array)."""
    final = {}
    for g in kernel.grown:
        if g.data not in kernel.containers:
            continue
        loose = sp.sympify(g.length).free_symbols - set(kernel.symbols)
        if loose:
            raise kernel.src.error(g.stmt, f"the list {g.name!r} grows to a length that "
                                           f"depends on {sorted(map(str, loose))[0]}; a list "
                                           "grown by append in a kernel has a length known "
                                           "on entry")
        final[g.placeholder] = g.length
    for name, c in list(kernel.containers.items()):
        if any(sp.sympify(n).free_symbols & set(final) for n in c.shape):
            kernel.containers[name] = replace(c, shape=tuple(sp.sympify(n).subs(final)
                                                             for n in c.shape))
