"""Partial derivatives of tasklets, from sympy.diff."""
import functools

import sympy as sp

from ..errors import AdjointError


@functools.lru_cache(maxsize=None)
def partial(expr, connector):
    """d expr / d connector, refusing results sympy could not differentiate."""
    d = sp.diff(expr, connector)
    if d.has(sp.Derivative, sp.Subs):
        raise AdjointError(f"no derivative rule for {expr}: sympy left {d}")
    return _one_division_per_denominator(d)


def _one_division_per_denominator(d):
    """The quotient rule divides twice by one denominator: d/dy x*y/(y*y + c) is
    x/(y*y + c) - 2*x*y*y/(y*y + c)**2. Over the common denominator it divides once,
    and a division costs several multiplications in a vectorised loop."""
    divisors = _divisors(d)
    if len(divisors) == len(set(divisors)):
        return d
    common = sp.together(d)
    return common if len(_divisors(common)) < len(divisors) else d


def _divisors(e):
    return [p.base for p in e.atoms(sp.Pow) if p.exp.is_negative]
