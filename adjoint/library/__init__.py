"""Library nodes: statements on whole containers that carry their own rules.

Each kind is one file holding its node class (a ``sdfg.nodes.LibraryNode``: what it
reads and writes, validation, text, reverse and tangent rules, C and CUDA emission)
and, for a NumPy function, the frontend hook that makes the node from a call. The
registry below is the only list of them: ``NUMPY_LINALG`` maps ``np.linalg.<name>`` to
its hook ``(builder, call node, {parameter: AST node}) -> ArrayExpr`` and the names of
its parameters in call order (``NUMPY``, the frontend's table of ``np.<name>``, takes
``np.interp`` the same way, with its keywords); ``SCIPY`` maps a SciPy function (its dotted name; the
frontend knows it by identity, ``array_calls.scipy_function``) that returns a tuple to
its hook ``(builder, call node, {parameter: AST node}, element) -> ArrayExpr`` for
``f(...)[element]`` and its parameter names. The tables are the frontend's
(``frontend/array_calls.py`` dispatches through them): library nodes build on the
frontend, so they register into it rather than the frontend importing them.
"""
from . import cholesky, interp, solve, tridiagonal
from .assertion import Assertion
from .cholesky import Cholesky
from .interp import Interp
from .matmul import MatMul
from .matvec import MatVecPair
from .solve import Solve
from .trsm import Trsm
from .tridiagonal import Tridiagonal
from ..frontend.array_calls import NUMPY, NUMPY_LINALG, SCIPY

NUMPY_LINALG.update({
    "cholesky": (cholesky.call, ("a",)),
    "solve": (solve.call, ("a", "b")),
    "inv": (solve.inverse, ("a",)),
})

NUMPY.update({
    "interp": (interp.call, interp.PARAMETERS, ()),
})

SCIPY.update({
    "scipy.linalg.lapack.dgtsv": (tridiagonal.call, tridiagonal.PARAMETERS),
})

__all__ = ["Assertion", "Cholesky", "Interp", "MatMul", "MatVecPair", "NUMPY_LINALG", "SCIPY", "Solve",
           "Tridiagonal", "Trsm"]
