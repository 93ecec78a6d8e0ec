"""Locate a kernel's source and resolve the types of its arguments."""
import ast
import copy
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

FLOAT_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))
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

    def error(self, node, message):
        line = getattr(node, "lineno", 1) + self.first_line - 1
        col = getattr(node, "col_offset", 0) + self.indent + 1
        for original, name in self.renamed:         # messages speak the user's names
            message = re.sub(rf"\b{re.escape(name)}\b", original, message)
        return KernelSyntaxError(message, self.filename, line, col)


_REGISTERED = weakref.WeakKeyDictionary()     # function defined in a kernel -> its source


def register_source(func, src: KernelSource):
    """The source of a function made from a kernel's own AST (``def``/``lambda`` in it)."""
    _REGISTERED[func] = src


def refuse_unreadable(func):
    """A method or a decorated function is not what its source says: the engine would
    compile the inner function without ``self`` or without what the decorator does."""
    if inspect.ismethod(func):
        raise KernelSyntaxError(f"{func.__qualname__} is a method (bound to a "
                                f"{type(func.__self__).__name__}); kernels are plain "
                                "functions: pass what it reads of self as arguments",
                                *_where(func.__func__))
    inner = getattr(func, "__wrapped__", None)
    if inner is not None and inspect.isfunction(func):
        raise KernelSyntaxError(f"{func.__name__}() is wrapped by a decorator, and the "
                                "engine would compile the function inside without what the "
                                "decorator does; call the undecorated function, or write the "
                                "decorator's work into the kernel", *_where(inspect.unwrap(func)))


def read_source(func) -> KernelSource:
    if func in _REGISTERED:
        return _REGISTERED[func]
    try:
        lines, first_line = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise KernelSyntaxError(f"cannot read the source of {func!r} ({exc}); define kernels "
                                "in a .py file") from None
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip())
    tree = ast.parse(dedented)
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        raise KernelSyntaxError("a kernel must be a plain `def` function",
                                inspect.getsourcefile(func) or "<kernel>", first_line, 1)
    return KernelSource(fn, inspect.getsourcefile(func) or "<kernel>", first_line, indent,
                        {**func.__globals__, **_nonlocals(func)})


def _nonlocals(func):
    """Variables of enclosing functions the kernel uses (a kernel defined in a function
    calling another kernel defined there)."""
    names = func.__code__.co_freevars
    out = {}
    for name, cell in zip(names, func.__closure__ or ()):
        try:
            out[name] = cell.cell_contents
        except ValueError:          # not assigned yet
            pass
    return out


def with_defaults(src: KernelSource, defaults) -> KernelSource:
    """``src`` for a call that leaves the parameters ``defaults`` ({name: value}, the last
    ones) to their default values: each is a constant of the body, as an inlined
    callee's defaults are (a local set to it first where the body assigns the name)."""
    tree = copy.deepcopy(src.tree)
    params = {a.arg: a for a in tree.args.args}
    tree.args.args = [a for a in tree.args.args if a.arg not in defaults]
    tree.args.defaults = []
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, (ast.Store, ast.Del))}
    constants = {name: _constant(src, params[name], name, value)
                 for name, value in defaults.items()}

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in constants and node.id not in assigned:
                return ast.copy_location(copy.deepcopy(constants[node.id]), node)
            return node
    tree = Substitute().visit(tree)
    first = [ast.copy_location(ast.Assign([ast.Name(name, ast.Store())], value), params[name])
             for name, value in constants.items() if name in assigned]
    docstring = tree.body[:1] if tree.body and isinstance(tree.body[0], ast.Expr) \
        and isinstance(tree.body[0].value, ast.Constant) \
        and isinstance(tree.body[0].value.value, str) else []
    tree.body = docstring + first + tree.body[len(docstring):]
    return KernelSource(ast.fix_missing_locations(tree), src.filename, src.first_line,
                        src.indent, src.globals, src.renamed)


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
    for name in sorted({n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)}):
        value = src.globals.get(name)
        func = getattr(value, "__wrapped__", value)
        if inspect.isfunction(func) and id(func) not in seen:
            seen.add(id(func))
            try:
                h.update(fingerprint(read_source(func), seen).encode())
            except KernelSyntaxError:
                h.update(repr(func).encode())
        elif isinstance(value, (int, float, str, sp.Basic, np.integer, np.floating)):
            h.update(f"{name}={value!r}".encode())
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
            raise KernelSyntaxError(f"parameter {name!r}: *args, **kwargs and keyword-only "
                                    "parameters are not supported", *_where(func))
        ann = annotations.get(name)
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


def _where(func):
    return inspect.getsourcefile(func) or "<kernel>", func.__code__.co_firstlineno, 1


def type_of_value(name, value):
    """The type an unannotated parameter takes from the value it is called with."""
    if isinstance(value, np.ndarray):
        if value.dtype not in FLOAT_DTYPES + INT_DTYPES and value.dtype.kind not in "iu":
            raise ArgumentError(f"argument {name!r}: arrays must be float64, float32, "
                                f"integer or bool, got {value.dtype}")
        shape = tuple(sp.Symbol(f"__{name}_{k}", integer=True, nonnegative=True)
                      for k in range(value.ndim))
        dtype = value.dtype if value.dtype in FLOAT_DTYPES + INT_DTYPES else np.dtype(np.int64)
        return ArrayType(dtype, shape)
    if isinstance(value, (int, np.integer, bool, np.bool_)):     # True is 1, as in Python
        return int
    if isinstance(value, (float, np.floating)):
        return float
    raise ArgumentError(f"argument {name!r}: expected a NumPy array, an int or a float, "
                        f"got {type(value).__name__}")
