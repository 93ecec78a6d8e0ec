"""Loops: ``for v in range(...)``, ``while``, ``break`` and ``continue``.

``break`` and ``continue`` become flags (scalar containers set to 1) that guard the
rest of the loop body; ``break`` also ends the loop through the LoopRegion's ``exit``
condition. A ``while`` loop is an unbounded LoopRegion whose body starts by setting
the exit flag from the test. Flags are data decisions like ``if`` flags, so the
reverse sweep replays them, and loops that may end early tape their trip count.
"""
import ast
import copy
from dataclasses import dataclass
from typing import Optional

import numpy as np
import sympy as sp

from ..sdfg import arithmetic as fp
from ..sdfg import ConditionalRegion, Container, LoopRegion, Memlet, Sequence, State, Tasklet
from ..sdfg.nodes import flag_symbol, index_loads
from ..errors import KernelSyntaxError
from . import lists, statics
from .lists import jumps_out
from .arrays import ArrayBuilder
from .expressions import AfterLoop, DataValue, ExpressionBuilder, IntValue


# A `for` over at most this many constant values whose variable reaches a slice bound
# (Veros' `for kr in range(2)` with `: -1 + kr or None` and `ki = 0 if kr == 1 else 1`)
# is unrolled: each copy sees the variable as a known int, as Python runs it, so `or
# None`, negative bounds and decided branches take Python's values.
UNROLL = 8
# A loop whose body binds a name to an array of a shape varying with the iteration
# (stockham_fft's `D = np.empty((R, R**i, R**(K - i - 1)))`) is unrolled at the call's
# trip count, up to this many copies (statements.parse)
UNROLL_AT_CALL = 64


class UnrolledValue(ast.stmt):
    """Binds an unrolled loop's variable to ``value`` (the first copy's: ``first``), or
    unbinds it after the last copy (``value`` None)."""
    _fields = ("var", "value", "first")


@dataclass
class LoopFrame:
    brk: Optional[Container] = None      # set by break (and by a while loop's test)
    cnt: Optional[Container] = None      # set by continue, cleared each iteration
    region: Optional[LoopRegion] = None  # a for loop's range (body left out), for proofs
    key: Optional[tuple] = None          # a for loop's loop_key


class LoopLowering:
    """Mixin of KernelBuilder: the loop statements."""

    def _stmt_For(self, stmt):
        if stmt.orelse:
            raise self.src.error(stmt, "`for ... else` is not supported")
        it = stmt.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and \
                it.func.attr == "ndindex" and \
                ExpressionBuilder(self, self.scope)._module(it.func.value) is np:
            return self._stmt_For(self._ndindex(stmt))
        if _call_of(self, it, "reversed"):
            return self._stmt_For(self._reversed(stmt))
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and it.func.id not in self.src.globals
                and not it.keywords and 1 <= len(it.args) <= 3):
            return self._stmt_For(self._over_indices(stmt))
        if not isinstance(stmt.target, ast.Name):
            raise self.src.error(stmt.target, "the loop variable must be a single name")
        ex = ExpressionBuilder(self, self.scope)
        bounds = [ex.index(a, "a range() bound") for a in it.args]
        start, stop, step = (sp.Integer(0), bounds[0], sp.Integer(1)) if len(bounds) == 1 else \
            (bounds[0], bounds[1], bounds[2] if len(bounds) == 3 else sp.Integer(1))
        if step == 0:
            raise self.src.error(it, "range() step must not be zero")
        if index_loads(step):     # its sign decides the loop's direction and bounds proofs
            raise self.src.error(it.args[2], "a range() step read from an array is not "
                                             "supported; pass the step as an int argument")
        var = stmt.target.id
        if not getattr(stmt, "over_indices", False):      # __it: _over_indices' own name
            self._check_name(stmt.target, var)
        if var in self.scope and var in self.int_locals and \
                not any(f.region is not None and f.region.var.name == var for f in self.loops):
            del self.scope[var]     # an integer local of code before (a loop's element)
        if var in self.scope:
            raise self.src.error(stmt.target, f"loop variable {var!r} shadows an argument, a "
                                              "size or an enclosing loop variable")
        symbol = sp.Symbol(var, integer=True)
        copies_, copies = self.binds.own_copies(self, stmt.body, self.line(stmt))
        self.scope[var] = IntValue(symbol)
        frame = LoopFrame(region=LoopRegion(symbol, start, stop, step, Sequence(())),
                          key=loop_key(self.src, stmt))
        self.loops.append(frame)
        lists.enter_loop(self, stmt, frame)
        try:
            body = self._body(stmt, copies)
        finally:
            lists.leave_loop(self, frame)
            del self.scope[var]
            self.loops.pop()
            self.drop_statics()
        for name, binding in list(self.scope.items()):      # aliases of the loop variable
            if type(binding) is IntValue and symbol in sp.sympify(binding.expr).free_symbols:
                self.scope[name] = AfterLoop(name, var, lambda m: self.src.error(stmt, m))
        return self._loop(frame, symbol, start, stop, step, body, stmt, copies_)

    def unrolled(self, stmt):
        """The statements a `for` over a few constant values stands for, one copy of the
        body per value (see UNROLL), or None for a loop lowered as a loop. A loop over a
        sequence known when compiling (``for k, (cx, cy) in enumerate(C)``, C a tuple of
        tuples) is Python's iteration written out: each copy reads the items in place of
        the names."""
        rows = statics.loop_rows(ExpressionBuilder(self, self.scope), stmt) if \
            isinstance(stmt, ast.For) and not stmt.orelse and not jumps_out(stmt.body) and \
            not _assigns(stmt.body, _names(stmt.target)) else None
        if rows is not None:
            return [_placed(statics.replaced(s, row), stmt) for row in rows for s in stmt.body]
        at_call = isinstance(stmt, ast.For) and loop_key(self.src, stmt) in self.unroll
        if not (isinstance(stmt, ast.For) and _unrollable(stmt, at_call)
                and _call_of(self, stmt.iter, "range")):
            return None
        ex = ExpressionBuilder(self, self.scope)
        try:
            bounds = [ex.index(a, "a range() bound") for a in stmt.iter.args]
        except KernelSyntaxError:
            return None                     # _stmt_For reports it
        if at_call and not ex.reads:        # the call's trip count: a decision on sizes
            bounds = [_at_call_value(ex, stmt.iter, b) for b in bounds]
        if ex.reads or ex.prelude or not all(b.is_Integer for b in bounds) or \
                (len(bounds) == 3 and bounds[2] == 0):
            return None
        values = range(*(int(b) for b in bounds))
        if len(values) > (UNROLL_AT_CALL if at_call else UNROLL):
            return None
        var, out = stmt.target.id, []
        for k, v in enumerate(values):
            out.append(_placed(UnrolledValue(var, v, k == 0), stmt))
            out.extend(copy.deepcopy(stmt.body))        # fresh nodes: call sites inline anew
        return out + [_placed(UnrolledValue(var, None, not values), stmt)]

    def _stmt_UnrolledValue(self, stmt):
        if stmt.first:
            self._check_name(stmt, stmt.var)
            if stmt.var in self.scope:
                raise self.src.error(stmt, f"loop variable {stmt.var!r} shadows an argument, "
                                           "a size or an enclosing loop variable")
        if stmt.value is None:
            self.scope.pop(stmt.var, None)
        else:
            self.scope[stmt.var] = IntValue(sp.Integer(stmt.value))
        return []

    def _body(self, stmt, copies, guard=None):
        """The loop's body, in a frame of its own (see bindings)."""
        with self.binds.region("loop"):
            path = self.binds.path
            body = self.block(stmt.body)
            if guard is not None:
                body = guard(body)
        self.binds.loop_built(body, path)
        self.binds.check_copies(self.src, copies, [body])
        return body

    def _reversed(self, stmt):
        """``for i in reversed(range(a, b))`` as ``for i in range(b - 1, a - 1, -1)`` (and
        a step of -1 the other way): the same indices, last first."""
        it = stmt.iter
        inner = it.args[0] if len(it.args) == 1 and not it.keywords else None
        if not (isinstance(inner, ast.Call) and _call_of(self, inner, "range") and
                not inner.keywords and 1 <= len(inner.args) <= 3):
            raise self.src.error(it, f"`{ast.unparse(it)}`: reversed() of a range() is "
                                     "supported; iterate over indices instead")
        args = inner.args if len(inner.args) > 1 else [ast.Constant(0)] + inner.args
        start, stop = args[:2]
        step = ExpressionBuilder(self, self.scope).index(args[2], "a range() step") \
            if len(args) == 3 else sp.Integer(1)
        if step not in (1, -1):
            raise self.src.error(it, f"`{ast.unparse(it)}`: reversed() of a range() with a "
                                     "step of 1 or -1 is supported; write the range backwards")
        op = ast.Sub() if step == 1 else ast.Add()
        first, last = (ast.BinOp(bound, op, ast.Constant(1)) for bound in (stop, start))
        rng = ast.Call(ast.Name("range", ast.Load()),
                       [first, last, ast.Constant(-int(step))], [])
        loop = ast.For(stmt.target, rng, stmt.body, stmt.orelse)
        return ast.fix_missing_locations(ast.copy_location(_placed(loop, stmt), stmt))

    def _over_indices(self, stmt):
        """``for x in A``, ``for i, x in enumerate(A)``, ``for a, b in zip(A, B)`` as the
        loop over indices Python's iteration makes: ``for k in range(n): x = A[k]`` (a
        row, a view; or a number), n the shortest first axis."""
        it, target = stmt.iter, stmt.target
        index = None
        if _call_of(self, it, "enumerate") and len(it.args) == 1 and \
                isinstance(target, ast.Tuple) and len(target.elts) == 2 and \
                isinstance(target.elts[0], ast.Name):
            index, target, arrays = target.elts[0], target.elts[1], it.args
        elif _call_of(self, it, "zip") and it.args and isinstance(target, ast.Tuple) and \
                len(target.elts) == len(it.args):
            arrays, target = it.args, target
        else:
            arrays = [it]
        b = ArrayBuilder(ExpressionBuilder(self, self.scope))
        values = [b.expr(a) for a in arrays]
        if any(not v.rank for v in values):
            raise self.src.error(it, f"loops must be `for v in range(...)` or over arrays "
                                     f"(`for x in A`, enumerate, zip), got "
                                     f"`{ast.unparse(it)}`; iterate over indices instead")
        self._counter += 1
        k = index.id if index is not None else f"__it{self._counter}"
        n = f"__n{self._counter}"
        self.scope[n] = IntValue(sp.Min(*[v.shape[0] for v in values]))
        names = target.elts if isinstance(target, ast.Tuple) and len(arrays) > 1 else [target]
        head = []
        for name, array, value in zip(names, arrays, values):
            element = ast.Subscript(array, ast.Name(k, ast.Load()), ast.Load())
            head.append(ast.Assign([name], element))
            binding = self.scope.get(array.id) if isinstance(array, ast.Name) else None
            if value.rank == 1 and isinstance(name, ast.Name) and \
                    isinstance(binding, DataValue) and \
                    binding.container.name in self.read_only_ints and \
                    not _assigns(stmt.body, {name.id}):
                self.int_locals.add(name.id)    # an element of an integer array: an index
            elif value.rank == 1 and isinstance(name, ast.Name) and \
                    name.id not in self.containers:
                self.containers[name.id] = Container(name.id, np.dtype(np.float64), (), True)
        rng = ast.Call(ast.Name("range", ast.Load()), [ast.Name(n, ast.Load())], [])
        loop = ast.For(ast.Name(k, ast.Store()), rng, head + stmt.body, [])
        loop.over_indices = index is None
        return ast.fix_missing_locations(ast.copy_location(_placed(loop, stmt), stmt))

    def _ndindex(self, stmt):
        """``for i, j in np.ndindex(N, M)`` (or ``np.ndindex(A.shape)``) as the nested loops
        ``for i in range(N): for j in range(M):``, the last index fastest as NumPy's; a
        single name (``for idx in ...``) stands for the tuple of indices (``A[idx]``)."""
        from .array_calls import _shape
        it, target = stmt.iter, stmt.target
        if it.keywords:
            raise self.src.error(it, "np.ndindex takes the shape only")
        b = ArrayBuilder(ExpressionBuilder(self, self.scope))
        items = it.args[0] if len(it.args) == 1 else ast.Tuple(it.args, ast.Load())
        shape = _shape(b, items)
        body = stmt.body
        if isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
            names = [t.id for t in target.elts]
        elif isinstance(target, ast.Name):
            self._counter += 1
            names = [f"__ix{self._counter}_{k}" for k in range(len(shape))]
            body = [_as_tuple(s, target.id, names) for s in body]
        else:
            raise self.src.error(target, "unpack np.ndindex into names (`for i, j in ...`) "
                                         "or take the tuple (`for idx in ...`)")
        if len(names) != len(shape):
            raise self.src.error(target, f"np.ndindex gives {len(shape)} indices, unpacked "
                                         f"into {len(names)} names")
        for name, size in zip(names[::-1], shape[::-1]):
            self._counter += 1
            n = f"__n{self._counter}"
            self.scope[n] = IntValue(size)
            rng = ast.Call(ast.Name("range", ast.Load()), [ast.Name(n, ast.Load())], [])
            loop = ast.For(ast.Name(name, ast.Store()), rng, body, [])
            loop.over_indices = name.startswith("__")
            body = [loop]
        return ast.fix_missing_locations(_placed(body[0], stmt))

    def _stmt_While(self, stmt):
        if stmt.orelse:
            raise self.src.error(stmt, "`while ... else` is not supported")
        line = self.line(stmt)
        frame = LoopFrame(brk=self.new_transient("__break"))
        copies_, copies = self.binds.own_copies(self, stmt.body + [stmt.test], line)
        ex = ExpressionBuilder(self, self.scope)
        cond = ex.condition(stmt.test)
        inputs = tuple((conn, Memlet(d, s)) for (d, s), conn in ex.reads.items())
        test = Tasklet(inputs, ((Memlet(frame.brk.name),
                                 fp.select(sp.Integer(0), cond, sp.Integer(1))),),
                       line)
        self.loops.append(frame)
        try:
            body = self._body(stmt, copies, lambda body: self.unless_jumped(body, frame))
        finally:
            self.loops.pop()
            self.drop_statics()
        body = Sequence(tuple(ex.prelude) + (State((test,), f"while_{line}"), body))
        self._counter += 1
        counter = sp.Symbol(f"__w{self._counter}", integer=True)
        return self._loop(frame, counter, sp.Integer(0), None, sp.Integer(1), body, stmt,
                          copies_)

    def _loop(self, frame, var, start, stop, step, body, stmt, before):
        line = self.line(stmt)
        if frame.cnt is not None:
            body = Sequence((self._set(frame.cnt, 0, line),) + body.elements)
        exit_ = None
        if frame.brk is not None:
            exit_ = sp.Ne(flag_symbol(frame.brk.name), 0)
            before = before + [self._set(frame.brk, 0, line)]
        return before + [LoopRegion(var, start, stop, step, body, line, exit=exit_)]

    def _stmt_Break(self, stmt):
        frame = self._frame(stmt, "break")
        if frame.brk is None:
            frame.brk = self.new_transient("__break")
        return [self._set(frame.brk, 1, self.line(stmt))]

    def _stmt_Continue(self, stmt):
        frame = self._frame(stmt, "continue")
        if frame.cnt is None:
            frame.cnt = self.new_transient("__continue")
        return [self._set(frame.cnt, 1, self.line(stmt))]

    def _frame(self, stmt, what):
        if not self.loops:
            raise self.src.error(stmt, f"`{what}` outside a loop")
        return self.loops[-1]

    def _set(self, flag, value, line):
        return State((Tasklet((), ((Memlet(flag.name), sp.Integer(value)),), line),),
                     f"flag_{line}")

    def may_jump(self, stmt):
        """Whether ``stmt`` can break or continue the innermost enclosing loop."""
        if not self.loops:
            return False
        todo = [stmt]
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.Break, ast.Continue)):
                return True
            if not isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
                todo.extend(ast.iter_child_nodes(node))
        return False

    def unless_jumped(self, rest, frame=None):
        """``rest`` guarded so that it does not run after a break or continue.

        The decision is copied into a fresh flag first: ``rest`` may itself break or
        continue, and a region's condition must not change inside the region."""
        frame = frame or self.loops[-1]
        flags = [f for f in (frame.brk, frame.cnt) if f is not None]
        if not flags or not rest.elements:
            return rest
        go = self.new_transient("__go")
        conns = [sp.Symbol(f"__in{k}", real=True) for k in range(len(flags))]
        decide = sp.Piecewise((sp.Integer(1), sp.And(*[sp.Eq(c, 0) for c in conns])),
                              (sp.Integer(0), True))
        inputs = tuple((c, Memlet(f.name)) for c, f in zip(conns, flags))
        snapshot = State((Tasklet(inputs, ((Memlet(go.name), decide),)),), "unless_jumped")
        region = ConditionalRegion(((sp.Ne(flag_symbol(go.name), 0), rest),))
        return Sequence((snapshot, region))

    def line(self, stmt):
        return stmt.lineno + self.src.first_line - 1


def unrolls_literally(stmt):
    """Whether the `for` ``stmt`` unrolls whatever the names around it mean (its range of
    int literals): what ``locals`` may assume before the lowering decides."""
    if not _unrollable(stmt):
        return False
    try:
        bounds = [ast.literal_eval(a) for a in stmt.iter.args]
    except (ValueError, TypeError, SyntaxError):
        return False
    return all(type(b) is int for b in bounds) and bounds[2:] != [0] and \
        len(range(*bounds)) <= UNROLL


def _unrollable(stmt, at_call=False):
    """Whether the `for` ``stmt`` has the form an unrolled loop has (see UNROLL), its
    values aside: ``for v in range(...)`` whose ``v`` reaches a slice bound (or one to
    unroll ``at_call``) and whose body does not leave it early."""
    it = stmt.iter
    return isinstance(stmt.target, ast.Name) and not stmt.orelse and \
        isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" \
        and not it.keywords and 1 <= len(it.args) <= 3 and \
        (at_call or _reaches_slice_bound(stmt.body, stmt.target.id)) and \
        not jumps_out(stmt.body)


def _at_call_value(ex, node, n):
    """The integer ``n`` (of sizes) at the call being compiled, a decision of the
    specialisation (``at_call``); ``n`` itself where the sizes do not decide it."""
    value = ex.call_value(n)
    decided = value is not None and value.is_Integer and ex.at_call(
        node, sp.Eq(n, value), lambda _: (
            f"`{ast.unparse(node)}` runs with {n} = {value} where this specialisation was "
            "compiled (its loop unrolled), not at these sizes")) is sp.true
    return value if decided else n


def loop_key(src, stmt):
    """A `for` statement's place in the source, the same in every lowering of it."""
    return src.filename, stmt.lineno + src.first_line - 1, stmt.col_offset


def _reaches_slice_bound(body, var):
    """Whether ``var``, or a name assigned from it, occurs in a slice bound in ``body``."""
    names, changed = {var}, True
    while changed:
        changed = False
        for node in (n for s in body for n in ast.walk(s)):
            if isinstance(node, ast.Assign) and _mentions(node.value, names):
                new = {t.id for t in node.targets if isinstance(t, ast.Name)} - names
                names |= new
                changed = changed or bool(new)
    return any(isinstance(n, ast.Slice) and _mentions(n, names)
               for s in body for n in ast.walk(s))


def _mentions(node, names):
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _names(target):
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _assigns(body, names):
    """Whether ``body`` binds any of ``names`` (then they are not the loop's items)."""
    return any(isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id in names
               for s in body for n in ast.walk(s))


def _call_of(kernel, node, name):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == name and name not in kernel.src.globals and not node.keywords


def _as_tuple(stmt, name, names):
    """``stmt`` with the name ``name`` read as the tuple of ``names``."""
    class Rewrite(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id == name and isinstance(node.ctx, ast.Load):
                return ast.copy_location(ast.Tuple([ast.Name(n, ast.Load()) for n in names],
                                                   ast.Load()), node)
            return node
    return Rewrite().visit(copy.deepcopy(stmt))


def _placed(tree, where):
    """Every node of ``tree`` without a position at ``where``'s (for messages)."""
    for node in ast.walk(tree):
        if "lineno" in node._attributes and not hasattr(node, "lineno"):
            ast.copy_location(node, where)
    return tree
