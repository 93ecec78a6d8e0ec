"""The background term of the cost: a Gaussian prior, optionally with smoothness.

    J_b(p) = 1/2 sum ((p - p_b) / sigma_b)^2 + 1/2 sum_axes sum (diff(p - p_b) / sigma_s)^2

``sigma_b`` is a parameter's ``prior_std``; ``sigma_s`` its ``smoothness_std``, the
expected size of the difference between neighbouring values of a parameter field
(about its background).
Both terms are quadratic, so value and gradient are a few NumPy lines.
"""
import numpy as np


def prior_cost(parameters, params: dict, background: dict):
    """(J_b, {name: dJ_b/dp}) for the declared ``parameters`` at ``params``."""
    total, grads = 0.0, {}
    for p in parameters:
        x = params[p.name] - background[p.name]
        g = np.zeros_like(x)
        if p.prior_std is not None:
            r = x / p.prior_std
            total += 0.5 * float(np.sum(r * r))
            g += r / p.prior_std
        if p.smoothness_std is not None:
            for axis in range(x.ndim):
                d = np.diff(x, axis=axis) / p.smoothness_std
                total += 0.5 * float(np.sum(d * d))
                gd = d / p.smoothness_std                  # adjoint of np.diff: -D^T
                g -= np.diff(gd, axis=axis, prepend=0.0, append=0.0)
        grads[p.name] = g
    return total, grads
