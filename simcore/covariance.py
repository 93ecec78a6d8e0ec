"""The background error covariance B and its square root, for 4D-Var's control variable.

    B = sigma_b^2 C,      C = C_1 (x) C_2 (x) ...      C_a[i, j] = exp(-d_a(i, j)^2 / (2 L^2))

C is a Gaussian correlation of length L (grid points), separable over the grid axes
(the Gaussian of a distance splits into one factor per axis), d_a the distance along
axis a -- around the ring on periodic axes. The control variable transform

    x0 = x_b + B^(1/2) v,     B^(1/2) = sigma_b C_1^(1/2) (x) C_2^(1/2) (x) ...

turns J_b into 1/2 v^T v and makes the Hessian of J the identity plus a low-rank
observation term: what makes L-BFGS and conjugate gradients converge in few
iterations. C_a^(1/2) is the symmetric square root (eigenvalues clipped at zero), so
B^(1/2) is symmetric and is its own transpose. All variables of the state share B's
std and length; the state is flattened as :func:`flatten` orders it.
"""
import numpy as np

from .errors import ConfigError


def layout(model) -> list:
    """[(variable, offset in the flat state, shape)] in the model's order. Kept on the
    model: 4D-Var flattens states thousands of times per second, and a model's dims
    come from its config (OmegaConf lookups, microseconds each)."""
    cached = model.__dict__.get("_flat_layout")
    if cached is None:
        cached, offset = [], 0
        for v in model.variables():
            shape = model.shape(v.dims)
            cached.append((v.name, offset, shape))
            offset += int(np.prod(shape, dtype=np.int64))
        model.__dict__["_flat_layout"] = cached
    return cached


def flatten(model, state: dict) -> np.ndarray:
    """The state variables, in the model's order, as one float64 vector."""
    return np.concatenate([np.asarray(state[name], dtype=np.float64).ravel()
                           for name, _, _ in layout(model)])


def unflatten(model, vector) -> dict:
    """The inverse of :func:`flatten`: {variable: C-contiguous array}."""
    out = {}
    for name, start, shape in layout(model):
        size = int(np.prod(shape, dtype=np.int64))
        out[name] = np.ascontiguousarray(vector[start:start + size]).reshape(shape)
    return out


def state_size(model) -> int:
    name, offset, shape = layout(model)[-1]
    return offset + int(np.prod(shape, dtype=np.int64))


def gaussian_correlation(n: int, length: float, periodic: bool = False) -> np.ndarray:
    """The n x n Gaussian correlation matrix of ``length`` grid points (0: identity)."""
    i = np.arange(n)
    d = np.abs(i[:, None] - i[None, :]).astype(np.float64)
    if periodic:
        d = np.minimum(d, n - d)
    if length <= 0:
        return (d == 0).astype(np.float64)
    return np.exp(-0.5 * (d / length) ** 2)


def symmetric_sqrt(c: np.ndarray) -> np.ndarray:
    """C^(1/2) = V diag(sqrt(max(lambda, 0))) V^T for a symmetric C."""
    lam, vec = np.linalg.eigh(c)
    return (vec * np.sqrt(np.maximum(lam, 0.0))) @ vec.T


class BackgroundCovariance:
    """B = std^2 C over the model's state; ``sqrt`` applies B^(1/2) to control vectors.

    C is the separable Gaussian correlation of ``length`` grid points (the module
    docstring), or, given ``covariance`` (n x n over the flat state), that matrix
    itself: B = std^2 K with K^(1/2) its symmetric square root, formed once (dense; the
    climatological covariance of a truth run, as DAPPER's Var4D takes B = xB K)."""

    def __init__(self, model, std: float, length: float = 0.0, covariance=None):
        if not std > 0 or (covariance is None and not length >= 0):
            raise ConfigError(f"background error needs std > 0 and length >= 0, got "
                              f"std={std}, length={length}")
        self.model, self.std = model, float(std)
        self.size = state_size(model)
        self.root = None                    # K^(1/2) of a given covariance
        self.factors = {}                   # dim name -> C_a^(1/2)
        self.shapes = []
        if covariance is not None:
            self.length = None
            self.root = symmetric_sqrt(np.asarray(covariance, dtype=np.float64))
            return
        self.length = float(length)
        periodic = set(model.periodic())
        for v in model.variables():
            for d in v.dims:
                if d not in self.factors:
                    c = gaussian_correlation(model.dim(d).size, self.length, d in periodic)
                    self.factors[d] = symmetric_sqrt(c)
            self.shapes.append((v.name, v.dims))

    def sqrt(self, v: np.ndarray) -> np.ndarray:
        """B^(1/2) v (flat in, flat out)."""
        if self.root is not None:
            return self.std * (self.root @ np.asarray(v, dtype=np.float64))
        if self.length == 0:                # C = I: B^(1/2) = std I, no products
            return self.std * np.asarray(v, dtype=np.float64)
        state = unflatten(self.model, np.asarray(v, dtype=np.float64))
        for name, dims in self.shapes:
            x = state[name]
            for axis, d in enumerate(dims):
                x = np.moveaxis(np.tensordot(self.factors[d], x, axes=(1, axis)), 0, axis)
            state[name] = self.std * x
        return flatten(self.model, state)

    def sqrt_adjoint(self, g: np.ndarray) -> np.ndarray:
        """(B^(1/2))^T g: B^(1/2) is symmetric."""
        return self.sqrt(g)

    def sample(self, rng) -> np.ndarray:
        """A draw from N(0, B)."""
        return self.sqrt(rng.standard_normal(self.size))

    def matrix(self) -> np.ndarray:
        """B itself (dense; for tests and small states)."""
        root = np.stack([self.sqrt(e) for e in np.eye(self.size)], axis=1)
        return root @ root.T
