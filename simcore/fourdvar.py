"""Strong-constraint 4D-Var over one window: the cost, its gradient, its minimisers.

The control is v, the state at the window start x0 = x_b + B^(1/2) v (simcore.covariance):

    J(v) = 1/2 v^T v  +  1/2 sum_j |(H x_j - y_j) / sigma_o|^2,      x_j = M_{0 -> t_j}(x0)
           \\-- J_b --/     \\------------------ J_o ------------------/

with observations y_j at ``offsets`` steps after the window start, each time's H linear
(simcore.observation) and R diagonal (each observation's error std sigma_o). The model
runs chunk by chunk between observation times through the engine (simcore.chain:
compiled forward; ``vjp`` for the adjoint, ``jvp`` for the tangent-linear model); no
finite differences anywhere.

Two minimisers, both reporting J, J_b, J_o and |grad J| / |grad J_0| per iteration:

- :func:`lbfgs`: L-BFGS on the full nonlinear J, one forward + adjoint run per
  evaluation;
- :func:`gauss_newton`: incremental 4D-Var. Each outer loop relinearises the model about
  the current trajectory (the chunks' ``vjp`` tapes are kept); each inner loop minimises
  the quadratic cost of the increment dv by conjugate gradients,

      J_q(dv) = 1/2 |v + dv|^2 + 1/2 sum_j |(H M'_j B^(1/2) dv - d_j) / sigma_o|^2,
      d_j = y_j - H M_j(x0)  (innovations),

  each CG iteration one tangent-linear (``jvp``) and one adjoint (pullback) run.
"""
from dataclasses import dataclass

import numpy as np

from .chain import Chain
from .covariance import flatten, unflatten
from .history import History


class Window:
    """The 4D-Var cost of one window (see the module docstring).

    ``observed``: one :class:`simcore.obsfile.Observed` (H, y, error stds) per
    observation time, ``offsets`` steps after the window start. Observation-space
    vectors (misfits, innovations, what :meth:`Linearization.tl` returns) are the times'
    vectors one after another, as ``y`` and ``sigma`` are."""

    def __init__(self, model, params, B, observed, xb, offsets):
        self.model, self.params, self.B = model, params, B
        self.observed = list(observed)
        self.y = np.concatenate([o.y for o in self.observed])
        self.sigma = np.concatenate([o.sigma for o in self.observed])
        ends = np.cumsum([o.y.size for o in self.observed])
        self.slices = [slice(e - o.y.size, e) for e, o in zip(ends, self.observed)]
        self.xb = np.asarray(xb, dtype=np.float64)
        self.offsets = [int(o) for o in offsets]
        if len(self.offsets) != len(self.observed):
            raise ValueError(f"{len(self.offsets)} offsets for {len(self.observed)} "
                             "observation times")
        self.chunks = np.diff([0, *self.offsets]).astype(int)   # steps before each time
        if np.any(self.chunks < 0):
            raise ValueError(f"observation offsets must be sorted, got {self.offsets}")
        self.chain = Chain(model, self.chunks)
        self.n_obs = self.y.size
        self.runs = {"forward": 0, "adjoint": 0, "tangent": 0}  # window runs of each model

    def observe(self, frames) -> np.ndarray:
        """H_j x_j of every time, one vector."""
        return np.concatenate([o.H(x) for o, x in zip(self.observed, frames)])

    def observe_adjoint(self, w) -> list:
        """H_j^T w_j for each time's part of the observation-space vector ``w``."""
        return [o.H.adjoint(w[sl]) for o, sl in zip(self.observed, self.slices)]

    def initial(self, v) -> np.ndarray:
        """x0 = x_b + B^(1/2) v."""
        return self.xb + self.B.sqrt(v)

    def state(self, x) -> dict:
        """The flat state ``x`` as {variable: array} (a copy)."""
        return unflatten(self.model, np.array(x, dtype=np.float64))

    def flat(self, state) -> np.ndarray:
        """The state {variable: array} as one vector (simcore.covariance's order)."""
        return flatten(self.model, state)

    def trajectory(self, x0) -> list:
        """The flat states at the observation times (compiled forward only)."""
        frames = self.chain.run(self.state(x0), self.params, self.flat)
        self.runs["forward"] += 1
        return frames

    def misfit(self, frames) -> np.ndarray:
        """(H x_j - y_j) / sigma_o at every observation time."""
        return self.observe(frames) / self.sigma - self.y / self.sigma

    def cost(self, v):
        """(J, J_b, J_o) by forward runs only."""
        r = self.misfit(self.trajectory(self.initial(v)))
        jb, jo = 0.5 * float(v @ v), 0.5 * float(np.sum(r * r))
        return jb + jo, jb, jo

    def cost_and_grad(self, v):
        """(J, J_b, J_o, dJ/dv): one forward run recording the tapes, one adjoint run."""
        frames, pullbacks = self.record(self.initial(v))
        r = self.misfit(frames)
        lam0 = self.pull(pullbacks, self.observe_adjoint(r / self.sigma))
        jb, jo = 0.5 * float(v @ v), 0.5 * float(np.sum(r * r))
        return jb + jo, jb, jo, v + self.B.sqrt_adjoint(lam0)

    def record(self, x0):
        """The flat states at the observation times and each chunk's pullback (or None)."""
        out = self.chain.record(self.state(x0), self.params, self.flat)
        self.runs["forward"] += 1
        return out

    def pull(self, pullbacks, cotangents) -> np.ndarray:
        """sum_j M'_j^T c_j: the pullbacks chained backwards, the flat c_j added at time j."""
        self.runs["adjoint"] += 1
        _, lam = self.chain.pull(pullbacks, [self.state(c) for c in cotangents])
        return self.flat(lam)


class Linearization:
    """The window linearised about the trajectory from x_b + B^(1/2) v: innovations, the
    tangent-linear map dv -> (H M'_j B^(1/2) dv)_j and its adjoint."""

    def __init__(self, window: Window, v):
        self.window, self.v = window, np.array(v, dtype=np.float64)
        self.x0 = window.initial(self.v)
        frames, self.pullbacks = window.record(self.x0)
        self.innovation = window.y - window.observe(frames)
        r = self.innovation / window.sigma
        self.Jb, self.Jo = 0.5 * float(self.v @ self.v), 0.5 * float(np.sum(r * r))
        self.J = self.Jb + self.Jo

    def tl(self, dv) -> np.ndarray:
        """(H M'_j B^(1/2) dv)_j, one vector over the times, by forward mode (``jvp``)."""
        w = self.window
        tangents = w.chain.tangent(w.state(self.x0), w.params, {}, w.state(w.B.sqrt(dv)))
        w.runs["tangent"] += 1
        return w.observe([w.flat(t) for t in tangents])

    def ad(self, obs) -> np.ndarray:
        """B^(1/2)^T sum_j M'_j^T H^T obs_j: the transpose of :meth:`tl` (pullbacks)."""
        w = self.window
        return w.B.sqrt_adjoint(w.pull(self.pullbacks, w.observe_adjoint(obs)))

    def hessian(self, dv) -> np.ndarray:
        """The Gauss-Newton Hessian I + B^(1/2)^T M'^T H^T R^-1 H M' B^(1/2) times dv."""
        return dv + self.ad(self.tl(dv) / self.window.sigma ** 2)


# History columns: J, J_b, J_o, |grad J| / |grad J_0|, the outer loop (0 for L-BFGS) and
# whether J is Gauss-Newton's quadratic model (inner iterations) rather than the
# nonlinear cost (L-BFGS; each outer loop's start; the last entry, at the analysis).
COLUMNS = ("cost", "cost_background", "cost_obs", "grad_norm_rel", "outer_loop", "quadratic")


def _report(history, J, Jb, Jo, grad, outer=0, quadratic=False):
    history.add(cost=J, cost_background=Jb, cost_obs=Jo, grad_norm_rel=grad,
                outer_loop=outer, quadratic=quadratic)


@dataclass
class Result:
    v: np.ndarray
    history: History
    iterations: int
    message: str


def lbfgs(window: Window, max_iter=50, gtol=1e-4, memory=10) -> Result:
    """L-BFGS on the nonlinear J from v = 0, until |grad J| / |grad J_0| < gtol.

    The two-loop recursion over the last ``memory`` pairs (s, y) (scaled by s.y / y.y;
    the first step has length 1, one background std), and a backtracking line search
    from the unit step (Armijo condition, quadratic interpolation; a step on which the
    model overflows counts as too long). Written out rather than scipy's L-BFGS-B: the
    problems are small (one window's state) and solved thousands of times, and
    L-BFGS-B's BLAS work costs milliseconds per iteration when BLAS threads compete for
    the cores -- more than the model runs; this loop costs microseconds."""
    history, pairs = History(*COLUMNS), []
    v = np.zeros(window.B.size)
    J, Jb, Jo, g = window.cost_and_grad(v)
    g0 = float(np.linalg.norm(g)) or 1.0
    _report(history, J, Jb, Jo, np.linalg.norm(g) / g0)
    message = f"{int(max_iter)} iterations"
    for _ in range(int(max_iter)):
        if history["grad_norm_rel"][-1] < gtol:
            break
        d = -_two_loop(g, pairs)
        if not pairs or float(d @ g) >= 0:               # first step, or a restart
            pairs, d = [], -g / max(float(np.linalg.norm(g)), 1e-300)
        found = _backtrack(window, v, J, g, d)
        if found is None:
            message = "line search found no decrease"
            break
        v_new, (J, Jb, Jo, g_new) = found
        s_k, y_k = v_new - v, g_new - g
        if float(s_k @ y_k) > 1e-12 * np.linalg.norm(s_k) * np.linalg.norm(y_k):
            pairs = (pairs + [(s_k, y_k, 1.0 / float(s_k @ y_k))])[-int(memory):]
        v, g = v_new, g_new
        _report(history, J, Jb, Jo, np.linalg.norm(g) / g0)
    if history["grad_norm_rel"][-1] < gtol:
        message = f"|grad J| / |grad J0| < {gtol:g}"
    return Result(v, history, len(history) - 1, message)


def _backtrack(window, v, J, g, d, c1=1e-4, tries=30):
    """(v + a d, cost_and_grad there) for the first a = 1, ... with J(v + a d) <=
    J + c1 a d.g; None when none of ``tries`` steps decreases J."""
    slope, a = float(d @ g), 1.0
    for _ in range(tries):
        with np.errstate(over="ignore", invalid="ignore"):
            out = window.cost_and_grad(v + a * d)
        if np.isfinite(out[0]) and out[0] <= J + c1 * a * slope:
            return v + a * d, out
        excess = out[0] - J - a * slope if np.isfinite(out[0]) else np.inf
        a_min = -slope * a * a / (2.0 * excess) if excess > 0 else 0.0
        a = min(max(a_min, 0.1 * a), 0.5 * a)
    return None


def _two_loop(g, pairs) -> np.ndarray:
    """The L-BFGS inverse-Hessian approximation applied to ``g``."""
    q, alphas = g.copy(), []
    for s, y, rho in reversed(pairs):
        a = rho * float(s @ q)
        q -= a * y
        alphas.append(a)
    if pairs:
        s, y, _ = pairs[-1]
        q *= float(s @ y) / float(y @ y)
    for (s, y, rho), a in zip(pairs, reversed(alphas)):
        q += s * (a - rho * float(y @ q))
    return q


def gauss_newton(window: Window, outer_loops=10, max_iter=50, gtol=1e-4) -> Result:
    """Incremental 4D-Var: up to ``outer_loops`` relinearisations, until the nonlinear
    |grad J| / |grad J_0| < gtol at the start of an outer loop. Each inner loop runs up to
    ``max_iter`` conjugate-gradient iterations on the quadratic cost, until its gradient
    falls below gtol |grad J_0|. (A linear model needs one outer loop.)"""
    history, v, g0, iterations = History(*COLUMNS), np.zeros(window.B.size), None, 0
    message = f"{int(outer_loops)} outer loops"
    for k in range(int(outer_loops)):
        lin = Linearization(window, v)
        b = -v + lin.ad(lin.innovation / window.sigma ** 2)     # -grad J at dv = 0
        bnorm = float(np.linalg.norm(b))
        g0 = g0 or bnorm or 1.0
        _report(history, lin.J, lin.Jb, lin.Jo, bnorm / g0, k)
        if bnorm / g0 < gtol:
            message = f"|grad J| / |grad J0| < {gtol:g} after {k} outer loops"
            break
        dv, r = np.zeros_like(v), b.copy()
        p, rr = r.copy(), bnorm ** 2
        for _ in range(int(max_iter)):
            Ap = lin.hessian(p)
            alpha = rr / float(p @ Ap)
            dv += alpha * p
            r -= alpha * Ap
            rr, rr_old = float(r @ r), rr
            Jq = lin.J - 0.5 * float(dv @ (b + r))
            Jb = 0.5 * float((v + dv) @ (v + dv))
            _report(history, Jq, Jb, Jq - Jb, np.sqrt(rr) / g0, k, quadratic=True)
            iterations += 1
            if np.sqrt(rr) / g0 < gtol:
                break
            p = r + (rr / rr_old) * p
        v = v + dv
    else:
        J, Jb, Jo, g = window.cost_and_grad(v)
        _report(history, J, Jb, Jo, np.linalg.norm(g) / (g0 or 1.0), int(outer_loops))
    return Result(v, history, iterations, message)
