"""Elements a sequential loop keeps in locals (scalar promotion).

``for k in range(i + 1, M): B[i, j] += A[k, i] * B[k, j]`` adds into one element in
every iteration; the compiler cannot tell ``B[i, j]`` from ``B[k, j]``, so each
iteration stores it and the next loads it back: a chain through memory. Where every
other access to the container in the loop provably names another element (``k - i >=
1`` over the loops' ranges, ``analysis.bounds.apart``), the element is read into a
local before the loop and written back after it: the same operations in the same
order, in a register."""
import sympy as sp

from ..analysis.bounds import apart
from ..analysis.dependence import counted
from ..sdfg.nodes import Memlet, Pop, Push, index_loads
from ..sdfg.visit import tasklets_only
from .decisions import Promotion


def promoted(loop, containers, outer):
    """The Promotions of the elements (Memlets, no ``wcr``) at addresses the sequential
    ``loop`` does not move over, of arrays it writes, that no other access in its body
    can name: each differs from every other access to its array in some index by at
    least one over the ``outer`` loops' and the loop's ranges. Only a counted loop of
    tasklets, pushes and pops (whose accesses the printer maps to the locals)."""
    if loop.parallel or not counted(loop) or loop.segment:
        return ()
    nodes = tasklets_only(loop.body, allow=(Push, Pop))
    if not nodes:
        return ()
    subsets = {}
    for m, written in (a for n in nodes for a in _memlets(n)):
        if not containers[m.data].is_scalar:
            accessed = subsets.setdefault(m.data, {})
            accessed[m.subset] = accessed.get(m.subset, False) or written
    loops = tuple(outer) + (loop,)
    found = []
    for name, accessed in subsets.items():
        if not any(accessed.values()):
            continue
        for subset in accessed:
            if loop.var in _symbols(subset) or any(index_loads(e) for e in subset):
                continue
            if all(apart(subset, other, loops) for other in accessed if other != subset):
                found.append(Promotion(Memlet(name, subset), accessed[subset]))
    return tuple(found)


def _memlets(node):
    """(memlet, whether it writes) for each access of a tasklet, push or pop."""
    if isinstance(node, Push):
        return [(node.memlet, False)]
    if isinstance(node, Pop):
        return [(node.memlet, True)]
    return [(m, False) for _, m in node.inputs] + [(m, True) for m, _ in node.outputs]


def _symbols(subset):
    return set().union(*(sp.sympify(e).free_symbols for e in subset))
