"""Library nodes: statements on whole containers that carry their own rules.

Each kind is one file holding its node class (a ``sdfg.nodes.LibraryNode``: what it
reads and writes, validation, text, reverse and tangent rules, C and CUDA emission)
and, for a NumPy function, the frontend hook that makes the node from a call. The
registry below is the only list of them: ``NUMPY_LINALG`` maps ``np.linalg.<name>`` to
its hook ``(builder, call node, {parameter: AST node}) -> ArrayExpr`` and the names of
its parameters in call order. The table is the frontend's (``frontend/array_calls.py``
dispatches through it): library nodes build on the frontend, so they register into it
rather than the frontend importing them.
"""
from . import cholesky, solve
from .cholesky import Cholesky
from .matmul import MatMul
from .solve import Solve
from .trsm import Trsm
from ..frontend.array_calls import NUMPY_LINALG

NUMPY_LINALG.update({
    "cholesky": (cholesky.call, ("a",)),
    "solve": (solve.call, ("a", "b")),
    "inv": (solve.inverse, ("a",)),
})

__all__ = ["Cholesky", "MatMul", "NUMPY_LINALG", "Solve", "Trsm"]
