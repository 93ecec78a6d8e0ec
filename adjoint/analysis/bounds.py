"""Prove every memlet inside its container with sympy; list what could not be proven.

An index is proven when its minimum over the enclosing loops is >= 0 and its
maximum is < the dimension's size, for every value of the sizes. The extremes
of an index affine in a loop variable lie at the ends of the loop's range, so
loop variables are eliminated innermost first. Unproven accesses become
:class:`IndexCheck`s, which the generated check entry point evaluates once per
distinct set of sizes before the kernel runs (never inside the kernel's loops).
"""
from dataclasses import dataclass

import sympy as sp

from ..sdfg.nodes import LoopRegion, MapScope, Pop, Push, Tasklet, walk


@dataclass(frozen=True)
class IndexCheck:
    """``condition`` must hold for every iteration of ``context``."""
    context: tuple
    condition: sp.Basic
    line: int
    message: str


def index_checks(sdfg):
    """The conditions that could not be proven statically, in program order."""
    checks, seen_loops = [IndexCheck((), c, line, m) for c, line, m in sdfg.assumptions], set()
    for node, context in walk(sdfg.body):
        for depth, region in enumerate(context):
            if isinstance(region, LoopRegion) and not region.step.is_number \
                    and id(region) not in seen_loops:
                seen_loops.add(id(region))
                checks.append(IndexCheck(context[:depth], sp.Ne(region.step, 0), region.line,
                                         f"range() step {region.step} is zero"))
        for memlet, line, ctx in _memlets(node, context):
            container = sdfg.containers[memlet.data]
            loops = [c for c in ctx if isinstance(c, LoopRegion)]
            for k, (index, size) in enumerate(zip(memlet.subset, container.shape)):
                where = f"{memlet.data}[{', '.join(map(str, memlet.subset))}]: index {index}"
                if not _proven_nonnegative(index, loops):
                    checks.append(IndexCheck(ctx, sp.Ge(index, 0), line,
                                             f"{where} can be negative"))
                if not _proven_nonnegative(size - 1 - index, loops):
                    checks.append(IndexCheck(ctx, sp.Lt(index, size), line,
                                             f"{where} can reach the size {size} of dimension {k}"))
    return checks


def _memlets(node, context):
    if isinstance(node, Tasklet):
        for m in [m for _, m in node.inputs] + [m for m, _ in node.outputs]:
            yield m, node.line, context
    elif isinstance(node, MapScope):
        loops = tuple(LoopRegion(p, a, b, s, None) for p, (a, b, s) in
                      zip(node.params, node.ranges))
        for t in node.body:
            yield from _memlets(t, context + loops)
    elif isinstance(node, (Push, Pop)):
        yield node.memlet, node.line, context


def _proven_nonnegative(expr, loops):
    low = minimum(sp.expand(expr), loops)
    return low is not None and bool(sp.simplify(low).is_nonnegative)


def minimum(expr, loops):
    """A lower bound of ``expr`` over the loops' iteration space, or None."""
    for loop in reversed(loops):
        v = loop.var
        if v not in expr.free_symbols:
            continue
        coeff = sp.diff(expr, v)
        if v in coeff.free_symbols or coeff.has(sp.Function):
            return None
        if loop.step.is_positive:
            lo, hi = loop.start, loop.stop - 1
        elif loop.step.is_negative:
            lo, hi = loop.stop + 1, loop.start
        else:
            return None
        if coeff.is_nonnegative:
            expr = sp.expand(expr.subs(v, lo))
        elif coeff.is_nonpositive:
            expr = sp.expand(expr.subs(v, hi))
        else:
            return None
    return expr


__all__ = ["IndexCheck", "index_checks", "minimum"]
