"""NumPy functions and array methods on ArrayExprs.

Each handler takes the ArrayBuilder, the call node and its arguments bound by name
(AST nodes) and returns an ArrayExpr. ``NUMPY`` maps ``np.<name>``, ``METHODS`` maps
``x.<name>(...)``; the scalar functions of ``sdfg.arithmetic.UNARY``/``BINARY`` apply
elementwise with broadcasting.
"""
import ast
import math
import sys
import types

import numpy as np
import sympy as sp

from .array_matmul import covariance
from .array_reductions import mean, reduction, variance
from .array_shapes import (ArrayExpr, broadcast_to, constant, flip, fmt_shape, number, remap,
                           reshape, same_size, subscript, transpose, truth, volume,
                           without_view)
from .array_stores import store, temporary
from .dtypes import FLOAT32, FLOAT64, value_dtype
from .masks import masked_operand
from .functions import floordiv, python_mod
from ..analysis.bounds import Fits
from ..sdfg import LoopRegion, Sequence
from ..sdfg import arithmetic as fp
from ..sdfg.arithmetic import BINARY, UNARY

# np.linalg.<name> -> (hook, parameter names), and a SciPy function returning a tuple (its
# dotted name, known by identity) -> (hook taking the element, parameter names): filled by
# the library nodes (adjoint/library), which build on this module; frontend/__init__.py
# imports them.
NUMPY_LINALG = {}
SCIPY = {}
# Filled by array_indexing: NumPy functions returning a tuple, np.<name> -> (hook returning
# a list of functions making each element, parameter names, keywords); np.mgrid-like
# subscripts, np.<name>[...] -> hook (an ArrayExpr, or such a list); SciPy functions
# returning an array (known by identity, as SCIPY's) -> (hook, parameter names, keywords).
NUMPY_TUPLES = {}
NUMPY_GRIDS = {}
SCIPY_ARRAYS = {}
EXTRA_UNARY = {"square": lambda x: fp.power(x, sp.Integer(2)), "negative": fp.neg,
               "reciprocal": lambda x: fp.power(x, sp.Integer(-1), array=True)}
# Binary ufuncs as np.<name>(x1, x2) and np.<name>.outer(a, b): (function of two elements,
# how elements enter it, whether the result is a mask); the rest of BINARY on numbers.
UFUNCS = {"add": (fp.add, number, False), "subtract": (fp.sub, number, False),
          "multiply": (fp.mul, number, False), "divide": (fp.div, number, False),
          "true_divide": (fp.div, number, False),
          "logical_and": (fp.logical(sp.And), truth, True),
          "logical_or": (fp.logical(sp.Or), truth, True),
          "logical_xor": (fp.logical(sp.Xor), truth, True),
          "less": (fp.relation(sp.Lt), number, True),
          "less_equal": (fp.relation(sp.Le), number, True),
          "greater": (fp.relation(sp.Gt), number, True),
          "greater_equal": (fp.relation(sp.Ge), number, True),
          "equal": (fp.relation(sp.Eq), number, True),
          "not_equal": (fp.relation(sp.Ne), number, True),
          "heaviside": (fp.heaviside, number, False)}
UFUNCS.update({name: (fp.ARRAY_POWER if name in ("power", "pow") else fn, number, False)
               for name, fn in BINARY.items()})
# The ufuncs of Python's // and %, on arrays as the operators are (arrays.py)
PYTHON_DIVISION = {"mod": ast.Mod, "remainder": ast.Mod, "floor_divide": ast.FloorDiv}
# ufunc.reduce / ufunc.accumulate: the reduction and the scan each stands for
UFUNC_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}
UFUNC_SCAN = {"add": fp.add, "multiply": fp.mul, "maximum": BINARY["maximum"],
              "minimum": BINARY["minimum"]}
SCALAR_BUILTINS = {"min": "np.minimum or np.min", "max": "np.maximum or np.max",
                   "sum": "np.sum", "float": "the array itself"}
VARARGS = tuple(f"_{k}" for k in range(8))     # x.transpose(1, 0), x.reshape(N, M)


def call(b, node):
    """The ArrayExpr of a call, or None when it is not an array function."""
    func = node.func
    name = scipy_call(b, node)
    if name in SCIPY_ARRAYS:
        handler, names, keywords = SCIPY_ARRAYS[name]
        return handler(b, node, bind(b, node, node.args, names, keywords))
    if name is not None:
        raise _a_tuple(b, node)
    if isinstance(func, ast.Attribute):
        module = b.ex._module(func.value)
        if module is np:
            return _numpy(b, node, func.attr)
        if isinstance(func.value, ast.Attribute) and func.value.attr == "linalg" and \
                b.ex._module(func.value.value) is np:
            return _linalg(b, node, func.attr)
        if ufunc_method(b.ex, func):
            return _ufunc_method(b, node, func.value.attr, func.attr)
        if module is math:
            return _scalar_only(b, node, f"math.{func.attr}", f"np.{func.attr}")
        if func.attr in METHODS:
            handler, names, keywords = METHODS[func.attr]
            return handler(b, node, bind(b, node, [func.value] + node.args, names, keywords))
        return None
    name = b.ex._builtin_name(func)
    if name == "abs" and len(node.args) == 1 and not node.keywords:
        return b.combine(node, UNARY["abs"], node.args)
    if name == "sum" and len(node.args) == 1 and not node.keywords and \
            b.expr(node.args[0]).rank:          # Python's sum of an array's rows, in order
        return reduction(b, node, "pysum", b.expr(node.args[0]), (0,), False)
    if name in ("max", "min") and len(node.args) == 1 and not node.keywords and \
            b.expr(node.args[0]).rank == 1:
        return _builtin_extreme(b, node, name, b.expr(node.args[0]))
    if name in SCALAR_BUILTINS:
        return _scalar_only(b, node, f"{name}()", SCALAR_BUILTINS[name])
    return None


def scipy_function(value):
    """The name in ``SCIPY`` or ``SCIPY_ARRAYS`` of the function ``value`` is (by
    identity), or None; SciPy is never imported here: a program holding one of its
    functions has."""
    for name in list(SCIPY) + list(SCIPY_ARRAYS):
        module, attr = name.rsplit(".", 1)
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, attr, None) is value:
            return name
    return None


def _builtin_extreme(b, node, name, x):
    """Python's ``max(x)`` / ``min(x)`` of a vector: ``m = x[0]``, then ``m = v`` for each
    later ``v`` beyond it (the first of equals; nan only as the first element). That is
    the extreme of ``x[1:]`` folded from -inf (+inf) where it beats ``x[0]``."""
    rest = _along(x, 0, ("slice", sp.Integer(1), 1, x.shape[0] - 1))
    extreme = reduction(b, node, "py" + name, rest, (0,), False)
    fold = fp.BUILTIN[name]
    return ArrayExpr((), lambda q: fold(number(x.at((sp.Integer(0),))), extreme.at(())))


def scipy_call(b, node):
    """The registered SciPy function (``SCIPY``) ``node`` calls, or None: its name in the
    body is one of the program's (``lapack.dgtsv``, read from outside) bound to it."""
    return scipy_name(b.ex, node.func)


def scipy_name(ex, func):
    """The registered SciPy function ``func`` names: a name from outside bound to it
    (``erf``, ``dgtsv``) or attributes of a module from outside (``scipy.special.erf``,
    ``special.expit``); None for others."""
    path = []
    while isinstance(func, ast.Attribute):
        path.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id in ex.scope:
        return None
    value = ex.src.globals.get(func.id)
    for attr in reversed(path):
        if not isinstance(value, types.ModuleType):
            return None
        value = getattr(value, attr, None)
    return scipy_function(value) if value is not None else None


def tuple_elements(b, node):
    """The elements (functions making their ArrayExprs) of a NumPy call returning a tuple
    (``np.histogram(x, n)``, ``np.meshgrid(x, y)``, ``np.ogrid[0:n, 0:m]``), or None."""
    if isinstance(node, ast.Subscript):
        value = grid(b, node)
        return value if isinstance(value, list) else None
    func = node.func if isinstance(node, ast.Call) else None
    if isinstance(func, ast.Attribute) and b.ex._module(func.value) is np and \
            func.attr in NUMPY_TUPLES:
        handler, names, keywords = NUMPY_TUPLES[func.attr]
        return handler(b, node, bind(b, node, node.args, names, keywords))
    return None


def grid(b, node):
    """``np.mgrid[...]``, ``np.ogrid[...]`` (``NUMPY_GRIDS``): an ArrayExpr or a tuple's
    elements; None for other subscripts."""
    base = node.value
    if isinstance(base, ast.Attribute) and b.ex._module(base.value) is np and \
            base.attr in NUMPY_GRIDS:
        return NUMPY_GRIDS[base.attr](b, node)
    return None


def element_of_call(b, node):
    """``f(...)[k]`` for a registered SciPy function or a NumPy one returning a tuple, or
    None."""
    elements = tuple_elements(b, node.value)
    if elements is not None:
        k = _constant_int(b, node.slice)
        if not -len(elements) <= k < len(elements):
            raise b.src.error(node, f"`{ast.unparse(node)}`: the tuple has "
                                    f"{len(elements)} elements")
        return elements[k]()
    name = scipy_call(b, node.value) if isinstance(node.value, ast.Call) else None
    if name is None or name not in SCIPY:
        return None
    k = _constant_int(b, node.slice)
    handler, names = SCIPY[name]
    call_node = node.value
    # overwrite_*=True lets SciPy reuse an input's memory: not doing so is allowed too
    kept = [kw for kw in call_node.keywords if not (kw.arg or "").startswith("overwrite_")]
    call_node = ast.copy_location(ast.Call(call_node.func, call_node.args, kept), call_node)
    return handler(b, call_node, bind(b, call_node, call_node.args, names), k)


def _linalg(b, node, name):
    """``np.linalg.<name>(...)``: the library node registered for it (adjoint/library)."""
    if name not in NUMPY_LINALG:
        raise b.src.error(node, f"np.linalg.{name} is not supported (supported: "
                                f"{', '.join(f'np.linalg.{n}' for n in sorted(NUMPY_LINALG))})")
    handler, names = NUMPY_LINALG[name]
    return handler(b, node, bind(b, node, node.args, names))


def _norm(b, node, args):
    """``np.linalg.norm(x, ord=None, axis=None, keepdims=False)``: the 2-norm of vectors,
    the Frobenius norm of matrices, sqrt(sum(x * x)) over ``axis`` (all axes by default)."""
    order = args.get("ord")
    if not (order is None or isinstance(order, ast.Constant) and order.value in (None, 2, "fro")):
        raise b.src.error(node, f"`{ast.unparse(node)}`: only the 2-norm and the Frobenius "
                                "norm (ord=None) are supported; write the others out "
                                "(np.sum(np.abs(x)), np.max(np.abs(x)))")
    a = b.expr(_required(b, node, args, "x"))
    if value_dtype(b, a).kind == "c":
        raise b.src.error(node, f"`{ast.unparse(node)}`: the norm of complex values is not "
                                "supported; write np.sqrt(np.sum(np.abs(z) ** 2))")
    square = ArrayExpr(a.shape, lambda i: fp.mul(number(a.at(i)), number(a.at(i))))
    total = reduction(b, node, "sum", square, _axes(b, args.get("axis"), a.rank),
                      _flag(b, args, "keepdims"))
    return b.combine(node, fp.sqrt, [total])


NUMPY_LINALG["norm"] = (_norm, ("x", "ord", "axis", "keepdims"))


def ufunc_at(ex, node):
    """Whether ``node`` is ``np.<ufunc>.at(...)``: a statement, scattering in place."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "at" and isinstance(node.func.value, ast.Attribute) and \
        ex._module(node.func.value.value) is np


def _a_tuple(b, node):
    return b.src.error(node, f"`{ast.unparse(node)}` returns a tuple; take the element the "
                             "kernel uses where it is called (`dgtsv(...)[3]`, "
                             "`np.histogram(x, n)[0]`) or unpack it (`a, b = ...`)")


def _numpy(b, node, name):
    if name in NUMPY_TUPLES and name not in NUMPY:    # np.gradient: an array, or a tuple
        raise _a_tuple(b, node)
    if name in NUMPY:
        handler, names, keywords = NUMPY[name]
        return handler(b, node, bind(b, node, node.args, names, keywords))
    if name in fp.FLOAT_CLASSES:                    # np.isnan(x): a mask
        args = bind(b, node, node.args, ("x",))
        return b.combine(node, fp.FLOAT_CLASSES[name], [_required(b, node, args, "x")],
                         number, True)
    fn = UNARY.get(name) or EXTRA_UNARY.get(name)
    if fn is not None:
        args = bind(b, node, node.args, ("x",))
        return b.combine(node, fn, [_required(b, node, args, "x")])
    if name == "logical_not":
        args = bind(b, node, node.args, ("x",))
        return b.combine(node, fp.logical(sp.Not), [_required(b, node, args, "x")], truth, True)
    if name in PYTHON_DIVISION:                     # np.mod(j + 1, n): as (j + 1) % n
        args = bind(b, node, node.args, ("x1", "x2"))
        x1, x2 = (_required(b, node, args, k) for k in ("x1", "x2"))
        return b.expr(ast.copy_location(ast.BinOp(x1, PYTHON_DIVISION[name](), x2), node))
    if name in UFUNCS:
        args = bind(b, node, node.args, ("x1", "x2"))
        fn, convert, boolean = UFUNCS[name]
        return b.combine(node, fn, [_required(b, node, args, k) for k in ("x1", "x2")],
                         convert, boolean)
    return None


def ufunc_method(ex, func):
    """Whether ``func`` is ``np.<ufunc>.outer/reduce/accumulate``."""
    return isinstance(func.value, ast.Attribute) and ex._module(func.value.value) is np \
        and func.attr in ("outer", "reduce", "accumulate")


def on_numbers(ex, func):
    """Whether a call of ``func`` in a scalar expression is evaluated here: the ufuncs
    that sdfg.arithmetic's scalar functions lack, and ufunc methods."""
    if not isinstance(func, ast.Attribute):
        return False
    if ex._module(func.value) is np:
        return func.attr == "logical_not" or func.attr in UFUNCS and func.attr not in BINARY
    return ufunc_method(ex, func)


def _ufunc_method(b, node, name, method):
    what = f"np.{name}.{method}"
    table = UFUNCS if method == "outer" else UFUNC_REDUCE if method == "reduce" else UFUNC_SCAN
    if name not in table:
        raise b.src.error(node, f"`{what}` is not supported; {method} works for "
                                f"np.{'/'.join(sorted(table))}")
    if method == "outer":
        args = bind(b, node, node.args, ("A", "B"))
        x, y = (b.expr(_required(b, node, args, k)) for k in ("A", "B"))
        fn, convert, boolean = table[name]

        def at(index):
            return fn(convert(x.at(index[:x.rank])), convert(y.at(index[x.rank:])))
        return ArrayExpr(x.shape + y.shape, at, boolean)
    args = bind(b, node, node.args, ("array", "axis"), ("keepdims",) * (method == "reduce"))
    a = b.expr(_required(b, node, args, "array"))
    axis = args.get("axis", ast.Constant(0))           # NumPy's default here: the first axis
    if method == "reduce":
        return reduction(b, node, table[name], a, _axes(b, axis, a.rank),
                         _flag(b, args, "keepdims"))
    return _scan(b, node, a, _one_axis(b, axis, a.rank, node), table[name])


def _scalar_only(b, node, what, instead):
    """Python's scalar functions: fine on numbers (the scalar builder handles them)."""
    for arg in node.args:
        if b.expr(arg).rank:
            raise b.src.error(node, f"{what} works on single numbers, and `{ast.unparse(arg)}` "
                                    f"is an array; use {instead}")
    return None


# ---- arguments ----------------------------------------------------------------------------
def bind(b, node, args, names, keywords=()):
    """{parameter: AST node} from positional ``args`` (in the order of ``names``) and the
    call's keywords (``names`` or ``keywords``)."""
    if len(args) > len(names):
        raise b.src.error(node, f"`{ast.unparse(node)}`: too many arguments (at most "
                                f"{len(names)}: {', '.join(names)})")
    out = dict(zip(names, args))
    for kw in node.keywords:
        if kw.arg is None or kw.arg not in names + tuple(keywords) or kw.arg in out:
            raise b.src.error(node, f"`{ast.unparse(node)}`: keyword {kw.arg!r} is not "
                                    "supported here")
        out[kw.arg] = kw.value
    return out


def _required(b, node, args, name):
    if name not in args:
        raise b.src.error(node, f"`{ast.unparse(node)}` needs the argument {name!r}")
    return args[name]


def _constant_int(b, node):
    value = b.ex.index(node, "an axis")
    if not value.is_Integer:
        raise b.src.error(node, f"`{ast.unparse(node)}` must be a constant integer")
    return int(value)


def _axes(b, node, rank, default_all=True):
    """Axes named by ``axis=`` (None: all), normalised to non-negative and sorted."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return tuple(range(rank)) if default_all else None
    items = node.elts if isinstance(node, ast.Tuple) else [node]
    axes = []
    for item in items:
        k = _constant_int(b, item)
        if not -rank <= k < rank:
            raise b.src.error(node, f"axis {k} is out of range for an array of {rank} "
                                    "dimensions")
        axes.append(k % rank)
    if len(set(axes)) != len(axes):
        raise b.src.error(node, f"repeated axis in `{ast.unparse(node)}`")
    return tuple(sorted(axes))


def _flag(b, args, name, default=False):
    node = args.get(name)
    if node is None:
        return default
    if not (isinstance(node, ast.Constant) and isinstance(node.value, bool)):
        raise b.src.error(node, f"{name}= must be True or False")
    return node.value


def _shape(b, node):
    """A shape argument: ``N``, ``(N, M)``, ``[N, M]``, ``A.shape``, a slice of one
    (``A.shape[:-1]``) or a sum of them (``V.shape[:-1] + (n, J)``)."""
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return b.expr(node.value).shape
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and \
            _is_tuple(node.left) and _is_tuple(node.right):       # not a size 2 * r + 1
        return tuple(_shape(b, node.left)) + tuple(_shape(b, node.right))
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice) and \
            isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        bounds = [None if n is None else _constant_int(b, n)
                  for n in (node.slice.lower, node.slice.upper, node.slice.step)]
        return tuple(b.expr(node.value.value).shape)[slice(*bounds)]
    items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    return tuple(b.ex.index(item, "an array size") for item in items)


def _is_tuple(node):
    """Whether ``node`` is written as a tuple of sizes (not one size)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return True
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Slice) and _is_tuple(node.value)
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and \
        _is_tuple(node.left) and _is_tuple(node.right)


def _check_dtype(b, args, default=FLOAT64):
    """The dtype of a new array: ``dtype=`` may name float64, float32, bool or an integer
    dtype in any spelling (np.float32, float, int, bool, "int32", ``A.dtype``); others are
    refused. ``default`` where it is left out (None: the dtype of what is stored)."""
    node = args.get("dtype")
    if node is None or isinstance(node, ast.Constant) and node.value is None:
        return default
    dtype = _dtype(b, node)
    if dtype in (FLOAT64, FLOAT32) or dtype is not None and dtype.kind in "iubc":
        return dtype
    what = f"dtype `{ast.unparse(node)}`"
    if dtype is None:
        raise b.src.error(node, f"{what} is not a dtype the kernel can tell; temporaries are "
                                "float64 or float32: leave out dtype= or use np.float64")
    raise b.src.error(node, f"{what}: {dtype} temporaries are not supported yet "
                            "(kernels compute in float64, float32, complex128, complex64, "
                            "integers and bool); leave out dtype= or use np.float64")


def _converted(value, dtype, from_float=False):
    """``value`` as an array of ``dtype``: each element converted (float32: rounded; bool:
    a mask, ``x != 0``; floats to integers truncated toward zero, as NumPy converts values
    in range)."""
    if dtype is None or value.dtype is not None and dtype == value.dtype:
        return value
    if dtype.kind == "b":
        return value if value.boolean else \
            ArrayExpr(value.shape, lambda index: truth(value.at(index)), True)
    if from_float and dtype.kind in "iu":
        to_int = fp.INT_CASTS[dtype.name]
        return ArrayExpr(value.shape, lambda index: fp.truncated(number(value.at(index))) if
                         dtype.name == "int64" else to_int(fp.truncated(number(value.at(index)))),
                         dtype=dtype)
    cast = fp.as_float32 if dtype == FLOAT32 else fp.as_float64 if dtype.kind == "f" else \
        fp.COMPLEX_CASTS[dtype.name] if dtype.kind == "c" else fp.INT_CASTS[dtype.name]
    return ArrayExpr(value.shape, lambda index: cast(number(value.at(index)), evaluate=False),
                     dtype=dtype)


def _dtype(b, node):
    """The np.dtype ``node`` names (``np.float32``, ``float``, ``"int64"``, ``A.dtype``),
    or None."""
    if isinstance(node, ast.Attribute) and node.attr == "dtype":
        value = b.expr(node.value)          # a mask is bool; an expression's, unknown
        return np.dtype(bool) if value.boolean else value_dtype(b, value)
    if isinstance(node, ast.Attribute) and b.ex._module(node.value) is np:
        spelled = getattr(np, node.attr, None)
    elif isinstance(node, ast.Name) and b.ex._builtin_name(node) in ("float", "int", "bool",
                                                                     "complex"):
        spelled = node.id
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        spelled = node.value
    else:
        return None
    try:
        return np.dtype(spelled) if spelled is not None else None
    except TypeError:
        return None


def _scalar(b, node):
    value = b.expr(node)
    if value.rank:
        raise b.src.error(node, f"`{ast.unparse(node)}` must be a single number")
    return value


# ---- creation -----------------------------------------------------------------------------
def _filled(fill, empty=False):
    def handler(b, node, args):
        dtype = _check_dtype(b, args, FLOAT64 if fill is not None else None)
        shape = _shape(b, _required(b, node, args, "shape"))
        _check_sizes(b, node, shape, dtype)
        return _fill(b, node, args, fill, shape, empty, dtype)
    return handler


def _fill(b, node, args, fill, shape, empty, dtype):
    """``shape`` filled with ``fill`` (None: the argument ``fill_value``) as ``dtype``
    (None: bool for True or False, else float64)."""
    value = _scalar(b, _required(b, node, args, "fill_value")) if fill is None else \
        constant(sp.Integer(fill))
    dtype = dtype or (np.dtype(bool) if value.boolean else FLOAT64)
    if dtype.kind == "b":                           # a mask: True / False elements
        return _converted(ArrayExpr(shape, lambda index: value.at(()), value.boolean), dtype)
    if fill is None:
        return ArrayExpr(shape, lambda index: number(value.at(())), dtype=dtype)
    return constant(sp.Integer(fill), shape, empty=empty, dtype=dtype)


def _check_sizes(b, node, shape, dtype=None):
    """A new array's sizes must not be negative (NumPy raises) and its bytes must be
    countable in int64 (8 bytes an element, a complex one's two parts 16): checked once
    per call where sympy cannot tell."""
    if not all(n.free_symbols <= set(b.kernel.symbols) for n in shape):
        return          # sized by a loop variable: no per-call check (nor temporary)
    what = ast.unparse(node)
    for n in shape:
        if n.is_negative:
            raise b.src.error(node, f"`{what}`: the size {n} is negative")
        if not n.is_nonnegative:
            b.assume(node, sp.Ge(n, 0), f"`{what}`: the size {n} is negative")
    nbytes = (16 if dtype is not None and dtype.kind == "c" else 8) * volume(shape)
    if Fits(nbytes) == sp.false:
        raise b.src.error(node, f"`{what}` has more bytes than int64 can count")
    if Fits(nbytes) != sp.true:
        b.assume(node, Fits(nbytes), f"`{what}`: the size in bytes, {nbytes}, overflows "
                                     "int64")


def _filled_like(fill, empty=False):
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "a"))
        dtype = _check_dtype(b, args, np.dtype(bool) if a.boolean else value_dtype(b, a))
        return _fill(b, node, args, fill, a.shape, empty, dtype)
    return handler


def _copy(b, node, args):
    """``.copy()``, ``np.copy``; ``.astype(dtype)`` converts each element."""
    value = b.expr(_required(b, node, args, "a"))
    dtype = _check_dtype(b, args, None)
    if dtype is not None and dtype == value_dtype(b, value):
        dtype = None                                # a copy: nothing to convert
    if dtype is not None and dtype.kind in "iu" and value_dtype(b, value).kind == "c":
        raise b.src.error(node, f"`{ast.unparse(node)}`: converting complex values to "
                                "integers is not supported; convert their real part")
    return _converted(without_view(value), dtype,
                      value_dtype(b, value).kind == "f" if dtype is not None else False)


def _eye(b, node, args):
    dtype = _check_dtype(b, args)
    n = b.ex.index(_required(b, node, args, "N"), "an array size")
    m = args.get("M")
    m = n if m is None or isinstance(m, ast.Constant) and m.value is None else \
        b.ex.index(m, "an array size")
    k = b.ex.index(args["k"], "a diagonal offset") if "k" in args else sp.Integer(0)
    _check_sizes(b, node, (n, m))
    if dtype.kind == "b":
        return ArrayExpr((n, m), lambda index: sp.Eq(index[1] - index[0], k), True)
    return ArrayExpr((n, m), lambda index: fp.select(sp.Integer(1),
                                                     sp.Eq(index[1] - index[0], k),
                                                     sp.Integer(0)), dtype=dtype)


def _part(name, argument):
    """``np.real(z)``, ``np.imag(z)``, ``z.conj()``: each element's (``frontend/complexes.py``
    splits it); ``z.real`` reads the same (arrays.py)."""
    return lambda b, node, args: b.combine(node, UNARY[name],
                                           [_required(b, node, args, argument)])


def _scalar_type(b, node, args):
    """``np.float64(x)``, ``np.complex128(x)``: a copy converted, as ``x.astype(...)``."""
    return _copy(b, node, {"a": _required(b, node, args, "x"), "dtype": node.func})


# ---- elementwise --------------------------------------------------------------------------
def _round(b, node, args):
    """``np.round(x, decimals)``, ``np.around``: to even as NumPy, ``rint(x * 10**d) / 10**d``
    for a constant ``d >= 0``."""
    d = _constant_int(b, args["decimals"]) if "decimals" in args else 0
    if d < 0:
        raise b.src.error(node, f"`{ast.unparse(node)}`: negative decimals are not supported; "
                                "write np.rint(x / 10 ** k) * 10 ** k")
    scale = sp.Float(10.0 ** d)
    if d == 0:
        return b.combine(node, UNARY["rint"], [_required(b, node, args, "a")])
    return b.combine(node, lambda x: fp.div(UNARY["rint"](fp.mul(x, scale)), scale),
                     [_required(b, node, args, "a")])


def _where(b, node, args):
    if "x" not in args and "y" not in args:
        raise b.src.error(node, f"`{ast.unparse(node)}` gives the indices where the condition "
                                "holds (their number depends on the data): bind it to a name "
                                "that only indexes arrays (`i = np.where(x < 0)`, `x[i] = 0.0`)"
                                ", index with the mask itself, or give x and y")
    parts = [b.expr(_required(b, node, args, k)) for k in ("condition", "x", "y")]
    shape, (cond, x, y) = b.broadcast(node, parts)

    def at(index):
        return fp.select(number(x.at(index)), truth(cond.at(index)), number(y.at(index)))
    return ArrayExpr(shape, at)


def _clip(b, node, args):
    bounds = [args.get("a_min"), args.get("a_max")]
    present = [n for n in bounds if not (n is None or isinstance(n, ast.Constant)
                                         and n.value is None)]
    if not present:
        raise b.src.error(node, "np.clip needs a lower or an upper bound")
    a = _required(b, node, args, "a")
    lo, hi = [n is not None and not (isinstance(n, ast.Constant) and n.value is None)
              for n in bounds]

    def fn(x, *limits):
        limits = list(limits)
        if lo:
            x = BINARY["maximum"](x, limits.pop(0))
        return BINARY["minimum"](x, limits.pop(0)) if hi else x
    return b.combine(node, fn, [a] + present)


# ---- views --------------------------------------------------------------------------------
def _squeeze(b, node, args):
    """``np.squeeze(a, axis=None)``, ``a.squeeze()``: a view without the axes of length 1
    (all of them, or those of ``axis=``), a size's length as the call's (``at_call``)."""
    a = b.expr(_required(b, node, args, "a"))

    def one(n):
        if n.is_number:
            return n == 1
        decided = b.ex.at_call(node, sp.Eq(n, 1), lambda ok: (
            f"`{ast.unparse(node)}` was compiled for {n} {'==' if ok else '!='} 1"))
        return decided is sp.true
    given = _axes(b, args.get("axis"), a.rank, default_all=False)
    dropped = [k for k in (given or range(a.rank)) if one(a.shape[k])]
    if given is not None and len(dropped) != len(given):
        raise b.src.error(node, f"`{ast.unparse(node)}`: an axis of axis= is not of length 1")
    kept = [k for k in range(a.rank) if k not in dropped]

    def old_index(q):
        where = dict(zip(kept, q))
        return tuple(where.get(k, sp.Integer(0)) for k in range(a.rank))
    return remap(a, [a.shape[k] for k in kept], old_index)


def _diagonal(b, node, args):
    """``np.diagonal(a, offset)``, ``a.diagonal()``: a matrix's diagonal, as np.diag's."""
    a = _required(b, node, args, "a")
    if b.expr(a).rank != 2:
        raise b.src.error(node, f"`{ast.unparse(node)}` takes a 2-D array here")
    return _diag(b, node, {"v": a, **({"k": args["offset"]} if "offset" in args else {})})


def _expand_dims(b, node, args):
    """``np.expand_dims(a, axis)``: a view with axes of length 1 at ``axis`` (an int or a
    tuple, positions in the result)."""
    a = b.expr(_required(b, node, args, "a"))
    items = _items(_required(b, node, args, "axis"))
    rank = a.rank + len(items)
    axes = sorted(_constant_int(b, n) % rank for n in items)
    for axis in axes:
        a = _new_axis(a, axis)
    return a


def _swapaxes(b, node, args):
    a = b.expr(_required(b, node, args, "a"))
    perm = list(range(a.rank))
    i, j = (_constant_int(b, _required(b, node, args, k)) % max(a.rank, 1)
            for k in ("axis1", "axis2"))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def _moveaxis(b, node, args):
    """``np.moveaxis(a, source, destination)`` (ints or tuples): a transposed view."""
    a = b.expr(_required(b, node, args, "a"))
    source, destination = ([_constant_int(b, n) % max(a.rank, 1) for n in _items(
        _required(b, node, args, k))] for k in ("source", "destination"))
    if len(source) != len(destination):
        raise b.src.error(node, f"`{ast.unparse(node)}`: as many destinations as sources")
    perm = [k for k in range(a.rank) if k not in source]
    for dst, src in sorted(zip(destination, source)):
        perm.insert(dst, src)
    return transpose(a, perm)


def _trapezoid(b, node, args):
    """``np.trapezoid(y, x=None, dx=1.0, axis=-1)`` (and ``np.trapz``) as NumPy computes
    it: ``sum(d * (y[1:] + y[:-1]) / 2.0)`` along the axis, ``d = diff(x)`` or ``dx``."""
    y = b.expr(_required(b, node, args, "y"))
    axis = _one_axis(b, args.get("axis", ast.Constant(-1)), y.rank, node)
    n = y.shape[axis] - 1
    upper, lower = (_along(y, axis, ("slice", sp.Integer(start), 1, n)) for start in (1, 0))
    x = args.get("x")
    if x is not None and not (isinstance(x, ast.Constant) and x.value is None):
        x = b.expr(x)
        if x.rank != 1:
            raise b.src.error(node, f"`{ast.unparse(node)}`: x= must be 1-D here")
        steps = b.combine(node, fp.sub, [_along(x, 0, ("slice", sp.Integer(start), 1, n))
                                         for start in (1, 0)])
        if y.rank > 1:
            steps = _new_axes_around(steps, axis, y.rank)
    else:
        steps = args.get("dx", ast.Constant(1.0))
    area = b.combine(node, lambda d, hi, lo: fp.div(fp.mul(d, fp.add(hi, lo)), sp.Float(2.0)),
                     [steps, upper, lower])
    return reduction(b, node, "sum", area, (axis,), False)


def _new_axes_around(v, axis, rank):
    """A vector ``v`` as an array of ``rank`` dimensions along ``axis`` (1 elsewhere)."""
    for k in range(rank):
        if k != axis:
            v = _new_axis(v, k)
    return v


def _gradient_along(b, node, f, axis, spacing):
    """One axis of ``np.gradient`` (uniform spacing, edge_order=1) as NumPy computes it:
    ``(f[i+1] - f[i-1]) / (2.0 * h)`` inside, one-sided ``(f[1] - f[0]) / h`` and
    ``(f[-1] - f[-2]) / h`` at the ends; the indices clamped so that one formula serves."""
    n = f.shape[axis]
    h = b.expr(spacing) if isinstance(spacing, ast.AST) else constant(spacing)
    if h.rank:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the spacing must be a number here "
                                "(coordinates: compute np.diff yourself)")

    def at(q):
        i = q[axis]
        hi, lo = (tuple(sp.Min(i + 1, n - 1) if k == axis else j for k, j in enumerate(q)),
                  tuple(sp.Max(i - 1, 0) if k == axis else j for k, j in enumerate(q)))
        step = number(h.at(()))
        inside = sp.And(sp.Gt(i, 0), sp.Lt(i, n - 1))
        width = fp.select(fp.mul(sp.Float(2.0), step), inside, step)
        return fp.div(fp.sub(number(f.at(hi)), number(f.at(lo))), width)
    return ArrayExpr(f.shape, at)


def _gradient_parts(b, node, args):
    """(f, [(axis, spacing)]) of ``np.gradient(f, *varargs, axis=None)``."""
    f = b.expr(_required(b, node, args, "f"))
    if "edge_order" in args and _constant_int(b, args["edge_order"]) != 1:
        raise b.src.error(node, f"`{ast.unparse(node)}`: edge_order=1 only")
    axis = args.get("axis")
    axes = list(_axes(b, axis, f.rank)) if axis is not None else list(range(f.rank))
    if axis is not None and not isinstance(axis, ast.Tuple):
        axes = [_constant_int(b, axis) % f.rank]
    spacings = _varargs(args) or [1.0]
    if len(spacings) == 1:
        spacings = spacings * len(axes)
    if len(spacings) != len(axes):
        raise b.src.error(node, f"`{ast.unparse(node)}`: one spacing, or one per axis")
    return f, list(zip(axes, spacings))


def _gradient(b, node, args):
    """``np.gradient`` of a vector, or along one ``axis``: one array."""
    f, parts = _gradient_parts(b, node, args)
    if len(parts) != 1:
        raise b.src.error(node, f"`{ast.unparse(node)}` of a {f.rank}-D array is a tuple of "
                                "arrays: unpack it (`gy, gx = np.gradient(F)`) or give axis=")
    return _gradient_along(b, node, f, *parts[0])


def _gradients(b, node, args):
    """``gy, gx = np.gradient(F, dy, dx)``: the elements, one per axis."""
    f, parts = _gradient_parts(b, node, args)
    return [lambda part=part: _gradient_along(b, node, f, *part) for part in parts]


PAD_MODES = ("constant", "edge", "wrap", "reflect", "symmetric")


def _clamped(i, n):
    """Index ``i`` moved into ``[0, n)``: the nearest end element."""
    return sp.Max(0, sp.Min(i, n - 1))


def _pad(b, node, args):
    """``np.pad(a, pad_width, mode, constant_values=0)`` for the modes of PAD_MODES, as
    an index map: element ``q`` reads ``a`` at ``q - before`` folded back into the array
    (clamped, periodic, mirrored about the end elements or between them) or is the
    constant."""
    a = b.expr(_required(b, node, args, "array"))
    mode = args.get("mode", ast.Constant("constant"))
    mode = mode.value if isinstance(mode, ast.Constant) else None
    if mode not in PAD_MODES:
        raise b.src.error(node, f"`{ast.unparse(node)}`: mode= must be one of "
                                f"{', '.join(PAD_MODES)} (a string constant)")
    widths = _pad_widths(b, node, _required(b, node, args, "pad_width"), a.rank)
    shape = tuple(n + lo + hi for n, (lo, hi) in zip(a.shape, widths))
    fill = b.expr(args.get("constant_values", ast.Constant(0.0)))
    if fill.rank:
        raise b.src.error(node, f"`{ast.unparse(node)}`: constant_values= must be a number")

    def folded(i, n):
        if mode == "edge":
            return _clamped(i, n)
        if mode == "wrap":
            return python_mod(i, n)
        period = 2 * n - 2 if mode == "reflect" else 2 * n
        j = python_mod(i, period)
        back = period - j if mode == "reflect" else period - 1 - j
        return sp.Piecewise((j, j < n), (back, True))

    def at(q):
        inner = [i - lo for i, (lo, _) in zip(q, widths)]
        if mode != "constant":
            return a.at(tuple(folded(i, n) for i, n in zip(inner, a.shape)))
        inside = sp.And(*[sp.And(i >= 0, i < n) for i, n in zip(inner, a.shape)])
        clamped = tuple(_clamped(i, n) for i, n in zip(inner, a.shape))
        return fp.select(number(a.at(clamped)), inside, number(fill.at(())))
    return ArrayExpr(shape, at)


def _pad_widths(b, node, width, rank):
    """``pad_width`` as (before, after) per axis: ``n``, ``(lo, hi)``, ``((lo, hi),)`` or
    one pair per axis."""
    def pair(item):
        items = _items(item)
        if len(items) not in (1, 2):
            raise b.src.error(node, f"`{ast.unparse(node)}`: pad widths are (before, after)")
        values = [b.ex.index(n, "a pad width") for n in items]
        return (values[0], values[-1])
    items = _items(width)
    if isinstance(width, (ast.Tuple, ast.List)) and all(
            isinstance(n, (ast.Tuple, ast.List)) for n in items):
        pairs = [pair(n) for n in items]
        if len(pairs) == 1:
            pairs = pairs * rank
        if len(pairs) != rank:
            raise b.src.error(node, f"`{ast.unparse(node)}`: one (before, after) per axis")
        return pairs
    return [pair(width)] * rank


def _convolve(b, node, args):
    """``np.convolve(a, v, mode='full')`` of two vectors: ``sum_j a[k - j] v[j]`` over the
    second one's elements (the filter), shifted as ``mode`` ('full', 'same', 'valid')
    says; the sums within rounding (NumPy's run as dot products)."""
    a, v = (_flat(b, node, b.expr(_required(b, node, args, k))) for k in ("a", "v"))
    mode = args.get("mode", ast.Constant("full"))
    mode = mode.value if isinstance(mode, ast.Constant) else None
    n, m = a.shape[0], v.shape[0]
    full = n + m - 1
    length, start = {"full": (full, sp.Integer(0)),
                     "same": (sp.Max(n, m), floordiv(sp.Min(n, m) - 1, 2)),
                     "valid": (sp.Max(n, m) - sp.Min(n, m) + 1, sp.Min(n, m) - 1)}.get(
                         mode, (None, None))
    if length is None:
        raise b.src.error(node, f"`{ast.unparse(node)}`: mode= must be 'full', 'same' or "
                                "'valid'")

    def term(q):
        k, j = q[0] + start, q[1]
        inside = sp.And(k - j >= 0, k - j < n)
        return fp.select(fp.mul(number(a.at((_clamped(k - j, n),))),
                                number(v.at((j,)))), inside, sp.Integer(0))
    return reduction(b, node, "sum", ArrayExpr((length, m), term), (1,), False)


def _cross(b, node, args):
    """``np.cross(a, b)`` of 3-vectors (or 2-vectors: the scalar ``a0*b1 - a1*b0``) along
    the last axis, broadcast over the others, in NumPy's order of operations."""
    x, y = (b.expr(_required(b, node, args, k)) for k in ("a", "b"))

    def length(v):          # 2 or 3, as the call's sizes have it
        for n in (3, 2):
            if v.rank and (v.shape[-1] == n or not v.shape[-1].is_number and b.ex.at_call(
                    node, sp.Eq(v.shape[-1], n), lambda ok, n=n, e=v.shape[-1]: (
                        f"`{ast.unparse(node)}` was compiled for {e} {'==' if ok else '!='} "
                        f"{n}")) is sp.true):
                return n
        return None
    n = length(x)
    if n is None or length(y) != n:
        raise b.src.error(node, f"`{ast.unparse(node)}`: vectors of 2 or 3 elements along "
                                "the last axis of both")
    x, y = (_along(v, v.rank - 1, ("slice", sp.Integer(0), 1, sp.Integer(n))) for v in (x, y))
    shape, (x, y) = b.broadcast(node, [x, y])

    def part(q, i, j):
        def at(v, k):
            return number(v.at(tuple(q) + (sp.Integer(k),)))
        return fp.sub(fp.mul(at(x, i), at(y, j)), fp.mul(at(x, j), at(y, i)))
    if n == 2:
        return ArrayExpr(shape[:-1], lambda q: part(q, 0, 1))
    pairs = ((1, 2), (2, 0), (0, 1))
    return ArrayExpr(shape, lambda q: fp.select(part(q[:-1], *pairs[0]), sp.Eq(q[-1], 0),
                                                fp.select(part(q[:-1], *pairs[1]),
                                                          sp.Eq(q[-1], 1),
                                                          part(q[:-1], *pairs[2]))))


def _kron(b, node, args):
    """``np.kron(a, b)`` of arrays of one rank: block ``i`` is ``a[i] * b``."""
    x, y = (b.expr(_required(b, node, args, k)) for k in ("a", "b"))
    if x.rank != y.rank or not x.rank:
        raise b.src.error(node, f"`{ast.unparse(node)}`: arrays of the same rank here")
    shape = tuple(m * n for m, n in zip(x.shape, y.shape))
    return ArrayExpr(shape, lambda q: fp.mul(
        number(x.at(tuple(floordiv(i, n) for i, n in zip(q, y.shape)))),
        number(y.at(tuple(python_mod(i, n) for i, n in zip(q, y.shape))))))


def _split(uneven):
    """``np.split(a, sections_or_indices, axis=0)`` (and ``np.array_split``, ``uneven``):
    views of ``a`` along the axis, for ``sections`` equal parts (array_split: the first
    ``n % sections`` one longer) or cut at constant or int ``indices``."""
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "ary"))
        axis = _one_axis(b, args.get("axis", ast.Constant(0)), a.rank, node)
        n = a.shape[axis]
        cuts = _required(b, node, args, "indices_or_sections")
        if isinstance(cuts, (ast.Tuple, ast.List)):
            bounds = [sp.Max(0, sp.Min(b.ex.index(c, "a split index"), n)) for c in cuts.elts]
            starts = [sp.Integer(0)] + bounds
            stops = bounds + [n]
            parts = [(lo, sp.Max(0, hi - lo)) for lo, hi in zip(starts, stops)]
        else:
            k = _constant_int(b, cuts)
            if k <= 0:
                raise b.src.error(node, f"`{ast.unparse(node)}`: the number of sections "
                                        "must be positive")
            if not uneven and not (n.is_number and n % k == 0) and b.ex.at_call(
                    node, sp.Eq(python_mod(n, k), 0), lambda ok: (
                        f"`{ast.unparse(node)}` was compiled for {n} "
                        f"{'' if ok else 'not '}divisible by {k}")) is not sp.true:
                raise b.src.error(node, f"`{ast.unparse(node)}`: array split does not result "
                                        "in an equal division")
            size, extra = floordiv(n, k), python_mod(n, k)
            parts = [(q * size + sp.Min(q, extra), size + sp.Piecewise((1, q < extra),
                                                                        (0, True)))
                     for q in range(k)] if uneven else [(q * size, size) for q in range(k)]
        return [lambda lo=lo, length=length: _along(a, axis, ("slice", lo, 1, length))
                for lo, length in parts]
    return handler


def _polyval(b, node, args):
    """``np.polyval(p, x)`` as NumPy computes it: ``y = 0``, then ``y = y * x + c`` for
    each coefficient ``c`` of ``p``, the highest power first (a loop over ``p`` into a
    temporary of x's shape)."""
    p, x = (b.expr(_required(b, node, args, k)) for k in ("p", "x"))
    if p.rank != 1:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the coefficients must be a vector")
    line = b.line(node)
    y = b.container(temporary(b, node, tuple(x.shape), "__polyval", dtype=FLOAT64))
    k, = b.state.fresh("c", 1)
    coefficient = _along(p, 0, ("index", k))
    zero = store(b, y, lambda q, old: sp.Integer(0), line)
    step = store(b, y, lambda q, old: fp.add(fp.mul(old(), number(x.at(tuple(q)))),
                                             number(coefficient.at(()))), line)
    b.ex.prelude.append(Sequence(tuple(zero) + (
        LoopRegion(k, sp.Integer(0), p.shape[0], sp.Integer(1), Sequence(tuple(step)), line),)))
    return y


def _trace(b, node, args):
    """``np.trace(a, offset)``, ``a.trace()``: the sum of a matrix's diagonal."""
    return reduction(b, node, "sum", _diagonal(b, node, args), (0,), False)


def _broadcast_to(b, node, args):
    """``np.broadcast_to(array, shape)``: a read-only view NumPy's rules allow."""
    a = b.expr(_required(b, node, args, "array"))
    shape = _shape(b, _required(b, node, args, "shape"))
    if tuple(b.broadcast_shape(node, [a.shape, shape])) != tuple(shape):
        raise b.src.error(node, f"`{ast.unparse(node)}`: an array of shape "
                                f"{fmt_shape(a.shape)} does not broadcast to {fmt_shape(shape)}")
    return broadcast_to(a, shape)


def _isclose(b, node, args):
    """``np.isclose(a, b, rtol, atol, equal_nan)`` as NumPy computes it: ``|a - b| <= atol
    + rtol*|b|`` where ``b`` is finite, ``a == b`` (equal infinities), both nan with
    ``equal_nan``."""
    tolerances = [args.get(k, ast.Constant(v)) for k, v in (("rtol", 1e-05), ("atol", 1e-08))]
    equal_nan = _flag(b, args, "equal_nan")

    def close(x, y, rtol, atol):
        near = fp.logical(sp.And)(fp.relation(sp.Le)(
            UNARY["abs"](fp.sub(x, y)), fp.add(atol, fp.mul(rtol, UNARY["abs"](y)))),
            fp.np_isfinite(y))
        out = fp.logical(sp.Or)(near, fp.relation(sp.Eq)(x, y))
        both_nan = fp.logical(sp.And)(fp.np_isnan(x), fp.np_isnan(y))
        return fp.logical(sp.Or)(out, both_nan) if equal_nan else out
    return b.combine(node, close, [_required(b, node, args, "a"),
                                   _required(b, node, args, "b")] + tolerances, number, True)


def _allclose(b, node, args):
    close = _isclose(b, node, args)
    return _every(b, node, "all", close, tuple(range(close.rank)), False)


def _nan_reduce(kind):
    """``np.nansum/nanprod/nanmean`` (the elements that are numbers kept, NumPy's) and
    ``np.nanmax/nanmin`` (``np.fmax/fmin`` reduced; nan, the first value, where every value
    is nan)."""
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "a"))
        axes, keep = _axes(b, args.get("axis"), a.rank), _flag(b, args, "keepdims")

        def not_nan(p):
            return sp.Not(fp.np_isnan(number(a.at(p))))
        if kind not in ("max", "min"):
            return kept_reduction(b, node, kind, a, not_nan, axes, keep)
        extreme = reduction(b, node, "nan" + kind, a, axes, keep)
        count = kept_count(b, node, a, not_nan, axes, keep)

        def first(q):       # the element at the start of the reduced axes
            q, index = list(q), []
            for k in range(a.rank):
                index.append(sp.Integer(0) if k in axes else q.pop(0))
                if k in axes and keep:
                    q.pop(0)
            return a.at(tuple(index))
        return ArrayExpr(extreme.shape, lambda q: fp.select(
            number(first(q)), fp.relation(sp.Eq)(count.at(q), sp.Integer(0)), extreme.at(q)))
    return handler


def _count_nonzero(b, node, args):
    """``np.count_nonzero(a, axis)``: a sum of the truth values."""
    a = b.expr(_required(b, node, args, "a"))
    axes = _axes(b, args.get("axis"), a.rank)
    return reduction(b, node, "sum", _bits(a), axes, _flag(b, args, "keepdims"))


def _bits(a):
    """The truth values of ``a``'s elements as 1 / 0."""
    return ArrayExpr(a.shape, lambda index: number(truth(a.at(index))))


def _every(b, node, kind, a, axes, keep):
    """``np.all`` (``kind`` "all") or ``np.any`` over ``axes``: a mask."""
    out = reduction(b, node, "min" if kind == "all" else "max", _bits(a), axes, keep)
    return ArrayExpr(out.shape, lambda index: truth(out.at(index)), True)


def _transpose(b, node, args):
    a = b.expr(_required(b, node, args, "a"))
    axes = args.get("axes")
    if axes is None or isinstance(axes, ast.Constant) and axes.value is None:
        return transpose(a, list(range(a.rank))[::-1])
    perm = [_constant_int(b, n) % max(a.rank, 1)
            for n in (axes.elts if isinstance(axes, (ast.Tuple, ast.List)) else [axes])]
    if sorted(perm) != list(range(a.rank)):
        raise b.src.error(node, f"axes {perm} are not a permutation of the {a.rank} axes")
    return transpose(a, perm)


def _method_transpose(b, node, args):
    rest = _varargs(args)
    axes = rest[0] if len(rest) == 1 else ast.Tuple(rest, ast.Load()) if rest else None
    return _transpose(b, node, {"a": args["a"], "axes": axes})


def _varargs(args):
    return [args[k] for k in VARARGS if k in args]


def _flip(axis_default):
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "m"))
        if axis_default is not None:
            if a.rank <= axis_default:
                raise b.src.error(node, f"`{ast.unparse(node)}` needs an array of at least "
                                        f"{axis_default + 1} dimensions")
            return flip(a, (axis_default,))
        return flip(a, _axes(b, args.get("axis"), a.rank))
    return handler


def _reshape(b, node, args):
    a = b.expr(_required(b, node, args, "a"))
    shape = list(_shape(b, _required(b, node, args, "shape" if "shape" in args else
                                     "newshape")))
    return _reshaped(b, node, a, shape)


def _method_reshape(b, node, args):
    rest = _varargs(args)
    if not rest:
        raise b.src.error(node, "reshape needs a shape")
    target = rest[0] if len(rest) == 1 else ast.Tuple(rest, ast.Load())
    return _reshaped(b, node, b.expr(args["a"]), list(_shape(b, target)))


def _ravel(b, node, args):
    return _reshaped(b, node, b.expr(args["a"]), [sp.Integer(-1)])


def _reshaped(b, node, a, shape):
    unknown = [k for k, n in enumerate(shape) if n == -1]
    if len(unknown) > 1:
        raise b.src.error(node, "only one dimension of a reshape can be -1")
    if unknown:
        rest = volume([n for n in shape if n != -1])
        size = sp.simplify(volume(a.shape) / rest)
        if not size.is_integer:
            raise b.src.error(node, f"cannot infer the -1 of `{ast.unparse(node)}`: "
                                    f"{volume(a.shape)} / {rest} is not an integer expression")
        shape[unknown[0]] = size
    if same_size(volume(a.shape), volume(shape)) is False:
        raise b.src.error(node, f"cannot reshape an array of shape {fmt_shape(a.shape)} into "
                                f"{fmt_shape(shape)}")
    b.agree(node, volume(a.shape), volume(shape), a.shape, shape, "reshape")
    return reshape(a, tuple(shape))


def _matmul(b, node, args):
    from .array_matmul import matmul
    return matmul(b, node, b.expr(_required(b, node, args, "a")),
                  b.expr(_required(b, node, args, "b")))


def _dot(b, node, args):
    """``np.dot(a, b)``, ``a.dot(b)``: a matrix product, or a product where either is a
    number (``dot(B, u)`` with the defaults ``B=1, u=0``)."""
    a, c = (_required(b, node, args, k) for k in ("a", "b"))
    if not (b.expr(a).rank and b.expr(c).rank):
        return b.combine(node, fp.mul, [a, c])
    return _matmul(b, node, args)


def _vdot(b, node, args):
    """``np.vdot(a, b)``: the sum of ``conj(a) * b`` over their elements in C order."""
    from .array_matmul import matmul
    a, c = (_reshaped(b, node, b.expr(_required(b, node, args, k)), [sp.Integer(-1)])
            for k in ("a", "b"))
    return matmul(b, node, ArrayExpr(a.shape, lambda index: UNARY["conj"](a.at(index))), c)


def _outer(b, node, args):
    from .array_matmul import outer
    return outer(b, node, b.expr(_required(b, node, args, "a")),
                 b.expr(_required(b, node, args, "b")))


def _einsum(b, node, args):
    from .array_matmul import einsum
    spec = _required(b, node, args, "subscripts")
    if not (isinstance(spec, ast.Constant) and isinstance(spec.value, str)):
        raise b.src.error(node, "np.einsum needs its subscripts as a string constant")
    return einsum(b, node, spec.value, [b.expr(args[k]) for k in VARARGS if k in args])


def _one_axis(b, node, rank, call_node):
    """The single axis ``node`` names (None stays None: the flattened array)."""
    if node is None or isinstance(node, ast.Constant) and node.value is None:
        return None
    axes = _axes(b, node, rank)
    if len(axes) != 1:
        raise b.src.error(call_node, f"`{ast.unparse(call_node)}` takes one axis")
    return axes[0]


def _along(expr, axis, item):
    """``expr`` with ``item`` (normalised, see array_shapes.subscript) on ``axis``."""
    items = [("slice", sp.Integer(0), 1, n) for n in expr.shape]
    items[axis] = item
    return subscript(expr, items)


def _flat(b, node, a):
    return a if a.rank == 1 else _reshaped(b, node, a, [sp.Integer(-1)])


# ---- index maps: roll, diff, triangles ----------------------------------------------------
def _roll(b, node, args):
    """Element ``q`` of ``np.roll(a, s, axis)`` is ``a[(q - s) % n]`` along the axis; no
    axis: the flattened array rolled and shaped back. A copy, as NumPy's."""
    a = b.expr(_required(b, node, args, "a"))
    shifts = [b.ex.index(n, "a shift") for n in _items(_required(b, node, args, "shift"))]
    axis = args.get("axis")
    if axis is None or isinstance(axis, ast.Constant) and axis.value is None:
        if len(shifts) != 1:
            raise b.src.error(node, f"`{ast.unparse(node)}`: several shifts need as many axes")
        return _reshaped(b, node, _rolled(_flat(b, node, a), {0: shifts[0]}), list(a.shape))
    axes = [_constant_int(b, n) for n in _items(axis)]
    if len(shifts) == 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise b.src.error(node, f"`{ast.unparse(node)}`: {len(shifts)} shifts for "
                                f"{len(axes)} axes")
    by_axis = {}
    for k, shift in zip(axes, shifts):
        if not -a.rank <= k < a.rank:
            raise b.src.error(node, f"axis {k} is out of range for an array of {a.rank} "
                                    "dimensions")
        by_axis[k % a.rank] = by_axis.get(k % a.rank, sp.Integer(0)) + shift
    return _rolled(a, by_axis)


def _rolled(a, shifts):
    def old_index(q):
        return tuple(python_mod(i - shifts[k], n) if shifts.get(k, 0) != 0 else i
                     for k, (i, n) in enumerate(zip(q, a.shape)))
    return remap(a, a.shape, old_index, keep_view=False)


def _items(node):
    return node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]


def _diff(b, node, args):
    """``a[1:] - a[:-1]`` along the axis, ``n`` times (masks: ``!=``)."""
    a = b.expr(_required(b, node, args, "a"))
    times = _constant_int(b, args["n"]) if "n" in args else 1
    if times < 0:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the order n must not be negative")
    if not a.rank:
        raise b.src.error(node, f"`{ast.unparse(node)}` needs an array of at least one "
                                "dimension")
    axis = _one_axis(b, args.get("axis", ast.Constant(-1)), a.rank, node)
    for _ in range(times):
        n = a.shape[axis] - 1
        parts = [_along(a, axis, ("slice", sp.Integer(start), 1, n)) for start in (1, 0)]
        a = b.combine(node, fp.logical(sp.Xor), parts, truth, True) if a.boolean else \
            b.combine(node, fp.sub, parts)
    return a


def _triangle(lower):
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "m"))
        if a.rank < 2:
            raise b.src.error(node, f"`{ast.unparse(node)}` needs an array of at least two "
                                    "dimensions")
        k = b.ex.index(args["k"], "a diagonal offset") if "k" in args else sp.Integer(0)
        keep = sp.Le if lower else sp.Ge

        def at(index):
            i, j = index[-2:]
            return fp.select(number(a.at(index)), keep(j - i, k), sp.Integer(0))
        return ArrayExpr(a.shape, at)
    return handler


def _diag(b, node, args):
    """``np.diag(v, k)``: a vector's square matrix with ``v`` on diagonal ``k`` (zeros
    elsewhere), or a matrix's diagonal ``k`` as a vector; both index maps."""
    a = b.expr(_required(b, node, args, "v"))
    k = b.ex.index(args["k"], "a diagonal offset") if "k" in args else sp.Integer(0)
    if k.is_nonnegative is None and k.is_nonpositive is None:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the sign of the offset {k} must be "
                                "known when compiling")
    up = bool(k.is_nonnegative)
    if a.rank == 1:
        n = a.shape[0]
        size = n + abs(k)

        def at(index):
            i, j = index            # v's element, clamped in bounds where it is not taken
            return fp.select(number(a.at((sp.Min(i if up else j, n - 1),))),
                             sp.Eq(j - i, k), sp.Integer(0))
        return ArrayExpr((size, size), at)
    if a.rank != 2:
        raise b.src.error(node, f"`{ast.unparse(node)}` takes a 1-D or 2-D array")
    n, m = a.shape
    size = sp.Max(0, sp.Min(n, m - k) if up else sp.Min(n + k, m))
    return remap(a, (size,), lambda q: (q[0], q[0] + k) if up else (q[0] - k, q[0]),
                 keep_view=False)


def _tile(b, node, args):
    """``np.tile(A, reps)``: element ``q`` is ``A[q % A.shape]`` (``A`` promoted to as many
    dimensions as ``reps`` has, and ``reps`` to ``A``'s)."""
    a = b.expr(_required(b, node, args, "A"))
    reps = [b.ex.index(n, "a repetition count") for n in _items(_required(b, node, args,
                                                                          "reps"))]
    rank = max(a.rank, len(reps))
    shape = (sp.Integer(1),) * (rank - a.rank) + tuple(a.shape)
    reps = [sp.Integer(1)] * (rank - len(reps)) + reps
    for r in reps:
        if r.is_negative:
            raise b.src.error(node, f"`{ast.unparse(node)}`: a negative repetition count")
    out = tuple(n * r for n, r in zip(shape, reps))
    _check_sizes(b, node, out)

    def old_index(q):
        q = q[rank - a.rank:]
        return tuple(i if r == 1 else python_mod(i, n)
                     for i, n, r in zip(q, a.shape, reps[rank - a.rank:]))
    return remap(a, out, old_index, keep_view=False)


def _repeat(b, node, args):
    """``np.repeat(a, repeats, axis)`` with one count: element ``q`` reads ``a`` at
    ``q // repeats`` along the axis (of the flattened array where ``axis`` is None)."""
    a = b.expr(_required(b, node, args, "a"))
    r = b.ex.index(_required(b, node, args, "repeats"), "a repetition count (one integer)")
    if r.is_negative:
        raise b.src.error(node, f"`{ast.unparse(node)}`: a negative repetition count")
    axes = _axes(b, args.get("axis"), a.rank, default_all=False)
    if axes is None:
        a, axes = _reshaped(b, node, a, [sp.Integer(-1)]), (0,)
    if len(axes) != 1:
        raise b.src.error(node, f"`{ast.unparse(node)}` repeats along one axis")
    out = tuple(n * r if k in axes else n for k, n in enumerate(a.shape))
    _check_sizes(b, node, (r,) + out)
    return remap(a, out, lambda q: tuple(floordiv(i, r) if k in axes else i
                                         for k, i in enumerate(q)), keep_view=False)


def _average(b, node, args):
    """``np.average``: the mean, or with ``weights`` ``sum(a * w) / sum(w)`` over the axes
    (1-D weights along the one axis, as NumPy); ``returned=`` is not supported."""
    a = b.expr(_required(b, node, args, "a"))
    axes = _axes(b, args.get("axis"), a.rank)
    keep = _flag(b, args, "keepdims")
    weights = args.get("weights")
    if weights is None or isinstance(weights, ast.Constant) and weights.value is None:
        return mean(b, node, a, axes, keep)
    w = b.expr(weights)
    if w.rank == 1 and a.rank > 1:
        if len(axes) != 1:
            raise b.src.error(node, f"`{ast.unparse(node)}`: 1-D weights need one axis")
        axis = axes[0]
        b.agree(node, w.shape[0], a.shape[axis], w.shape, a.shape,
                "weights and the array along the axis")
        flat = w
        w = ArrayExpr(a.shape, lambda index: flat.at((index[axis],)))
    elif w.rank != a.rank:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the weights must have the array's "
                                "shape, or be 1-D along the axis")
    else:
        for x, y in zip(w.shape, a.shape):
            b.agree(node, x, y, w.shape, a.shape, "weights and the array")
    product = ArrayExpr(a.shape, lambda index: fp.mul(number(a.at(index)),
                                                      number(w.at(index))))
    total = reduction(b, node, "sum", product, axes, keep)
    scale = reduction(b, node, "sum", w, axes, keep)
    return ArrayExpr(total.shape, lambda index: fp.div(total.at(index), scale.at(index)))


# ---- scans: cumsum, cumprod, ufunc.accumulate ---------------------------------------------
def _cumulative(combine):
    def handler(b, node, args):
        a = _converted(b.expr(_required(b, node, args, "a")), _check_dtype(b, args, None))
        axis = _one_axis(b, args.get("axis"), a.rank, node)     # in dtype= if given
        return _scan(b, node, a, axis, combine)
    return handler


def _scan(b, node, a, axis, combine):
    """NumPy's accumulate: ``out[0] = a[0]``, ``out[k] = combine(out[k - 1], a[k])`` along
    ``axis``, one element after the other as NumPy adds (bitwise); None: of the flattened
    array. Lazy like a reduction: a transient filled by a loop in the statement's prelude
    the first time an element is read."""
    if axis is None or not a.rank:
        a, axis = _flat(b, node, a) if a.rank else _reshaped(b, node, a, [sp.Integer(1)]), 0
    filled = []

    def at(index):
        if not filled:
            filled.append(_fill_scan(b, node, a, axis, combine))
        return b.ex._read(filled[0].name, tuple(index))
    return ArrayExpr(a.shape, at)


def _fill_scan(b, node, a, axis, combine):
    line = b.line(node)
    out = b.container(temporary(b, node, a.shape, "__scan"))
    k0, k = b.state.fresh("s", 2)
    n, one = a.shape[axis], sp.Integer(1)
    first = _along(a, axis, ("index", k0))      # k0 in range(min(n, 1)): none if empty
    copy = store(b, _along(out, axis, ("index", k0)), lambda p, old: number(first.at(p)), line)
    before, this = _along(out, axis, ("index", k - 1)), _along(a, axis, ("index", k))
    body = store(b, _along(out, axis, ("index", k)),
                 lambda p, old: combine(before.at(p), number(this.at(p))), line)
    b.ex.prelude.append(Sequence((
        LoopRegion(k0, sp.Integer(0), sp.Min(n, one), one, Sequence(tuple(copy)), line),
        LoopRegion(k, one, n, one, Sequence(tuple(body)), line))))
    return out.view.container


# ---- joins: concatenate, stack, np.array([...]) -------------------------------------------
def _parts(b, node, seq):
    """The ArrayExprs of a sequence written in the call (``(a, b)``, ``[a, b]``) or of
    the tuple a function returns (``np.stack(f(x))``)."""
    if isinstance(seq, ast.Call) and b.kernel.callee_of(seq) is not None:
        return b.kernel.call_parts(b, seq)
    if not isinstance(seq, (ast.Tuple, ast.List)) or not seq.elts:
        raise b.src.error(node, f"`{ast.unparse(node)}`: write the arrays to join as a tuple "
                                "or list in the call (`(a, b)`)")
    if any(isinstance(e, ast.Starred) for e in seq.elts):
        raise b.src.error(node, f"`{ast.unparse(node)}`: starred arrays cannot be joined; "
                                "list them")
    return [literal(b, node, e) for e in seq.elts]


def literal(b, node, item):
    """A nested list or tuple of numbers and arrays (``np.array([[a, b], [c, d]])``)
    stacked along a new first axis; anything else its value."""
    if isinstance(item, (ast.Tuple, ast.List)):
        return stacked(b, node, _parts(b, node, item), 0)
    return b.expr(item)


def _joined(b, node, parts, axis):
    """The parts, one after the other along ``axis``, in a transient filled (lazily, as a
    reduction's) by one store per part: reading a part's elements only where they lie."""
    rank = parts[0].rank
    if not rank or any(p.rank != rank for p in parts):
        raise b.src.error(node, f"`{ast.unparse(node)}`: the arrays to join need the same "
                                "number of dimensions, at least one (shapes "
                                f"{', '.join(fmt_shape(p.shape) for p in parts)})")
    if not -rank <= axis < rank:
        raise b.src.error(node, f"axis {axis} is out of range for arrays of {rank} dimensions")
    axis %= rank
    for p in parts[1:]:
        for k in range(rank):
            if k != axis:
                b.agree(node, parts[0].shape[k], p.shape[k], parts[0].shape, p.shape,
                        "arrays joined")
    shape = list(parts[0].shape)
    shape[axis] = sp.Add(*(p.shape[axis] for p in parts))
    filled = []

    def at(index):
        if not filled:
            filled.append(_fill_join(b, node, parts, axis, tuple(shape)))
        return b.ex._read(filled[0].name, tuple(index))
    return ArrayExpr(tuple(shape), at)


def _fill_join(b, node, parts, axis, shape):
    line = b.line(node)
    out = b.container(temporary(b, node, shape, "__join"))
    offset = sp.Integer(0)
    for p in parts:
        n = p.shape[axis]
        b.ex.prelude += store(b, _along(out, axis, ("slice", offset, 1, n)),
                              lambda q, old, p=p: number(p.at(q)), line)
        offset += n
    return out.view.container


def stacked(b, node, parts, axis):
    """``np.stack``: the parts (of one shape) along a new axis."""
    rank = parts[0].rank + 1
    if not -rank <= axis < rank:
        raise b.src.error(node, f"axis {axis} is out of range for a stack of {rank} "
                                "dimensions")
    axis %= rank
    for p in parts[1:]:
        if p.rank != parts[0].rank:
            raise b.src.error(node, f"`{ast.unparse(node)}`: the arrays to stack need one "
                                    f"shape, not {fmt_shape(parts[0].shape)} and "
                                    f"{fmt_shape(p.shape)}")
    return _joined(b, node, [_new_axis(p, axis) for p in parts], axis)


def _new_axis(p, axis):
    items = [("slice", sp.Integer(0), 1, n) for n in p.shape]
    return subscript(p, items[:axis] + [("new",)] + items[axis:])


def _concatenate(b, node, args):
    return _converted(_concatenated(b, node, args), _check_dtype(b, args, None))


def _concatenated(b, node, args):
    parts = _parts(b, node, _required(b, node, args, "arrays"))
    axis = args.get("axis", ast.Constant(0))
    if isinstance(axis, ast.Constant) and axis.value is None:
        return _joined(b, node, [_flat(b, node, p) for p in parts], 0)
    return _joined(b, node, parts, _constant_int(b, axis))


def _stack(b, node, args):
    parts = _parts(b, node, _required(b, node, args, "arrays"))
    axis = _constant_int(b, args["axis"]) if "axis" in args else 0
    return _converted(stacked(b, node, parts, axis), _check_dtype(b, args, None))


def _hstack(b, node, args):
    parts = [_at_least(b, node, p, 1) for p in
             _parts(b, node, _required(b, node, args, "tup"))]
    return _converted(_joined(b, node, parts, 0 if parts[0].rank == 1 else 1),
                      _check_dtype(b, args, None))


def _vstack(b, node, args):
    parts = [_at_least(b, node, p, 2) for p in
             _parts(b, node, _required(b, node, args, "tup"))]
    return _converted(_joined(b, node, parts, 0), _check_dtype(b, args, None))


def _column_stack(b, node, args):
    """``np.column_stack``: vectors as columns, matrices as they are, side by side."""
    parts = [p if p.rank >= 2 else _new_axis(p, 1) for p in
             _parts(b, node, _required(b, node, args, "tup"))]
    return _joined(b, node, parts, 1)


def _at_least(b, node, p, rank):
    """``np.atleast_1d/2d/3d``: axes of length 1 where NumPy puts them, in front up to 2-D
    (a vector becomes a row), then last (``(n,)`` in 3-D: ``(1, n, 1)``)."""
    while p.rank < min(rank, 2):
        p = _new_axis(p, 0)
    if p.rank < rank:
        p = _new_axis(p, p.rank)
    return p


def _at_least_call(rank):
    return lambda b, node, args: _at_least(b, node, b.expr(_required(b, node, args, "arys")),
                                           rank)


def _array(copy):
    """``np.array(x)``: a copy (``np.asarray``: ``x`` itself, a view stays one); of a
    list or tuple (nested), its elements stacked."""
    def handler(b, node, args):
        a = _required(b, node, args, "object" if copy else "a")
        dtype = _check_dtype(b, args, None)
        if isinstance(a, (ast.Tuple, ast.List)):
            return _converted(literal(b, node, a), dtype)
        value = b.expr(a)
        if dtype is not None and dtype != value_dtype(b, value):
            return _converted(without_view(value), dtype)
        return without_view(value) if copy else value
    return handler


# ---- ranges: arange, linspace -------------------------------------------------------------
def _arange(b, node, args):
    """``np.arange``: integer bounds make integer elements ``start + k * step`` (constant
    step); float bounds must be constants, and the elements are NumPy's
    ``start + k * ((start + step) - start)`` (``start + step`` the second); ``dtype=``
    converts them."""
    return _converted(_range(b, node, args), _check_dtype(b, args, None))


def _range(b, node, args):
    given = [args.get(k) for k in ("start", "stop", "step")]
    if given[1] is None:                                    # np.arange(stop)
        given = [None, given[0], given[2]]
    start, stop, step = given
    if stop is None:
        raise b.src.error(node, f"`{ast.unparse(node)}` needs the argument 'stop'")
    numbers = [_float_constant(n) for n in given]
    if any(isinstance(v, float) for v in numbers):
        return _float_arange(b, node, [d if n is None else v
                                       for n, v, d in zip(given, numbers, (0, None, 1))])
    start = sp.Integer(0) if start is None else b.ex.index(start, "an arange bound")
    stop = b.ex.index(stop, "an arange bound")
    step = sp.Integer(1) if step is None else b.ex.index(step, "an arange step")
    if not step.is_Integer or step == 0:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the step must be a constant integer "
                                "other than zero")
    length = floordiv(stop - start + step - (1 if step > 0 else -1), step)
    length = sp.Max(0, length) if not length.is_number else sp.Integer(max(0, int(length)))
    _check_sizes(b, node, (length,))
    return ArrayExpr((length,), lambda index: start + step * index[0])


def _float_constant(node):
    """The number a constant (or its negation) is, or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _float_constant(node.operand)
        return None if v is None else -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    return None


def _float_arange(b, node, values):
    if any(v is None for v in values):
        raise b.src.error(node, f"`{ast.unparse(node)}`: with float bounds the length "
                                "depends on their values, so they must be constants; use "
                                "integer bounds (np.arange(n) * dx) or np.linspace")
    start, stop, step = (float(v) for v in values)
    if step == 0:
        raise b.src.error(node, f"`{ast.unparse(node)}`: the step must not be zero")
    length = len(np.arange(start, stop, step))
    second = start + step
    delta = second - start

    def at(index):
        k = index[0]
        rest = fp.add(sp.Float(start), fp.mul(k, sp.Float(delta)))
        return fp.select(sp.Float(start), sp.Eq(k, 0),
                         fp.select(sp.Float(second), sp.Eq(k, 1), rest))
    return ArrayExpr((sp.Integer(length),), at)


def _linspace(b, node, args):
    """NumPy's linspace, operation for operation: ``k * step + start`` with ``step = (stop
    - start) / div``, ``(k / div) * delta + start`` where the step is zero, ``stop`` last."""
    if _flag(b, args, "retstep"):
        raise b.src.error(node, f"`{ast.unparse(node)}`: retstep=True returns a tuple; "
                                "compute the step as (stop - start) / (num - 1)")
    if "axis" in args and _constant_int(b, args["axis"]) != 0:
        raise b.src.error(node, f"`{ast.unparse(node)}`: start and stop are numbers, so the "
                                "only axis is 0")
    lo, hi = (_scalar(b, _required(b, node, args, k)) for k in ("start", "stop"))
    num = b.ex.index(args["num"], "a number of samples") if "num" in args else sp.Integer(50)
    _check_sizes(b, node, (num,))
    at = linspace_values(lambda: number(lo.at(())), lambda: number(hi.at(())), num,
                         _flag(b, args, "endpoint", True))
    dtype = _check_dtype(b, args, None)
    return _converted(ArrayExpr((num,), at, dtype=FLOAT64), dtype)


def linspace_values(lo, hi, num, endpoint):
    """Element ``index`` of ``np.linspace(lo(), hi(), num, endpoint)`` (``lo``, ``hi`` give
    the numbers, read where an element is built)."""
    div = num - 1 if endpoint else num

    def at(index):
        k, start, stop = index[0], lo(), hi()
        delta = fp.sub(stop, start)
        step = fp.div(delta, div)
        spaced = fp.select(fp.mul(fp.div(k, div), delta), fp.relation(sp.Eq)(step, 0),
                           fp.mul(k, step))
        value = fp.add(fp.select(spaced, sp.Gt(div, 0), fp.mul(k, delta)), start)
        return fp.select(stop, sp.And(sp.Eq(k, num - 1), sp.Gt(num, 1)), value) \
            if endpoint else value
    return at


# ---- reductions ---------------------------------------------------------------------------
def _reduce(kind):
    def handler(b, node, args):
        masked = masked_operand(b, _required(b, node, args, "a"))
        if masked is not None:                       # np.mean(A[m]), A[m].sum()
            return _masked_reduction(b, node, kind, args, *masked)
        a = b.expr(_required(b, node, args, "a"))
        dtype = _check_dtype(b, args, None)         # the accumulator's: np.sum(x, dtype=...)
        if dtype is not None:
            a = _converted(a, dtype)
        axes = _axes(b, args.get("axis"), a.rank)
        keep = _flag(b, args, "keepdims")
        if args.get("where") is not None:
            return _reduce_where(b, node, kind, a, args["where"], axes, keep)
        if kind == "mean":
            return mean(b, node, a, axes, keep)
        if kind in ("var", "std"):
            ddof = _constant_int(b, args["ddof"]) if "ddof" in args else 0
            v = variance(b, node, a, axes, keep, ddof)
            return v if kind == "var" else b.combine(node, fp.sqrt, [v])
        if kind in ("any", "all"):       # the largest / smallest of the 0/1 truth values
            return _every(b, node, kind, a, axes, keep)
        return reduction(b, node, kind, a, axes, keep)
    return handler


def _reduce_where(b, node, kind, a, where, axes, keep):
    """``np.sum/prod/mean(a, where=m)``: the elements ``m`` (broadcast to ``a``) keeps."""
    if kind not in ("sum", "prod", "mean"):
        raise b.src.error(node, f"`{ast.unparse(node)}`: where= is supported for sum, prod "
                                "and mean (a maximum needs initial=: use np.where)")
    _, (a, mask) = b.broadcast(node, [a, b.expr(where)])
    return kept_reduction(b, node, kind, a, lambda p: truth(mask.at(p)), axes, keep)


def _cov(b, node, args):
    """``np.cov(m, rowvar=True, bias=False, ddof=None)`` of one array (no ``y``, no weights)."""
    if args.get("y") is not None and not (isinstance(args["y"], ast.Constant) and
                                          args["y"].value is None):
        raise b.src.error(node, "np.cov of two arrays is not supported: stack them first")
    ddof = args.get("ddof")
    if ddof is None or isinstance(ddof, ast.Constant) and ddof.value is None:
        ddof = 0 if _flag(b, args, "bias") else 1
    else:
        ddof = _constant_int(b, ddof)
    return covariance(b, node, b.expr(_required(b, node, args, "m")),
                      _flag(b, args, "rowvar", True), ddof)


def _masked_reduction(b, node, kind, args, values, mask):
    """A reduction of the elements a mask selects (``np.mean(A[m])``). The selection is
    1-D: no axis."""
    if kind not in ("sum", "prod", "mean") or args.get("axis") is not None:
        raise b.src.error(node, f"`{ast.unparse(node)}`: of a masked selection the kernel "
                                "computes sum, prod and mean over all of it (no axis); "
                                "write the loop, or use np.where")
    return kept_reduction(b, node, kind, values, lambda p: truth(mask.at(p)),
                          tuple(range(values.rank)), False)


def kept_reduction(b, node, kind, values, kept, axes, keepdims):
    """``kind`` (sum, prod, mean) of the elements ``p`` of ``values`` where ``kept(p)``
    holds: the others count as the reduction's identity (a sum's 0, a product's 1); a mean
    divides by how many it keeps (nan for none, as NumPy). Masked selections, ``where=``
    and the nan-reductions."""
    other = sp.Integer(1 if kind == "prod" else 0)
    chosen = ArrayExpr(values.shape, lambda p: fp.select(number(values.at(p)), kept(p), other))
    total = reduction(b, node, "prod" if kind == "prod" else "sum", chosen, axes, keepdims)
    if kind != "mean":
        return total
    count = kept_count(b, node, values, kept, axes, keepdims)
    return ArrayExpr(total.shape, lambda q: fp.div(total.at(q), count.at(q)))


def kept_count(b, node, values, kept, axes, keepdims):
    """How many elements ``p`` of ``values`` have ``kept(p)``, over ``axes``."""
    ones = ArrayExpr(values.shape, lambda p: fp.select(sp.Integer(1), kept(p), sp.Integer(0)))
    return reduction(b, node, "sum", ones, axes, keepdims)


def _special(function):
    """A ``scipy.special`` ufunc of one or two arguments, elementwise."""
    def handler(b, node, args):
        names = [k for k in ("x", "y") if k in args]
        return b.combine(node, function, [args[k] for k in names])
    return handler


def _expit(x):
    return fp.div(sp.Integer(1), fp.add(sp.Integer(1), UNARY["exp"](fp.neg(x))))


def _logit(p):
    return UNARY["log"](fp.div(p, fp.sub(sp.Integer(1), p)))


def _xlogy(x, y):
    return fp.select(sp.Integer(0), sp.And(fp.relation(sp.Eq)(x, sp.Integer(0)),
                                            sp.Not(fp.np_isnan(y))),
                     fp.mul(x, UNARY["log"](y)))


# scipy.special's functions (cephes/xsf): within a few ulps of these formulas
SCIPY_ARRAYS.update({
    "scipy.special.erf": (_special(UNARY["erf"]), ("x",), ()),
    "scipy.special.erfc": (_special(UNARY["erfc"]), ("x",), ()),
    "scipy.special.expit": (_special(_expit), ("x",), ()),
    "scipy.special.logit": (_special(_logit), ("x",), ()),
    "scipy.special.xlogy": (_special(_xlogy), ("x", "y"), ()),
})

REDUCE_ARGS = ("a", "axis")
REDUCE_KEYWORDS = ("keepdims", "ddof", "dtype")
NUMPY = {
    "zeros": (_filled(0), ("shape", "dtype"), ()),
    "ones": (_filled(1), ("shape", "dtype"), ()),
    "empty": (_filled(0, empty=True), ("shape", "dtype"), ()),
    "full": (_filled(None), ("shape", "fill_value", "dtype"), ()),
    "zeros_like": (_filled_like(0), ("a", "dtype"), ()),
    "ones_like": (_filled_like(1), ("a", "dtype"), ()),
    "empty_like": (_filled_like(0, empty=True), ("a", "dtype"), ()),
    "full_like": (_filled_like(None), ("a", "fill_value", "dtype"), ()),
    "eye": (_eye, ("N", "M", "k", "dtype"), ()),
    "identity": (_eye, ("N", "dtype"), ()),
    "float64": (_scalar_type, ("x",), ()),
    "double": (_scalar_type, ("x",), ()),
    "float32": (_scalar_type, ("x",), ()),
    "complex128": (_scalar_type, ("x",), ()),
    "complex64": (_scalar_type, ("x",), ()),
    "real": (_part("real", "val"), ("val",), ()),
    "imag": (_part("imag", "val"), ("val",), ()),
    "ndarray": (_filled(0, empty=True), ("shape", "dtype"), ()),
    "copy": (_copy, ("a",), ()),
    "array": (_array(True), ("object", "dtype"), ()),
    "asarray": (_array(False), ("a", "dtype"), ()),
    "arange": (_arange, ("start", "stop", "step", "dtype"), ()),
    "linspace": (_linspace, ("start", "stop", "num", "endpoint", "retstep", "dtype", "axis"),
                 ()),
    "concatenate": (_concatenate, ("arrays", "axis"), ("dtype",)),
    "stack": (_stack, ("arrays", "axis"), ("dtype",)),
    "hstack": (_hstack, ("tup",), ("dtype",)),
    "vstack": (_vstack, ("tup",), ("dtype",)),
    "column_stack": (_column_stack, ("tup",), ()),
    "broadcast_to": (_broadcast_to, ("array", "shape"), ()),
    "trace": (_trace, ("a", "offset"), ()),
    "isclose": (_isclose, ("a", "b", "rtol", "atol", "equal_nan"), ()),
    "allclose": (_allclose, ("a", "b", "rtol", "atol", "equal_nan"), ()),
    "count_nonzero": (_count_nonzero, ("a", "axis"), ("keepdims",)),
    "nansum": (_nan_reduce("sum"), REDUCE_ARGS, ("keepdims",)),
    "nanprod": (_nan_reduce("prod"), REDUCE_ARGS, ("keepdims",)),
    "nanmean": (_nan_reduce("mean"), REDUCE_ARGS, ("keepdims",)),
    "nanmax": (_nan_reduce("max"), REDUCE_ARGS, ("keepdims",)),
    "nanmin": (_nan_reduce("min"), REDUCE_ARGS, ("keepdims",)),
    "expand_dims": (_expand_dims, ("a", "axis"), ()),
    "swapaxes": (_swapaxes, ("a", "axis1", "axis2"), ()),
    "moveaxis": (_moveaxis, ("a", "source", "destination"), ()),
    "trapezoid": (_trapezoid, ("y", "x", "dx", "axis"), ()),
    "trapz": (_trapezoid, ("y", "x", "dx", "axis"), ()),
    "gradient": (_gradient, ("f",) + VARARGS, ("axis", "edge_order")),
    "pad": (_pad, ("array", "pad_width", "mode"), ("constant_values",)),
    "cross": (_cross, ("a", "b"), ()),
    "polyval": (_polyval, ("p", "x"), ()),
    "kron": (_kron, ("a", "b"), ()),
    "convolve": (_convolve, ("a", "v", "mode"), ()),
    "roll": (_roll, ("a", "shift", "axis"), ()),
    "diff": (_diff, ("a", "n", "axis"), ()),
    "triu": (_triangle(False), ("m", "k"), ()),
    "diag": (_diag, ("v", "k"), ()),
    "diagonal": (_diagonal, ("a", "offset"), ()),
    "squeeze": (_squeeze, ("a", "axis"), ()),
    "atleast_1d": (_at_least_call(1), ("arys",), ()),
    "atleast_2d": (_at_least_call(2), ("arys",), ()),
    "atleast_3d": (_at_least_call(3), ("arys",), ()),
    "tile": (_tile, ("A", "reps"), ()),
    "repeat": (_repeat, ("a", "repeats", "axis"), ()),
    "average": (_average, ("a", "axis", "weights"), ("keepdims",)),
    "tril": (_triangle(True), ("m", "k"), ()),
    "cumsum": (_cumulative(fp.add), ("a", "axis", "dtype"), ()),
    "cumprod": (_cumulative(fp.mul), ("a", "axis", "dtype"), ()),
    "where": (_where, ("condition", "x", "y"), ()),
    "round": (_round, ("a", "decimals"), ()),
    "around": (_round, ("a", "decimals"), ()),
    "clip": (_clip, ("a", "a_min", "a_max"), ()),
    "transpose": (_transpose, ("a", "axes"), ()),
    "flip": (_flip(None), ("m", "axis"), ()),
    "flipud": (_flip(0), ("m",), ()),
    "fliplr": (_flip(1), ("m",), ()),
    "reshape": (_reshape, ("a", "newshape"), ("shape",)),
    "ravel": (_ravel, ("a",), ()),
    "sum": (_reduce("sum"), REDUCE_ARGS, ("keepdims", "dtype", "where")),
    "prod": (_reduce("prod"), REDUCE_ARGS, ("keepdims", "dtype", "where")),
    "max": (_reduce("max"), REDUCE_ARGS, ("keepdims",)),
    "amax": (_reduce("max"), REDUCE_ARGS, ("keepdims",)),
    "min": (_reduce("min"), REDUCE_ARGS, ("keepdims",)),
    "amin": (_reduce("min"), REDUCE_ARGS, ("keepdims",)),
    "mean": (_reduce("mean"), REDUCE_ARGS, ("keepdims", "dtype", "where")),
    "any": (_reduce("any"), REDUCE_ARGS, ("keepdims",)),
    "all": (_reduce("all"), REDUCE_ARGS, ("keepdims",)),
    "var": (_reduce("var"), REDUCE_ARGS, REDUCE_KEYWORDS),
    "std": (_reduce("std"), REDUCE_ARGS, REDUCE_KEYWORDS),
    "cov": (_cov, ("m", "y", "rowvar", "bias", "ddof"), ()),
    "dot": (_dot, ("a", "b"), ()),
    "matmul": (_matmul, ("a", "b"), ()),
    "outer": (_outer, ("a", "b"), ()),
    "vdot": (_vdot, ("a", "b"), ()),
    "einsum": (_einsum, ("subscripts",) + VARARGS, ()),
}
METHODS = {name: NUMPY[name] for name in ("sum", "prod", "max", "min", "mean", "var", "std",
                                          "any", "all")}
METHODS.update({
    "copy": (_copy, ("a",), ()),
    "astype": (_copy, ("a", "dtype"), ("copy",)),      # copy=False: a copy is fine too
    "diagonal": (_diagonal, ("a", "offset"), ()),
    "trace": (_trace, ("a", "offset"), ()),
    "swapaxes": (_swapaxes, ("a", "axis1", "axis2"), ()),
    "clip": (_clip, ("a", "a_min", "a_max"), ()),
    "round": (_round, ("a", "decimals"), ()),
    "squeeze": (_squeeze, ("a", "axis"), ()),
    "conj": (_part("conj", "a"), ("a",), ()),
    "conjugate": (_part("conj", "a"), ("a",), ()),
    "transpose": (_method_transpose, ("a",) + VARARGS, ()),
    "reshape": (_method_reshape, ("a",) + VARARGS, ()),
    "ravel": (_ravel, ("a",), ()),
    "dot": (_dot, ("a", "b"), ()),
    "flatten": (lambda b, node, args: without_view(_ravel(b, node, args)), ("a",), ()),
    "cumsum": (_cumulative(fp.add), ("a", "axis", "dtype"), ()),
    "cumprod": (_cumulative(fp.mul), ("a", "axis", "dtype"), ()),
})
