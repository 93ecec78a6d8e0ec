"""Partial derivatives of tasklets, from sympy.diff."""
import functools

import sympy as sp

from ..errors import AdjointError


@functools.lru_cache(maxsize=None)
def partial(expr, connector):
    """d expr / d connector, refusing results sympy could not differentiate."""
    d = _power_rule_diff(expr, connector)
    if d.has(sp.Derivative, sp.Subs):
        raise AdjointError(f"no derivative rule for {expr}: sympy left {d}")
    return _zero_where_a_factor_is(_one_division_per_denominator(d))


class _Power(sp.Function):
    """``b**n`` for a constant ``n``, differentiated by the power rule (see below)."""

    def fdiff(self, argindex=1):
        base, n = self.args
        return n * _Power(base, n - 1)


def _power_rule_diff(expr, x):
    """``sp.diff``, with ``n*b**(n-1)*b'`` for a constant power of a compound base.
    sympy differentiates ``b**n`` as ``b**n * n/b * b'``, which only simplifies where
    the powers of ``b`` combine: for ``np.where(m, x, 0)**2`` (a Piecewise, into which
    sympy pushes the powers) it is ``0 * inf`` (nan) where x is 0 and ``zoo`` where m is
    false."""
    def compound_power(e):
        return isinstance(e, sp.Pow) and e.exp.is_number and not e.base.is_Symbol
    if not expr.has(sp.Pow):
        return sp.diff(expr, x)
    d = sp.diff(expr.replace(compound_power, lambda e: _Power(e.base, e.exp)), x)
    return d.replace(lambda e: isinstance(e, _Power), lambda e: sp.Pow(*e.args))


def _zero_where_a_factor_is(d):
    """The chain rule's products inside one partial, where a step factor is exactly zero
    and another is infinite: ``sqrt(max(0, x))`` at x < 0 is 0.5/sqrt(0) times max's
    derivative 0, which must be 0 (the value is constant there), not nan. Such a product
    becomes ``0 if the other factors are 0 else the product`` (the test ``times`` makes
    for a zero cotangent, within the expression)."""
    def infinite(f):
        return any(p.exp.is_negative and not p.exp.is_integer for p in f.atoms(sp.Pow))

    def rewrite(m):
        steps = [f for f in m.args if f.has(sp.Heaviside) and not infinite(f)]
        if not steps or not any(infinite(f) for f in m.args):
            return m
        return sp.Piecewise((sp.Integer(0), sp.Eq(sp.Mul(*steps), 0)), (m, True))
    if not d.has(sp.Heaviside) or not infinite(d):
        return d
    return d.replace(lambda e: isinstance(e, sp.Mul), rewrite)


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


def times(factor, d):
    """``factor * d``, a chain-rule term, where an exactly zero factor (a cotangent or a
    tangent) gives zero even when the partial ``d`` is infinite: the distance of a point
    to itself, ``sqrt(dx*dx)`` at 0, has an infinite derivative times a zero adjoint, and
    the term must vanish, not be nan. Only partials that can be infinite where the value
    is finite get the test: fractional negative powers (sqrt, x**0.5, asin, acos)."""
    if not any(p.exp.is_negative and not p.exp.is_integer for p in d.atoms(sp.Pow)):
        return factor * d
    return sp.Piecewise((sp.Integer(0), sp.Eq(factor, 0)), (factor * d, True))
