"""Locate a kernel's source and resolve the types of its arguments."""
import ast
import copy
import functools
import hashlib
import inspect
import re
import textwrap
import weakref
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..errors import ArgumentError, KernelSyntaxError
from ..types import ArrayType
from .outside import as_library_calls, function_value, resolve

ONE = sp.Integer(1)

INEXACT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.complex128),
                np.dtype(np.complex64))
INT_DTYPES = tuple(np.dtype(t) for t in (np.int64, np.int32, np.int16, np.int8, np.uint64,
                                          np.uint32, np.uint16, np.uint8, np.bool_))
# Other integer arrays are index arrays too: passed as int64 copies (runtime/arguments.py)


@dataclass(frozen=True)
class KernelSource:
    """The parsed function with what is needed to report errors at its lines."""
    tree: ast.FunctionDef
    filename: str
    first_line: int
    indent: int
    globals: dict
    renamed: tuple = ()     # (original, engine name) of an inlined callee's locals
    defaults: tuple = ()    # the function's default values (functions among them are inlined)
    outside: tuple = ()     # (hidden argument, array) of a kernel's arrays from outside

    def error(self, node, message):
        line = getattr(node, "lineno", 1) + self.first_line - 1
        col = getattr(node, "col_offset", 0) + self.indent + 1
        return KernelSyntaxError(self.speak(message), self.filename, line, col)

    def speak(self, message):
        """``message`` in the user's names (an inlined callee's locals, ``self.W`` for the
        engine's ``__self_W``)."""
        for original, name in self.renamed:
            message = re.sub(rf"\b{re.escape(name)}\b", original, message)
        return message


_REGISTERED = weakref.WeakKeyDictionary()     # function defined in a kernel -> its source


def register_source(func, src: KernelSource):
    """The source of a function made from a kernel's own AST (``def``/``lambda`` in it)."""
    _REGISTERED[func] = src


def is_registered(func):
    """Whether ``func`` was defined in a kernel's body (its source is that node)."""
    try:
        return func in _REGISTERED
    except TypeError:
        return False


class KernelFunction:
    """A Python function as the frontend lowers it: the function (``__wrapped__``, its
    name) and its declared argument types. ``api.Kernel`` (a compiled kernel) is one; a
    plain function that a kernel calls is wrapped in one to be inlined (calls.py), so the
    frontend knows kernels without importing the API above it."""

    def __init__(self, func):
        refuse_unreadable(func)
        functools.update_wrapper(self, func)
        self._declared = declared_types(func)


def refuse_unreadable(func):
    """A decorated function is compiled as its decorator's wrapper (which must be a Python
    function with source); one whose wrapper has none would be compiled without what the
    decorator does, and is refused."""
    if getattr(func, "__wrapped__", None) is not None and function_tree(func) is None:
        raise KernelSyntaxError(f"{func.__name__}() is wrapped by a decorator whose wrapper "
                                "has no Python source the engine can read, so the engine "
                                "would compile the function inside without what the "
                                "decorator does; call the undecorated function, or write "
                                "the decorator's work into the kernel",
                                *_where(inspect.unwrap(func)))


def function_tree(func):
    """(definition, filename, first line, indent) of a Python function, a bound method,
    a lambda or a decorator's wrapper (its own code, not the function it wraps), or None
    where there is no source to read."""
    if not (inspect.isfunction(func) or inspect.ismethod(func)):
        return None
    try:        # the code object: inspect would unwrap a wrapper to the function inside
        lines, first_line = inspect.getsourcelines(func.__code__)
    except (OSError, TypeError):
        return None
    text = textwrap.dedent("".join(lines))
    indent = len(lines[0]) - len(lines[0].lstrip())
    try:
        tree = ast.parse(text)
    except SyntaxError:                 # a lambda on a continuation line
        return None
    filename = inspect.getsourcefile(func) or "<kernel>"
    if func.__name__ == "<lambda>":
        code = func.__code__
        params = list(code.co_varnames[:code.co_argcount])
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                 and [a.arg for a in n.args.args] == params]
        if len(found) != 1:
            return None
        node = found[0]
        return (ast.fix_missing_locations(ast.copy_location(ast.FunctionDef(
            "<lambda>", node.args, [ast.copy_location(ast.Return(node.body), node.body)], [],
            None, None), node)), filename, first_line, indent)
    fn = tree.body[0]
    return (fn, filename, first_line, indent) if isinstance(fn, ast.FunctionDef) else None


def read_source(func) -> KernelSource:
    """The function's definition with what it reads from outside resolved
    (``outside.resolve``: a method's ``self``, attribute chains, NumPy functions by name)."""
    if func in _REGISTERED:
        return _REGISTERED[func]
    found = function_tree(func)
    if found is None:
        raise KernelSyntaxError(f"cannot read the source of {func!r}; define kernels as "
                                "`def` functions in a .py file")
    tree, filename, first_line, indent = found
    tree, names, renamed = resolve(tree, func)
    return KernelSource(tree, filename, first_line, indent, names, renamed,
                        tuple(func.__defaults__ or ()))


def decorated_source(func) -> KernelSource:
    """A decorated kernel: a body calling the decorator's wrapper with the parameters of
    the function inside (the kernel's own), so the wrapper's work is compiled too."""
    inner = inspect.unwrap(func)
    found = function_tree(inner)
    if found is None:
        raise KernelSyntaxError(f"cannot read the source of {inner!r}")
    defn, filename, first_line, indent = found
    params = [p.name for p in inspect.signature(func).parameters.values()]
    args = copy.deepcopy(defn.args)
    args.args = [ast.arg(a.arg, a.annotation) for a in args.args]
    call = ast.Call(ast.Name("__decorated", ast.Load()),
                    [ast.Name(p, ast.Load()) for p in params], [])
    wrapper = function_tree(func)[0]
    returns = any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(wrapper))
    body = ast.Return(call) if returns else ast.Expr(call)
    tree = ast.fix_missing_locations(ast.FunctionDef(func.__name__, args, [body], [],
                                                     None, None))
    tree.lineno = 0         # not the inner function's line: that one is called, not recursion
    return KernelSource(tree, filename, first_line, indent, {"__decorated": func},
                        ((func.__code__.co_name, "__decorated"),))


def with_defaults(src: KernelSource, defaults) -> KernelSource:
    """``src`` for a call that leaves the parameters ``defaults`` ({name: value}, the last
    ones) to their default values: each is a constant of the body, as an inlined
    callee's defaults are (a local set to it first where the body assigns the name)."""
    tree = copy.deepcopy(src.tree)
    params = {a.arg: a for a in tree.args.args}
    tree.args.args = [a for a in tree.args.args if a.arg not in defaults]
    tree.args.defaults = []
    functions = {n: v for n, v in defaults.items() if function_value(v)}    # mode=wrap: a
    defaults = {n: v for n, v in defaults.items() if n not in functions}    # namespace name
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, (ast.Store, ast.Del))}
    constants = {name: _constant(src, params[name], name, value)
                 for name, value in defaults.items()}

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in constants and node.id not in assigned:
                return ast.copy_location(copy.deepcopy(constants[node.id]), node)
            return node
    tree, functions = as_library_calls(Substitute().visit(tree), functions)
    first = [ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), params[name])
             for name, value in constants.items() if name in assigned]
    docstring = tree.body[:1] if tree.body and isinstance(tree.body[0], ast.Expr) \
        and isinstance(tree.body[0].value, ast.Constant) \
        and isinstance(tree.body[0].value.value, str) else []
    tree.body = docstring + first + tree.body[len(docstring):]
    return KernelSource(ast.fix_missing_locations(tree), src.filename, src.first_line,
                        src.indent, {**src.globals, **functions}, src.renamed)


def _constant(src, arg, name, value):
    """The expression of a default value written as Python would (numbers, True/False,
    None, strings and tuples of them)."""
    if isinstance(value, np.generic):
        value = value.item()
    try:
        node = ast.parse(repr(value), mode="eval").body
        same = ast.literal_eval(node) == value and type(ast.literal_eval(node)) is type(value)
    except (SyntaxError, ValueError):
        same = False
    if not same:
        raise src.error(arg, f"parameter {name!r}: its default value {_short(value)} is not a "
                             "constant the kernel can use (numbers, True/False, None, "
                             "strings, tuples of them); pass the argument")
    return node


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def fingerprint(src: KernelSource, _seen=None) -> str:
    """A digest of everything a kernel's SDFG depends on: its code and where it sits
    (messages carry file and line), and the same of every function it calls."""
    seen = set() if _seen is None else _seen
    h = hashlib.sha256(f"{ast.dump(src.tree)}|{src.filename}|{src.first_line}|"
                       f"{src.indent}".encode())
    names = sorted({n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)})
    for name, value in [(n, src.globals.get(n)) for n in names] + \
            [(f"default {k}", v) for k, v in enumerate(src.defaults)]:
        func = value.__wrapped__ if hasattr(value, "py_func") else value   # a kernel's function
        key = (id(getattr(func, "__func__", func)), id(getattr(func, "__self__", None)))
        if (inspect.isfunction(func) or inspect.ismethod(func)) and key not in seen:
            seen.add(key)
            try:
                h.update(fingerprint(read_source(func), seen).encode())
            except KernelSyntaxError:
                h.update(repr(func).encode())
        elif isinstance(value, (int, float, str, sp.Basic, np.integer, np.floating)):
            h.update(f"{name}={value!r}".encode())
        elif isinstance(value, np.ndarray):         # a hidden argument (outside.py)
            h.update(f"{name}=array {value.dtype} {value.ndim}".encode())
    return h.hexdigest()


def declared_types(func):
    """Parameter name -> ArrayType / float / int, or None where unannotated."""
    params = inspect.signature(func).parameters
    try:
        annotations = inspect.get_annotations(func, eval_str=True)
    except Exception as exc:                # a string annotation that is not an expression
        raise KernelSyntaxError(f"the annotations of {func.__name__}() cannot be evaluated "
                                f"({type(exc).__name__}: {exc}); annotate with float64[...], "
                                "float32[...], int or float", *_where(func)) from None
    out = {}
    for name, p in params.items():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue            # a kernel refuses them (check_parameters), a callee binds them
        ann = annotations.get(name)
        if ann is complex:                  # a number: a 0-d complex128 array (read only)
            ann = ArrayType(np.dtype(np.complex128), ())
        if ann is not None and not (isinstance(ann, ArrayType) or ann is int or ann is float):
            raise KernelSyntaxError(f"parameter {name!r} is annotated {ann!r}; use float64[...], "
                                    "float32[...], int or float", *_where(func))
        for size in getattr(ann, "shape", ()):
            if size.has(sp.zoo, sp.nan, sp.oo, -sp.oo, sp.I) or not size.is_integer \
                    or size.is_negative:
                raise KernelSyntaxError(f"parameter {name!r}: the size {size} is not a "
                                        "non-negative integer (sizes are ints, symbols made "
                                        "with adjoint.symbol, and integer expressions of "
                                        "them)", *_where(func))
            engine = sorted(s.name[:40] for s in size.free_symbols if s.name.startswith("__"))
            if engine:                  # could equal an engine's symbol (a segment bound)
                raise KernelSyntaxError(f"parameter {name!r}: the size {engine[0]!r} starts "
                                        "with '__', which is the engine's", *_where(func))
        out[name] = ann
    return out


def check_parameters(func):
    """A kernel called from Python takes positional-or-keyword parameters only."""
    for name, p in inspect.signature(func).parameters.items():
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            raise KernelSyntaxError(f"parameter {name!r}: *args, **kwargs and keyword-only "
                                    "parameters are not supported", *_where(func))


def _where(func):
    return inspect.getsourcefile(func) or "<kernel>", func.__code__.co_firstlineno, 1


def call_sizes(types, values):
    """Symbol name -> value at a call: the sizes its arrays give the symbols of their types
    (``types``: parameter -> type, ``values``: parameter -> value) and its int arguments."""
    sizes = {}
    for name, value in values.items():
        t = types.get(name)
        if t is int and isinstance(value, (int, np.integer, bool, np.bool_)):
            sizes[name] = int(value)
        elif isinstance(t, ArrayType) and len(np.shape(value)) == len(t.shape):
            sizes.update((n.name, int(m)) for n, m in zip(t.shape, np.shape(value))
                         if n.is_Symbol)
    return sizes


def holds(decisions, sizes):
    """Whether the conditions ``decisions`` (``SDFG.decisions``) hold at ``sizes``."""
    return all(c.xreplace({s: sp.Integer(sizes[s.name]) for s in c.free_symbols
                           if s.name in sizes}) == sp.true for c in decisions)


def type_of_value(name, value, what=None):
    """The type an unannotated parameter takes from the value it is called with."""
    what = what or f"argument {name!r}"
    if isinstance(value, np.ndarray):
        if value.dtype not in INEXACT_DTYPES + INT_DTYPES and value.dtype.kind not in "iu":
            raise ArgumentError(f"{what}: arrays must be float64, float32, complex128, "
                                f"complex64, integer or bool, got {value.dtype}")
        # A size-1 axis is the constant 1, so it broadcasts as NumPy's does (p.shape ==
        # (1, 1, n) against (nx, ny, n)); the shape is part of the call's signature, so an
        # argument of other sizes gets its own specialisation.
        shape = tuple(ONE if n == 1 else sp.Symbol(f"__{name}_{k}", integer=True,
                                                   nonnegative=True)
                      for k, n in enumerate(value.shape))
        dtype = value.dtype if value.dtype in INEXACT_DTYPES + INT_DTYPES else np.dtype(np.int64)
        return ArrayType(dtype, shape)
    if isinstance(value, (int, np.integer, bool, np.bool_)):     # True is 1, as in Python
        return int
    if isinstance(value, (float, np.floating)):
        return float
    if isinstance(value, (complex, np.complexfloating)):     # passed as a 0-d array
        return ArrayType(np.result_type(value, 1j), ())
    raise ArgumentError(f"{what}: expected a NumPy array, an int or a float, "
                        f"got {type(value).__name__}")
