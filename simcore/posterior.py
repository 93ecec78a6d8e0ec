"""Uncertainty of calibrated parameters: the Gauss-Newton posterior covariance.

    A = J^T R^-1 J + P          C = A^-1          posterior std = sqrt(diag C)

at the estimate p: J = d(H M)/dp, the linearised observations (``Twin.linearized``, the
engine's ``jvp``), J^T its transpose (``Twin.adjoint``, the pullbacks of ``vjp``), R
diagonal (each observation's error std) and P the Hessian of the prior term (J_b is
quadratic: P dp = grad J_b at p_b + dp). ``A`` is applied to vectors, J never formed.
Where the model is linear in p and the errors Gaussian, C is the exact covariance of the
estimate; otherwise it is the usual Laplace (linearised) approximation.

- Few parameters (``exact`` or fewer): A's columns by n products (one tangent-linear
  and one adjoint run each), C by a dense inverse.
- More: P = L L^T (dense Cholesky; P is formed from its quadratic form, no model runs),
  and the leading ``rank`` eigenpairs (lambda, u) of the prior-preconditioned data
  Hessian L^-1 J^T R^-1 J L^-T by Lanczos (scipy's eigsh, two model runs per product):

      C = L^-T (I + L^-1 J^T R^-1 J L^-T)^-1 L^-1 ~ P^-1 - sum_i lambda_i/(1 + lambda_i) w_i w_i^T,

  w_i = L^-T u_i: the data shrink the prior's variance along the few directions they
  inform; the directions not found keep the prior's (so the std is an upper bound).
"""
import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, eigsh

from .errors import ConfigError
from .prior import prior_cost

EXACT = 64


class Posterior:
    """The Gauss-Newton Hessian of ``twin``'s cost at ``params`` over its parameters
    (flattened in the model's order) and what follows from it."""

    def __init__(self, twin, params: dict):
        self.twin, self.params = twin, {k: np.asarray(v, dtype=np.float64)
                                        for k, v in params.items()}
        self.parameters = twin.parameters
        self.shapes = {p.name: p.value.shape for p in self.parameters}
        self.size = sum(p.value.size for p in self.parameters)
        self.products = 0                               # Hessian-vector products

    def unpack(self, x) -> dict:
        out, start = {}, 0
        for name, shape in self.shapes.items():
            n = int(np.prod(shape, dtype=np.int64))
            out[name] = np.asarray(x[start:start + n], dtype=np.float64).reshape(shape)
            start += n
        return out

    def pack(self, d: dict) -> np.ndarray:
        return np.concatenate([np.ravel(d[name]) for name in self.shapes])

    def data_hessian(self, x) -> np.ndarray:
        """J^T R^-1 J x: one tangent-linear and one adjoint run."""
        twin = self.twin
        zero = {k: np.zeros_like(v) for k, v in twin.x0.items()}
        lin = twin.linearized(self.params, self.unpack(x), zero)
        gp, _ = twin.adjoint(self.params, [w / o.sigma ** 2
                                           for w, o in zip(lin, twin.observed)])
        self.products += 1
        return self.pack(gp)

    def prior_hessian(self) -> np.ndarray:
        """P, dense (J_b is quadratic: its gradient at p_b + e_i is P's column i)."""
        background = self.twin.background
        cols = []
        for e in np.eye(self.size):
            shifted = {k: background[k] + v for k, v in self.unpack(e).items()}
            cols.append(self.pack(prior_cost(self.parameters, shifted, background)[1]))
        return np.stack(cols, axis=1)

    def std(self, exact=EXACT, rank=20) -> np.ndarray:
        """The posterior std of every parameter value (flat)."""
        P = self.prior_hessian()
        if self.size <= exact:
            A = P + np.stack([self.data_hessian(e) for e in np.eye(self.size)], axis=1)
            return np.sqrt(np.diag(np.linalg.inv(0.5 * (A + A.T))))
        return np.sqrt(np.maximum(self.low_rank_variance(P, rank), 0.0))

    def low_rank_variance(self, P, rank) -> np.ndarray:
        """diag C from the leading eigenpairs of the prior-preconditioned data Hessian."""
        try:
            L = np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            raise ConfigError(f"posterior std of {self.size} parameters needs a prior on "
                              "every one (prior_std): without one the data alone must "
                              "inform them all") from None

        def apply(u):
            w = sla.solve_triangular(L, u, lower=True, trans="T")          # L^-T u
            return sla.solve_triangular(L, self.data_hessian(w), lower=True)

        k = min(int(rank), self.size - 1)
        lam, U = eigsh(LinearOperator((self.size, self.size), matvec=apply), k=k,
                       which="LA")
        lam = np.maximum(lam, 0.0)
        W = sla.solve_triangular(L, U, lower=True, trans="T")               # L^-T U
        prior_variance = np.diag(sla.cho_solve((L, True), np.eye(self.size)))
        return prior_variance - np.sum(W * W * (lam / (1.0 + lam)), axis=1)
