"""Library nodes: statements on whole containers that carry their own rules.

Each kind is one file holding its node class (a ``sdfg.nodes.LibraryNode``: what it
reads and writes, validation, text, reverse and tangent rules, C and CUDA emission)
and, for a NumPy function, the frontend hook that makes the node from a call. The
registry below is the only list of them: ``NUMPY_LINALG`` maps ``np.linalg.<name>`` to
its hook ``(builder, call node, {parameter: AST node}) -> ArrayExpr`` and the names of
its parameters in call order.
"""
from . import cholesky, solve
from .cholesky import Cholesky
from .matmul import MatMul
from .solve import Solve
from .trsm import Trsm

NUMPY_LINALG = {
    "cholesky": (cholesky.call, ("a",)),
    "solve": (solve.call, ("a", "b")),
    "inv": (solve.inverse, ("a",)),
}

__all__ = ["Cholesky", "MatMul", "NUMPY_LINALG", "Solve", "Trsm"]
