"""Which loops and maps run as CUDA kernels, and how: grid levels, atomics, tape positions.

A GPU runs more in parallel than the CPU threads of ``analysis.parallel`` allow:

- a counted loop whose iterations meet only through sums (two iterations adding into
  one element, as a reverse sweep scatters adjoints) is a kernel whose shared sums are
  ``atomicAdd``s; every other pair of accesses to an element, one of them a write or a
  sum, must come from one iteration (``analysis.dependence``, as for OpenMP);
- a loop or map whose body pushes (recording) or pops (reverse sweep) a fixed number of
  elements per iteration, outside any inner loop or condition, is a kernel too: each
  iteration computes the tape positions the sequential order would use;
- perfectly nested loops that are each such loops (bounds free of the outer variables)
  form one kernel over a grid of up to three levels, the innermost loop fastest.

Written scalars must be private to an iteration (as for OpenMP), or only added into
(a sum over the iterations: block reductions, as for maps). Everything else runs in a
single GPU thread; only the outermost kernel-capable construct is marked.
"""
from dataclasses import dataclass, replace

import sympy as sp

from ..sdfg.nodes import (LibraryNode, LoopRegion, MapScope, Memlet, Pop, Push, Sequence, Tasklet,
                          elements, index_loads, loops, walk)
from .dependence import SUM, Scope, counted, injective, private_scalar, trips_taped
from .parallel import _Marker, shared_sums

LEVELS = 3      # loops one kernel's grid covers


@dataclass(frozen=True)
class Nest:
    """Loops one kernel runs as a grid (outermost first) and what its body needs."""
    loops: tuple
    private: tuple          # scalars each iteration keeps its own copy of
    atomic: frozenset       # Memlets of sums other iterations may add into too
    tape: str = ""          # "push", "pop" or "" (no tape)
    per_iteration: int = 0  # tape elements per iteration
    sums: tuple = ()        # scalars the iterations only add into (block reductions)

    @property
    def body(self):
        return self.loops[-1].body


def device_parallelize(sdfg):
    """The SDFG with its outermost kernel loops and maps marked ``parallel``."""
    return sdfg.replace(body=_DeviceMarker(sdfg).region(sdfg.body))


class _DeviceMarker(_Marker):
    def _parallel_loop(self, loop, nested):
        nest = kernel_nest(self.sdfg, loop)
        return None if nest is None else (nest.private, ())

    def _map(self, node):
        return replace(node, parallel=True) if map_kernel(node) else node


def map_kernel(node):
    """Whether a map runs as a kernel: plain writes one element per iteration (sums may
    be shared: atomics, even where the CPU keeps such a scatter sequential), pushes only
    of elements the iteration writes, ranges known at launch."""
    params = set(node.params)
    for a, b, s in node.ranges:
        if any(index_loads(x) or sp.sympify(x).free_symbols & params for x in (a, b, s)):
            return False
    if any(not isinstance(t, (Tasklet, Push)) for t in node.body):
        return False
    plain = {m for t in node.body if isinstance(t, Tasklet) for m, _ in t.outputs if not m.wcr}
    for t in node.body:
        if isinstance(t, Push) and replace(t.memlet, wcr=None) not in plain:
            return False
    writes = {}
    for t in node.body:
        if isinstance(t, Tasklet):
            for m, _ in t.outputs:
                writes.setdefault(m.data, []).append(m)
    for memlets in writes.values():       # sums may be shared (atomics); plain writes not
        plain = [m for m in memlets if not m.wcr]
        if plain and (len({m.subset for m in memlets}) > 1
                      or not injective(plain[0].subset, node.params)):
            return False
    return True


def map_pushes(node):
    return sum(isinstance(t, Push) for t in node.body)


def map_atomics(node):
    """The sums of a map kernel that need atomics (as ``analysis.parallel.shared_sums``)."""
    shared = shared_sums(replace(node, body=tuple(t for t in node.body
                                                   if isinstance(t, Tasklet))))
    return frozenset(m for t in node.body if isinstance(t, Tasklet) for m, _ in t.outputs
                     if m.wcr and m.data in shared)


def kernel_nest(sdfg, loop):
    """The Nest a loop heads, collapsing up to LEVELS perfectly nested loops, or None
    when the loop cannot be a kernel."""
    chain = [loop]
    while len(chain) < LEVELS:
        inner = _only_loop(chain[-1].body)
        if inner is None or inner.segment or not _rectangular(inner, chain):
            break
        chain.append(inner)
    while chain:
        nest = _nest(sdfg, tuple(chain))
        if nest is not None:
            return nest
        chain.pop()
    return None


def distributed(sdfg, loop):
    """A kernel nest whose innermost body is several loops, as one nest per body loop,
    each collapsing deeper into its grid; None when that is not allowed or gains nothing.

    The gather splits a reversed stencil's innermost range into pieces (the boundary
    rows and the interior), so the grid stopped above them and each thread ran the
    pieces along a row: uncoalesced, and one level of threads short (jacobi-2d's
    gradient took 28x its forward on an H200). Distributing a parallel nest over its
    body is legal: iterations meet only through atomic sums, which commute, and with no
    private scalars or tape positions nothing passes from one piece to the next inside
    an iteration but through arrays that iteration alone touches."""
    nest = kernel_nest(sdfg, loop)
    if nest is None or nest.private or nest.tape or nest.sums or len(nest.loops) == LEVELS:
        return None
    pieces = elements(nest.body)
    if len(pieces) < 2 or not all(isinstance(e, LoopRegion) for e in pieces):
        return None
    nests = [_wrapped(nest.loops, piece) for piece in pieces]
    if all(len(getattr(kernel_nest(sdfg, n), "loops", ())) <= len(nest.loops) for n in nests):
        return None
    return nests


def _wrapped(chain, piece):
    """``piece`` inside copies of the loops of ``chain`` (outermost first)."""
    body = Sequence((piece,))
    for r in reversed(chain):
        r = replace(r, body=body)
        body = Sequence((r,))
    return r


def _only_loop(body):
    found = elements(body)
    if len(found) == 1 and isinstance(found[0], LoopRegion):
        return found[0]
    return None


def _rectangular(loop, outer):
    variables = {r.var for r in outer}
    return all(not (sp.sympify(x).free_symbols & variables) and not index_loads(x)
               for x in (loop.start, loop.stop, loop.step) if x is not None)


def _nest(sdfg, chain):
    if not all(counted(r) and r.step.is_number and r.step != 0 for r in chain):
        return None
    innermost = chain[-1]
    scope, tape = Scope(innermost.body, sdfg.containers), _tape(innermost.body)
    if scope.library() or tape is None:
        return None
    kind, count = tape
    if kind and len({r.reverse for r in chain}) > 1:
        return None
    # A taped scalar must be private like any written one (a push reads it, a pop writes
    # it): recorded once per iteration (a decision on data), not carried across them.
    private, sums = [], []
    for name in sorted(scope.written):
        if sdfg.containers[name].is_scalar:
            kinds = scope.kinds(name)
            if kinds == {SUM}:
                sums.append(name)
            elif SUM in kinds or not private_scalar(name, innermost, sdfg.body,
                                                    sdfg.containers):
                return None
            else:
                private.append(name)
    variables = {r.var for r in chain}
    atomic = set()
    for name in scope.by_data:
        if sdfg.containers[name].is_scalar:
            continue
        for x, y in scope.meeting(name, variables):
            if x.kind == y.kind == SUM:
                atomic.add(Memlet(x.data, x.subset, "sum"))
                continue
            return None
    order = list(sdfg.containers)
    private.sort(key=order.index)
    return Nest(chain, tuple(private), frozenset(atomic), kind, count, tuple(sums))


def _tape(body):
    """(tape kind, tape elements per iteration) of a kernel body: pushes or pops in its
    own states (not in loops, conditions or maps); None when its tape use is not such
    a fixed count (a trip count taped inside, pushes and pops both)."""
    if any(trips_taped(r) for r in loops(body)):
        return None
    pushes = pops = 0
    for node, context in walk(body):
        leaves = node.body if isinstance(node, MapScope) else (node,)
        taped = [t for t in leaves if isinstance(t, (Push, Pop))]
        if taped and (context or isinstance(node, MapScope)):
            return None
        pushes += sum(isinstance(t, Push) for t in taped)
        pops += sum(isinstance(t, Pop) for t in taped)
    if pushes and pops:
        return None
    return ("push" if pushes else "pop" if pops else ""), pushes + pops


def has_kernels(item):
    """Whether a region or dataflow node holds work that runs as kernels: marked loops
    and maps, and library nodes that are kernels of their own (matrix products)."""
    if isinstance(item, LibraryNode):
        return item.device_kernel
    if isinstance(item, MapScope):
        return item.parallel
    if isinstance(item, (Tasklet, Push, Pop)):
        return False
    if isinstance(item, LoopRegion) and item.parallel:
        return True
    for node, context in walk(item):
        if any(isinstance(r, LoopRegion) and r.parallel for r in context):
            return True
        if isinstance(node, LibraryNode) and node.device_kernel or \
                isinstance(node, MapScope) and node.parallel:
            return True
    return False
