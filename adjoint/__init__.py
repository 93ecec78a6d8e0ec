"""adjoint: Python loop kernels -> SDFG -> reverse-mode adjoint -> C, loaded through cffi.

    from adjoint import kernel, symbol, float64, grad
    N = symbol("N")

    @kernel
    def smooth(A: float64[N, N], T: int) -> float:
        ...
"""
import os

# Threads of OpenMP regions spin only briefly when idle: the engine calls many short
# parallel kernels (checkpointing replays loops piece by piece), and long spinning
# steals the cores from the thread that has work. Set the variable to override.
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

from .api import Kernel, configure, grad, jvp, kernel, value_and_grad, vjp  # noqa: E402
from .errors import (AdjointError, ArgumentError, AssertionFailed, BoundsError, CompileError,
                     DeviceError, KernelSyntaxError, LinAlgError)
from .options import options
from .types import (bool_, complex64, complex128, float32, float64, int8, int16, int32, int64, symbol, uint8, uint16,
                    uint32, uint64)

__version__ = "0.1.0"
__all__ = ["Kernel", "kernel", "grad", "value_and_grad", "vjp", "jvp", "symbol", "float64",
           "float32", "complex128", "complex64", "int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8",
           "bool_", "configure", "options", "AdjointError",
           "ArgumentError",
           "AssertionFailed", "BoundsError", "CompileError", "DeviceError", "KernelSyntaxError",
           "LinAlgError"]
