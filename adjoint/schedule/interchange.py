"""Parallel loops around sequential loops, run with their own iterations innermost.

``for j (independent): for k: B[i, j] += A[k, i] * B[k, j]`` walks A and B down columns,
and each iteration is a chain through one element in memory (the compiler cannot tell
``B[i, j]`` from ``B[k, j]``). Its iterations being independent, any order that keeps
each iteration's own order computes the same values, bit for bit: the body's pieces in
turn, each over all of j, a sequential loop's with j innermost (``for k: for j: ...``),
unit stride and one SIMD lane per j, each lane adding in its element's order. A loop
that records pushes each iteration's values where its serial code does (in its slots,
or the q-th block of its values per iteration; each piece's from its offset there), so
the reverse sweep finds them as before. A scalar each iteration keeps is an element per
iteration (of a strip of them at a time)."""
import sympy as sp

from ..analysis.dependence import counted, stride
from ..analysis.parallel import tape_per_iteration
from ..sdfg.nodes import LoopRegion, Push, Sequence, State, Tasklet, trips
from ..sdfg.visit import flattened, tasklets_only
from .decisions import Interchange
from .tape import slot_layout, uses_tape


def interchange(loop, containers):
    """The Interchange of a parallel loop whose body is states of tasklets and pushes and
    sequential counted loops over ranges free of its variable, each of states of those
    (pushes in slots), where that gives more unit-stride accesses than it takes away
    (``_gain``); else None. The scalars its iterations keep (``private``,
    ``zeroed``) become one element per iteration; a loop adding into shared copies
    (``sums``) keeps its order, and so does one that pops (its values' order)."""
    if not (loop.parallel and counted(loop) and loop.step.is_number) or loop.segment \
            or loop.sums:
        return None
    pieces, pending = [], []
    for e in flattened(loop.body):
        if isinstance(e, State) and all(isinstance(n, (Tasklet, Push)) for n in e.nodes):
            pending.append(e)
            continue
        if not _inner(e, loop.var):
            return None
        if pending:
            pieces.append(_states(pending))
            pending = []
        pieces.append(e)
    if pending:
        pieces.append(_states(pending))
    inner = [p for p in pieces if isinstance(p, LoopRegion)]
    nodes = [n for p in pieces for n in tasklets_only(p.body if p in inner else p, (Push,))]
    own = set(loop.private) | set(loop.zeroed)
    if not inner or any(containers[m.data].is_scalar and m.data not in own
                        for t in nodes if isinstance(t, Tasklet) for m, _ in t.outputs):
        return None
    if sum(_gain(p, loop.var) for p in inner) <= 0:
        return None
    own = tuple(sorted({(m.data, m.subset) for t in nodes if isinstance(t, Tasklet)
                        for m in [m for _, m in t.inputs] + [m for m, _ in t.outputs]
                        if m.data in own}, key=str))
    if not uses_tape(loop.body):
        return Interchange(tuple(pieces), own=own)
    taped = tape_per_iteration(loop)
    if taped is None or taped[0] != "push":
        return None
    slots = slot_layout(loop)
    counts = [_pushes(p, bool(slots)) for p in pieces]
    offsets = tuple(sp.Add(*counts[:k]) for k in range(len(counts)))
    return Interchange(tuple(pieces), offsets, taped[1], bool(slots), own)


def _inner(region, var):
    """Whether ``region`` is a sequential counted loop of tasklets (and pushes in its
    slots) over a range free of ``var``, which may run outside the loop over ``var``."""
    return isinstance(region, LoopRegion) and counted(region) and not (
        region.parallel or region.segment or region.tape_trips or region.private
        or region.zeroed or region.sums) and \
        not any(var in x.free_symbols for x in (region.start, region.stop, region.step)) and \
        tasklets_only(region.body, (Push,)) is not None and \
        (not uses_tape(region.body) or slot_layout(region) is not None)


def _states(states):
    """The states as one piece (a state, or their sequence)."""
    return states[0] if len(states) == 1 else Sequence(tuple(states))


def _pushes(piece, slotted):
    """The tape values a piece pushes in one iteration of the loop around it (``slotted``:
    in the loop's slots, none in inner loops)."""
    if isinstance(piece, LoopRegion):
        if slotted:
            return sp.Integer(0)
        pushed = sum(isinstance(n, Push) for n in tasklets_only(piece.body, (Push,)))
        return pushed * trips(piece.start, piece.stop, piece.step)
    return sp.Integer(sum(isinstance(n, Push) for n in tasklets_only(piece, (Push,))))


def _gain(inner, var):
    """How many fewer of the inner loop's distinct accesses move with a stride other than
    one when ``var`` (the parallel loop's variable) runs innermost than when its own
    variable does (an access that does not move is a register's)."""
    subsets = {(m.data, m.subset) for t in tasklets_only(inner.body, (Push,))
               if isinstance(t, Tasklet)
               for m in [m for _, m in t.inputs] + [m for m, _ in t.outputs]}
    return sum(_strided(s, inner.var) - _strided(s, var) for _, s in subsets)


def _strided(subset, var):
    """Whether an element's address moves as ``var`` does, by more than one."""
    return any(var in sp.sympify(e).free_symbols for e in subset) and not _unit(subset, var)


def _unit(subset, var):
    """Whether an element's address moves by one as ``var`` does (its last index
    ``var + c``, the others free of it)."""
    if not subset:
        return False
    *rest, last = subset
    form = stride(last, (var,))
    return form is not None and form[1] == 1 and \
        not any(var in e.free_symbols for e in rest)
