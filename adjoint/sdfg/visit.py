"""Rebuilding the IR: the one transformer passes derive from.

Passes read the IR through ``nodes.walk`` (every dataflow node with the loops and
guards around it), ``nodes.regions`` (every region so) and ``nodes.loops``, and
rebuild it through :class:`Transformer`: a pass overrides the methods of the regions
it changes and calls the base methods for the others, which rebuild a region around
its parts transformed (each region object new, every other field as it was), so that
no pass writes the traversal again.
"""
from dataclasses import replace

from .nodes import ConditionalRegion, LoopRegion, MapScope, Sequence, State, Tasklet


class Transformer:
    """A region rebuilt from its transformed parts. ``region`` dispatches on the kind;
    ``elements`` returns what replaces the elements of a sequence, where a region
    transformed into a list or tuple of regions is spliced in (a loop distributed into
    several); ``node`` transforms the dataflow nodes of a state. While the body of a
    loop is transformed, ``loops`` holds the loops around it, outermost first."""

    def __init__(self):
        self.loops = ()

    def region(self, region):
        if isinstance(region, Sequence):
            return self.sequence(region)
        if isinstance(region, LoopRegion):
            return self.loop(region)
        if isinstance(region, ConditionalRegion):
            return self.conditional(region)
        if isinstance(region, State):
            return self.state(region)
        raise TypeError(f"not a region: {region!r}")

    def sequence(self, sequence):
        return Sequence(tuple(self.elements(sequence.elements)))

    def elements(self, elements):
        out = []
        for element in elements:
            new = self.region(element)
            out.extend(new) if isinstance(new, (list, tuple)) else out.append(new)
        return out

    def loop(self, loop):
        self.loops += (loop,)
        try:
            return replace(loop, body=self.region(loop.body))
        finally:
            self.loops = self.loops[:-1]

    def conditional(self, region):
        return replace(region, branches=tuple((c, self.region(b)) for c, b in region.branches))

    def state(self, state):
        return replace(state, nodes=tuple(self.node(n) for n in state.nodes))

    def node(self, node):
        return node


def flattened(region):
    """The elements of nested sequences, in order (``region`` itself if it is none)."""
    if isinstance(region, Sequence):
        for element in region.elements:
            yield from flattened(element)
    else:
        yield region


def tasklets_only(region, allow=()):
    """The tasklets (and nodes of the ``allow`` types) of a body made of states of those
    only, else None."""
    parts = list(flattened(region))
    if not all(isinstance(p, State) and all(isinstance(n, (Tasklet, *allow)) for n in p.nodes)
               for p in parts):
        return None
    return [n for p in parts for n in p.nodes]


def leaves(node):
    """(enclosing map loops, node) for a dataflow node and the nodes inside a map."""
    if isinstance(node, MapScope):
        loops = tuple(LoopRegion(p, a, b, s, None) for p, (a, b, s) in
                      zip(node.params, node.ranges))
        for inner in node.body:
            yield loops, inner
    else:
        yield (), node
