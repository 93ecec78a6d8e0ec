"""Prove every memlet inside its container with sympy; list what could not be proven.

An index is proven when its minimum over the enclosing loops is >= 0 and its
maximum is < the dimension's size, for every value of the sizes. The extremes
of an index affine in a loop variable lie at the ends of the loop's range, so
loop variables are eliminated innermost first. Unproven accesses become
:class:`IndexCheck`s, which the generated check entry point evaluates once per
distinct set of sizes before the kernel runs (never inside the kernel's loops).
"""
import functools
from dataclasses import dataclass

import sympy as sp

from ..errors import AdjointError
from ..sdfg.nodes import (LoopRegion, MapScope, Memlet, Pop, Push, Tasklet, index_loads,
                          readable, value_range, walk)


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
        accesses = list(_memlets(node, context))
        for depth, region in enumerate(context):
            if isinstance(region, LoopRegion) and id(region) not in seen_loops:
                seen_loops.add(id(region))
                if not region.step.is_number:
                    checks.append(IndexCheck(context[:depth], sp.Ne(region.step, 0),
                                             region.line, f"range() step {region.step} is zero"))
                bounds = [b for b in (region.start, region.stop) if b is not None]
                accesses += [(Memlet(name, load.args), region.line, context[:depth])
                             for b in bounds for name, load in index_loads(b)]
        for memlet, line, ctx in accesses:
            container = sdfg.containers[memlet.data]
            loops = [c for c in ctx if isinstance(c, LoopRegion)]
            indirect = any(index_loads(e) for e in memlet.subset) or any(
                index_loads(e) for loop in loops for e in (loop.start, loop.stop) if e is not None)
            for k, (index, size) in enumerate(zip(memlet.subset, container.shape)):
                where = readable(f"{memlet.data}[{', '.join(map(str, memlet.subset))}]: "
                                 f"index {index}")
                for low, condition, what in ((index, sp.Ge(index, 0), "can be negative"),
                                             (size - 1 - index, sp.Lt(index, size),
                                              f"can reach the size {size} of dimension {k}")):
                    bound = minimum(sp.expand(low), loops)
                    if bound is not None and _nonnegative(bound):
                        continue
                    if indirect:       # checked through the index arrays' value ranges
                        if bound is None:
                            raise AdjointError(f"{sdfg.filename}:{line}: cannot bound the "
                                               f"indirect index {index}; keep it affine in "
                                               "the loop variables and index-array elements")
                        checks.append(IndexCheck((), sp.Ge(bound, 0), line, f"{where} {what}"))
                    else:
                        checks.append(IndexCheck(ctx, condition, line, f"{where} {what}"))
    return checks


def _nonnegative(bound):
    """Whether sympy proves ``bound >= 0``; simplifying (slow) only when the plain
    query cannot tell."""
    known = bound.is_nonnegative
    return known if known is not None else _simplified_nonnegative(bound)


@functools.lru_cache(maxsize=4096)
def _simplified_nonnegative(bound):
    return bool(sp.simplify(bound).is_nonnegative)


def _memlets(node, context):
    """Every element a node accesses, integer-array elements inside indices included."""
    if isinstance(node, Tasklet):
        for m in [m for _, m in node.inputs] + [m for m, _ in node.outputs]:
            yield m, node.line, context
            for e in m.subset:
                for name, load in index_loads(e):
                    yield Memlet(name, load.args), node.line, context
    elif isinstance(node, MapScope):
        loops = tuple(LoopRegion(p, a, b, s, None) for p, (a, b, s) in
                      zip(node.params, node.ranges))
        for t in node.body:
            yield from _memlets(t, context + loops)
    elif isinstance(node, (Push, Pop)):
        yield node.memlet, node.line, context


def minimum(expr, loops):
    """A lower bound of ``expr`` over the loops' iteration space, or None.

    Elements of integer arrays (``idx[i]``, also in loop bounds) become free variables
    ranging over the array's values ``[__min_idx, __max_idx]``, eliminated last."""
    ranges = {}
    expr = _abstract_loads(expr, ranges)
    for loop in reversed(loops):
        if loop.var not in expr.free_symbols:
            continue
        if loop.step.is_positive and loop.stop is not None:
            lo, hi = loop.start, loop.stop - 1
        elif loop.step.is_negative and loop.stop is not None:
            lo, hi = loop.stop + 1, loop.start
        else:
            return None
        expr = _at_minimum(expr, loop.var, _abstract_loads(lo, ranges),
                           _abstract_loads(hi, ranges))
        if expr is None:
            return None
    for v, (lo, hi) in reversed(list(ranges.items())):
        expr = _at_minimum(expr, v, lo, hi)
        if expr is None:
            return None
    return expr


def _at_minimum(expr, v, lo, hi):
    """``expr`` at the end of ``[lo, hi]`` where it is smallest (affine in v), or None."""
    if v not in expr.free_symbols:
        return expr
    coeff = sp.diff(expr, v)
    if v in coeff.free_symbols or coeff.has(sp.Function):
        return None
    if coeff.is_nonnegative:
        return sp.expand(expr.subs(v, lo))
    if coeff.is_nonpositive:
        return sp.expand(expr.subs(v, hi))
    return None


def _abstract_loads(expr, ranges):
    """Replace each integer-array element by a fresh variable, recording its range."""
    for name, load in index_loads(expr):
        v = sp.Symbol(f"__v{len(ranges)}", integer=True)
        ranges[v] = value_range(name)
        expr = expr.subs(load, v)
    return sp.expand(expr)


__all__ = ["IndexCheck", "index_checks", "minimum"]
