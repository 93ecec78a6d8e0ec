"""The control vector of calibrate: parameters flattened and preconditioned by the prior.

    v = (p - p_b) / s        s = prior_std (1 where a parameter has none)

so v = 0 is the first guess, and v's components are of order one: what L-BFGS-B's
tolerances and its first step assume. Bounds and gradients are mapped the same way.
"""
import numpy as np


class Control:
    def __init__(self, parameters, background: dict):
        self.parameters = parameters
        self.background = background
        self.slices, start = {}, 0
        for p in parameters:
            self.slices[p.name] = slice(start, start + p.value.size)
            start += p.value.size
        self.size = start
        self.scale = np.concatenate([np.full(p.value.size, float(p.prior_std or 1.0))
                                     for p in parameters])
        self.base = np.concatenate([background[p.name].ravel() for p in parameters])

    def unpack(self, v) -> dict:
        p = self.base + self.scale * np.asarray(v)
        return {q.name: p[self.slices[q.name]].reshape(q.value.shape).copy()
                for q in self.parameters}

    def pack(self, params: dict) -> np.ndarray:
        p = np.concatenate([params[q.name].ravel() for q in self.parameters])
        return (p - self.base) / self.scale

    def gradient(self, grad: dict) -> np.ndarray:
        """dJ/dv from dJ/dp."""
        return self.scale * np.concatenate([grad[q.name].ravel() for q in self.parameters])

    def bounds(self) -> list:
        lo, hi = [], []
        for q in self.parameters:
            b = q.bounds if q.bounds is not None else (-np.inf, np.inf)
            lo.append(np.full(q.value.size, float(b[0])))
            hi.append(np.full(q.value.size, float(b[1])))
        lo = (np.concatenate(lo) - self.base) / self.scale
        hi = (np.concatenate(hi) - self.base) / self.scale
        return [(None if not np.isfinite(a) else a, None if not np.isfinite(b) else b)
                for a, b in zip(lo, hi)]
