"""Which loops and maps run in parallel (OpenMP), and what each thread keeps private.

A map is parallel when its plain writes name a different element per iteration;
accumulations into a scalar become per-thread partial sums (added up in thread order,
so results do not depend on timing); accumulations that several rows share go through
per-thread copies (shared_across_rows; on the GPU: atomics). A map that records runs
as the loops of its reverse (codegen.c), its outermost parallel like a loop that
pushes (below): its ranges must not depend on its parameters.

A counted loop is parallel when no element one iteration writes is accessed by
another: every pair of accesses to a written array must agree, in some dimension,
on the same expression ``a*v + g`` of the loop variable ``v`` (a != 0, g free of the
loop's inner variables), so that equal elements imply equal iterations, or, in a
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

from ..options import options
from ..sdfg.nodes import (ConditionalRegion, Guard, LoopRegion, MapScope, MatMul, Pop, Push,
                          Sequence, State, Tasklet, as_reduction, condition_containers,
                          index_loads, trips, walk)

PARALLEL_WORK = 32768   # statement instances below which a parallel construct runs on one thread


def parallelize(sdfg):
    """The SDFG with its outermost parallel loops and maps marked."""
    return sdfg.replace(body=_Marker(sdfg).region(sdfg.body))


class _Marker:
    def __init__(self, sdfg):
        self.sdfg = sdfg

    def region(self, region, nested=False):
        if isinstance(region, Sequence):
            return Sequence(tuple(self.region(e, nested) for e in region.elements))
        if isinstance(region, LoopRegion):
            shares = self._parallel_loop(region, nested)
            if shares is not None:
                private, sums = shares
                return replace(region, parallel=True, private=private, sums=sums)
            return replace(region, body=self.region(region.body, True))
        if isinstance(region, ConditionalRegion):
            return ConditionalRegion(tuple((c, self.region(b, nested))
                                           for c, b in region.branches), region.line)
        return State(tuple(self._map(n) if isinstance(n, MapScope) else n
                           for n in region.nodes), region.label)

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
        if loop.stop is None or loop.exit is not None or not loop.step.is_number:
            return None
        tape = tape_per_iteration(loop)
        if (loop.stop - loop.start).is_number and loop.stop - loop.start <= 8 or tape is None:
            return None
        inner, writes, accesses, read, assigned = set(), {}, {}, set(), set()
        for node, context in walk(loop.body):
            inner |= {r.var for r in context if isinstance(r, LoopRegion)}
            read |= {n for r in context if isinstance(r, Guard)
                     for n in condition_containers(r.condition, self.sdfg.containers)}
            if isinstance(node, MatMul):
                return None
            tasks = node.body if isinstance(node, MapScope) else (node,)
            if isinstance(node, MapScope):
                inner |= set(node.params)
            for t in tasks:
                t = as_reduction(t) if isinstance(t, Tasklet) else t    # s = s + ...: a sum
                for m in _written(t):
                    writes.setdefault(m.data, []).append(m.subset)
                    accesses.setdefault(m.data, []).append(m.subset)
                    if m.wcr != "sum":
                        assigned.add(m.data)
                for m in _read(t):
                    accesses.setdefault(m.data, []).append(m.subset)
                    read.add(m.data)
        summable = options.device == "cpu" and not nested
        private, sums = [], []
        for name, subsets in writes.items():
            if self.sdfg.containers[name].is_scalar and (name in loop.zeroed or
                                                         self._private(name, loop)):
                private.append(name)
            elif not self.sdfg.containers[name].is_scalar and all(
                    _same_iteration(w, a, loop.var, inner) for w in subsets
                    for a in accesses[name]):
                continue
            elif summable and name not in read | assigned:
                sums.append(name)
            else:
                return None
        return tuple(private), tuple(sorted(sums))

    def _private(self, name, loop):
        return private_scalar(name, loop, self.sdfg.body, self.sdfg.containers)


def private_scalar(name, loop, body, containers):
    """Whether the scalar ``name`` is private to each iteration of ``loop`` (a loop of
    ``body``): a transient written before any read in every iteration, and read neither
    outside the loop nor by its exit test."""
    if not containers[name].transient or _first_access(loop.body, name) != "write":
        return False
    if loop.exit is not None and name in condition_containers(loop.exit, containers):
        return False
    return not _read_outside(body, loop, name, containers)


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
            if region.tape_trips or (region.reverse and region.exit is not None):
                return None
            inner = count(region.body, bound | {region.var})
            if inner == 0:
                return inner
            if inner is None or region.stop is None or region.exit is not None or not fixed(
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


def _read(node):
    """The memlets a tasklet or a push reads."""
    if isinstance(node, Tasklet):
        return [m for _, m in node.inputs]
    return [node.memlet] if isinstance(node, Push) else []


def shared_sums(node):
    """Containers a map accumulates into from several iterations (atomic updates);
    sums into scalars are excluded (they use per-thread partial sums)."""
    subsets = {}
    for t in node.body:
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
        subsets = [m.subset for t in node.body for m, _ in t.outputs if m.data == name]
        if any(not _same_iteration(w, a, p, inner) for w in subsets for a in subsets):
            out.add(name)
    return out


NEVER, ANY = "never", "any"      # distance: no two points meet; cannot be told


def distance(x, y, n):
    """``u - w`` per variable (``n`` of them) where subset ``x`` at point u names the
    element subset ``y`` names at w (both as linear_forms); NEVER if no such points,
    ANY if they cannot be told (not affine alike, or some variable free)."""
    d = {}
    for fx, fy in zip(x, y):
        if fx is None or fy is None or fx[0] != fy[0]:
            return ANY
        apart = sp.expand(fy[1] - fx[1])
        if not apart.is_Integer:
            return ANY
        used = [(k, a) for k, a in enumerate(fx[0]) if a]
        if not used:
            if apart:
                return NEVER
            continue
        if len(used) > 1:
            return ANY
        (k, a), = used
        if apart % a or d.setdefault(k, apart // a) != apart // a:
            return NEVER
    if len(d) < n:
        return ANY
    return tuple(int(d[k]) for k in range(n))


def linear_form(e, variables):
    """(integer coefficient of each variable, the rest) of ``e``, or None."""
    coefficients = tuple(sp.diff(e, v) for v in variables)
    if not all(c.is_Integer for c in coefficients):
        return None
    return coefficients, sp.expand(e - sum(c * v for c, v in zip(coefficients, variables)))


def injective(subset, params):
    """Each parameter alone, with a nonzero constant coefficient, in some dimension."""
    return all(any(_isolates(e, p, set(params) - {p}) for e in subset) for p in params)


def _isolates(e, v, others):
    e = sp.expand(e)
    a = sp.diff(e, v)
    if not a.is_number or a == 0 or index_loads(e):
        return False
    return not ((e - a * v).free_symbols & others)


def _same_iteration(w, a, v, inner):
    """Whether accesses ``w`` and ``a`` can only touch one element in one iteration."""
    return any(sp.expand(x - y) == 0 and _isolates(x, v, inner) for x, y in zip(w, a))


def _first_access(region, name):
    """'write' if the body's first access to the scalar is an unconditional write not
    reading it (a pop counts as one), or if every access lies in one inner loop each
    iteration of which writes it first (``s = ...`` inside a row loop); 'read'
    otherwise; None if never accessed."""
    for k, element in enumerate(region.elements):
        if isinstance(element, LoopRegion) and _mentions(element, name):
            alone = not any(_mentions(e, name) for e in region.elements[k + 1:])
            return "write" if alone and _first_access(element.body, name) == "write" \
                else "read"
        if isinstance(element, State):
            for node in element.nodes:
                if isinstance(node, (Tasklet, Pop)):
                    if any(m.data == name for m in _read(node)):
                        return "read"
                    if any(m.data == name for m in _written(node)):
                        return "write"
                elif _mentions(node, name):
                    return "read"
        elif _mentions(element, name):
            return "read"
    return None


def _mentions(region, name):
    dataflow = (Tasklet, MapScope, MatMul, Push, Pop)
    for node, context in walk(State((region,)) if isinstance(region, dataflow) else region):
        tasks = node.body if isinstance(node, MapScope) else (node,)
        for t in tasks:
            if isinstance(t, Tasklet) and (any(m.data == name for _, m in t.inputs)
                                           or any(m.data == name for m, _ in t.outputs)):
                return True
            if isinstance(t, (Push, Pop)) and t.memlet.data == name:
                return True
            if isinstance(t, MatMul) and name in (t.out, t.a, t.b):
                return True
        if any(isinstance(r, Guard) and name in {s.name for s in r.condition.free_symbols}
               for r in context):
            return True
    return False


def _read_outside(body, loop, name, containers):
    for node, context in walk(body):
        if any(r is loop for r in context):
            continue
        tasks = node.body if isinstance(node, MapScope) else (node,)
        if any(isinstance(t, Tasklet) and any(m.data == name for _, m in t.inputs)
               for t in tasks):
            return True
        if any(isinstance(r, Guard) and name in condition_containers(r.condition, containers)
               for r in context):
            return True
    return False
