"""The engine's exceptions: each says what went wrong, where, and what to do."""
import numpy as np


class AdjointError(Exception):
    """Base class of every error the engine raises on purpose."""


class KernelSyntaxError(AdjointError):
    """The kernel uses Python the engine does not compile.

    The message starts with ``file:line:col`` of the construct and says what
    to write instead.
    """

    def __init__(self, message, filename="<kernel>", line=0, col=0):
        self.filename, self.line, self.col = filename, line, col
        super().__init__(f"{filename}:{line}:{col}: {message}")


class ArgumentError(AdjointError, TypeError):
    """A kernel was called with an argument of the wrong kind, dtype, rank or size."""


class BoundsError(AdjointError, IndexError):
    """An index in the kernel falls outside its array for the sizes of this call."""


class LinAlgError(AdjointError, np.linalg.LinAlgError):
    """A factorisation in the kernel failed for this call's values (``np.linalg.cholesky``
    of a matrix that is not positive definite, ``np.linalg.solve`` of a singular one);
    the message names the line. Also a ``numpy.linalg.LinAlgError``, as NumPy raises."""


class AssertionFailed(AdjointError, AssertionError):
    """An ``assert`` in the kernel failed for this call's values: the message names the
    line, the test and the assert's message. Also an ``AssertionError``, as Python raises."""


class CompileError(AdjointError):
    """The C compiler rejected generated code (an engine bug: please report it with the log)."""


class DeviceError(AdjointError):
    """The GPU (``device="cuda"``) is missing, or a CUDA call or kernel launch failed;
    the message names the CUDA error and, for a failed launch, the generated source."""
