"""Calls to other kernels (inlined) and the values functions return.

``y = other(A[1:], x, 2)`` where ``other`` is an ``adjoint.kernel`` is lowered in place:
the callee's body is lowered by the caller's builder, in a scope of its own, with

- arrays passed by reference: a name or a view (``A[1:]``, ``A.T``, ``A[i]``) binds the
  parameter to that memory, so the callee's writes go through to the caller's arrays;
  a computed array (``A + 1.0``) is stored in a temporary first;
- numbers passed by value: an integer expression becomes the callee's integer (usable in
  ``range`` and indices), a float is copied into a scalar of the callee;
- the callee's locals renamed apart (``s`` -> ``s_<k>``), so they never meet the caller's;
- its sizes bound to the caller's sizes by unifying the declared shapes with the
  arguments' (what cannot be proven equal is checked once per call, like ``A + B``).

The callee's ``return`` value is the call's value: a number (a scalar), an array (a
view when the callee returns memory it was given, a temporary otherwise), or a tuple of
them, which the caller unpacks (``a, b = other(...)``). Everything the callee generates
carries the line of the call, so bounds errors name the caller's line; syntax errors
in the callee name the callee's own line and say where it was called from.

A kernel's own ``return`` may likewise be a number, an array or a tuple: each value goes
to a container ``__return`` (one value) or ``__return0``, ``__return1``, ... (a tuple);
see :func:`lower_return`.
"""
import ast
import copy
import inspect
import math
import sys
import weakref
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import sympy as sp

from ..errors import KernelSyntaxError
from ..sdfg import (ConditionalRegion, Container, LoopRegion, MapScope, Memlet, Sequence,
                    State, Tasklet)
from ..sdfg.nodes import library_nodes, tasklets
from ..types import ArrayType
from .array_shapes import ArrayExpr, MaskValue, View, ViewValue, fmt_shape, number, \
    without_view
from .array_stores import store, stored_dtype, stored_value, tasklet_body, temporary
from .arrays import ArrayBuilder
from .expressions import DataValue, ExpressionBuilder, IntValue
from .locals import classify_locals, is_integer_expression
from .statics import NotStatic, StaticValue, static_value
from .outside import MATH_NAME, NUMPY_NAME, as_library_calls, bind_arrays, \
    function_value, integer_names, library_function
from .source import KernelFunction, function_tree, is_registered, read_source, register_source

FLOAT64 = np.dtype(np.float64)


@dataclass(frozen=True)
class Returned:
    """One value a callee returned, independent of the builder that will read it."""
    kind: str                           # "scalar", "int", "array" (a temporary) or "view"
    container: Optional[Container] = None
    view: Optional[View] = None
    shape: tuple = ()
    boolean: bool = False
    value: object = None                # an "int": the integer expression

    def expr(self, b) -> ArrayExpr:
        """The value as an ArrayExpr read through the ArrayBuilder ``b``."""
        if self.kind == "int":
            return ArrayExpr((), lambda index: self.value)
        if self.kind == "scalar":
            name = self.container.name
            return ArrayExpr((), lambda index: b.ex._read(name, ()))
        if self.kind == "view":
            return b.load(self.view, self.shape, self.boolean)
        return without_view(b.container(self.container, self.boolean))

    def binding(self, name, loops):
        """What a name bound to this value is (tuple unpacking)."""
        if self.kind == "int":
            return IntValue(self.value)
        if self.kind == "view":
            return ViewValue(name, self.view, self.shape, self.boolean, loops)
        return (MaskValue if self.boolean else DataValue)(self.container)


@dataclass
class _Inlined:
    node: ast.Call
    regions: list
    results: Optional[tuple]       # None: the callee returns nothing
    receivers: list                # ExpressionBuilders whose prelude holds the regions


# ---- hooks ----------------------------------------------------------------------------------
def callee_of(kernel, node):
    """The kernel that the call ``node`` calls, or None: an ``adjoint.kernel``, or a plain
    Python function of the program (``def``, source available), inlined the same way."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return None
    if node.func.id in kernel.scope:
        return None
    target = kernel.src.globals.get(node.func.id)
    if isinstance(target, KernelFunction):
        return target
    return _as_kernel(target) if _plain_function(target) else None


_KERNELS = weakref.WeakKeyDictionary()      # plain function -> its Kernel


def local_function(kernel, node, name):
    """``def name(...)`` or ``name = lambda ...`` in a kernel's body: a function object
    of the program (its defaults evaluated now, as Python does), whose source is that
    node; calls to it are inlined like any plain function's, seeing the names of the
    body that calls it as a closure does."""
    src = kernel.src
    if isinstance(node, ast.Lambda):
        node = ast.copy_location(ast.FunctionDef(name, node.args, [ast.copy_location(
            ast.Return(node.body), node.body)], [], None, None), node)
    elif node.decorator_list:
        raise src.error(node, f"`def {name}`: decorated functions inside a kernel are not "
                              "supported; define the function at module level")
    placed = ast.increment_lineno(copy.deepcopy(node), src.first_line - 1)
    namespace = dict(src.globals)
    try:
        exec(compile(ast.fix_missing_locations(ast.Module([placed], [])), src.filename,
                     "exec"), namespace)
    except Exception as exc:                     # a default that reads a local, ...
        raise src.error(node, f"`def {name}`: {type(exc).__name__}: {exc} (defaults of "
                              "functions inside a kernel may use only constants and "
                              "module-level names)") from None
    func = namespace[name]
    register_source(func, replace(src, tree=node))
    kernel.__dict__.setdefault("_closures", {})[func] = kernel.scope   # read at each call
    return func


def _as_kernel(func):
    if func not in _KERNELS:
        _KERNELS[func] = KernelFunction(func)
    return _KERNELS[func]


def is_function(value):
    """A value that is a function to the engine: a kernel or a plain function."""
    return isinstance(value, KernelFunction) or _plain_function(value)


def _plain_function(target):
    """A function of the user's program with readable source (a ``def``, a lambda, a bound
    method, a decorator's wrapper): not NumPy's, SciPy's or the standard library's own
    Python functions (those are the language's functions, or unsupported)."""
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        return False
    if is_registered(target):
        return True
    module = (getattr(target, "__module__", None) or "").split(".")[0]
    if module in LIBRARIES or module in sys.stdlib_module_names:
        return False
    return function_tree(target) is not None


LIBRARIES = {"numpy", "scipy", "sympy", "adjoint"}


def plain_function_hint(kernel, node):
    """For a call to a Python function that cannot be inlined: why."""
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id in (NUMPY_NAME, MATH_NAME):           # imported by name
        return (f"; `{func.attr}` has no Python source the engine can read (a builtin, a "
                "C extension or a library function): only Python functions defined in your "
                "program are inlined")
    if not isinstance(func, ast.Name) or func.id in kernel.scope:
        return ""
    if hasattr(kernel.src.globals.get(func.id), "__wrapped__"):
        return (f"; `{func.id}` is wrapped by a decorator whose wrapper has no Python "
                "source, and the engine would compile the function inside without what "
                "the decorator does: call the undecorated function, or write the "
                "decorator's work into the kernel")
    if callable(kernel.src.globals.get(func.id)):
        return (f"; `{func.id}` has no Python source the engine can read (a builtin, a C "
                "extension or a library function): only Python functions defined in your "
                "program are inlined")
    return ""


def call_value(ex, node):
    """The number a call to a kernel stands for in a scalar expression."""
    result = single_result(ex, node)
    if result.kind == "int":
        return result.value
    if result.kind != "scalar":
        raise ex.src.error(node, f"`{_short(node)}` returns an array of shape "
                                 f"{fmt_shape(result.shape)} where a single number is "
                                 "needed; index it or reduce it (np.sum, ...)")
    return ex._read(result.container.name, ())


def call_index(ex, node, what):
    """The integer a call stands for in an index (``F[i, md(i + 1)]``): the callee must
    return an integer expression and do nothing else."""
    result = single_result(ex, node)
    done = ex.kernel._inlined[id(node)]
    if result.kind != "int" or any(_written(r) for r in done.regions):
        raise ex.src.error(node, f"{what} must be an integer expression; `{_short(node)}` "
                                 "returns a number that is not one (only functions returning "
                                 "an integer expression of their integer arguments are "
                                 "indices)")
    return result.value


def returns_integer(kernel, call, k, int_params=False):
    """Whether the function ``call`` calls returns an integer expression (element ``k`` of
    its returned tuple; None: its one value), as far as its source tells without the
    call's arguments (``int_params``: given integers for all of them): what
    classify_locals asks of ``n, m = f(...)``."""
    func = kernel.src.globals.get(call.func.id) if isinstance(call.func, ast.Name) else None
    func = func.__wrapped__ if hasattr(func, "py_func") else func
    if not _plain_function(func):
        return False
    src = read_source(func)
    tree = src.tree
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Return) or last.value is None:
        return False
    value = last.value
    if k is not None:
        if not isinstance(value, ast.Tuple) or len(value.elts) <= k:
            return False
        value = value.elts[k]
    depth = kernel.__dict__.setdefault("_classifying", [0])
    if depth[0] > 8:                            # recursion: not followed
        return False
    depth[0] += 1
    try:
        asks = lambda c, j: returns_integer(kernel, c, j)       # noqa: E731
        params = {a.arg for a in tree.args.args}
        outer = integer_names(src) | (params if int_params else set())
        ints, _ = classify_locals(tree, outer, params, asks)
        return is_integer_expression(value, ints | outer, asks)
    finally:
        depth[0] -= 1


def call_expr(b, node) -> ArrayExpr:
    """The value of a call to a kernel inside an array expression; a tuple it returns is
    an array as NumPy makes one of it (``np.asarray(f(x))``: its values stacked)."""
    parts = call_parts(b, node)
    if len(parts) == 1:
        return parts[0]
    from .array_calls import stacked
    return stacked(b, node, parts, 0)


def call_parts(b, node):
    """The values a call returns (``np.stack(f(x))``), as ArrayExprs."""
    results = inline(b.ex, node)
    if results is None:
        raise b.src.error(node, f"`{_short(node)}` returns nothing, so it has no value; "
                                "call it as a statement of its own")
    return [r.expr(b) for r in results]


class CallLowering:
    """The kernel builder's part from this module (``statements.KernelBuilder`` composes
    it): calls met inside the expressions that the modules below this one lower
    (expressions.py, arrays.py), which reach them through ``ex.kernel``."""

    def callee_of(self, node):
        return callee_of(self, node)

    def returns_integer(self, call):
        """Whether ``call`` returns an integer expression given integer arguments."""
        return isinstance(call.func, ast.Name) and returns_integer(self, call, None, True)

    def forget_call(self, call):
        """Drop what inlining ``call`` recorded (a trial that did not give an integer)."""
        self.__dict__.get("_inlined", {}).pop(id(call), None)

    def call_value(self, ex, node):
        return call_value(ex, node)

    def call_index(self, ex, node, what):
        return call_index(ex, node, what)

    def call_expr(self, b, node):
        return call_expr(b, node)

    def call_parts(self, b, node):
        return call_parts(b, node)

    def plain_function_hint(self, node):
        return plain_function_hint(self, node)


def single_result(ex, node):
    results = inline(ex, node)
    if results is None:
        raise ex.src.error(node, f"`{_short(node)}` returns nothing, so it has no value; "
                                 "call it as a statement of its own")
    if len(results) != 1:
        raise ex.src.error(node, f"`{_short(node)}` returns {len(results)} values; unpack "
                                 f"them: `{', '.join(f'v{k}' for k in range(len(results)))} "
                                 f"= {_short(node)}`")
    return results[0]


def call_statement(kernel, stmt):
    """``other(A, x)`` as a statement: the callee's effects, its value dropped."""
    kernel.call_roots = {id(stmt.value)}
    ex = ExpressionBuilder(kernel, kernel.scope)
    inline(ex, stmt.value)
    return ex.prelude


def unpack_call(kernel, stmt, tuples):
    """``a, b = other(...)`` (``tuples``: the targets of each tuple, ``a, b = c, d =
    other(...)`` in a chain): each target assigned one of the returned values."""
    targets = tuples[0]
    kernel.call_roots = {id(stmt.value)}
    ex = ExpressionBuilder(kernel, kernel.scope)
    results = inline(ex, stmt.value)
    count = 0 if results is None else len(results)
    if count != len(targets):
        raise kernel.src.error(stmt, f"`{_short(stmt.value)}` returns {count} value"
                                     f"{'s' if count != 1 else ''}, unpacked into "
                                     f"{len(targets)} names")
    return ex.prelude + [r for elts in tuples for r in assign_results(kernel, stmt, elts,
                                                                      results)]


def assign_results(kernel, stmt, targets, results):
    """``target_k = result_k`` through hidden names bound to the results."""
    regions, hidden = [], []
    loops = tuple(getattr(kernel, "loops", ()))
    for target, result in zip(targets, results):
        kernel._counter += 1
        name = f"__value{kernel._counter}"
        kernel.scope[name] = result.binding(name, loops)
        hidden.append(ast.copy_location(ast.Name(name, ast.Load()), target))
    try:
        for target, value in zip(targets, hidden):
            regions += kernel._assign(stmt, target, value, None)
    finally:
        for value in hidden:
            kernel.scope.pop(value.id, None)
    return regions


# ---- returns --------------------------------------------------------------------------------
def lower_return(kernel, stmt, result_name):
    """A kernel's ``return``: each value stored in ``result_name`` (one value) or
    ``result_name0``, ``result_name1``, ... (a tuple). Sets ``kernel.returns`` and, when the
    kernel returns one number, ``kernel.result`` (the loss ``grad`` differentiates)."""
    value = stmt.value
    if callee_of(kernel, value) is not None:          # return other(...): its values
        kernel.call_roots = {id(value)}
        ex = ExpressionBuilder(kernel, kernel.scope)
        results = inline(ex, value)
        if results is None:
            raise kernel.src.error(stmt, f"`{_short(value)}` returns nothing")
        regions, names = ex.prelude, _result_names(result_name, len(results), len(results) == 1)
        out = []
        for name, result in zip(names, results):
            b = ArrayBuilder(ExpressionBuilder(kernel, kernel.scope))
            more, r = _store(b, stmt, value, result.expr(b), name, keep_views=False)
            regions, out = regions + more, out + [r]
        return _returned(kernel, names, out, regions, stmt)
    single = not isinstance(value, ast.Tuple)
    elements = [value] if single else value.elts
    if any(isinstance(e, ast.Starred) for e in elements):
        raise kernel.src.error(stmt, "starred values in `return` are not supported")
    regions, results = [], []
    names = _result_names(result_name, len(elements), single)
    for name, element in zip(names, elements):
        kernel.call_roots = {id(element)}
        more, result = store_value(kernel, stmt, element, name, keep_views=False)
        regions += more
        results.append(result)
    return _returned(kernel, names, results, regions, stmt)


def _result_names(base, count, single):
    return [base] if single else [f"{base}{k}" for k in range(count)]


def _returned(kernel, names, results, regions, stmt=None):
    check_declared_return(kernel.src, stmt, results)
    kernel.returns = tuple(names)
    kernel.result = names[0] if len(names) == 1 and results[0].kind == "scalar" else None
    return regions


def check_declared_return(src, stmt, results):
    """``-> float`` promises one number: an array or a tuple contradicts it."""
    declared = src.tree.returns
    if not (isinstance(declared, ast.Name) and declared.id == "float"):
        return
    if len(results) != 1 or results[0].kind not in ("scalar", "int"):
        what = f"{len(results)} values" if len(results) != 1 else \
            f"an array of shape {fmt_shape(results[0].shape)}"
        raise src.error(stmt, f"{src.tree.name}() is declared `-> float` and returns {what}; "
                              "reduce it to a number (np.sum, ...) or change the annotation")


def store_value(kernel, stmt, node, name, keep_views):
    """Regions evaluating ``node`` into a new container ``name``: (regions, Returned).

    A number goes to a float64 scalar, an array to a float64 temporary of its shape; with
    ``keep_views`` an array that is memory (``A``, ``A[1:]``) is returned as that view."""
    b = ArrayBuilder(ExpressionBuilder(kernel, kernel.scope))
    return _store(b, stmt, node, stored_value(b, node), name, keep_views)


def _store(b, stmt, node, v, name, keep_views):
    line = b.line(stmt)
    if not v.rank:
        c = Container(name, FLOAT64, (), True)
        b.kernel.containers[name] = c
        inputs, body = tasklet_body(b.ex, lambda: number(v.at(())))
        state = State((Tasklet(inputs, ((Memlet(name), body),), line),), f"return_{line}")
        return b.ex.prelude + [state], Returned("scalar", c)
    if keep_views and v.view is not None:
        return b.ex.prelude, Returned("view", view=v.view, shape=v.shape, boolean=v.boolean)
    c = temporary(b, node, v.shape, None, name, stored_dtype(v))
    regions = [] if v.empty else \
        store(b, b.container(c, v.boolean), lambda p, old: number(v.at(p)), line)
    return b.ex.prelude + regions, Returned("array", c, shape=v.shape, boolean=v.boolean)


# ---- inlining -------------------------------------------------------------------------------
def inline(ex, node):
    """Lower the call ``node`` into ``ex.prelude`` (once per call site; the frontend may
    evaluate an expression twice, the second time into another builder) and return the
    callee's values as a tuple of :class:`Returned`, or None."""
    kernel = ex.kernel
    memo = kernel.__dict__.setdefault("_inlined", {})
    done = memo.get(id(node))
    if done is None or done.node is not node:
        callee = callee_of(kernel, node)
        regions, results = _Inliner(kernel, ex, node, callee).run()
        done = memo[id(node)] = _Inlined(node, regions, results, [])
    if not any(r is ex for r in done.receivers):
        ex.prelude.extend(done.regions)
        done.receivers.append(ex)
    return done.results


class _Inliner:
    """One call site: arguments bound, callee lowered, its values returned."""

    def __init__(self, kernel, ex, node, callee):
        self.kernel, self.ex, self.node, self.callee = kernel, ex, node, callee
        self.func = callee.__wrapped__
        self.name = callee.__name__
        self.caller = kernel.src
        self.line = node.lineno + kernel.src.first_line - 1
        self.prelude = []

    def run(self):
        try:
            src = read_source(self.func)
        except KernelSyntaxError as exc:    # a method writing self.count: name the call too
            raise _called_from(exc, self.name, self.caller, self.line) from None
        self._check_recursion(src)
        params = self._bind_parameters()
        src, params = _forwarded(src, params)
        functions = {p: f for p, f in ((p, self._function(a)) for p, a in params.items())
                     if f is not None}
        tree, renamed = _rename(src.tree, params, self._taken(src.tree), self.kernel)
        tree, names = as_library_calls(tree, {renamed[p]: f for p, f in functions.items()})
        callee_src = replace(src, tree=tree, renamed=src.renamed + tuple(renamed.items()),
                             globals={**src.globals, **names})
        unread = _unread(src, functions) - set(self._declared())
        params = {p: a for p, a in params.items()
                  if p not in functions and not (p in unread and _pure(a))}
        containers_before = set(self.kernel.containers)
        self.assigned = {n.id for n in ast.walk(src.tree)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        scope = self._arguments(params, renamed)
        bind_arrays(self.kernel, callee_src, scope)
        body, results = self._lower_body(callee_src, scope)
        self._check_effects(body, containers_before)
        return self.prelude + [_relocate(body, self.line)], results

    # ---- checks ------------------------------------------------------------------------
    def _check_recursion(self, src):
        stack = self.kernel.__dict__.setdefault("_call_stack", [_where(self.caller)])
        if _where(src) in stack:
            raise self.caller.error(self.node, f"`{_short(self.node)}`: {self.name}() calls "
                                               "itself (directly or through other kernels); "
                                               "recursion is not supported: write a loop")

    def _check_effects(self, body, before):
        """A call that writes the caller's arrays must be a statement's whole value."""
        written = _written(body) & before
        if written and id(self.node) not in getattr(self.kernel, "call_roots", ()):
            names = ", ".join(sorted(written))
            raise self.caller.error(self.node, f"`{_short(self.node)}` modifies {names}, so "
                                               "it must be called on its own: write "
                                               f"`r = {_short(self.node)}` (or the bare call) "
                                               "and use r")

    # ---- parameters --------------------------------------------------------------------
    def _starred(self, node, sig):
        """The call's positional arguments with one ``*A`` spread: a tuple's elements, or
        the rows of an array as many as the callee's positional parameters left (``aux(*x)``
        with ``def aux(x, y)``: x[0], x[1], with len(x) == 2 checked per call)."""
        stars = [k for k, a in enumerate(node.args) if isinstance(a, ast.Starred)]
        positional = [p for p in sig.parameters.values() if p.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        if not stars:
            if any(k.arg is None for k in node.keywords):
                raise self.caller.error(node, f"`{_short(node)}`: **kwargs in calls are not "
                                              "supported; pass each argument")
            return node.args
        if len(stars) > 1 or any(k.arg is None for k in node.keywords) or any(
                p.kind == inspect.Parameter.VAR_POSITIONAL for p in sig.parameters.values()):
            raise self.caller.error(node, f"`{_short(node)}`: one *A into a function of "
                                          "named parameters is supported, not more; pass "
                                          "each argument")
        k, value = stars[0], node.args[stars[0]].value
        named = {kw.arg for kw in node.keywords}
        count = len([p for p in positional[k:] if p.name not in named]) - \
            (len(node.args) - k - 1)
        if isinstance(value, (ast.Tuple, ast.List)):
            spread = value.elts
        elif count < 1:
            raise self.caller.error(node, f"`{_short(node)}`: {self.name}() has no parameter "
                                          "left for *" + ast.unparse(value))
        else:
            spread = self.kernel.rows(node, value, count)
        return node.args[:k] + list(spread) + node.args[k + 1:]

    def _bind_parameters(self):
        """{parameter: argument AST node} from the call's positional and keyword arguments."""
        node = self.node
        sig = inspect.signature(self.func, follow_wrapped=False)    # a wrapper's own
        args = self._starred(node, sig)
        try:
            bound = sig.bind(*args, **{k.arg: k.value for k in node.keywords})
        except TypeError as exc:
            raise self.caller.error(node, f"`{_short(node)}`: {exc}; {self.name}"
                                          f"{_signature_text(sig)}") from None
        bound.apply_defaults()
        out = {}
        for pname, value in bound.arguments.items():
            if sig.parameters[pname].kind in (inspect.Parameter.VAR_POSITIONAL,
                                              inspect.Parameter.VAR_KEYWORD) or \
                    function_value(value):
                out[pname] = value          # *args, **kwargs; a function as a default
            elif not isinstance(value, ast.AST):
                if value is not None and not isinstance(value, (int, float, str)):  # True: 1
                    raise self.caller.error(node, f"`{_short(node)}`: the default value "
                                                  f"{value!r} of {pname!r} is not a number, "
                                                  "a string or None")
                value = ast.copy_location(ast.Constant(value), node)
            out[pname] = value
        return out

    def _declared(self):
        """The callee's annotated types (a wrapper's are the function inside's: none)."""
        return {} if hasattr(self.func, "__wrapped__") else \
            {n: t for n, t in self.callee._declared.items() if t is not None}

    def _function(self, arg):
        """The function an argument is, or None: a lambda written in the call (a function
        of the caller's body), a name of a function (the caller's, the program's, a
        kernel), or a function-valued default."""
        if not isinstance(arg, ast.AST):
            return arg if function_value(arg) else None
        if isinstance(arg, ast.Lambda):
            self.kernel._counter += 1
            return local_function(self.kernel, arg, f"lambda_{self.kernel._counter}")
        if isinstance(arg, ast.Name) and arg.id not in self.kernel.scope:
            value = self.caller.globals.get(arg.id)
            if is_function(value) or library_function(value):
                return value
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and \
                arg.value.id not in self.kernel.scope:       # np.sin, math.exp
            module = self.caller.globals.get(arg.value.id)
            if module in (np, math) and library_function(getattr(module, arg.attr, None)):
                return getattr(module, arg.attr)
        return None

    def _taken(self, tree):
        names = set(self.kernel.containers) | set(self.kernel.scope)
        root = self.kernel.__dict__.setdefault("_root_tree", self.kernel.src.tree)
        for t in (root, tree):
            names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
            names |= {a.arg for a in ast.walk(t) if isinstance(a, ast.arg)}
        return names

    def _arguments(self, params, renamed):
        """The callee's scope: sizes, then each parameter bound to its argument."""
        b = ArrayBuilder(ExpressionBuilder(self.kernel, self.kernel.scope))
        scope = {f"<caller {k}>": v for k, v in self.kernel.scope.items()
                 if isinstance(v, IntValue)}         # keeps the caller's views in scope
        declared = self._declared()
        sizes = {}
        for pname, arg in params.items():
            scope[renamed[pname]] = self._argument(b, pname, renamed[pname],
                                                   declared.get(pname), arg, sizes)
        for name, expr in sizes.items():
            scope.setdefault(name, IntValue(expr))
        enclosing = self.kernel.__dict__.get("_closures", {}).get(self.func)
        if enclosing is not None:            # defined in a body: it sees that body's names
            free = {n.id for n in ast.walk(read_source(self.func).tree)
                    if isinstance(n, ast.Name) and n.id not in renamed}
            for name in free & set(enclosing):
                scope.setdefault(name, enclosing[name])
        self.prelude = b.ex.prelude
        return scope

    def _argument(self, b, pname, local, declared, arg, sizes):
        what = f"argument {pname!r} of {self.name}()"
        try:                                # None, a slice, a tuple: known when compiling
            return StaticValue(static_value(b.ex, arg), self.kernel.static_where())
        except NotStatic:
            pass
        if declared is int:
            return IntValue(b.ex.index(arg, what))
        v = b.expr(arg)
        if isinstance(declared, ArrayType) or (declared is None and v.rank):
            return self._array_argument(b, what, local, declared, arg, v, sizes)
        if v.rank:
            raise self.caller.error(arg, f"{what} is declared a number, and "
                                         f"`{_short(arg)}` is an array of shape "
                                         f"{fmt_shape(v.shape)}")
        inputs, value = tasklet_body(b.ex, lambda: number(v.at(())))
        if declared is None and not inputs and value.is_integer and pname not in self.assigned:
            return IntValue(value)          # an integer the callee only reads: substituted
        c = Container(local, FLOAT64, (), True)
        self.kernel.containers[local] = c
        b.ex.prelude.append(State((Tasklet(inputs, ((Memlet(local), value),), self.line),),
                                  f"call_{self.line}"))
        return DataValue(c)

    def _array_argument(self, b, what, local, declared, arg, v, sizes):
        if not v.rank:
            raise self.caller.error(arg, f"{what} is declared an array "
                                         f"({_declared_text(declared)}), and "
                                         f"`{_short(arg)}` is a single number")
        dtype = v.view.container.dtype if v.view is not None else FLOAT64
        if declared is not None:
            if len(declared.shape) != v.rank:
                raise self.caller.error(arg, f"{what} is declared {_declared_text(declared)}, "
                                             f"and `{_short(arg)}` has shape "
                                             f"{fmt_shape(v.shape)}")
            if declared.dtype != dtype:
                raise self.caller.error(arg, f"{what} is declared {_declared_text(declared)}, "
                                             f"and `{_short(arg)}` is {dtype}")
            self._unify(b, what, arg, declared.shape, v.shape, sizes)
        binding = self.kernel.scope.get(arg.id) if isinstance(arg, ast.Name) else None
        if isinstance(binding, DataValue) and not binding.container.is_scalar:
            return binding                  # the caller's array, view or mask itself
        if v.view is not None:
            if dtype.kind != "f":
                raise self.caller.error(arg, f"{what}: pass integer arrays whole "
                                             f"(`{ast.unparse(arg)}` is a part of one)")
            return ViewValue(local, v.view, v.shape, v.boolean, tuple(self.kernel.loops))
        c = temporary(b, arg, v.shape, None, local, stored_dtype(v))
        regions = store(b, b.container(c, v.boolean), lambda p, old: number(v.at(p)), self.line)
        b.ex.prelude.extend(regions)
        return (MaskValue if v.boolean else DataValue)(c)

    def _unify(self, b, what, arg, declared, actual, sizes):
        """Bind the declared sizes' symbols to the actual sizes; the rest must agree."""
        for d, n in zip(declared, actual):
            d = sp.sympify(d)
            if isinstance(d, sp.Symbol) and d.name not in sizes:
                sizes[d.name] = n
                continue
            loose = [s for s in d.free_symbols if s.name not in sizes]
            if loose:
                raise self.caller.error(arg, f"{what}: cannot tell the size {d} of its "
                                             "declared shape from the arguments")
            d = d.subs({s: sizes[s.name] for s in d.free_symbols}, simultaneous=True)
            b.agree(self.node, d, n, tuple(declared), tuple(actual),
                    f"declared and passed array for {what}")

    # ---- body --------------------------------------------------------------------------
    def _lower_body(self, src, scope):
        k = self.kernel
        saved = (k.src, k.scope, getattr(k, "call_roots", set()), getattr(k, "returning", None))
        k._call_stack.append(_where(src))
        assumptions = len(k.arrays.assumptions)
        returned = []

        def returning(stmt):            # the callee's `return`: its values, not the kernel's
            if stmt.value is None:
                return []
            regions, results = self._returns(stmt)
            returned.append(results)
            return regions
        try:
            k.src, k.scope, k.returning = src, scope, returning
            int_names = {n for n, v in scope.items() if isinstance(v, IntValue)}
            ints, floats = classify_locals(src.tree, int_names | integer_names(src), set(scope),
                                           lambda c, j: returns_integer(k, c, j))
            k.int_locals = set(k.int_locals) | ints
            for local in floats:
                k.containers.setdefault(local, Container(local, FLOAT64, (), True))
            k.arrays.count(src.tree)
            with k.binds.region("call"):            # the parameters are the callee's names
                for name in scope:
                    k.binds.bind(name)
                body = k.block(src.tree.body, top=True)
            return body, (returned[0] if returned else None)
        except KernelSyntaxError as exc:
            raise _called_from(exc, self.name, self.caller, self.line) from None
        finally:
            k.src, k.scope, k.call_roots, k.returning = saved
            k._call_stack.pop()
            k.arrays.assumptions[assumptions:] = [
                (c, self.line, f"in {self.name}(): {src.speak(m)}")
                for c, _, m in k.arrays.assumptions[assumptions:]]

    def _returns(self, stmt):
        value = stmt.value
        elements = value.elts if isinstance(value, ast.Tuple) else [value]
        if any(isinstance(e, ast.Starred) for e in elements):
            raise self.kernel.src.error(stmt, "starred values in `return` are not supported")
        regions, results = [], []
        for element in elements:
            self.kernel.call_roots = {id(element)}
            integer = _integer(self.kernel, element)
            if integer is not None:             # sizes, constants, int locals: integers
                results.append(Returned("int", value=integer))
                continue
            name = self.kernel.new_transient("__ret").name
            more, result = store_value(self.kernel, stmt, element, name, keep_views=True)
            regions += more
            results.append(result)
        check_declared_return(self.kernel.src, stmt, results)
        return regions, tuple(results)


# ---- helpers --------------------------------------------------------------------------------
def _pure(arg):
    """An argument whose evaluation has no effect beyond its value (no call in it)."""
    return isinstance(arg, ast.AST) and not any(isinstance(n, (ast.Call, ast.Lambda))
                                                for n in ast.walk(arg))


def _unread(src, functions, depth=0):
    """The parameters of ``src`` whose value its body never needs: not read, or read only
    in arguments of calls to functions (``functions``: parameter -> function value, else
    the namespace's) that do not read theirs, as DAPPER's ``rk4(f, x0, np.nan, dt)`` passes
    ``t`` to an autonomous ``f``. Their arguments are not evaluated: Python's evaluating
    them is unobservable, and they need not be what kernels compute (``np.nan``)."""
    tree = src.tree
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}

    def needed(node):                   # whether this read's value is used
        while id(node) in parents:
            parent = parents[id(node)]
            if isinstance(parent, ast.keyword):
                slot, call = parent.arg, parents.get(id(parent))
            elif isinstance(parent, ast.Call) and node in parent.args:
                slot, call = parent.args.index(node), parent
            else:
                node = parent
                continue
            if not _pure(node):         # evaluated anyway (the rule the inliner follows)
                return True
            func = functions.get(call.func.id, src.globals.get(call.func.id)) \
                if isinstance(call.func, ast.Name) else None
            name = _parameter(func, slot)
            if name is None or depth > 4 or name not in _unread(read_source(func), {},
                                                                 depth + 1):
                return True
            return False
        return True
    params = {a.arg for a in tree.args.args}
    uses = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in params]
    return params - {n.id for n in uses if not isinstance(n.ctx, ast.Load) or needed(n)}


def _parameter(func, slot):
    """The name of the parameter of ``func`` (a plain function) that the argument in
    ``slot`` (a position or a keyword) binds, or None."""
    if not _plain_function(func):
        return None
    params = [p for p in inspect.signature(func, follow_wrapped=False).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if isinstance(slot, int):
        return params[slot].name if slot < len(params) else None
    return slot if any(p.name == slot for p in params) else None


def _integer(kernel, node):
    """``node``'s integer expression when it is one (no data read), else None."""
    if not is_integer_expression(node, {n for n, v in kernel.scope.items()
                                        if isinstance(v, IntValue)} | set(kernel.int_locals),
                                 lambda c, j: returns_integer(kernel, c, j)) and \
            not isinstance(node, ast.Name):
        return None
    ex = ExpressionBuilder(kernel, kernel.scope)
    try:
        value = ex.index(node)
    except KernelSyntaxError:
        return None
    return value if not ex.reads and not ex.prelude else None


def _forwarded(src, params):
    """A callee with ``*args``/``**kwargs`` (a decorator's wrapper forwarding them) as one
    with a parameter per value the call gives them, each forwarded where the body writes
    ``*args``/``**kwargs`` in a call; other uses of them are refused naming the line."""
    args = src.tree.args
    star = args.vararg.arg if args.vararg else None
    stars = args.kwarg.arg if args.kwarg else None
    if star is None and stars is None:
        return src, params
    given = params.pop(star, ()) if star else ()
    named = params.pop(stars, {}) if stars else {}
    extra = {f"{star}_{k}": v for k, v in enumerate(given)}
    extra.update({f"{stars}_{k}": v for k, v in named.items()})
    tree = copy.deepcopy(src.tree)

    class Forward(ast.NodeTransformer):
        def visit_Call(self, node):
            self.generic_visit(node)
            out = []
            for a in node.args:
                if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name) and \
                        a.value.id == star:
                    out += [ast.Name(f"{star}_{k}", ast.Load()) for k in range(len(given))]
                else:
                    out.append(a)
            keywords = []
            for k in node.keywords:
                if k.arg is None and isinstance(k.value, ast.Name) and k.value.id == stars:
                    keywords += [ast.keyword(n, ast.Name(f"{stars}_{n}", ast.Load()))
                                 for n in named]
                else:
                    keywords.append(k)
            node.args, node.keywords = out, keywords
            return node
    tree = Forward().visit(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in (star, stars):
            raise src.error(n, f"`{n.id}` ({'*' if n.id == star else '**'}{n.id}) is used "
                               "other than forwarded to a call (`f(x, *args, **kwargs)`), "
                               "which kernels do not support")
    tree.args = ast.arguments(args.posonlyargs, args.args + [ast.arg(n) for n in extra],
                              None, args.kwonlyargs, args.kw_defaults, None, [])
    return replace(src, tree=ast.fix_missing_locations(tree)), {**params, **extra}


def _where(src):
    """Where a function's ``def`` is (a function defined in a kernel shares its source)."""
    return src.filename, src.first_line + src.tree.lineno - 1, \
        getattr(src.tree, "col_offset", 0)          # lambdas share lines


def _rename(tree, params, taken, kernel):
    """A copy of ``tree`` whose parameters and locals have fresh names."""
    tree = copy.deepcopy(tree)
    local = set(params) | {a.arg for a in tree.args.args}
    local |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, (ast.Store, ast.Del))}
    renamed = {}
    for name in sorted(local):
        kernel._counter += 1
        new = f"{name}_{kernel._counter}"
        while new in taken:
            kernel._counter += 1
            new = f"{name}_{kernel._counter}"
        taken.add(new)
        renamed[name] = new
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in renamed:
            n.id = renamed[n.id]
        elif isinstance(n, ast.arg) and n.arg in renamed:
            n.arg = renamed[n.arg]
    return tree, renamed


def _written(region):
    """Containers a region writes (tasklets, maps and library nodes)."""
    out = {m.data for t, _, _ in tasklets(region) for m, _ in t.outputs}
    return out | {name for node in library_nodes(region) for name in node.writes()}


def _relocate(region, line):
    """``region`` with every line number set to ``line`` (the call's)."""
    if isinstance(region, Sequence):
        return replace(region, elements=tuple(_relocate(e, line) for e in region.elements))
    if isinstance(region, State):
        return replace(region, nodes=tuple(_relocate(n, line) for n in region.nodes))
    if isinstance(region, LoopRegion):
        return replace(region, body=_relocate(region.body, line), line=line)
    if isinstance(region, ConditionalRegion):
        return replace(region, branches=tuple((c, _relocate(b, line))
                                              for c, b in region.branches), line=line)
    if isinstance(region, MapScope):
        return replace(region, body=tuple(_relocate(t, line) for t in region.body), line=line)
    if isinstance(region, Tasklet) or hasattr(region, "line"):
        return replace(region, line=line)
    return region


def _called_from(exc, name, caller, line):
    prefix = f"{exc.filename}:{exc.line}:{exc.col}: "
    message = str(exc)
    message = message[len(prefix):] if message.startswith(prefix) else message
    return KernelSyntaxError(f"{message} (in {name}(), called at "
                             f"{caller.filename}:{line})", exc.filename, exc.line, exc.col)


def _signature_text(sig):
    return "(" + ", ".join(sig.parameters) + ")"


def _declared_text(declared):
    if declared is None:
        return "an array"
    dims = ", ".join(str(n) for n in declared.shape)
    return f"{np.dtype(declared.dtype).name}[{dims}]"


def _short(node):
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
