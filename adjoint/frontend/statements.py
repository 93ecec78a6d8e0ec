"""Python statements -> SDFG control-flow regions and states."""
import ast
import copy
from dataclasses import dataclass, replace

import numpy as np
import sympy as sp

from ..sdfg import (SDFG, Argument, ConditionalRegion, Container, LoopRegion, Memlet,
                    Sequence, State, Tasklet)
from ..errors import KernelSyntaxError
from ..sdfg.nodes import (condition_containers, flag_symbol, index_loads, regions, tasklets,
                          value_range, walk)
from ..types import ArrayType
from .array_calls import tuple_elements, ufunc_at
from .array_indexing import scatter_at
from .arrays import ArrayBuilder, ArrayLowering, ArrayState
from .arrays import assign as assign_arrays
from .bindings import Bindings
from .calls import (CallLowering, assign_results, call_statement, callee_of, local_function,
                    lower_return, plain_function_hint, returns_integer, store_value,
                    unpack_call)
from ..sdfg import arithmetic as fp
from .expressions import (BITS, LOGICAL, RESULT, DataValue, ExpressionBuilder, IntValue,
                          number_of)
from . import dtypes
from .locals import classify_locals, read_only
from .masks import indices_as_mask, inline_selection
from .loops import LoopLowering
from .outside import bind_arrays, integer_names
from . import lists, statics
from .statics import NotStatic, StaticValue

AUG_OPS = {ast.Add: fp.add, ast.Sub: fp.sub, ast.Mult: fp.mul, ast.Div: fp.div,
           ast.FloorDiv: fp.py_floordiv, ast.Mod: fp.py_mod,     # of data (numbers, elements)
           **{op: (lambda f: lambda a, b: fp.bits(f, a, b))(f) for op, f in BITS.items()}}


class KernelBuilder(LoopLowering, CallLowering, ArrayLowering):
    """Builds the SDFG of one kernel for one assignment of argument types. The modules
    below statements.py reach the ones above them through it (``ex.kernel``): each of
    those defines its part as a mixin (``LoopLowering``, ``CallLowering``,
    ``ArrayLowering``), composed here, so that no frontend module imports one above it."""

    def __init__(self, src, name, types, sizes=None, unroll=frozenset()):
        self.src, self.name = src, name
        self.sizes = sizes or {}    # symbol name -> value at the call being compiled
        self.unroll = unroll        # loops (loop_key) unrolled at the call's trip count
        self.containers, self.arguments, self.symbols = {}, [], []
        self.typed = set()          # transients whose dtype the code names (dtypes.py)
        self.complex_stored = set()     # the others holding complex values (dtypes.py)
        self.scope = {}
        self._counter = 0
        self._bind_arguments(types)
        int_names = {n for n, b in self.scope.items() if isinstance(b, IntValue)}
        int_arrays = {n for n, b in self.scope.items() if isinstance(b, DataValue)
                      and not b.container.is_scalar and b.container.dtype.kind in "iu"}
        self.int_locals, float_locals = classify_locals(
            src.tree, int_names | integer_names(src), set(self.scope),
            lambda c, k: returns_integer(self, c, k), int_arrays)
        self.read_only_ints = read_only(src.tree, int_arrays)   # for i, c in zip(idx, cs)
        for local in float_locals:
            self.containers[local] = Container(local, np.dtype(np.float64), (), True)
        self.result = None
        self.returns = ()           # containers holding the returned values, in order
        self.call_roots = set()     # ids of the calls that are a whole statement's value
        self.arrays = ArrayState(src.tree)
        self.loops = []             # LoopFrame per enclosing loop, innermost last
        self.binds = Bindings()     # which array each name means (Python's rebinding)
        self.branches = []          # (if, branch) decided at run time around the statement
        self.grown = []             # lists grown by append (lists.py), every one bound
        self.listed = set()         # the returned containers that are such lists

    # ---- arguments ------------------------------------------------------------------
    def _bind_arguments(self, types):
        hidden = [(None, name) for name, _ in self.src.outside]     # arrays from outside
        for arg, name in [(a, a.arg) for a in self.src.tree.args.args] + hidden:
            t = types[name]
            if arg is not None:
                self._check_name(arg, name)
            if isinstance(t, ArrayType):
                for size in t.shape:
                    for s in sorted(size.free_symbols, key=str):
                        if s not in self.symbols:
                            self.symbols.append(s)
                            self.scope.setdefault(s.name, IntValue(s))
                c = Container(name, t.dtype, t.shape)
                self.arguments.append(Argument(name, "array", t.dtype, t.shape))
            elif t is float:
                c = Container(name, np.dtype(np.float64), ())
                self.arguments.append(Argument(name, "float", c.dtype))
            else:
                s = sp.Symbol(name, integer=True)
                if any(x.name == name for x in self.symbols):
                    s = next(x for x in self.symbols if x.name == name)
                else:
                    self.symbols.append(s)
                self.arguments.append(Argument(name, "int", np.dtype(np.int64)))
                self.scope[name] = IntValue(s)
                continue
            self.containers[name] = c
            self.scope[name] = DataValue(c)
        for c in list(self.containers.values()):
            if c.dtype.kind in "iu":      # index arrays: their value range, for bounds checks
                self.symbols += list(value_range(c.name))
        self.outside = {id(value): self.scope[name] for name, value in self.src.outside}
        bind_arrays(self, self.src, self.scope)

    def _check_name(self, node, name):
        if name.startswith("__") or not name.isascii():
            raise self.src.error(node, f"name {name!r}: names starting with '__' and non-ASCII "
                                       "names are reserved for the engine")

    def note_store(self, name, inputs, value):
        """``dtypes.note_store``, for the modules dtypes.py imports (array_stores.py)."""
        dtypes.note_store(self, name, inputs, value)

    def new_transient(self, prefix):
        self._counter += 1
        c = Container(f"{prefix}{self._counter}", np.dtype(np.float64), (), True)
        self.containers[c.name] = c
        return c

    # ---- statements -----------------------------------------------------------------
    def build(self) -> SDFG:
        body = self.block(self.src.tree.body, top=True)
        lists.finish(self)
        self.binds.check_aliases(self.src, body)
        self._check_integer_writes(body)
        self._check_outside_read_only(body)
        assumptions = tuple((c, line, self.src.speak(m)) for c, line, m in self.arrays.assumptions)
        inferred = {n for n, c in self.containers.items() if c.transient and n not in self.typed}
        weak = {a.name for a in self.arguments if a.kind == "float"}
        body, containers = dtypes.assign(body, self.containers, inferred, weak,
                                         self.src.filename)
        self._check_values_are_real(body)      # complex ones as their parts (complexes.py)
        return SDFG(self.name, tuple(self.arguments), containers,
                    tuple(self.symbols), body, self.result, self.src.filename,
                    assumptions, returns=tuple(self.returns),
                    decisions=tuple(self.arrays.decisions), lists=frozenset(self.listed))

    def _check_values_are_real(self, body):
        """No infinite or complex constants: ``x / 0.0``, ``np.mean(x[:0])``, ``(-1.0) ** 0.5``
        (NumPy gives inf/nan with a warning; C has no such constants), and no integer
        constants beyond 64 bits (``2 ** 100``), which C would truncate silently."""
        for t, _, _ in tasklets(body):
            for m, expr in t.outputs:
                if expr.has(sp.zoo, sp.I) or expr.has(sp.nan):
                    raise KernelSyntaxError(
                        f"the value stored in {m.data!r} divides by zero or is complex "
                        f"({expr}); check for x / 0, a mean over nothing or a negative number "
                        "to a fractional power", self.src.filename, t.line, 1)
            exprs = [e for _, e in t.outputs] + [i for _, m in t.inputs for i in m.subset] + \
                [i for m, _ in t.outputs for i in m.subset]
            self._check_integers(exprs, t.line)
        for _, context in walk(body):
            for region in context:
                if isinstance(region, LoopRegion):
                    self._check_integers((region.start, region.stop, region.step), region.line)

    def _check_integers(self, exprs, line):
        for e in exprs:
            big = [a for a in sp.sympify(e).atoms(sp.Integer) if abs(int(a)) >= 2 ** 63] \
                if e is not None else []
            if big:
                raise KernelSyntaxError(f"an integer constant of {len(str(abs(int(big[0]))))} "
                                        "digits does not fit in 64 bits; write it as a float "
                                        "(1e30)",
                                        self.src.filename, line, 1)

    def _check_integer_writes(self, body):
        """Integer arrays the kernel writes may not provide indices, whose bounds are
        checked from the values on entry (the engine's own, of known ``values``, may)."""
        written = set()
        for t, _, _ in tasklets(body):
            for m, _ in t.outputs:
                c = self.containers[m.data]
                if c.dtype.kind in "iu" and c.values is None:
                    written.add(m.data)
        for expr, line in _index_expressions(body) if written else ():
            loaded = {name for name, _ in index_loads(expr)} & written
            if loaded:
                raise KernelSyntaxError(f"integer array {sorted(loaded)[0]!r} is written by the "
                                        "kernel and indexes an array; index arrays are checked "
                                        "against their values on entry, so they must be "
                                        "read-only: compute it outside the kernel and pass "
                                        "it in", self.src.filename, line, 1)

    def _check_outside_read_only(self, body):
        """Arrays from outside the body (hidden arguments) are read, never written: the
        caller would not see that its module's or object's array changed."""
        names = {name for name, _ in self.src.outside}
        labels = {engine: label for label, engine in self.src.renamed}
        written = [(t.line, m.data) for t, _, _ in tasklets(body) for m, _ in t.outputs]
        written += [(n.line, n.out) for n, _ in walk(body) if isinstance(getattr(n, "out", None),
                                                                         str)]
        for line, data in written:
            if data in names:
                raise KernelSyntaxError(f"{labels.get(data, data)!r} is an array from "
                                        "outside the kernel (a module-level array or an "
                                        "object's attribute) and is written here; kernels "
                                        "only read such arrays: pass it as an argument to "
                                        "write it", self.src.filename, line, 1)

    def block(self, stmts, top=False):
        elements, mark = [], self.binds.mark()
        stmts, k = list(stmts), -1
        while k + 1 < len(stmts):
            k += 1
            stmt = stmts[k]
            if top and k == 0 and _is_docstring(stmt):
                continue
            taken = self._decided_branch(stmt)
            if taken is not None:       # `if stages == 4:` with a constant: as Python runs it
                returns = bool(taken) and isinstance(taken[-1], ast.Return)
                stmts[k:k + 1 if not returns else len(stmts)] = taken    # the rest: dead
                k -= 1
                continue
            if isinstance(stmt, ast.Try):   # what runs when the body raises nothing
                stmts[k:k + 1] = self._without_handlers(stmt)
                k -= 1
                continue
            copies = self.unrolled(stmt)
            if copies is not None:      # `for kr in range(2)` deciding slice ends: unrolled
                stmts[k:k + 1] = copies
                k -= 1
                continue
            chosen = _returned_value(stmts[k:]) if top and isinstance(stmt, ast.If) else None
            if chosen is not None:      # `if c: return a` / `else: return b`: one return
                stmts[k:] = [ast.copy_location(ast.Return(chosen), stmt)]
                stmt = stmts[k]
            if isinstance(stmt, ast.Return) and not (top and k == len(stmts) - 1):
                raise self.src.error(stmt, "`return` must be the last statement of the kernel")
            guarded = _guarded_choice(stmt, self.scope, self.int_locals)
            if guarded is not None:     # `y[i] = x[i + 1] if i < n - 1 else 0.0`
                stmts[k:k + 1] = [guarded]
                k -= 1
                continue
            inlined = inline_selection(stmts, k, lambda n: ArrayBuilder(ExpressionBuilder(
                self, self.scope))._is_mask(n), self.src.tree)
            if inlined is not None:     # `v = data[m]`: its uses read the selection itself
                stmts[k + 1:] = inlined
                continue
            elements.extend(self.statement(stmt))
            if k + 1 < len(stmts) and self.may_jump(stmt):
                elements.append(self.unless_jumped(self.block(stmts[k + 1:])))
                break
        elements += self.binds.close(self, mark)      # aliases made in this block end
        return Sequence(tuple(elements))

    def statement(self, stmt):
        method = getattr(self, "_stmt_" + type(stmt).__name__, None)
        if method is None:
            raise self.src.error(stmt, f"statement `{_first_line(stmt)}` "
                                       f"({type(stmt).__name__}) is not supported in kernels; "
                                       "see docs/kernel-language.md")
        self.call_roots = set()
        changed = self._static_update(stmt)
        if changed is not None:
            return changed
        stmt = self._substituted(stmt)
        try:
            return method(stmt)
        except ZeroDivisionError:       # constant arithmetic: 1 // 0, 0.0 / 0.0
            raise self.src.error(stmt, f"`{_first_line(stmt)}` divides by zero") from None

    def _substituted(self, stmt):
        """``stmt`` with the names bound to values known when compiling (statics.py)
        written out; a compound statement's header only (its body is lowered in turn)."""
        if isinstance(stmt, (ast.If, ast.While)):
            return replace_field(stmt, "test", lists.substituted(
                self, statics.substituted(self, stmt.test)))
        if isinstance(stmt, ast.For):
            iter_ = lists.substituted(self, ast.copy_location(ast.For(
                stmt.target, statics.substituted(self, stmt.iter), [], []), stmt)).iter
            return replace_field(stmt, "iter", iter_)
        if isinstance(stmt, (ast.FunctionDef, ast.Try, ast.With)):
            return stmt
        return lists.substituted(self, statics.substituted(self, stmt))

    def _static_update(self, stmt):
        """``shape[2] += 2`` on a list known when compiling: the list changed, as
        Python changes it (every name for it sees the change), or None."""
        if isinstance(stmt, ast.AugAssign):
            target, value = stmt.target, ast.BinOp(_as_load(stmt.target), stmt.op, stmt.value)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        else:
            return None
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
            return None
        binding = self.scope.get(target.value.id)
        if not isinstance(binding, StaticValue):
            return None
        if not isinstance(binding.value, list):
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: {target.value.id!r} is a "
                                       f"{type(binding.value).__name__}, which does not "
                                       "support item assignment")
        self._check_static_change(stmt, target.value.id)
        ex = ExpressionBuilder(self, self.scope)
        try:
            key = statics.evaluate(ex, target.slice)
            new = statics.evaluate(ex, statics.substituted(self, ast.copy_location(value,
                                                                                   stmt)))
        except NotStatic:
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: {target.value.id!r} is a "
                                       "list known when compiling, and this is not a value "
                                       "known then (an integer, None, a slice, a tuple)") \
                from None
        try:
            binding.value[statics.python_key(ex, target, key)] = new
        except (IndexError, TypeError) as exc:
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: {exc}") from None
        return []

    def static_where(self):
        """Where a value known when compiling is bound: the loops and the branches of
        `if`s decided at run time around the statement."""
        return tuple(id(f) for f in self.loops), tuple(self.branches)

    def _check_static_change(self, stmt, name):
        """A value known when compiling changes where it was bound only: not under an
        `if` on data, nor in a loop, around its binding (Python's value would then depend
        on the data or the iteration)."""
        binding = self.scope.get(name)
        if isinstance(binding, StaticValue) and binding.where != self.static_where():
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: {name!r} holds a value known "
                                       "when compiling (None, a slice, a tuple or a list); it "
                                       "cannot change under an `if` on data or in a loop "
                                       "around its first assignment")

    def static_comparison(self, ex, node):
        """A comparison decided when compiling (statics.py), or None."""
        return statics.comparison(ex, node)

    def drop_statics(self):
        """After a loop body or an `if` on data: the values known when compiling bound
        inside are not known after it (Python's would be the data's or the last
        iteration's choice), so their names are unbound."""
        loops, branches = self.static_where()
        for name, v in list(self.scope.items()):
            if isinstance(v, StaticValue) and (v.where[0] != loops[:len(v.where[0])] or
                                               v.where[1] != branches[:len(v.where[1])]):
                del self.scope[name]

    def _bind_static(self, stmt, targets, value):
        """Bind the names ``targets`` to ``value`` when it is one known when compiling
        (True), or drop their bindings to earlier ones (False: lowered as usual)."""
        ex = ExpressionBuilder(self, self.scope)
        try:
            value = statics.static_value(ex, value)
        except NotStatic:
            for t in targets:
                if isinstance(t, ast.Name) and isinstance(self.scope.get(t.id), StaticValue):
                    self._check_static_change(stmt, t.id)
                    del self.scope[t.id]
            return False
        if isinstance(value, (tuple, list)) and all(isinstance(t, ast.Subscript)
                                                    for t in targets):
            return False            # A[0] = 0, 0: numbers stored into elements
        for t in targets:
            if not isinstance(t, ast.Name):
                raise self.src.error(stmt, f"`{_first_line(stmt)}`: {statics.kind(value)} "
                                           "is assigned to names only")
            if t.id in self.scope and not isinstance(self.scope[t.id], StaticValue):
                raise self.src.error(stmt, f"`{_first_line(stmt)}`: {t.id!r} names an array "
                                           f"or a number before this line, and here "
                                           f"{statics.kind(value)}; use another name")
            self._check_static_change(stmt, t.id)
            self.scope[t.id] = StaticValue(value, self.static_where())
        return True

    def _stmt_Pass(self, stmt):
        return []

    def _stmt_Refused(self, stmt):
        raise stmt.error()          # what outside.resolve refused, here reached

    def _stmt_Assert(self, stmt):
        """``assert`` on sizes and integers: checked once per call (a BoundsError with the
        message); on data or loop variables where Python checks it, in the generated
        code (``library/assertion.py``: AssertionFailed)."""
        ex = ExpressionBuilder(self, self.scope)
        cond = ex.condition(stmt.test)
        if cond is sp.false:
            raise self.src.error(stmt, f"`{_first_line(stmt)}` always fails")
        if cond is sp.true:
            return []
        if not isinstance(stmt.msg, (ast.Constant, type(None))):
            raise self.src.error(stmt.msg, f"`{_first_line(stmt)}`: an assert's message is a "
                                           "string constant in kernels")
        why = f"assert failed: `{ast.unparse(stmt.test)}`" + \
            (f": {stmt.msg.value}" if stmt.msg is not None else "")
        if not ex.reads and cond.free_symbols <= set(self.symbols):
            ArrayBuilder(ex).assume(stmt, cond, why)
            return []
        from ..library.assertion import Assertion
        line = stmt.lineno + self.src.first_line - 1
        flag = self.new_transient("__assert")
        return ex.prelude + [_flag_state(ex, cond, flag, line),
                             State((Assertion(flag.name, why, line),), f"assert_{line}")]

    def _stmt_Expr(self, stmt):
        if isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return []                                     # a string used as a comment
        if callee_of(self, stmt.value) is not None:      # other(A, x): inlined
            return call_statement(self, stmt)
        ex = ExpressionBuilder(self, self.scope)
        if ufunc_at(ex, stmt.value):                     # np.add.at(acc, idx, v)
            return scatter_at(ArrayBuilder(ex), stmt)
        store = _in_place_store(ex, stmt.value)
        if store is not None:                            # np.exp(x, out=y), y.fill(0.0)
            return self._stmt_Assign(ast.fix_missing_locations(ast.copy_location(store, stmt)))
        if isinstance(self.scope.get(lists.append_of(stmt)), lists.GrowingList):
            return lists.append(self, stmt)         # xs.append(v) in counted loops
        func = getattr(stmt.value, "func", None)
        if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert"):
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: kernels grow the lists they "
                                       "make (`Ps = []`) by `append` only; make an array of its "
                                       "final length and store each value (`Ps = np.zeros(I)` "
                                       "... `Ps[i] = P`)")
        raise self.src.error(stmt, f"expression statement `{_first_line(stmt)}` has no effect "
                                   "in a kernel (calls with side effects such as print are not "
                                   "supported)" + plain_function_hint(self, stmt.value))

    def _stmt_FunctionDef(self, stmt):
        return self._define(stmt.name, stmt)

    def _define(self, name, node):
        """A function defined in the body: callable from here on, inlined at each call."""
        self._check_name(node, name)
        if name in self.scope:
            raise self.src.error(node, f"{name!r} names a value before this line; use another "
                                       "name for the function")
        func = local_function(self, node, name)
        self.src = replace(self.src, globals={**self.src.globals, name: func})
        return []

    def _stmt_Assign(self, stmt):
        first, *more = stmt.targets
        grown = lists.grown_lists(self.src.tree, stmt)
        if grown:                                   # Ps = [], Ps, hist = [], []
            out = []
            for name, value in grown:
                self._check_name(stmt, name.id)
                self.scope[name.id] = lists.GrowingList(self, name.id, stmt)
                out += [r for e in getattr(value, "elts", ())      # hist = [u.copy()]
                        for r in lists.append(self, lists.appending(name.id, e))]
            return out
        if len(stmt.targets) == 1 and isinstance(first, ast.Name) and \
                isinstance(self.scope.get(first.id), lists.GrowingList):
            del self.scope[first.id]                # xs = np.array(xs): another value
        if isinstance(stmt.value, ast.Lambda) and len(stmt.targets) == 1 and \
                isinstance(first, ast.Name):
            return self._define(first.id, stmt.value)     # f = lambda x: ...
        if len(stmt.targets) == 1 and isinstance(first, ast.Name) and \
                self._indices_where(stmt.value):           # i = np.where(x < 0): a mask
            stmt = indices_as_mask(ArrayBuilder(ExpressionBuilder(self, self.scope)),
                                   self.src.tree, stmt)
        tuples = [t for t in stmt.targets if isinstance(t, (ast.Tuple, ast.List))]
        if tuples and len(tuples) < len(stmt.targets):
            raise self.src.error(stmt, "a chained assignment with a tuple among its targets "
                                       "assigns tuples only (`a, b = c, d = ...`)")
        if tuples:
            return self._unpack(stmt, [t.elts for t in tuples], stmt.value)
        for t in stmt.targets:
            if more and not isinstance(t, (ast.Name, ast.Subscript)):
                raise self.src.error(stmt, "a chained assignment `x = y = ...` assigns "
                                           "names, subscripts or tuples of them; not "
                                           f"`{ast.unparse(t)}`")
        return self._chain(stmt, stmt.targets)

    def _indices_where(self, value):
        """Whether ``value`` is ``np.where(c)`` or ``np.nonzero(c)``: one argument."""
        return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
            value.func.attr in ("where", "nonzero") and len(value.args) == 1 and \
            not value.keywords and \
            ExpressionBuilder(self, self.scope)._module(value.func.value) is np

    def _chain(self, stmt, targets):
        """``x = y = expr`` (or one target): expr evaluated once, every target assigned it."""
        if self._bind_static(stmt, targets, stmt.value):
            return []
        names = [t for t in targets if isinstance(t, ast.Name)]
        if not names and len(targets) > 1:      # A[i] = B[i] = expr: a hidden name holds it
            self.call_roots = {id(stmt.value)}
            self._counter += 1
            regions, result = store_value(self, stmt, stmt.value, f"__chained{self._counter}",
                                          keep_views=True)
            return regions + assign_results(self, stmt, targets, [result] * len(targets))
        # The first name gets expr and the others read it: a name holds the value itself (a
        # number, or one array that every name is bound to), where `y = A[:]` would not.
        source = names[0] if names else targets[0]
        regions = self._assign(stmt, source, stmt.value, None)
        for target in targets:
            if target is not source:
                regions += self._assign(stmt, target, _as_load(source), None)
        return regions

    def _unpack(self, stmt, tuples, value):
        """``a, b = b, a``, ``n, m = A.shape``, ``a, b = f(...)``, and chains of them
        (``a, b = c, d = ...``: ``tuples`` holds each tuple's targets): every value is
        evaluated once, into a hidden name, before the targets are assigned left to right
        (Python's order)."""
        targets = [t for elts in tuples for t in elts]
        if any(not isinstance(t, (ast.Name, ast.Subscript)) for t in targets):
            raise self.src.error(stmt, "unpack into names or subscripts (`a, b = ...`; no "
                                       "nesting or starred targets)")
        if len({len(elts) for elts in tuples}) > 1:
            raise self.src.error(stmt, f"`{_first_line(stmt)}` unpacks one value into tuples "
                                       "of different lengths")
        if callee_of(self, value) is not None:
            return unpack_call(self, stmt, tuples)       # a, b = other(...)
        values = self._unpacked_values(stmt, value, len(tuples[0]))
        columns = list(zip(*tuples))                    # the targets each value goes to
        known = [self._bind_static(stmt, list(col), v) for col, v in zip(columns, values)]
        if all(known):
            return []
        if any(known):
            raise self.src.error(stmt, f"`{_first_line(stmt)}` unpacks values known when "
                                       "compiling (None, slices, tuples) with others; "
                                       "assign them in statements of their own")
        # An array name rebound here is stored in place: a value viewing it must be a copy.
        rebound = {b.container.name for b in (self.scope.get(t.id) for t in targets
                                              if isinstance(t, ast.Name))
                   if isinstance(b, DataValue) and not b.container.is_scalar}
        regions, results = [], []
        for col, node in zip(columns, values):
            if any(isinstance(t, ast.Name) and t.id in self.int_locals for t in col):
                ex = ExpressionBuilder(self, self.scope)
                results.append(_Index(ex.index(node, f"integer local {col[0].id!r}")))
                continue
            self._counter += 1
            name = f"__unpacked{self._counter}"
            more, result = store_value(self, stmt, node, name, keep_views=True)
            if result.kind == "view" and result.view.container.name in rebound:
                more, result = store_value(self, stmt, node, name, keep_views=False)
            regions, results = regions + more, results + [result]
        for elts in tuples:
            regions += assign_results(self, stmt, elts, results)
        return regions

    def _unpacked_values(self, stmt, value, count):
        """The value nodes of ``targets = value``: a tuple's elements or ``A.shape[k]``."""
        elements = statics.expanded(ExpressionBuilder(self, self.scope), value)
        if elements is not None:        # (f(a) for a in (x, y)): f(x), f(y)
            values = elements
        elif isinstance(value, ast.Attribute) and value.attr == "shape":
            rank = ArrayBuilder(ExpressionBuilder(self, self.scope)).expr(value.value).rank
            values = [_item(value, k) for k in range(rank)]
        elif isinstance(value, (ast.Tuple, ast.List)) and \
                not any(isinstance(e, ast.Starred) for e in value.elts):
            values = value.elts
        elif (elements := tuple_elements(ArrayBuilder(ExpressionBuilder(self, self.scope)),
                                         value)) is not None:
            values = [_item(value, k) for k in range(len(elements))]    # np.meshgrid(x, y)
        elif isinstance(value, (ast.Name, ast.Subscript, ast.Attribute, ast.Call, ast.BinOp,
                                ast.UnaryOp)):
            values = self.rows(stmt, value, count)      # an array's rows
        else:
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: unpack a tuple of values "
                                       "(`a, b = b, a`), an array's rows, `A.shape` or a "
                                       "kernel call")
        if len(values) != count:
            raise self.src.error(stmt, f"`{_first_line(stmt)}` unpacks {len(values)} value"
                                       f"{'s' if len(values) != 1 else ''} into {count} names")
        return values

    def rows(self, stmt, value, count):
        """``x, y, z = A`` (and ``f(*A)``): A[0], A[1], A[2], with len(A) == 3 checked per
        call."""
        b = ArrayBuilder(ExpressionBuilder(self, self.scope))
        v = b.expr(value)
        if not v.rank:
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: unpack a tuple of values "
                                       "(`a, b = b, a`), an array's rows, `A.shape` or a "
                                       "kernel call; this is a single number")
        b.agree(stmt, v.shape[0], sp.Integer(count), v.shape, (count,),
                "array and names")
        return [_item(value, k) for k in range(count)]

    def _stmt_AugAssign(self, stmt):
        if type(stmt.op) not in AUG_OPS:
            raise self.src.error(stmt, f"augmented assignment `{_first_line(stmt)}`: only "
                                       "+=, -=, *=, /=, //=, %=, &=, |=, ^=, <<= and >>= "
                                       "are supported")
        return self._assign(stmt, stmt.target, stmt.value, AUG_OPS[type(stmt.op)])

    def _stmt_AnnAssign(self, stmt):
        if stmt.value is None:
            return []
        return self._assign(stmt, stmt.target, stmt.value, None)

    def _assign(self, stmt, target, value, op):
        # A call that writes the caller's arrays may be the whole value (calls.py), not for
        # `A[i] += f(A)`: Python reads A[i] before the call.
        self.call_roots = {id(value)} if op is None or isinstance(target, ast.Name) else set()
        if isinstance(target, ast.Name) and target.id in self.int_locals:
            return self._bind_int_local(stmt, target, value, op)
        lowered = assign_arrays(self, stmt, target, value, op)     # slices, whole arrays
        if lowered is not None:
            return lowered
        ex = ExpressionBuilder(self, self.scope)
        if isinstance(target, ast.Subscript):
            container, subset = ex.memlet_for(target)
            if not container.transient and self._argument(container.name).kind == "float":
                raise self.src.error(target, f"{container.name!r} is a scalar")
        elif isinstance(target, ast.Name):
            container = self._scalar_target(target)
            subset = ()
        else:
            raise self.src.error(target, f"cannot assign to `{ast.unparse(target)}`")
        if container.dtype.kind == "b":
            rhs = number_of(self._logical_value(stmt, ex, container, subset, value, op))
        else:
            rhs = ex.value(value)
            if op is not None:
                rhs = op(ex._read(container.name, subset), rhs)
        if isinstance(target, ast.Name) and target.id not in self.scope:
            self.scope[target.id] = DataValue(container)
            self.binds.bind(target.id, container.name)
        out = Memlet(container.name, subset)
        inputs = tuple((conn, Memlet(d, s)) for (d, s), conn in ex.reads.items())
        state = State((Tasklet(inputs, ((out, rhs),), stmt.lineno + self.src.first_line - 1),),
                      f"line_{stmt.lineno + self.src.first_line - 1}")
        return ex.prelude + [state]

    def _logical_value(self, stmt, ex, container, subset, value, op):
        """The condition an element of a bool array is set to: ``m[i] = x[i] > 0``, and
        ``m[i] &= ...``, ``|=``, ``^=`` (logical on bools, as NumPy's)."""
        new = ex.condition(value)
        if op is None:
            return new
        logical = LOGICAL.get(type(stmt.op))
        if logical is None:
            raise self.src.error(stmt, f"`{_first_line(stmt)}`: "
                                       f"`{ast.unparse(stmt.target.value)}` is a bool "
                                       "array; update it with &=, |= or ^=")
        return fp.logical(logical)(sp.Ne(ex._read(container.name, subset), 0), new)

    def _scalar_target(self, target):
        binding = self.scope.get(target.id)
        if isinstance(binding, IntValue):
            raise self.src.error(target, f"cannot assign to {target.id!r}: it is a loop "
                                         "variable, a size or an int argument")
        if isinstance(binding, DataValue):
            return binding.container
        if target.id in self.containers:
            return self.containers[target.id]
        self._check_name(target, target.id)
        raise self.src.error(target, f"cannot assign to {target.id!r}")

    def _bind_int_local(self, stmt, target, value, op):
        if op is not None:
            raise self.src.error(stmt, f"integer local {target.id!r} is updated in place; "
                                       "compute it from the loop variables instead")
        ex = ExpressionBuilder(self, self.scope)
        self.scope[target.id] = IntValue(ex.index(value, f"integer local {target.id!r}"))
        return []

    def _without_handlers(self, stmt):
        """``try:`` as the statements Python runs when its body raises nothing: the body,
        ``else:``, ``finally:``. A kernel raises nothing its code could catch (arithmetic
        gives inf and nan, as C's; bad indices and shapes are errors before it runs), so
        the handlers are never lowered (``except: K = dot(P, 1. / S)``, ``print(x); raise``)."""
        if stmt.finalbody and any(isinstance(n, ast.Return) for s in stmt.body + stmt.orelse
                                  for n in ast.walk(s)):
            raise self.src.error(stmt, "a `return` inside `try:` with `finally:` (which Python "
                                       "runs before returning); return after the try statement")
        return stmt.body + stmt.orelse + stmt.finalbody

    def _decided_branch(self, stmt):
        """The statements an ``if`` runs when its condition is known when compiling (an
        integer condition of constants: a default, a module-level number; or of sizes and
        int arguments, as the call being compiled decides it), else None: the branch not
        taken is never lowered, as Python never runs it (``if NR == NM:`` choosing
        between shapes)."""
        if not isinstance(stmt, ast.If) or _guards_data(stmt.test, self.scope):
            return None
        ex = ExpressionBuilder(self, self.scope)
        try:
            cond = ex.condition(stmt.test)
        except KernelSyntaxError:
            return None                 # _stmt_If reports it
        if ex.reads or ex.prelude:
            return None
        if cond not in (sp.true, sp.false):
            cond = ex.at_call(stmt.test, cond, lambda taken: (
                f"`{ast.unparse(stmt.test)}` is {taken} at these sizes, as it was where "
                "this specialisation was compiled"))
        if cond is None:
            return None
        return list(stmt.body if cond is sp.true else stmt.orelse)

    def _stmt_If(self, stmt):
        line = stmt.lineno + self.src.first_line - 1
        before, cond = self._test(stmt.test, line)
        copies_, copies = self.binds.own_copies(self, stmt.body + stmt.orelse, line)
        token = self.binds.token()
        with self.binds.region("if", token, 0):
            self.branches.append((id(stmt), 0))
            body = self.block(stmt.body)
            self.branches.pop()
            self.drop_statics()
            body = Sequence(body.elements + tuple(self.binds.materialize(self, stmt.orelse,
                                                                         line)))
            branches = [(cond, body)]
        if stmt.orelse:
            with self.binds.region("if", token, 1):
                self.branches.append((id(stmt), 1))
                branches.append((None, self.block(stmt.orelse)))
                self.branches.pop()
                self.drop_statics()
        self.binds.check_copies(self.src, copies, [body for _, body in branches])
        return before + copies_ + [ConditionalRegion(tuple(branches), line)]

    def _test(self, test, line):
        """(states, condition) of a test: an integer condition as it is; a decision on
        data evaluated once into a flag, which the reverse sweep reads back (restored
        from the tape), never re-evaluating the condition."""
        if _guards_data(test, self.scope):
            flag = self.new_transient("__if")
            states, implied = self._decide(test, flag, line)
            return states, sp.And(*implied, sp.Ne(flag_symbol(flag.name), 0))
        ex = ExpressionBuilder(self, self.scope)
        cond = ex.condition(test)
        if not ex.reads:
            return ex.prelude, cond
        flag = self.new_transient("__if")
        return ex.prelude + [_flag_state(ex, cond, flag, line)], sp.Ne(flag_symbol(flag.name), 0)

    def _decide(self, test, flag, line):
        """(states setting ``flag`` to whether ``test`` holds, integer conditions that hold
        when it is set). The operands of `and`/`or` are read only as far as Python reads
        them: `i < N and A[i] > 0` reads A[i] in a branch taken when i < N, and the
        branches on the flag know that i < N, so the bounds checks see both."""
        test = _not_inward(test)
        if not isinstance(test, ast.BoolOp):
            ex = ExpressionBuilder(self, self.scope)
            cond = ex.condition(test)
            return ex.prelude + [_flag_state(ex, cond, flag, line)], [] if ex.reads else [cond]
        rest = test.values[1:]
        rest = rest[0] if len(rest) == 1 else ast.copy_location(ast.BoolOp(test.op, rest),
                                                                rest[0])
        both = isinstance(test.op, ast.And)
        states, first = self._test(test.values[0], line)
        then, implied = self._decide(rest, flag, line)
        go = first if both else sp.Not(first)          # the rest decides
        known = [c for c in sp.And.make_args(first)
                 if not condition_containers(c, self.containers)]
        return (states + [self._set(flag, 0 if both else 1, line),
                          ConditionalRegion(((go, Sequence(tuple(then))),), line)],
                known + implied if both else [])

    def _stmt_Return(self, stmt):
        if getattr(self, "returning", None) is not None:    # an inlined callee's (calls.py)
            return self.returning(stmt)
        if stmt.value is None:
            return []
        return lower_return(self, stmt, RESULT)     # a number, an array or a tuple

    def _argument(self, name):
        return next(a for a in self.arguments if a.name == name)


def _flag_state(ex, cond, flag, line):
    """``flag = 1 if cond else 0``, reading what ``ex`` read."""
    inputs = tuple((conn, Memlet(d, s)) for (d, s), conn in ex.reads.items())
    decide = fp.select(sp.Integer(1), cond, sp.Integer(0))
    return State((Tasklet(inputs, ((Memlet(flag.name), decide),), line),), f"if_{line}")


def _guarded_choice(stmt, scope, int_locals):
    """``y[i] = x[i + 1] if i < n - 1 else 0.0`` as ``if i < n - 1: y[i] = x[i + 1]`` /
    ``else: y[i] = 0.0``, or None: Python evaluates only the branch an integer test picks,
    so a branch reading an element may be out of bounds where it is not taken; as an ``if``
    each branch's indices are proven under its condition. A test on data stays a select."""
    if not isinstance(stmt, (ast.Assign, ast.AugAssign)) or any(
            isinstance(t, ast.Name) and t.id in int_locals
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
        return None                 # an integer local's choice is a Piecewise index
    nodes = list(ast.walk(stmt.value))
    at = next((j for j, n in enumerate(nodes) if isinstance(n, ast.IfExp)), None)
    if at is None or not _integer_test(nodes[at].test, scope) or \
            not any(_reads_element(b) for b in (nodes[at].body, nodes[at].orelse)):
        return None

    def taking(branch):
        copied = copy.deepcopy(stmt)
        choice = list(ast.walk(copied.value))[at]

        class Pick(ast.NodeTransformer):
            def visit_IfExp(self, node):
                return getattr(node, branch) if node is choice else self.generic_visit(node)
        return ast.fix_missing_locations(Pick().visit(copied))
    return ast.copy_location(ast.If(nodes[at].test, [taking("body")], [taking("orelse")]), stmt)


def _reads_element(node):
    """Whether ``node`` reads an element of an array (a subscript without slices)."""
    for n in ast.walk(node):
        if isinstance(n, ast.Subscript):
            items = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if not any(isinstance(i, ast.Slice) for i in items):
                return True
    return False


def _guards_data(test, scope):
    """Whether an `and`/`or` in ``test`` has an integer operand before one reading data,
    which Python then reads only as the integer operand decides."""
    for node in ast.walk(test):
        if isinstance(node, ast.BoolOp):
            integer = [_integer_test(v, scope) for v in node.values]
            if any(integer[k] and not all(integer[k:]) for k in range(len(integer))):
                return True
    return False


def _integer_test(node, scope):
    """Whether a test reads no data, as far as its syntax shows: integer names and
    constants, sizes (``A.shape[k]``, ``len(A)``), arithmetic and comparisons of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int)
    if isinstance(node, ast.Name):
        return isinstance(scope.get(node.id), IntValue)
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        return name not in scope and (name == "len" or name in ("min", "max", "abs", "int")
                                      and all(_integer_test(a, scope) for a in node.args))
    if isinstance(node, (ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp)):
        return all(_integer_test(c, scope) for c in ast.iter_child_nodes(node)
                   if isinstance(c, ast.expr))
    return False


def _not_inward(test):
    """``not (a and b)`` as ``not a or not b`` (and ``or`` alike): the same order of
    evaluation, with the operator outermost."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) \
            and isinstance(test.operand, ast.BoolOp):
        op = ast.Or() if isinstance(test.operand.op, ast.And) else ast.And()
        values = [ast.copy_location(ast.UnaryOp(ast.Not(), v), v) for v in test.operand.values]
        return ast.copy_location(ast.BoolOp(op, values), test)
    return test


@dataclass(frozen=True)
class _Index:
    """An integer value of a tuple assignment, bound like a call's ``Returned``."""
    value: sp.Expr

    def binding(self, name, loops):
        return IntValue(self.value)


def replace_field(node, field, value):
    """A shallow copy of ``node`` with ``field`` set to ``value``."""
    node = copy.copy(node)
    setattr(node, field, value)
    return node


def _as_load(target):
    """The target ``x`` or ``A[i]`` of an assignment as an expression reading it."""
    node = copy.deepcopy(target)
    node.ctx = ast.Load()
    return node


def _index_expressions(body):
    """(expression, line) for every index, loop bound and condition of ``body``, and every
    tasklet value (integer arrays' elements in values read through indices too)."""
    for t, _, _ in tasklets(body):
        for _, m in t.inputs:
            yield from ((e, t.line) for e in m.subset)
        for m, e in t.outputs:
            yield from ((x, t.line) for x in (*m.subset, e))
    for region, _ in regions(body):
        if isinstance(region, LoopRegion):
            yield from ((e, region.line) for e in (region.start, region.stop, region.step)
                        if e is not None)
        elif isinstance(region, ConditionalRegion):
            yield from ((c, region.line) for c, _ in region.branches if c is not None)


def _is_docstring(stmt):
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def _first_line(stmt):
    return ast.unparse(stmt).splitlines()[0]


def _in_place_store(ex, call):
    """``y[...] = value`` for a call that writes an array it is given: a NumPy function
    with ``out=y`` (``np.exp(x, out=y)``, ``np.add(a, b, out=a)``), ``np.copyto(y, x)``,
    ``y.fill(v)``; None for other calls."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    func, every = call.func, ast.Subscript(value=None, slice=ast.Constant(Ellipsis),
                                           ctx=ast.Store())
    if func.attr == "fill" and len(call.args) == 1 and not call.keywords and \
            ex._module(func.value) is None:
        every.value, value = func.value, call.args[0]
    elif ex._module(func.value) is np and func.attr == "copyto" and len(call.args) == 2 \
            and not call.keywords:
        every.value, value = call.args
    else:
        out = [k for k in call.keywords if k.arg == "out"]
        if ex._module(func.value) is not np or len(out) != 1 or \
                not isinstance(out[0].value, (ast.Name, ast.Attribute, ast.Subscript)):
            return None
        every.value = out[0].value
        value = ast.Call(func=func, args=call.args,
                         keywords=[k for k in call.keywords if k.arg != "out"])
    return ast.Assign(targets=[every], value=value)


def parse(src, name, types, sizes=None) -> SDFG:
    """Lower the kernel's AST to an SDFG for the given argument types; ``sizes`` (symbol
    name -> the call's value) decides what the types leave open (``ArrayLowering.unit``).
    A loop whose body binds a name to an array whose shape varies with the iteration
    (``array_stores.temporary``: the error's ``unroll``) is lowered again from the start,
    unrolled at the call's trip count where the sizes decide it (``loops.unrolled``)."""
    unroll = frozenset()
    while True:
        try:
            return KernelBuilder(src, name, types, sizes, unroll).build()
        except KernelSyntaxError as exc:
            more = getattr(exc, "unroll", frozenset()) - unroll
            if not more:
                raise
            unroll |= more


def _item(value, k):
    """``value[k]``, every node of it at ``value``'s place in the source (errors name it)."""
    return ast.copy_location(ast.Subscript(value, ast.copy_location(ast.Constant(k), value),
                                           ast.Load()), value)


def _returned_value(stmts):
    """The value ``stmts`` return when they are only a choice of returns -- ``if c:
    return a`` then ``else: return b`` or a final ``return b``, ``elif`` chains too -- as
    one conditional expression ``a if c else b`` (Python evaluates only the branch it
    takes, as C's ``c ? a : b`` does); None for anything else."""
    if not stmts:
        return None
    first, rest = stmts[0], stmts[1:]
    if isinstance(first, ast.Return):
        return first.value                  # what follows a return never runs
    if not isinstance(first, ast.If):
        return None
    taken, other = _returned_value(first.body + rest), _returned_value(first.orelse + rest)
    if taken is None or other is None:
        return None
    return ast.copy_location(ast.IfExp(first.test, taken, other), first)
