"""adjoint: Python loop kernels -> SDFG -> reverse-mode adjoint -> C, loaded through cffi.

    from adjoint import kernel, symbol, float64, grad
    N = symbol("N")

    @kernel
    def smooth(A: float64[N, N], T: int) -> float:
        ...
"""
from .api import Kernel, grad, jvp, kernel, value_and_grad, vjp
from .errors import (AdjointError, ArgumentError, BoundsError, CompileError,
                     KernelSyntaxError)
from .options import configure, options
from .types import float32, float64, int32, int64, symbol

__version__ = "0.1.0"
__all__ = ["Kernel", "kernel", "grad", "value_and_grad", "vjp", "jvp", "symbol", "float64",
           "float32", "int64", "int32", "configure", "options", "AdjointError", "ArgumentError",
           "BoundsError", "CompileError", "KernelSyntaxError"]
