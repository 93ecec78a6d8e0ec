"""Library nodes: statements on whole containers that carry their own rules.

Each kind is one file holding its node class (a ``sdfg.nodes.LibraryNode``: what it
reads and writes, validation, text, reverse and tangent rules, C and CUDA emission)
and, for a NumPy function, the frontend hook that makes the node from a call. The
registry below is the only list of them: ``NUMPY_LINALG`` maps ``np.linalg.<name>`` to
its hook ``(builder, call node, {parameter: AST node}) -> ArrayExpr`` and the names of
its parameters in call order; ``SCIPY`` maps a SciPy function (its dotted name; the
frontend knows it by identity, ``scipy_function``) that returns a tuple to its hook
``(builder, call node, {parameter: AST node}, element) -> ArrayExpr`` for
``f(...)[element]`` and its parameter names.
"""
import sys

from . import cholesky, solve, tridiagonal
from .cholesky import Cholesky
from .matmul import MatMul
from .solve import Solve
from .trsm import Trsm
from .tridiagonal import Tridiagonal

NUMPY_LINALG = {
    "cholesky": (cholesky.call, ("a",)),
    "solve": (solve.call, ("a", "b")),
    "inv": (solve.inverse, ("a",)),
}

SCIPY = {
    "scipy.linalg.lapack.dgtsv": (tridiagonal.call, tridiagonal.PARAMETERS),
}


def scipy_function(value):
    """The name in ``SCIPY`` of the function ``value`` is (by identity), or None; SciPy
    is never imported here: a program holding one of its functions has."""
    for name in SCIPY:
        module, attr = name.rsplit(".", 1)
        loaded = sys.modules.get(module)
        if loaded is not None and getattr(loaded, attr, None) is value:
            return name
    return None


__all__ = ["Cholesky", "MatMul", "NUMPY_LINALG", "SCIPY", "Solve", "Tridiagonal", "Trsm",
           "scipy_function"]
