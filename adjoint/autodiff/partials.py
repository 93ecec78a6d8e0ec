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
    return d
