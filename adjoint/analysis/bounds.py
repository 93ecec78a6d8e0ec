"""Prove every memlet inside its container with sympy; list what could not be proven.

An index is proven when its minimum over the enclosing loops is >= 0 and its
maximum is < the dimension's size, for every value of the sizes. The extremes
of an index affine in a loop variable lie at the ends of the loop's range, so
loop variables are eliminated innermost first. Unproven accesses become
:class:`IndexCheck`s, which the generated check entry point evaluates once per
distinct set of sizes before the kernel runs (never inside the kernel's loops).

Integers are int64 in C and unbounded in Python, so the same pass lists where the
kernel's integers may overflow: loop bounds and trip counts, map ranges, integer
branch conditions, integer values, indices and (from the frontend) new arrays' sizes
whose ranges (sizes up to what NumPy lets an argument's bytes be, int arguments and
index-array elements anywhere in int64) do not show that they fit. Such a place gets
a :class:`Fits` check, of the expression's extremes where it is affine in the loop
variables, else at every point of its loops; ``sc_check`` evaluates every check in
checked arithmetic, so a check holds only on exact values. What is guaranteed: every
index, bound, trip count and integer the kernel computes is the exact (Python) value;
only sums and products inside an index proven in bounds may wrap on the way, which
two's complement undoes (the index itself is in bounds).
"""
import functools
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np
import sympy as sp
from sympy.logic.boolalg import BooleanFunction

from ..errors import AdjointError
from ..sdfg.nodes import (LOAD, ConditionalRegion, Guard, LoopRegion, MapScope, Memlet, Pop,
                          Push, Tasklet, condition_containers, index_loads, readable, regions,
                          value_range, walk)

INT64 = (-2 ** 63, 2 ** 63 - 1)
PRODUCTS = "__products"     # in spans: (dimensions of an argument, what their product is below)


class Fits(BooleanFunction):
    """True when each argument (an integer expression or condition), computed in int64,
    does not overflow; ``sc_check`` evaluates it in checked arithmetic."""

    @classmethod
    def eval(cls, *args):
        if all(a.is_Integer for a in args):
            return sp.true if all(_fits(int(a)) for a in args) else sp.false


@dataclass(frozen=True)
class IndexCheck:
    """``condition`` must hold for every iteration of ``context``."""
    context: tuple
    condition: sp.Basic
    line: int
    message: str


def index_checks(sdfg):
    """The conditions that could not be proven statically, in program order: the
    frontend's conditions on sizes, then per loop, branch and access where it first
    occurs, that its integers fit in int64 and its indices in their arrays."""
    ints = _Integers(sdfg)
    checks = [IndexCheck((), c, line, m) for c, line, m in sdfg.assumptions
              if not (isinstance(c, Fits) and ints.safe(c, ()))]
    for condition, line, ctx in _branch_conditions(sdfg.body):
        if not condition_containers(condition, sdfg.containers) and not ints.safe(condition, ctx):
            checks += ints.fits_check([condition], ctx, line,
                                      f"the condition {readable(condition)}")
    seen = {}       # id -> region, kept alive so that ids stay unique (maps' loops are fresh)
    values = set()          # integer values already checked, with their loops
    for node, context in walk(sdfg.body):
        leaves = list(_leaves(node, context))
        accesses = [a for leaf, ctx in leaves for a in _memlets(leaf, ctx)]
        for depth, region in enumerate(context):
            if id(region) in seen:
                continue
            seen[id(region)] = region
            if isinstance(region, LoopRegion):
                if not region.step.is_number:
                    checks.append(IndexCheck(context[:depth], sp.Ne(region.step, 0), region.line,
                                             f"range() step {region.step} is zero"))
                checks += ints.range_checks(region, context[:depth], region.line)
                bounds = [b for b in (region.start, region.stop) if b is not None]
                accesses += [(Memlet(name, load.args), region.line, context[:depth])
                             for b in bounds for name, load in index_loads(b)]
        for memlet, line, ctx in accesses:
            for depth in range(len(context), len(ctx)):          # the loops of a map
                if id(ctx[depth]) not in seen:
                    seen[id(ctx[depth])] = ctx[depth]
                    checks += ints.range_checks(ctx[depth], ctx[:depth], line)
            checks += _access_checks(sdfg, ints, memlet, line, ctx)
        for leaf, ctx in leaves:
            for value in _integer_values(leaf):
                key = (value, tuple(map(id, ctx)))
                if key not in values and not ints.safe(value, ctx):
                    values.add(key)
                    checks += ints.fits_check([value], ctx, leaf.line,
                                              f"the integer {readable(value)}")
    return _first_of_each(checks)


def _first_of_each(checks):
    """The checks without repeats (the reads and writes of one element ask alike)."""
    seen, out = set(), []
    for c in checks:
        key = (c.condition, tuple(map(id, c.context)), c.message)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _access_checks(sdfg, ints, memlet, line, ctx):
    """That each index of ``memlet`` fits in int64 and in its dimension."""
    checks = []
    container = sdfg.containers[memlet.data]
    loops = [c for c in ctx if isinstance(c, LoopRegion)]
    loaded_loops = any(index_loads(e) for loop in loops for e in (loop.start, loop.stop)
                       if e is not None)
    for k, (index, size) in enumerate(zip(memlet.subset, container.shape)):
        # an index of index-array elements (or in loops bounded by them), checked through
        # their value ranges; the others of the access under the branches around it
        indirect = loaded_loops or bool(index_loads(index))
        where = readable(f"{memlet.data}[{', '.join(map(str, memlet.subset))}]: "
                         f"index {index}")
        sides = []
        for low, condition, what in ((index, sp.Ge(index, 0), "can be negative"),
                                     (size - 1 - index, sp.Lt(index, size),
                                      f"can reach the size {size} of dimension {k}")):
            bound = _known_values(sdfg, minimum(sp.expand(low), loops))
            sides.append((bound, condition, what, bound is not None and _nonnegative(bound)))
        proven = all(side[3] for side in sides) and _polynomial(index)
        if not proven and not ints.safe(index, ctx):
            checks += ints.fits_check([index], ctx, line, where)
        for bound, condition, what, holds in sides:
            if holds:
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


def _known_values(sdfg, bound):
    """``bound`` with the value ranges of the engine's index arrays (``Container.values``)
    in place of the symbols of ranges found on entry."""
    known = {s: v for c in sdfg.containers.values() if c.values is not None
             for s, v in zip(value_range(c.name), c.values)}
    return bound if bound is None or not known else sp.expand(bound.xreplace(known))


class _Integers:
    """Which integer expressions of a kernel may overflow int64, and their checks."""

    def __init__(self, sdfg):
        self.sdfg = sdfg
        self.spans = {s: ((0, INT64[1]) if s.is_nonnegative else INT64) for s in sdfg.symbols}
        # NumPy keeps an array's bytes below 2**63: its dimensions and their products too
        self.spans[PRODUCTS] = []
        for a in sdfg.arguments:
            dims = [n for n in a.shape if n in self.spans] if a.kind == "array" else []
            if dims:
                self.spans[PRODUCTS].append((Counter(dims), INT64[1] // a.dtype.itemsize))
            for n in dims:
                self.spans[n] = (0, min(self.spans[n][1], INT64[1] // a.dtype.itemsize))
        for name, c in sdfg.containers.items():
            if c.dtype.kind in "iu":
                info = np.iinfo(c.dtype)
                for s in value_range(name):
                    self.spans[s] = (int(info.min), int(info.max))
                self.spans[LOAD + name] = (int(info.min), int(info.max))
        self._loops = {}

    def safe(self, expr, ctx):
        """Whether ``expr`` (with every subexpression) fits in int64 for all values."""
        return _span(expr, self._env(ctx)) is not None

    def _env(self, ctx):
        env = dict(self.spans)
        for region in ctx:
            if isinstance(region, LoopRegion):
                if id(region) not in self._loops:
                    self._loops[id(region)] = (region, _loop_span(region, env))
                env[region.var] = self._loops[id(region)][1]
        return env

    def range_checks(self, loop, outer, line):
        """A loop's bounds and trip count must fit (a while loop counts from 0)."""
        if loop.stop is not None:
            exprs = _range_exprs(loop)
            if not all(self.safe(e, outer + (loop,)) for e in exprs):
                return self.fits_check(exprs, outer, line, _range_text(loop))
        return []

    def fits_check(self, exprs, ctx, line, what):
        """``Fits`` of the extremes of ``exprs`` (of a condition's operands) over the loops
        of ``ctx`` where they are affine (evaluated once), else of ``exprs`` at every
        point of ``ctx``."""
        loops = [r for r in ctx if isinstance(r, LoopRegion)]
        operands = [side for e in exprs for side in
                    ([e] if isinstance(e, sp.Expr) else _operands(e))]
        operands += [r.args[0] for e in operands for r in _remainders(e)]  # a % m: a too
        extremes = []
        for e in operands:
            lo, hi = minimum(sp.expand(e), loops), minimum(sp.expand(-e), loops)
            if lo is None or hi is None:
                break
            extremes += [x for x in (lo, -hi) if x not in extremes]
        else:       # under the branches around it that the loops do not decide
            fits = Fits(*[x for x in extremes if not (x.is_Integer and _fits(int(x)))])
            looped = {r.var for r in loops}
            guards = tuple(g for g in ctx if isinstance(g, Guard)
                           and not g.condition.free_symbols & looped)
            return [] if fits == sp.true else [IndexCheck(guards, fits, line,
                                                          f"{what} overflows int64")]
        if any(index_loads(e) for e in exprs):
            raise AdjointError(f"{self.sdfg.filename}:{line}: cannot bound {what}; keep it "
                               "affine in the loop variables and index-array elements")
        return [IndexCheck(ctx, Fits(*exprs), line, f"{what} overflows int64")]


def _remainders(expr):
    """The ``a % m`` (the frontend's ``python_mod``, known here by name) in ``expr``."""
    return [f for f in sp.sympify(expr).atoms(sp.Function) if type(f).__name__ == "python_mod"]


def _operands(condition):
    """The integer expressions a condition compares."""
    return [side for rel in sorted(condition.atoms(sp.core.relational.Relational), key=str)
            for side in (rel.lhs, rel.rhs)]


def _branch_conditions(body):
    """(condition, line, context) of each branch of every ConditionalRegion, in program
    order; the context as ``walk`` gives it, and the earlier branches not taken."""
    for region, context in regions(body):
        if isinstance(region, ConditionalRegion):
            earlier = []
            for cond, _ in region.branches:
                if cond is not None:
                    yield cond, region.line, context + ((Guard(sp.And(*earlier)),) if earlier
                                                        else ())
                    earlier.append(sp.Not(cond))


def _range_exprs(loop):
    """What C computes of ``range(a, b, s)`` besides a, b and s: the loop variable's
    last value plus the step, and the trip count's numerator."""
    a, b, s = loop.start, loop.stop, loop.step
    up, down = [b - 1 + s, b - a + s - 1], [b + 1 + s, a - b - s - 1]
    more = up if s.is_positive else down if s.is_negative else up + down
    return [sp.expand(e) for e in [a, b, s] + more]


def _range_text(loop):
    a, b, s = loop.start, loop.stop, loop.step
    inner = f"{b}" if a == 0 and s == 1 else f"{a}, {b}" if s == 1 else f"{a}, {b}, {s}"
    return readable(f"range({inner})")


def _loop_span(loop, env):
    """The values the loop variable takes, from its bounds' spans (int64 where unknown:
    the loop's own check keeps its bounds inside)."""
    start = _span(loop.start, env) or INT64
    if loop.stop is None:
        return (start[0], INT64[1])
    stop = _span(loop.stop, env) or INT64
    up, down = (start[0], stop[1] - 1), (stop[0] + 1, start[1])
    if loop.step.is_positive:
        span = up
    elif loop.step.is_negative:
        span = down
    else:
        span = (min(up[0], down[0]), max(up[1], down[1]))
    return (max(span[0], INT64[0]), min(span[1], INT64[1]))


def _fits(v):
    return INT64[0] <= v <= INT64[1]


def _span(expr, env):
    """(lo, hi) bounding integer ``expr`` when every subexpression, in any order C may
    compute it, provably fits in int64 (``env``: spans of symbols and loads), else None.
    A condition gets (0, 1) when its operands fit."""
    expr = sp.sympify(expr)
    if expr.is_Integer:
        return (int(expr),) * 2 if _fits(int(expr)) else None
    if expr.is_Symbol:
        return env.get(expr, INT64) if expr.is_integer else None
    if isinstance(expr, sp.logic.boolalg.BooleanAtom):
        return (0, 1)
    name = type(expr).__name__
    if name.startswith(LOAD):
        return env.get(name, INT64)
    if isinstance(expr, sp.Piecewise):
        parts = [(_span(v, env), _span(c, env)) for v, c in expr.args]
        if any(v is None or c is None for v, c in parts):
            return None
        return (min(v[0] for v, _ in parts), max(v[1] for v, _ in parts))
    args = [_span(a, env) for a in expr.args]
    if any(a is None for a in args):
        return None
    if isinstance(expr, sp.logic.boolalg.Boolean):
        return (0, 1)
    if expr.is_Add:            # every partial sum lies between these two
        low, high = sum(min(a[0], 0) for a in args), sum(max(a[1], 0) for a in args)
        return (sum(a[0] for a in args), sum(a[1] for a in args)) \
            if _fits(low) and _fits(high) else None
    if expr.is_Pow:
        if not (expr.exp.is_Integer and expr.exp >= 0):
            return None
        args = [args[0]] * int(expr.exp)
    if expr.is_Mul or expr.is_Pow:      # every partial product is at most this big
        args = _sizes_product(expr, args, env)
        if math.prod(max(abs(a[0]), abs(a[1]), 1) for a in args) > INT64[1]:
            return None
        span = (1, 1)
        for a in args:
            corners = [x * y for x in span for y in a]
            span = (min(corners), max(corners))
        return span
    if name == "floordiv":
        m = max(abs(args[0][0]), abs(args[0][1]))        # INT64_MIN // -1 does not fit
        return (-m, m) if _fits(m) else None
    if name == "python_mod":
        (a, _), (b0, b1) = args
        if a == INT64[0] and b0 <= -1 <= b1:
            return None                                   # INT64_MIN % -1 traps in C
        m = max(abs(b0), abs(b1))
        return (0, m - 1) if b0 > 0 else (-m + 1, m - 1)
    if name == "trips":
        (a0, a1), (b0, b1), (s0, s1) = args
        width = max(b1 - a0, a1 - b0) + max(abs(s0), abs(s1))
        return (0, width) if _fits(width) else None
    if isinstance(expr, (sp.Min, sp.Max)):
        return (min(a[0] for a in args), max(a[1] for a in args))
    return None


def _sizes_product(expr, spans, env):
    """The spans of a product's factors (``spans``), with dimensions of one argument
    taken together (``N*M`` of a ``float64[N, M]``): NumPy bounds their product."""
    parts = sp.Mul.make_args(expr) if expr.is_Mul else (expr,)
    dims = Counter()
    for f in parts:
        base, exp = f.as_base_exp()
        if base.is_Symbol and exp.is_Integer and exp > 0:
            dims[base] += int(exp)
    for have, bound in env.get(PRODUCTS, ()):
        if dims and all(have[n] >= k for n, k in dims.items()):
            others = [a for f, a in zip(parts, spans) if f.as_base_exp()[0] not in dims] \
                if expr.is_Mul else []
            return others + [(0, bound)]
    return spans


def _polynomial(expr):
    """Whether ``expr`` is built from sums and products only (which wrap exactly)."""
    return not any(not (a.is_Add or a.is_Mul or a.is_Pow or a.is_Atom
                        or type(a).__name__.startswith(LOAD))
                   for a in sp.preorder_traversal(expr))


def _nonnegative(bound):
    """Whether sympy proves ``bound >= 0``; by cases on the Min and Max it contains, and
    simplifying (slow), only when the plain query cannot tell."""
    known = bound.is_nonnegative
    return known if known is not None else _simplified_nonnegative(bound)


@functools.lru_cache(maxsize=4096)
def _simplified_nonnegative(bound):
    return bool(_by_cases(bound) or sp.simplify(bound).is_nonnegative)


def _by_cases(bound):
    """``bound >= 0`` from the arguments of a Min or Max it holds linearly: ``c * Max(a,
    b)`` with ``c >= 0`` is at least ``c * a`` and ``c * b``, so one case suffices; ``c *
    Min(a, b)`` is the smaller of them, so both must hold (and conversely for c <= 0)."""
    m = next((a for a in sp.preorder_traversal(bound) if isinstance(a, (sp.Min, sp.Max))),
             None)
    if m is None:
        return False
    d = sp.Dummy(integer=True)
    linear = bound.xreplace({m: d})
    coeff = sp.diff(linear, d)
    if d in coeff.free_symbols or coeff.has(sp.Derivative):
        return False
    cases = (_nonnegative(sp.expand(linear.subs(d, a))) for a in m.args)
    if coeff.is_nonnegative:
        return any(cases) if isinstance(m, sp.Max) else all(cases)
    if coeff.is_nonpositive:
        return any(cases) if isinstance(m, sp.Min) else all(cases)
    return False


def _leaves(node, context):
    """(node, context) of a node, or of each node in a map with the map's loops added."""
    if isinstance(node, MapScope):
        loops = tuple(LoopRegion(p, a, b, s, None) for p, (a, b, s) in
                      zip(node.params, node.ranges))
        for t in node.body:
            yield from _leaves(t, context + loops)
    else:
        yield node, context


def _memlets(node, context):
    """Every element a node accesses, integer-array elements inside indices included."""
    if isinstance(node, Tasklet):
        for m in [m for _, m in node.inputs] + [m for m, _ in node.outputs]:
            yield m, node.line, context
            for e in m.subset:
                for name, load in index_loads(e):
                    yield Memlet(name, load.args), node.line, context
    elif isinstance(node, (Push, Pop)):
        yield node.memlet, node.line, context


def _integer_values(node):
    """The largest integer parts of the values a tasklet computes (C: in int64)."""
    todo = [sp.sympify(e) for _, e in node.outputs] if isinstance(node, Tasklet) else []
    while todo:
        e = todo.pop()
        if e.is_Atom:
            continue
        if isinstance(e, sp.Expr) and _integral(e):
            yield e
        else:
            todo.extend(e.args)


def _integral(e):
    """Whether ``e`` is computed as an integer: integer symbols and constants under sums,
    products, powers, quotients, remainders, min and max."""
    if e.is_Integer or e.is_Symbol:
        return bool(e.is_integer)
    if e.is_Pow:
        return e.exp.is_Integer and e.exp >= 0 and _integral(e.base)
    if e.is_Add or e.is_Mul or isinstance(e, (sp.Min, sp.Max)) or \
            type(e).__name__ in ("floordiv", "python_mod"):
        return all(_integral(a) for a in e.args)
    return False


def minimum(expr, loops):
    """A lower bound of ``expr`` over the loops' iteration space, or None.

    Elements of integer arrays (``idx[i]``, also in loop bounds) become free variables
    ranging over the array's values ``[__min_idx, __max_idx]``, eliminated last; so do
    remainders ``a % m`` over ``[0, m)``."""
    folded = sp.piecewise_fold(expr.rewrite(sp.Piecewise)) if expr.has(sp.Min, sp.Max,
                                                                      sp.Piecewise) else expr
    if isinstance(folded, sp.Piecewise):    # a choice (``idx[i + 1] if c else 0``, a clamp):
        lows = [minimum(sp.expand(e), loops)     # its lowest branch
                for e, _ in folded.args]
        return None if None in lows else sp.Min(*lows)
    ranges = {}
    expr = _abstract_loads(expr, ranges)
    looped = {loop.var for loop in loops}
    for k, mod in enumerate(sorted(_remainders(expr), key=sp.count_ops, reverse=True)):
        m = mod.args[1]     # Python's a % m lies in [0, m) for m > 0 (m = 0: checked apart)
        if expr.has(mod) and m.is_nonnegative and not m.free_symbols & looped:
            ranges[sp.Symbol(f"__m{k}", integer=True)] = (mod, (sp.Integer(0), m - 1))
            expr = sp.expand(expr.xreplace({mod: list(ranges)[-1]}))
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
    for v, (_, (lo, hi)) in reversed(list(ranges.items())):
        expr = _at_minimum(expr, v, lo, hi)
        if expr is None:
            return None
    return expr


def apart(x, y, loops):
    """Whether subsets ``x`` and ``y`` differ by at least one in some index at every point
    of the ``loops`` (outermost first): they never name one element there."""
    for a, b in zip(x, y):
        if index_loads(a) or index_loads(b):
            continue
        d = sp.expand(sp.sympify(a) - sp.sympify(b))
        for e in (d - 1, -d - 1):
            low = minimum(e, loops)
            if low is not None and low.is_nonnegative:
                return True
    return False


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
    """Replace each integer-array element by a variable over the array's values, recording
    its range: one variable per element, the same in the index and in the loop bounds
    (``A_val[r + A_row[i]]`` for ``r`` in ``range(A_row[i + 1] - A_row[i])`` reaches
    ``A_row[i + 1] - 1``), the outermost loads first (``x[A_col[r + A_row[i]]]`` is one
    variable over ``A_col``'s values)."""
    names = {load: v for v, (load, _) in ranges.items()}
    for name, load in sorted(index_loads(expr), key=lambda x: -sp.count_ops(x[1])):
        if not expr.has(load):                  # inside a load already replaced
            continue
        if load not in names:
            names[load] = sp.Symbol(f"__v{len(ranges)}", integer=True)
            ranges[names[load]] = (load, value_range(name))
        expr = expr.xreplace({load: names[load]})
    return sp.expand(expr)


__all__ = ["Fits", "IndexCheck", "apart", "index_checks", "minimum"]
