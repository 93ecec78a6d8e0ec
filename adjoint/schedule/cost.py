"""The cost model of threads: a parallel construct runs on threads when its statement
instances reach PARALLEL_WORK (smaller ones lose to the cost of starting threads); the
per-thread copies of its sums hold PRIVATE_SUMS elements at most, all threads together,
and a quarter of its work (else one thread adds into the container: zeroing and adding
up big copies would cost more than the threads give)."""
import sympy as sp

from ..analysis.dependence import countable
from ..sdfg.nodes import LoopRegion, walk
from ..sdfg.visit import leaves
from .decisions import Threads

PARALLEL_WORK = 32768   # statement instances below which a parallel construct runs on one thread
PRIVATE_SUMS = 1 << 24   # elements of the per-thread copies of a loop's sums, all threads


def work(loop):
    """Statement instances of a loop nest, estimated from the ranges, outer variables
    at their start, of the costliest innermost loop or map, times the statements it
    runs (each term of a gathered edge tests its own condition)."""
    statements = {}
    for node, context in walk(loop.body):
        for maps, _ in leaves(node):
            loops = tuple(r for r in context + maps if isinstance(r, LoopRegion))
            statements[loops] = statements.get(loops, 0) + 1
    volumes = set()
    for loops, count in statements.items():       # each innermost loop or map
        volume, outer = sp.Integer(count), {}
        for region in (loop,) + loops:
            if not countable(region):
                continue
            volume *= sp.Max((region.stop - region.start).subs(outer), 1)
            outer[region.var] = region.start
        volumes.add(volume)
    return sp.Max(*volumes) if volumes else sp.Integer(1)


def loop_threads(loop):
    """Threads for a parallel loop, or None when its nest is provably smaller than
    PARALLEL_WORK (an edge piece: no threads, no outlined function)."""
    volume = work(loop)
    if volume.is_number and volume < PARALLEL_WORK:
        return None
    return Threads(volume, PARALLEL_WORK)


def map_threads(node):
    """Threads for a parallel map over its points."""
    return Threads(sp.Mul(*[(b - a) for a, b, _ in node.ranges]), PARALLEL_WORK)
