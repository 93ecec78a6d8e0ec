"""Which loops and maps run in parallel (OpenMP), and what each thread keeps private.

A map is parallel when its plain writes name a different element per iteration;
accumulations into a scalar become per-thread partial sums (added up in thread order,
so results do not depend on timing); accumulations that several rows share go through
per-thread copies (shared_across_rows; on the GPU: atomics). A map that records runs
as the loops of its reverse (codegen.c), its outermost parallel like a loop that
pushes (below): its ranges must not depend on its parameters.

A counted loop is parallel when no element one iteration writes is accessed by
another (``analysis.dependence``, whose accesses include the elements indices and
bounds load and the flags conditions read): every pair of accesses to a written array
must agree, in some dimension, on the same expression ``a*v + g`` of the loop variable
``v`` (a != 0, g free of the loop's inner variables), so that equal elements imply
equal iterations, or, in a
loop at the top of its entry, the written container is only added into (``sums``:
per-thread copies, as for maps). Scalars written in the body must be private: written
before any read in every iteration and never read outside the loop, or zero whenever
an iteration starts and ends (``LoopRegion.zeroed``: conv2d's adjoint of its per-pixel
sum; each copy starts at zero). A push reads its element, a pop writes it; the tape
allows threads when every iteration pushes (or every one pops) the same number of
values, so that each finds its own from its index (``tape_per_iteration``). Only the
outermost parallel construct gets threads; a loop of a few iterations (8 at most)
is not one.
"""
from dataclasses import replace

import sympy as sp

from ..sdfg.nodes import (ConditionalRegion, LoopRegion, MapScope, Pop, Push, Sequence,
                          Tasklet, index_loads, trips)
from ..sdfg.visit import Transformer
from .dependence import Scope, counted, injective, private_scalar, same_iteration, trips_taped

def parallelize(sdfg):
    """The SDFG with its outermost parallel loops and maps marked."""
    return sdfg.replace(body=_Marker(sdfg).region(sdfg.body))


class _Marker(Transformer):
    def __init__(self, sdfg):
        super().__init__()
        self.sdfg = sdfg

    def loop(self, loop):
        shares = self._parallel_loop(loop, bool(self.loops))
        if shares is not None:
            private, sums = shares
            return replace(loop, parallel=True, private=private, sums=sums)
        return super().loop(loop)

    def node(self, node):
        return self._map(node) if isinstance(node, MapScope) else node

    def _map(self, node):
        if any(not isinstance(t, (Tasklet, Push)) for t in node.body):
            return node
        if any(isinstance(t, Push) for t in node.body) and any(
                index_loads(x) or sp.sympify(x).free_symbols & set(node.params)
                for r in node.ranges for x in r):
            return node         # its loops (see codegen.c) would push unequal numbers
        writes = {}
        for t in node.body:
            for m in _written(t):
                writes.setdefault(m.data, []).append(m)
        for name, memlets in writes.items():
            if name in node.private:        # each point's own copy
                continue
            plain = [m for m in memlets if not m.wcr]
            if plain and (len({m.subset for m in memlets}) > 1
                          or not injective(plain[0].subset, node.params)):
                return node
        return replace(node, parallel=True)

    # ---- loops ------------------------------------------------------------------------
    def _parallel_loop(self, loop, nested):
        """(private scalars, containers summed through per-thread copies) if ``loop`` can
        run in parallel, else None. A few iterations (an edge slab of a gathered nest,
        its loop over the two sides) are not worth threads: the loops inside may be. A
        container the iterations only add into, at elements other iterations add into
        too (a column sum ``gb[j] += ...`` in a loop over rows, a scalar), is summed by
        each thread into a copy of its own: on the CPU, in a loop at the top of its
        entry."""
        if not counted(loop) or not loop.step.is_number:
            return None
        tape = tape_per_iteration(loop)
        if (loop.stop - loop.start).is_number and loop.stop - loop.start <= 8 or tape is None:
            return None
        containers = self.sdfg.containers
        scope = Scope(loop.body, containers, reductions=True)    # s = s + ...: a sum
        if scope.library():
            return None
        summable = not nested
        private, sums = [], []
        for name in scope.written:
            if containers[name].is_scalar and (name in loop.zeroed or
                                               self._private(name, loop)):
                private.append(name)
            elif not containers[name].is_scalar and \
                    next(scope.meeting(name, (loop.var,)), None) is None:
                continue
            elif summable and name not in scope.read | scope.assigned:
                sums.append(name)
            else:
                return None
        return tuple(private), tuple(sorted(sums))

    def _private(self, name, loop):
        return private_scalar(name, loop, self.sdfg.body, self.sdfg.containers)


def tape_per_iteration(loop):
    """("push" or "pop", n) when every iteration of ``loop`` pushes, or every one pops,
    the same number n of tape values (a sympy expression of sizes and outer variables);
    ("", 0) when they use no tape; None when iterations may differ (tape use under a
    condition, or in an inner loop whose trips depend on the iteration or on data) or
    push and pop both."""
    kinds = set()

    def fixed(bounds, bound):
        return not any(index_loads(x) or sp.sympify(x).free_symbols & bound for x in bounds)

    def count(region, bound):
        if isinstance(region, Sequence):
            parts = [count(e, bound) for e in region.elements]
            return None if None in parts else sp.Add(*parts)
        if isinstance(region, ConditionalRegion):
            return 0 if all(count(b, bound) == 0 for _, b in region.branches) else None
        if isinstance(region, LoopRegion):
            if trips_taped(region):
                return None
            inner = count(region.body, bound | {region.var})
            if inner == 0:
                return inner
            if inner is None or not counted(region) or not fixed(
                    (region.start, region.stop, region.step), bound):
                return None
            return trips(region.start, region.stop, region.step) * inner
        total = sp.Integer(0)
        for node in region.nodes:
            leaves = node.body if isinstance(node, MapScope) else (node,)
            taped = [t for t in leaves if isinstance(t, (Push, Pop))]
            kinds.update("push" if isinstance(t, Push) else "pop" for t in taped)
            if taped and isinstance(node, MapScope):
                if not fixed([x for r in node.ranges for x in r], bound):
                    return None
                total += len(taped) * sp.Mul(*(trips(*r) for r in node.ranges))
            else:
                total += len(taped)
        return total

    per = count(loop.body, {loop.var})
    if per is None or len(kinds) > 1:
        return None
    return (kinds.pop() if kinds else ""), per


def _written(node):
    """The memlets a tasklet or a pop writes."""
    if isinstance(node, Tasklet):
        return [m for m, _ in node.outputs]
    return [node.memlet] if isinstance(node, Pop) else []


def shared_sums(node):
    """Containers a map accumulates into from several iterations (atomic updates);
    sums into scalars are excluded (they use per-thread partial sums). Pushes and pops
    (a recording map's) add into nothing."""
    subsets = {}
    for t in _tasklets(node):
        for m, _ in t.outputs:
            if m.wcr and m.subset:
                subsets.setdefault(m.data, set()).add(m.subset)
    return {name for name, s in subsets.items()
            if len(s) > 1 or not injective(next(iter(s)), node.params)}


def shared_across_rows(node):
    """The containers of ``shared_sums(node)`` that points with different values of the
    map's first parameter, the one threads split, add into: those need a copy per
    thread; the others each thread's rows add into alone (``g[i, j] += ...`` and
    ``g[i, j + 1] += ...``)."""
    p, inner = node.params[0], set(node.params[1:])
    out = set()
    for name in shared_sums(node):
        subsets = [m.subset for t in _tasklets(node) for m, _ in t.outputs if m.data == name]
        if any(not same_iteration(w, a, (p,), inner) for w in subsets for a in subsets):
            out.add(name)
    return out


def _tasklets(node):
    """A map's tasklets (not its pushes and pops)."""
    return [t for t in node.body if isinstance(t, Tasklet)]
