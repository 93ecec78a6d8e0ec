"""NumPy functions and array methods on ArrayExprs.

Each handler takes the ArrayBuilder, the call node and its arguments bound by name
(AST nodes) and returns an ArrayExpr. ``NUMPY`` maps ``np.<name>``, ``METHODS`` maps
``x.<name>(...)``; the scalar functions of ``sdfg.arithmetic.UNARY``/``BINARY`` apply
elementwise with broadcasting.
"""
import ast
import math

import numpy as np
import sympy as sp

from .array_reductions import mean, reduction, variance
from .array_shapes import (ArrayExpr, broadcast_to, constant, flip, fmt_shape, number,
                           reshape, same_size, transpose, truth, volume, without_view)
from ..analysis.bounds import Fits
from ..sdfg import arithmetic as fp
from ..sdfg.arithmetic import BINARY, UNARY

EXTRA_UNARY = {"square": lambda x: fp.power(x, sp.Integer(2)), "negative": fp.neg,
               "reciprocal": lambda x: fp.power(x, sp.Integer(-1), array=True)}
SCALAR_BUILTINS = {"min": "np.minimum or np.min", "max": "np.maximum or np.max",
                   "sum": "np.sum", "float": "the array itself"}
VARARGS = tuple(f"_{k}" for k in range(8))     # x.transpose(1, 0), x.reshape(N, M)


def call(b, node):
    """The ArrayExpr of a call, or None when it is not an array function."""
    func = node.func
    if isinstance(func, ast.Attribute):
        module = b.ex._module(func.value)
        if module is np:
            return _numpy(b, node, func.attr)
        if module is math:
            return _scalar_only(b, node, f"math.{func.attr}", f"np.{func.attr}")
        if func.attr in METHODS:
            handler, names, keywords = METHODS[func.attr]
            return handler(b, node, bind(b, node, [func.value] + node.args, names, keywords))
        return None
    name = b.ex._builtin_name(func)
    if name == "abs" and len(node.args) == 1 and not node.keywords:
        return b.combine(node, UNARY["abs"], node.args)
    if name in SCALAR_BUILTINS:
        return _scalar_only(b, node, f"{name}()", SCALAR_BUILTINS[name])
    return None


def _numpy(b, node, name):
    if name in NUMPY:
        handler, names, keywords = NUMPY[name]
        return handler(b, node, bind(b, node, node.args, names, keywords))
    fn = UNARY.get(name) or EXTRA_UNARY.get(name)
    if fn is not None:
        args = bind(b, node, node.args, ("x",))
        return b.combine(node, fn, [_required(b, node, args, "x")])
    if name in BINARY:
        args = bind(b, node, node.args, ("x1", "x2"))
        fn = fp.ARRAY_POWER if name == "power" else BINARY[name]
        return b.combine(node, fn, [_required(b, node, args, k) for k in ("x1", "x2")])
    return None


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
    """A shape argument: ``N``, ``(N, M)``, ``[N, M]`` or ``A.shape``."""
    if isinstance(node, ast.Attribute) and node.attr == "shape":
        return b.expr(node.value).shape
    items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
    return tuple(b.ex.index(item, "an array size") for item in items)


def _check_dtype(b, args):
    """Temporaries are float64: ``dtype=`` may name float64 in any spelling (np.float64,
    float, "float64", ``A.dtype`` of a float64 array); other dtypes are refused."""
    node = args.get("dtype")
    if node is None or isinstance(node, ast.Constant) and node.value is None:
        return
    dtype = _dtype(b, node)
    if dtype == np.float64:
        return
    what = f"dtype `{ast.unparse(node)}`"
    if dtype is None:
        raise b.src.error(node, f"{what} is not a dtype the kernel can tell; temporaries are "
                                "float64: leave out dtype= or use np.float64")
    if dtype.kind not in "iub":
        raise b.src.error(node, f"{what}: {dtype} temporaries are not supported yet "
                                "(kernels compute in float64); leave out dtype= or use "
                                "np.float64")
    raise b.src.error(node, f"{what}: {dtype} temporaries are not supported (integer and "
                            "boolean arrays are read-only in kernels); compute in a float64 "
                            "array: leave out dtype= or use np.float64")


def _dtype(b, node):
    """The np.dtype ``node`` names (``np.float32``, ``float``, ``"int64"``, ``A.dtype``),
    or None."""
    if isinstance(node, ast.Attribute) and node.attr == "dtype":
        value = b.expr(node.value)          # a mask is bool; an expression's, unknown
        return np.dtype(bool) if value.boolean else \
            value.view.container.dtype if value.view is not None else None
    if isinstance(node, ast.Attribute) and b.ex._module(node.value) is np:
        spelled = getattr(np, node.attr, None)
    elif isinstance(node, ast.Name) and b.ex._builtin_name(node) in ("float", "int", "bool"):
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
        _check_dtype(b, args)
        shape = _shape(b, _required(b, node, args, "shape"))
        _check_sizes(b, node, shape)
        if fill is None:
            value = _scalar(b, _required(b, node, args, "fill_value"))
            return ArrayExpr(shape, lambda index: number(value.at(())))
        return constant(sp.Integer(fill), shape, empty=empty)
    return handler


def _check_sizes(b, node, shape):
    """A new array's sizes must not be negative (NumPy raises) and its bytes must be
    countable in int64: checked once per call where sympy cannot tell."""
    if not all(n.free_symbols <= set(b.kernel.symbols) for n in shape):
        return          # sized by a loop variable: no per-call check (nor temporary)
    what = ast.unparse(node)
    for n in shape:
        if n.is_negative:
            raise b.src.error(node, f"`{what}`: the size {n} is negative")
        if not n.is_nonnegative:
            b.assume(node, sp.Ge(n, 0), f"`{what}`: the size {n} is negative")
    nbytes = 8 * volume(shape)
    if Fits(nbytes) == sp.false:
        raise b.src.error(node, f"`{what}` has more bytes than int64 can count")
    if Fits(nbytes) != sp.true:
        b.assume(node, Fits(nbytes), f"`{what}`: the size in bytes, {nbytes}, overflows "
                                     "int64")


def _filled_like(fill, empty=False):
    def handler(b, node, args):
        _check_dtype(b, args)
        shape = b.expr(_required(b, node, args, "a")).shape
        if fill is None:
            value = _scalar(b, _required(b, node, args, "fill_value"))
            return ArrayExpr(shape, lambda index: number(value.at(())))
        return constant(sp.Integer(fill), shape, empty=empty)
    return handler


def _copy(b, node, args):
    _check_dtype(b, args)
    return without_view(b.expr(_required(b, node, args, "a")))


def _eye(b, node, args):
    _check_dtype(b, args)
    n = b.ex.index(_required(b, node, args, "N"), "an array size")
    m = args.get("M")
    m = n if m is None or isinstance(m, ast.Constant) and m.value is None else \
        b.ex.index(m, "an array size")
    k = b.ex.index(args["k"], "a diagonal offset") if "k" in args else sp.Integer(0)
    _check_sizes(b, node, (n, m))
    return ArrayExpr((n, m), lambda index: fp.select(sp.Integer(1),
                                                     sp.Eq(index[1] - index[0], k),
                                                     sp.Integer(0)))


def _scalar_type(b, node, args):
    """``np.float64(x)``: a float64 copy, as ``x.astype(np.float64)``."""
    return _copy(b, node, {"a": _required(b, node, args, "x"), "dtype": node.func})


# ---- elementwise --------------------------------------------------------------------------
def _where(b, node, args):
    parts = [b.expr(_required(b, node, args, k)) for k in ("condition", "x", "y")]
    shape = b.broadcast_shape(node, [p.shape for p in parts])
    cond, x, y = (broadcast_to(p, shape) for p in parts)

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
    shape = list(_shape(b, _required(b, node, args, "newshape")))
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


# ---- reductions ---------------------------------------------------------------------------
def _reduce(kind):
    def handler(b, node, args):
        a = b.expr(_required(b, node, args, "a"))
        axes = _axes(b, args.get("axis"), a.rank)
        keep = _flag(b, args, "keepdims")
        if kind == "mean":
            return mean(b, node, a, axes, keep)
        if kind in ("var", "std"):
            ddof = _constant_int(b, args["ddof"]) if "ddof" in args else 0
            v = variance(b, node, a, axes, keep, ddof)
            return v if kind == "var" else b.combine(node, fp.sqrt, [v])
        if kind in ("any", "all"):       # the largest / smallest of the 0/1 truth values
            bits = ArrayExpr(a.shape, lambda index: number(truth(a.at(index))))
            out = reduction(b, node, "max" if kind == "any" else "min", bits, axes, keep)
            return ArrayExpr(out.shape, lambda index: truth(out.at(index)), True)
        return reduction(b, node, kind, a, axes, keep)
    return handler


REDUCE_ARGS = ("a", "axis")
REDUCE_KEYWORDS = ("keepdims", "ddof")
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
    "float64": (_scalar_type, ("x",), ()),
    "double": (_scalar_type, ("x",), ()),
    "float32": (_scalar_type, ("x",), ()),
    "copy": (_copy, ("a",), ()),
    "array": (_copy, ("a", "dtype"), ()),
    "where": (_where, ("condition", "x", "y"), ()),
    "clip": (_clip, ("a", "a_min", "a_max"), ()),
    "transpose": (_transpose, ("a", "axes"), ()),
    "flip": (_flip(None), ("m", "axis"), ()),
    "flipud": (_flip(0), ("m",), ()),
    "fliplr": (_flip(1), ("m",), ()),
    "reshape": (_reshape, ("a", "newshape"), ()),
    "ravel": (_ravel, ("a",), ()),
    "sum": (_reduce("sum"), REDUCE_ARGS, ("keepdims",)),
    "prod": (_reduce("prod"), REDUCE_ARGS, ("keepdims",)),
    "max": (_reduce("max"), REDUCE_ARGS, ("keepdims",)),
    "amax": (_reduce("max"), REDUCE_ARGS, ("keepdims",)),
    "min": (_reduce("min"), REDUCE_ARGS, ("keepdims",)),
    "amin": (_reduce("min"), REDUCE_ARGS, ("keepdims",)),
    "mean": (_reduce("mean"), REDUCE_ARGS, ("keepdims",)),
    "any": (_reduce("any"), REDUCE_ARGS, ("keepdims",)),
    "all": (_reduce("all"), REDUCE_ARGS, ("keepdims",)),
    "var": (_reduce("var"), REDUCE_ARGS, REDUCE_KEYWORDS),
    "std": (_reduce("std"), REDUCE_ARGS, REDUCE_KEYWORDS),
    "dot": (_matmul, ("a", "b"), ()),
    "matmul": (_matmul, ("a", "b"), ()),
    "outer": (_outer, ("a", "b"), ()),
    "einsum": (_einsum, ("subscripts",) + VARARGS, ()),
}
METHODS = {name: NUMPY[name] for name in ("sum", "prod", "max", "min", "mean", "var", "std",
                                          "any", "all")}
METHODS.update({
    "copy": (_copy, ("a",), ()),
    "astype": (_copy, ("a", "dtype"), ()),
    "transpose": (_method_transpose, ("a",) + VARARGS, ()),
    "reshape": (_method_reshape, ("a",) + VARARGS, ()),
    "ravel": (_ravel, ("a",), ()),
    "dot": (_matmul, ("a", "b"), ()),
    "flatten": (lambda b, node, args: without_view(_ravel(b, node, args)), ("a",), ()),
})
