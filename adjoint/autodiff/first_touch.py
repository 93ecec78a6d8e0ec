"""Adjoints whose first touch in the reverse sweep assigns a box of elements.

The sweep's adjoint buffers start at zero because the reverse sweep adds into them.
Where the first statement of the whole reverse sweep (in the order the regions' reverse
sweeps run) that touches an adjoint is a map or a nest of counted loops adding into one
element per iteration, at ``v + c`` in each dimension, or a library node adding into all
of it (an outer product's adjoint), nothing has been added to that box before: the sum
is an assignment, and only the rest of the buffer needs zeros. This runs
before the gather, which then sees a local write. Vectorised and loop stencils meet it
for the adjoints of their inputs and of ``x`` under ``np.sum(x * x)``: hdiff-limiter's
gradient spent an eighth of its time zero-filling such buffers.
"""
from dataclasses import replace

import sympy as sp

from ..analysis.dependence import counted, linear_form, node_accesses
from ..sdfg.nodes import (LibraryNode, LoopRegion, MapScope, Pop, Push, Sequence, State, Tasklet,
                          elements, index_loads, walk)
from ..sdfg.visit import Transformer


def assign_first(regions, adjoints, seeded):
    """(the regions' reverse sweeps with those sums made assignments, {adjoint: box}):
    ``regions`` in forward order; a box is ``(lo, hi)`` per dimension. ``adjoints``: the
    adjoint containers; ``seeded``: those the sweep sets before its reverse sweep runs
    (the outputs' cotangents)."""
    seen, boxes = set(seeded), {}
    out = []
    for region in reversed(regions):        # the order the reverse sweeps run in
        sizes = frozenset(region.reverse.symbols)
        body = _Top((adjoints, sizes), seen, boxes, region.reverse.containers).region(
            region.reverse.body)
        out.append(replace(region, reverse=region.reverse.replace(body=body)))
    return tuple(reversed(out)), boxes


class _Top(Transformer):
    """Rewrites a region's top-level statements (those in branches may not run, those in
    a loop's body run more than once: what they touch only counts as seen)."""

    def __init__(self, names, seen, boxes, containers):
        super().__init__()
        self.names, self.seen, self.boxes = names, seen, boxes
        self.containers = containers

    def node(self, node):
        if isinstance(node, MapScope):
            node = _assigning(node, node.params, node.ranges, node.body, self.names,
                              self.seen, self.boxes)
        elif isinstance(node, LibraryNode):
            node = self._library(node)
        self.seen.update(_names(node))
        return node

    def _library(self, node):
        """A library node summing into an adjoint nothing has touched, whole, assigns it
        where its kind can (``LibraryNode.assigning``: an outer product's adjoint in
        one pass writing it, not zeros and dger's read and write of every element)."""
        adjoints, sizes = self.names
        accesses = node.accesses()
        for name, kind in accesses:
            if kind != "sum" or name not in adjoints or name in self.seen or \
                    (name, "read") in accesses:
                continue
            box = tuple((0, d) for d in self.containers[name].shape)
            assigned = node.assigning(name)
            if assigned is not None and not any(sp.sympify(d).free_symbols - sizes
                                                for _, d in box):
                node, self.boxes[name] = assigned, box
        return node

    def loop(self, loop):
        nest = _nest(loop)
        if nest is not None:
            loop = _assigning(loop, *nest, self.names, self.seen, self.boxes)
        return self._seen(loop)

    def conditional(self, region):
        return self._seen(region)

    def _seen(self, region):
        for node, _ in walk(region):
            self.seen.update(_names(node))
        return region


def _nest(region):
    """(variables, ranges, body nodes) of a perfect nest of counted loops around one
    state, or None. A checkpointing segment loop runs its iterations in pieces, each
    once: its box is that of the whole range."""
    variables, ranges = [], []
    while isinstance(region, LoopRegion):
        if not counted(region) or region.step != 1:
            return None
        variables.append(region.var)
        ranges.append((region.start, region.stop, region.step))
        inner = elements(region.body)
        if len(inner) != 1:
            return None
        region = inner[0]
    if not variables or not isinstance(region, State):
        return None
    return tuple(variables), tuple(ranges), region.nodes


def _assigning(node, params, ranges, body, names, seen, boxes):
    """``node`` (a map, or the outermost loop of a nest) with each first sum into an
    adjoint made an assignment; the boxes assigned go into ``boxes``. ``names``: the
    adjoint containers, and the sizes a box may depend on. A sum is first when it is
    the body's first access to its adjoint, whose every access there is at its subset
    (a fused map's ``g[i] += ...`` then read and reset at ``i``)."""
    adjoints, sizes = names
    if any(isinstance(t, (MapScope, LibraryNode)) or not isinstance(t, (Tasklet, Push, Pop))
           for t in body):
        return node
    found = {}                  # adjoint: [(tasklet, output or None for a read, memlet)]
    for k, t in enumerate(body):
        if isinstance(t, Tasklet):
            accesses = [(None, m) for _, m in t.inputs] + list(enumerate(
                m for m, _ in t.outputs))
        else:
            accesses = [(None if isinstance(t, Push) else -1, t.memlet)]
        for j, m in accesses:
            if m.data in adjoints and m.data not in seen:
                found.setdefault(m.data, []).append((k, j, m))
    assign, first = {}, set()
    for name, ((k, j, m), *rest) in found.items():
        if j is not None and j >= 0 and m.wcr and all(x.subset == m.subset for *_, x in rest):
            box = _box(m.subset, params, ranges, sizes)
            if box is not None:
                assign[name] = box
                first.add((k, j))
    if not assign:
        return node
    boxes.update(assign)
    new_body = tuple(replace(t, outputs=tuple((replace(m, wcr=None) if (k, j) in first else m, e)
                                              for j, (m, e) in enumerate(t.outputs)))
                     if isinstance(t, Tasklet) else t for k, t in enumerate(body))
    return _with_body(node, new_body)


def _box(subset, params, ranges, sizes):
    """The elements ``subset`` reaches over the ranges, ``(lo, hi)`` per dimension, when
    it reaches one per point (each parameter alone, plus a constant, in its own
    dimension) and the box depends on the ``sizes`` only (not on outer loops or data),
    or None."""
    used, box = set(), []
    for e in subset:
        form = linear_form(e, params)
        if form is None:
            return None
        coefficients, rest = form
        moving = [(p, a) for p, a in zip(params, coefficients) if a]
        if not moving:
            box.append((rest, rest + 1))
            continue
        (p, a), *others = moving
        start, stop, step = ranges[list(params).index(p)]
        if others or p in used or a != 1 or step != 1:
            return None
        used.add(p)
        box.append((start + rest, stop + rest))
    bounds = [sp.sympify(b) for pair in box for b in pair]
    if used != set(params) or any(b.free_symbols - sizes or index_loads(b) for b in bounds):
        return None
    return tuple(box)


def _with_body(node, body):
    """The map, or the loop nest, with its innermost state's nodes replaced."""
    if isinstance(node, MapScope):
        return replace(node, body=body)
    inner = elements(node.body)[0]
    if isinstance(inner, State):
        return replace(node, body=Sequence((replace(inner, nodes=body),)))
    return replace(node, body=Sequence((_with_body(inner, body),)))


def _names(node):
    """The containers a dataflow node touches."""
    return {a.data for a in node_accesses(node)}
