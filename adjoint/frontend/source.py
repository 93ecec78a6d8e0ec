"""Locate a kernel's source and resolve the types of its arguments."""
import ast
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
INT_DTYPES = (np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.bool_))


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
        elif isinstance(value, (int, float, str, sp.Basic)):
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
        if value.dtype not in FLOAT_DTYPES + INT_DTYPES:
            raise ArgumentError(f"argument {name!r}: arrays must be float64, float32, int64, "
                                f"int32 or bool, got {value.dtype}")
        shape = tuple(sp.Symbol(f"__{name}_{k}", integer=True, nonnegative=True)
                      for k in range(value.ndim))
        return ArrayType(value.dtype, shape)
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"argument {name!r}: booleans are not supported; pass an int")
    if isinstance(value, (int, np.integer)):
        return int
    if isinstance(value, (float, np.floating)):
        return float
    raise ArgumentError(f"argument {name!r}: expected a NumPy array, an int or a float, "
                        f"got {type(value).__name__}")
