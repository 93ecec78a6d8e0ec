"""What every library node's rules use: the derivative context they are given, and the
small maps (copies, sums, zeros) they build around other library nodes.

A rule sees ``Rules``: which containers carry derivatives, each one's adjoint or
tangent name, and ``scratch`` for the transients it needs (added to the SDFG's
containers; named after the node's output, so a node run once per iteration of a loop
reuses one buffer).
"""
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ..sdfg.nodes import Container, MapScope, Memlet, Tasklet

FLOAT64 = np.dtype(np.float64)
ONE = sp.Integer(1)


@dataclass(frozen=True)
class Rules:
    """A derivative rule's view: ``carried`` containers have derivatives named
    ``prefix + name``; ``containers`` (the SDFG's, mutable) grows by ``scratch``."""
    carried: frozenset
    prefix: str
    containers: dict

    def has(self, name):
        return name in self.carried

    def of(self, name):
        return self.prefix + name

    def scratch(self, name, shape, dtype=FLOAT64):
        """A transient ``name`` of ``shape`` (the same one if asked again)."""
        c = self.containers.setdefault(name, Container(name, np.dtype(dtype), tuple(shape),
                                                       True))
        assert c.shape == tuple(shape), f"scratch {name}: two shapes"
        return name


def matrix(shape):
    """The (rows, cols) of a row-major 1-D or 2-D array (a vector is a column)."""
    return (shape[0], shape[1]) if len(shape) == 2 else (shape[0], ONE)


def elementwise(out, shape, value, inputs, line, accumulate=False):
    """A map over the (rows, cols) ``shape`` assigning (or adding, ``accumulate``)
    ``value(i, j, symbols)`` to ``out[i, j]``, where ``inputs`` are (container, subset
    function of (i, j)) pairs and ``symbols`` their connectors in that order."""
    i, j = sp.Symbol("__e0", integer=True), sp.Symbol("__e1", integer=True)
    conns = [sp.Symbol(f"__x{k}", real=True) for k in range(len(inputs))]
    reads = tuple((c, Memlet(name, tuple(at(i, j)))) for c, (name, at) in zip(conns, inputs))
    write = Memlet(out[0], tuple(out[1](i, j)), "sum" if accumulate else None)
    t = Tasklet(reads, ((write, value(i, j, *conns)),), line)
    ranges = ((sp.Integer(0), shape[0], ONE), (sp.Integer(0), shape[1], ONE))
    return MapScope((i, j), ranges, (t,), line)


def at(rank):
    """The subset function of an operand of ``rank`` 1 or 2 seen as a (rows, cols) matrix."""
    return (lambda i, j: (i, j)) if rank == 2 else (lambda i, j: (i,))


def copy_loop(gen, out, source, volume):
    """C copying ``volume`` doubles from container ``source`` to ``out``."""
    if source != out:
        gen.emit(f"for (int64_t sc_q = 0; sc_q < {volume}; ++sc_q) "
                 f"{gen.pointer(out)}[sc_q] = {gen.pointer(source)}[sc_q];")


def whole_operand(b, node, value, what):
    """The float64 container holding ``value`` (an array expression of rank 1 or 2 with
    sizes known on entry) as it is, or a new temporary it is stored into."""
    from ..frontend.array_matmul import _copy, _known_on_entry
    from ..frontend.array_shapes import fmt_shape
    from ..frontend.complexes import is_complex
    from ..frontend.dtypes import value_dtype
    if is_complex(value_dtype(b, value)):
        raise b.src.error(node, f"{what} of complex matrices is not supported (LAPACK's "
                                "real routines): np.linalg.solve and inv are")
    if value.rank not in (1, 2) or not _known_on_entry(b, value.shape):
        raise b.src.error(node, f"{what} of shape {fmt_shape(value.shape)}: a matrix or "
                                "vector whose sizes are known on entry is needed here")
    view = value.view
    if view is not None and view.container.dtype.name == "float64" and \
            view.is_whole(value.shape):
        return view.container
    return _copy(b, node, value)
