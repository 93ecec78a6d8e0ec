"""The plain-Python seidel2d (the kernel's reference semantics), with or without the engine.

With a working engine this is ``simcore.models.seidel``'s own functions (``seidel2d.py_func``).
Without it, the functions ``seidel2d``, ``polybench_init`` and ``polybench_weights`` are
taken from models/seidel.py's source (decorators dropped, annotations
unevaluated, nothing else imported) and
the size symbol N is bound from ``A.shape[0]`` at call time, as the engine does.
"""
import __future__
import ast
import pathlib
import types

import numpy as np

MODEL = pathlib.Path(__file__).resolve().parents[2] / "models" / "seidel.py"
FUNCTIONS = ("seidel2d", "polybench_init", "polybench_weights")


def _from_source():
    tree = ast.parse(MODEL.read_text(), str(MODEL))
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in FUNCTIONS]
    for node in defs:
        node.decorator_list = []
    ns = {"np": np}
    code = compile(ast.Module(body=defs, type_ignores=[]), str(MODEL), "exec",
                   flags=__future__.annotations.compiler_flag)  # annotations stay unevaluated
    exec(code, ns)
    plain = ns["seidel2d"]

    def seidel2d(A, w, TSTEPS):
        ns["N"] = A.shape[0]
        return plain(A, w, TSTEPS)
    return types.SimpleNamespace(**{**{name: ns[name] for name in FUNCTIONS}, "seidel2d": seidel2d})


def plain_model():
    """A namespace with plain-Python ``seidel2d``, ``polybench_init``, ``polybench_weights``."""
    try:
        from simcore.models import seidel
        return types.SimpleNamespace(seidel2d=seidel.seidel2d.py_func, polybench_init=seidel.polybench_init,
                                     polybench_weights=seidel.polybench_weights)
    except Exception:  # the engine (or the framework) does not import yet
        return _from_source()


def plain_seidel2d():
    return plain_model().seidel2d
