"""Argument annotations: ``float64[N, N]``, ``symbol("N")``, ``int``, ``float``."""
from dataclasses import dataclass

import numpy as np
import sympy as sp


def symbol(name: str) -> sp.Symbol:
    """A symbolic size shared between arrays (``N = symbol("N")``).

    Sizes are non-negative integers; one compiled kernel serves every value.
    """
    if not name.isidentifier() or not name.isascii():
        raise ValueError(f"symbol name {name!r} must be an ASCII Python identifier")
    return sp.Symbol(name, integer=True, nonnegative=True)


@dataclass(frozen=True)
class ArrayType:
    """A C-contiguous array argument of a given dtype and (symbolic) shape."""
    dtype: np.dtype
    shape: tuple

    @property
    def ndim(self):
        return len(self.shape)


@dataclass(frozen=True)
class DType:
    """``float64`` / ``float32`` / ``int64`` / ``int32``: index it with sizes to declare
    an array type."""
    dtype: np.dtype

    def __getitem__(self, sizes):
        sizes = sizes if isinstance(sizes, tuple) else (sizes,)
        shape = []
        for s in sizes:
            if isinstance(s, (int, np.integer)) and s >= 0:
                shape.append(sp.Integer(int(s)))
            elif isinstance(s, sp.Expr):
                shape.append(s)
            else:
                raise TypeError(f"array size {s!r} must be a non-negative int or a symbol")
        return ArrayType(np.dtype(self.dtype), tuple(shape))


float64 = DType(np.dtype(np.float64))
float32 = DType(np.dtype(np.float32))
complex128 = DType(np.dtype(np.complex128))   # their parts differentiated (api.py)
complex64 = DType(np.dtype(np.complex64))
int64 = DType(np.dtype(np.int64))      # integer arrays: never differentiated
int32 = DType(np.dtype(np.int32))
int16, int8 = DType(np.dtype(np.int16)), DType(np.dtype(np.int8))
uint64, uint32 = DType(np.dtype(np.uint64)), DType(np.dtype(np.uint32))
uint16, uint8 = DType(np.dtype(np.uint16)), DType(np.dtype(np.uint8))
bool_ = DType(np.dtype(np.bool_))      # masks: read-only, never differentiated
