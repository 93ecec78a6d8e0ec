"""Check a call's arguments against a kernel's SDFG and turn them into buffers.

``bind`` runs every check. A ``Binding`` keeps what they found for the calls that
follow with the same ``signature`` (types, dtypes, shapes, strides, writeable flags,
ints): those skip them. What a signature does not fix is checked per call: whether the
arrays share memory (unless each owns its own) and the value ranges of index arrays."""
import numpy as np
import sympy as sp

from ..errors import ArgumentError
from ..sdfg.nodes import value_range

INT64 = (-2**63, 2**63 - 1)     # what the compiled code computes sizes and ints in
INTEGERS = (int, np.integer, np.bool_)      # values that may give a size: part of the key


def bind(sdfg, args, written=(), writes=None):
    """(int64 array of symbol values, {argument name: ndarray}) for one call; the symbol
    values end with the two segment bounds of checkpointed loops (zero here).

    Arrays are passed as they are (no copy), so those named in ``written`` (the ones
    the entry writes) must be writable; float scalars become fresh 1-element arrays.
    ``writes`` (default: ``written``): the arrays the kernel writes, which must have
    their declared dtype (an integer array of another one is passed as a copy only when
    the kernel just reads it). Raises ArgumentError naming the argument on any mismatch.
    """
    writes = written if writes is None else writes
    params = sdfg.arguments
    if len(args) != len(params):
        names = ", ".join(a.name for a in params)
        raise ArgumentError(f"{sdfg.name}() takes {len(params)} arguments ({names}), "
                            f"got {len(args)}")
    env, source, values = {}, {}, {}
    for p, v in zip(params, args):
        if p.kind == "array":
            values[p.name] = _array(sdfg, p, v, env, source, p.name in written,
                                    p.name in writes)
        elif p.kind == "float":
            values[p.name] = np.array([_float(p, v)])
        else:
            if not isinstance(v, (int, np.integer, bool, np.bool_)):   # True is 1
                raise ArgumentError(f"argument {p.name!r} must be an int, got "
                                    f"{type(v).__name__} {v!r}")
            _bind_symbol(sdfg, p.name, int(v), env, source, p.name)
    for p, v in zip(params, args):
        if p.kind == "array":
            _check_shape(p, v, env, source)
    _check_aliasing(params, values)
    missing = [s.name for s in sdfg.symbols if s not in env]
    if missing:
        raise ArgumentError(f"cannot infer the sizes {missing} from the arguments of "
                            f"{sdfg.name}(); use them directly as an array dimension")
    syms = np.array([env[s] for s in sdfg.symbols] + [0, 0], dtype=np.int64)
    return syms, values


def _float(p, v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                               np.floating)):
        raise ArgumentError(f"argument {p.name!r} must be a float, got {type(v).__name__}")
    try:
        return float(v)
    except OverflowError:               # an int beyond the float range
        raise ArgumentError(f"argument {p.name!r} = {v} is too large for a float64") from None


def _array(sdfg, p, v, env, source, written, writes):
    if p.dtype.kind == "c" and not p.shape and isinstance(v, (int, float, complex, np.number)) \
            and not isinstance(v, (bool, np.bool_)):
        v = np.array(v, p.dtype)            # a complex number (frontend/source.py)
    if not isinstance(v, np.ndarray):
        raise ArgumentError(f"argument {p.name!r} must be a NumPy array of {p.dtype}, got "
                            f"{type(v).__name__}")
    if v.dtype != p.dtype and v.dtype.kind in "iu" and p.dtype.kind in "iu" and not writes:
        v = _as_index_array(p, v)
    if v.dtype != p.dtype:
        raise ArgumentError(f"argument {p.name!r} has dtype {v.dtype}, the kernel expects "
                            f"{p.dtype}; convert it with {p.name}.astype(np.{p.dtype})")
    if v.ndim != len(p.shape):
        raise ArgumentError(f"argument {p.name!r} has {v.ndim} dimensions, the kernel expects "
                            f"{len(p.shape)}")
    if not v.flags.c_contiguous and not writes:     # A.T, A[:, 0], a Fortran array: read
        v = np.ascontiguousarray(v)                 # from a copy (no later call reuses it)
    if not v.flags.c_contiguous:
        raise ArgumentError(f"argument {p.name!r} is not C-contiguous, and "
                            f"{sdfg.name}() writes it; pass np.ascontiguousarray({p.name}) "
                            "and copy the result back")
    if written and not v.flags.writeable:
        refuse_read_only(sdfg, p.name)
    for size, actual in zip(p.shape, v.shape):
        if isinstance(size, sp.Symbol):
            _bind_symbol(sdfg, size.name, actual, env, source, p.name, size)
    if v.dtype.kind in "iu":            # the value range bounds every index it provides
        low, high = value_range(p.name)
        env[low], env[high] = (_clip(v.min()), _clip(v.max())) if v.size else (0, -1)
        source[low] = source[high] = p.name
    return as_parts(v)


def as_parts(v):
    """A complex array as the kernel's container holds it (``frontend/complexes.py``): a
    view with a last axis of (real, imaginary); another array as it is."""
    if not isinstance(v, np.ndarray):       # a complex number
        v = np.array(v, np.result_type(v, 1j))
    if v.dtype.kind != "c":
        return v
    return v.reshape(-1).view(v.real.dtype).reshape(v.shape + (2,))


def as_complex(parts):
    """The complex array whose parts (last axis) ``parts`` holds, a view where it can; a
    Python complex for one number."""
    parts = np.ascontiguousarray(parts)
    z = parts.reshape(-1).view(np.result_type(parts.dtype, 1j)).reshape(parts.shape[:-1])
    return complex(z) if z.ndim == 0 else z


def refuse_read_only(sdfg, name):
    raise ArgumentError(f"argument {name!r} is read-only (writeable=False: e.g. "
                        f"np.frombuffer of bytes, a memmap opened with mode='r'), but "
                        f"{sdfg.name}() writes it; pass a writable copy ({name}.copy())")


def _clip(value):
    """An integer array's extreme value within int64, where indices are computed (a uint64
    beyond it is an index beyond every size: its bounds check fails)."""
    return min(max(int(value), INT64[0]), INT64[1])


def _as_index_array(p, v):
    """An integer array of another width or signedness as a copy in the dtype the kernel
    declares (one it only reads: a copy of one it writes would not be written back), when
    every value fits."""
    info = np.iinfo(p.dtype)
    if v.size and (int(v.min()) < info.min or int(v.max()) > info.max):
        raise ArgumentError(f"argument {p.name!r} has values in [{int(v.min())}, "
                            f"{int(v.max())}], beyond the {p.dtype} the kernel indexes with")
    return np.ascontiguousarray(v, dtype=p.dtype)


def _bind_symbol(sdfg, name, value, env, source, arg, symbol=None):
    symbol = symbol or next((s for s in sdfg.symbols if s.name == name), None)
    if symbol is None:
        return
    if not INT64[0] <= value <= INT64[1]:
        raise ArgumentError(f"argument {arg!r} gives {name}={value}, outside the int64 range "
                            f"[-2**63, 2**63 - 1] that {sdfg.name}() computes in")
    if symbol in env and env[symbol] != value:
        raise ArgumentError(f"argument {arg!r} implies {name}={value}, but argument "
                            f"{source[symbol]!r} gave {name}={env[symbol]}: inconsistent sizes")
    env.setdefault(symbol, value)
    source.setdefault(symbol, arg)


def _check_shape(p, v, env, source):
    for k, (size, actual) in enumerate(zip(p.shape, np.shape(v))):
        if size.is_Symbol and size in env:
            if env[size] == actual:
                continue
            expected = sp.Integer(env[size])
        else:
            expected = size if size.is_Integer else size.subs(env)
        if expected.free_symbols:
            continue
        if int(expected) != actual:
            origin = ", ".join(f"{s}={env[s]} from {source[s]!r}" for s in size.free_symbols)
            raise ArgumentError(f"argument {p.name!r} has shape {v.shape}; dimension {k} must "
                                f"be {size} = {int(expected)}" + (f" ({origin})" if origin else ""))


def _check_aliasing(params, values):
    arrays = [(p.name, values[p.name]) for p in params if p.kind == "array"]
    for k, (a, x) in enumerate(arrays):
        for b, y in arrays[k + 1:]:
            if np.shares_memory(x, y):
                raise ArgumentError(f"arguments {a!r} and {b!r} share memory; pass separate "
                                    "arrays (use .copy())")


def signature(args):
    """What ``bind``'s checks depend on but for memory and an index array's values: per
    argument its type, an array's dtype, shape, strides and writeable flag, an integer's
    value (it may give a size). Arguments of one signature pass or fail alike."""
    key = []
    for v in args:          # the common types first: this runs on every call
        t = type(v)
        if t is float:
            key.append(t)
        elif t is np.ndarray:
            key.append((v.dtype, v.shape, v.strides, v.flags.writeable))
        elif isinstance(v, INTEGERS):
            key.append((t, v))
        elif isinstance(v, np.ndarray):         # a subclass
            key.append((t, v.dtype, v.shape, v.strides, v.flags.writeable))
        else:
            key.append(t)
    return tuple(key)


class Binding:
    """``bind``'s result for one call, reusable by the calls with the same
    :func:`signature`: ``values`` gives theirs without the checks that the signature
    decides. ``memo`` keeps what callers derive from the sizes (buffer sizes, plans)."""

    def __init__(self, sdfg, args, writes=()):
        """``writes``: the arrays the kernel writes (see ``bind``); whether they may be
        read-only depends on the call (``writable``)."""
        self.sdfg = sdfg
        self.syms, values = bind(sdfg, args, writes=writes)
        params = sdfg.arguments
        self.arrays = [(k, p.name) for k, p in enumerate(params) if p.kind == "array"]
        self.floats = [(k, p) for k, p in enumerate(params) if p.kind == "float"]
        # An index array of another integer dtype was copied, after a look at its values:
        # no later call may skip that, and this one uses the copy.
        self.complex = [(k, p.name) for k, p in enumerate(params)
                        if p.kind == "array" and p.dtype.kind == "c"]
        self.reusable = all(values[n] is args[k] for k, n in self.arrays
                            if (k, n) not in self.complex)
        self._values = None if self.reusable else values
        self.read_only = {n for k, n in self.arrays if not np.asarray(args[k]).flags.writeable}
        position = {s: j for j, s in enumerate(sdfg.symbols)}
        self.ranges = [(k, *(position[s] for s in value_range(n)))
                       for k, n in self.arrays if np.asarray(args[k]).dtype.kind in "iu"
                       and all(s in position for s in value_range(n))]
        self.memo = {}

    def values(self, args):
        """(symbol values, {argument: ndarray}) for ``args`` of this signature, as
        ``bind`` gives them; ArgumentError where arrays share memory."""
        if self._values is not None:            # not reusable: the call that made it
            return self.syms, dict(self._values)
        values = {n: args[k] for k, n in self.arrays}
        for k, n in self.complex:
            values[n] = as_parts(args[k])
        for k, p in self.floats:
            buffer = values[p.name] = np.empty(1)
            v = args[k]
            buffer[0] = v if type(v) is float else _float(p, v)
        if len(self.arrays) > 1 and not _own_memory([args[k] for k, _ in self.arrays]):
            _check_aliasing(self.sdfg.arguments, values)
        syms = self.syms
        if self.ranges:                 # the value range bounds every index it provides
            syms = syms.copy()
            for k, low, high in self.ranges:
                v = args[k]
                syms[low], syms[high] = (_clip(v.min()), _clip(v.max())) if v.size else (0, -1)
        return syms, values

    def writable(self, names):
        """Raise ``bind``'s error when an array named in ``names`` was given read-only."""
        for name in names:
            if name in self.read_only:
                refuse_read_only(self.sdfg, name)


def _own_memory(arrays):
    """Whether the arrays are distinct and each owns its memory: then none shares any
    (np.shares_memory is the test otherwise)."""
    return all(v.flags.owndata for v in arrays if isinstance(v, np.ndarray)) and \
        len({id(v) for v in arrays}) == len(arrays)     # a complex number: a new array
