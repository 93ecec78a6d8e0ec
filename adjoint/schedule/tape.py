"""Where a loop's tape values go: the slot layout, and the loops a recording map runs as.

Reverse mode (``autodiff/reverse.py``) and the scheduling pass both build a map that
records, or restores, as the loop nest of ``as_loops`` (the first parameter outermost;
its reverse runs the same loops backwards), so that the record and its reverse are
loops of the same ranges. A counted loop whose iterations each push (or each pop) k
values directly in its states keeps them in slots (``slot_layout``): iteration q's
c-th value at ``tp + c * n + q`` of its n trips, and the reverse loop, mirroring its
record, finds each value at the same place whichever order, or threads, either runs in.
"""
from ..analysis.dependence import countable, counted, trips_taped
from ..sdfg.nodes import LoopRegion, MapScope, Pop, Push, Sequence, State, regions
from ..sdfg.visit import flattened, leaves
from .decisions import Slots


def as_loops(params, ranges, nodes, line, reverse=False):
    """A Sequence holding the loop nest that runs ``nodes`` (one state) at every point of
    a map's ``ranges``, the first parameter outermost, backwards where ``reverse``."""
    body = Sequence((State(tuple(nodes)),))
    for p, (a, b, s) in reversed(list(zip(params, ranges))):
        body = Sequence((LoopRegion(p, a, b, s, body, line, reverse),))
    return body


def records(node):
    """Whether a map pushes or pops (it then runs as ``as_loops``)."""
    return isinstance(node, MapScope) and any(isinstance(n, (Push, Pop)) for n in node.body)


def uses_tape(region):
    """Whether the region pushes or pops (its code needs the entry's tape position)."""
    for r, _ in regions(region):
        if isinstance(r, LoopRegion) and trips_taped(r):
            return True
        if isinstance(r, State) and any(isinstance(leaf, (Push, Pop))
                                        for n in r.nodes for _, leaf in leaves(n)):
            return True
    return False


def slot_layout(loop):
    """The Slots of a counted loop (not a segment) whose body pushes, or pops, a fixed
    number k of values per iteration, directly in its states, with nothing else in it
    using the tape (tasklets, conditions and loops may sit between); else None."""
    if not (counted(loop) and countable(loop) and not loop.segment):
        return None
    elements = list(flattened(loop.body))
    nodes = [n for e in elements if isinstance(e, State) for n in e.nodes]
    others = [e for e in elements if not isinstance(e, State)] + \
        [State((n,)) for n in nodes if isinstance(n, MapScope)]
    if any(uses_tape(e) for e in others):
        return None
    pushes = sum(isinstance(n, Push) for n in nodes)
    pops = sum(isinstance(n, Pop) for n in nodes)
    if not (pushes or pops) or (pushes and pops):
        return None
    return Slots(pushes, pops)
