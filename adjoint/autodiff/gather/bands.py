"""On the CPU the distributed nests then fuse again into *bands* (see _bands): each runs
in the band's nest shifted along the innermost dimension far enough that it touches
every element after the earlier nests did, so a reverse step passes over its arrays
once, not once per target. Outer dimensions never shift, so rows stay independent and
outer loops parallel; a 1-D band has only its one loop, so it runs on one thread, and
where threads would run the distributed nests run instead.
"""
from dataclasses import dataclass, replace

import sympy as sp

from ...analysis.dependence import ANY, NEVER, distance, linear_form
from ...schedule.cost import PARALLEL_WORK
from ...sdfg.nodes import THREADS, ConditionalRegion, Sequence
from .distribution import _back, _target_key
from .emit import _emit


@dataclass(frozen=True)
class _Band:
    """Consecutive groups run in one nest, each moved along the innermost dimension by its
    own alignment (see _bands). ``units`` in order: the gathered terms of a group (added
    up in one tasklet), then each lagged or ungathered term alone; every term placed
    (its shift includes the alignment). ``gathered``: some unit gathers."""
    units: tuple
    gathered: bool

    def terms(self):
        return [t for unit in self.units for t in unit]


MAX_SPREAD = 64     # most innermost shifts a band's terms may spread over
SLACK = 16          # elements a read stays behind the store it reads (see _bands)


def _bands(groups, variables, cpu):
    """The groups as bands: each group joins the band before it when it can run at
    every point right after the band's terms, moved by an alignment a along the
    innermost dimension. A pair of accesses to one element, one of them a write, gives
    a bound: the band reaches the element at point u, the group at w (before the move)
    with ``u - w = d``, so ``a >= d`` keeps the band first, and ``a >= d + SLACK`` when
    the group reads what the band wrote: a vector load that overlaps a store still in
    flight waits for it (minmod's band: 84 ms at a = d, 48 at d + 16, 56 unfused). Any
    other dimension must meet at the same point (d = 0 there), so rows stay
    independent and the outer loops parallel. Sums into one element from both commute
    (bound kept for the vectoriser: every dependence then points forwards, which SIMD
    chunks preserve). The band's arrays pass through the caches once instead of once
    per group. On the GPU every group stays a grid of independent points."""
    bands = []
    for group in groups:
        joined = _joined(bands[-1], group, variables) \
            if bands and cpu else None
        if joined is None:
            bands.append(_alone(group, variables))
        else:
            bands[-1] = joined
    return bands


def _alone(group, variables):
    """The band of one group."""
    return _Band(tuple(_units(group, _sign(group, None, variables), 0)), group.key is not None)


def _unless_threads(groups, nest, banded, line):
    """A band of a 1-D nest carries dependences along its only loop, which then cannot
    get threads: where threads would run (more than one, at least PARALLEL_WORK term
    instances), the groups' own nests run instead. (Two copies of the code: a 1-D nest
    over a row or column of bigger arrays, a boundary condition, is not banded; its
    work is small next to the nests over whole arrays, and its code would double.)"""
    plain = [n for group in groups for n in _emit(_alone(group, nest.vars), nest, line, True)]
    (lo, hi), = nest.bounds
    work = sum(len(group.everything()) for group in groups) * (hi - lo)
    threads = sp.And(sp.Gt(THREADS, 1), sp.Ge(work, PARALLEL_WORK))
    return ConditionalRegion(((threads, Sequence(tuple(plain))),
                              (None, Sequence(tuple(banded)))), line)


def _sign(group, band, variables):
    """The orientation the group's terms run in: its gathered terms', else the band's."""
    if group.key is not None:
        return group.terms[0].sign
    if band is not None and band.gathered:
        return next(t for t in band.terms() if t.sign is not None).sign
    return (1,) * len(variables)


def _units(group, sign, align):
    """The group's units (see _Band), placed ``align`` along the innermost dimension:
    an ungathered group's terms run at their own iteration (shift 0, whatever their
    target's offset)."""
    def placed(t, shift):
        return replace(t, shift=shift[:-1] + (shift[-1] + align,), sign=sign)
    if group.key is None:
        return [[placed(t, (0,) * len(sign))] for t in group.terms]
    return [[placed(t, t.shift) for t in group.terms]] + \
        [[placed(t, t.shift)] for t in group.lagged]


def _joined(band, group, variables):
    """``band`` with ``group`` joined (see _bands), or None."""
    sign = _sign(group, band, variables)
    if sign != band.terms()[0].sign:
        return None
    trial = [t for unit in _units(group, sign, 0) for t in unit]
    ours = [a for t in band.terms() for a in _placed_accesses(t, variables)]
    theirs = [a for t in trial for a in _placed_accesses(t, variables)]
    align = None
    for x in ours:
        for y in theirs:
            if x[0] != y[0] or x[2] == y[2] == "read":
                continue
            d = distance(x[1], y[1], len(variables))
            summed = x[2] == y[2] == "sum"
            if d is NEVER or summed and (d is ANY or any(d[:-1])):
                continue
            if d is ANY or any(d[:-1]):
                return None
            bound = d[-1] + (SLACK if x[2] != "read" and y[2] != "write" else 0)
            align = bound if align is None else max(align, bound)
    units = band.units + tuple(_units(group, sign, align or 0))
    shifts = [t.shift[-1] for unit in units for t in unit]
    if max(shifts) - min(shifts) > MAX_SPREAD:
        return None
    return _Band(units, band.gathered or group.key is not None)


def _placed_accesses(term, variables):
    """(array, each index at point u as a linear_form, "read" | "write" | "sum") of
    each access of a placed term (see _tasklet)."""
    back = _back(term, variables)

    def forms(subset):
        return tuple(linear_form(sp.expand(e.xreplace(back)), variables) for e in subset)
    out = [(m.data, forms(m.subset), "read") for _, m in term.inputs]
    target = _target_key(term, variables)[1]
    return out + [(term.out.data, forms(target), "sum" if term.out.wcr else "write")]
