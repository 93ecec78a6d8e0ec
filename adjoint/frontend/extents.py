"""Temporaries whose sizes depend on loop variables, allocated once at their largest size.

Inside ``for i in range(M)``, ``data[:, i] @ data[:, i + 1:]`` has ``M - i - 1``
elements. The frontend builds such a temporary with that extent (its maps run over
``M - i - 1`` points, the bounds analysis proves their indices), and once the kernel is
built :func:`largest_extents` gives its container the largest value of each extent over
the loops around its accesses: the upper end of an affine expression over the loops'
ranges (``analysis.bounds.minimum`` of its negation), here ``M - 1``. The buffer is
allocated once per call at that size, and every iteration uses its first elements.

A fill of such a temporary with a constant (a reduction's identity, ``__sum[m] = 0``
over its extent) is widened to the whole allocation: the elements past the extent are
never read, and a write of the whole container is one reverse mode records alone (the
sums into it that follow push nothing, ``autodiff.reverse._after_full_writes``; else
``data[:, i] @ data[:, i:]`` recorded every partial sum).
"""
from dataclasses import replace

import sympy as sp

from ..analysis.bounds import minimum
from ..errors import KernelSyntaxError
from ..sdfg import LibraryNode, LoopRegion, MapScope, Sequence, State, Tasklet
from ..sdfg.nodes import walk
from .array_shapes import fmt_shape


def affine(extent, variables):
    """Whether ``extent`` is a polynomial of degree at most 1 in ``variables``."""
    e = sp.sympify(extent)
    if not e.free_symbols & variables:
        return True
    if any(f.free_symbols & variables for f in e.atoms(sp.Function, sp.Min, sp.Max)):
        return False
    return e.is_polynomial(*variables) and sp.Poly(e, *variables).total_degree() <= 1


def largest_extents(sdfg):
    """``sdfg`` with every container whose shape uses loop variables at its largest shape.

    Every access must lie inside the loops those variables belong to, the same loops
    for all accesses: a later loop over a variable of the same name is another loop,
    and the array's size there would not be the one it was made with."""
    sizes = set(sdfg.symbols)
    loose = {name: set().union(*(sp.sympify(n).free_symbols for n in c.shape)) - sizes
             for name, c in sdfg.containers.items()}
    loose = {name: variables for name, variables in loose.items() if variables}
    if not loose:
        return sdfg
    made_in, resized = {}, {}
    for node, context in walk(sdfg.body):
        for name in _touched(node) & loose.keys():
            c = sdfg.containers[name]
            loops = _binding_loops(loose[name], context)
            if made_in.setdefault(name, loops) != loops:
                raise _error(sdfg, node.line, c, "is used here outside the loop it was made in")
            if name not in resized:
                resized[name] = tuple(_largest(sdfg, n, context, node.line, c)
                                      for n in c.shape)
    return sdfg.replace(containers={name: replace(c, shape=resized.get(name, c.shape))
                                    for name, c in sdfg.containers.items()},
                        body=_widen(sdfg.body, {n: (sdfg.containers[n].shape, shape)
                                                for n, shape in resized.items()}))


def _widen(region, shapes):
    """``region`` with the constant fills of the resized containers over their new shape
    (``shapes``: name -> (extents, largest))."""
    if isinstance(region, State):
        return State(tuple(_widened(node, shapes) for node in region.nodes), region.label)
    if isinstance(region, Sequence):
        return Sequence(tuple(_widen(e, shapes) for e in region.elements))
    if isinstance(region, LoopRegion):
        return replace(region, body=_widen(region.body, shapes))
    return replace(region, branches=tuple((c, _widen(b, shapes)) for c, b in region.branches))


def _widened(node, shapes):
    """A map filling a resized container with a constant over its extents: over its
    largest shape."""
    t = node.body[0] if isinstance(node, MapScope) and len(node.body) == 1 else None
    if not isinstance(t, Tasklet) or t.inputs or len(t.outputs) != 1:
        return node
    m = t.outputs[0][0]
    if m.wcr or m.data not in shapes or m.subset != tuple(node.params):
        return node
    extents, largest = shapes[m.data]
    if tuple(node.ranges) != _ranges(extents):
        return node
    return replace(node, ranges=_ranges(largest))


def _ranges(shape):
    return tuple((sp.Integer(0), n, sp.Integer(1)) for n in shape)


def _binding_loops(variables, context):
    """Ids of the innermost loops over ``variables`` around an access (None: none)."""
    loops = [r for r in context if isinstance(r, LoopRegion)]
    return tuple(next((id(r) for r in reversed(loops) if r.var == v), None)
                 for v in sorted(variables, key=str))


def _largest(sdfg, extent, context, line, container):
    loops = [r for r in context if isinstance(r, LoopRegion)]
    bound = minimum(-sp.sympify(extent), loops)
    if bound is None or bound.free_symbols - set(sdfg.symbols):
        raise _error(sdfg, line, container, "is made here, and its largest size over the loops "
                     "around it cannot be bounded (it can inside `for` loops over ranges "
                     "whose bounds are affine in the sizes and outer loop variables)")
    return sp.expand(-bound)


def _error(sdfg, line, container, what):
    names = ", ".join(sorted({str(s) for n in container.shape
                              for s in sp.sympify(n).free_symbols - set(sdfg.symbols)}))
    return KernelSyntaxError(
        f"an array of shape {fmt_shape(container.shape)}, whose size depends on {names}, "
        f"{what}: allocate it before the loop at its largest size and use a slice of it",
        sdfg.filename, line, 1)


def _touched(node):
    """The containers a dataflow node of the frontend's SDFG reads or writes."""
    if isinstance(node, LibraryNode):
        return set(node.reads()) | set(node.writes())
    nodes = node.body if isinstance(node, MapScope) else (node,)
    return {m.data for t in nodes for m in [m for _, m in t.inputs] + [m for m, _ in t.outputs]}
