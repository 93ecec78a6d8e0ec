"""Strong-constraint 4D-Var over one window: the cost, its gradient, its minimisers.

The control is v, the state at the window start x0 = x_b + B^(1/2) v (simcore.covariance):

    J(v) = 1/2 v^T v  +  1/2 sum_j |(H x_j - y_j) / sigma_o|^2,      x_j = M_{0 -> t_j}(x0)
           \\-- J_b --/     \\------------------ J_o ------------------/

with observations y_j at ``offsets`` steps after the window start, H linear
(simcore.observation) and R = sigma_o^2 I. The model runs chunk by chunk between
observation times through the engine (compiled forward; ``vjp`` for the adjoint,
``jvp`` for the tangent-linear model); no finite differences anywhere.

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
from dataclasses import dataclass, field

import numpy as np

from adjoint import jvp, vjp

from .covariance import flatten, unflatten
from .twin import advance


class Window:
    """The 4D-Var cost of one window (see the module docstring)."""

    def __init__(self, model, params, B, H, sigma, xb, y, offsets):
        self.model, self.params, self.B, self.H = model, params, B, H
        self.sigma = float(sigma)
        self.xb = np.asarray(xb, dtype=np.float64)
        self.y = np.asarray(y, dtype=np.float64)                # (times, observations)
        self.offsets = [int(o) for o in offsets]
        self.chunks = np.diff([0, *self.offsets]).astype(int)   # steps before each time
        if np.any(self.chunks < 0):
            raise ValueError(f"observation offsets must be sorted, got {self.offsets}")
        self.names = [v.name for v in model.variables()]
        self.n_obs = self.y.size
        self.runs = {"forward": 0, "adjoint": 0, "tangent": 0}  # window runs of each model

    def initial(self, v) -> np.ndarray:
        """x0 = x_b + B^(1/2) v."""
        return self.xb + self.B.sqrt(v)

    def trajectory(self, x0) -> list:
        """The flat states at the observation times (compiled forward only)."""
        state, frames = unflatten(self.model, np.array(x0, dtype=np.float64)), []
        for steps in self.chunks:
            if steps:
                advance(self.model, state, self.params, int(steps))
            frames.append(flatten(self.model, state))
        self.runs["forward"] += 1
        return frames

    def misfit(self, frames) -> np.ndarray:
        """(H x_j - y_j) / sigma_o at every observation time."""
        return np.stack([self.H(x) for x in frames]) / self.sigma - self.y / self.sigma

    def cost(self, v):
        """(J, J_b, J_o) by forward runs only."""
        r = self.misfit(self.trajectory(self.initial(v)))
        jb, jo = 0.5 * float(v @ v), 0.5 * float(np.sum(r * r))
        return jb + jo, jb, jo

    def cost_and_grad(self, v):
        """(J, J_b, J_o, dJ/dv): one forward run recording the tapes, one adjoint run."""
        frames, pullbacks = self.record(self.initial(v))
        r = self.misfit(frames)
        lam0 = self.pull(pullbacks, [self.H.adjoint(rj / self.sigma) for rj in r])
        jb, jo = 0.5 * float(v @ v), 0.5 * float(np.sum(r * r))
        return jb + jo, jb, jo, v + self.B.sqrt_adjoint(lam0)

    def record(self, x0):
        """The flat states at the observation times and each chunk's pullback (or None)."""
        state, frames, pullbacks = unflatten(self.model, np.array(x0, dtype=np.float64)), [], []
        for steps in self.chunks:
            pullback = None
            if steps:
                outs, pullback = vjp(self.model.kernel,
                                     *self.model.kernel_args(state, self.params, int(steps)))
                state = {n: outs[n] for n in self.names}
            frames.append(flatten(self.model, state))
            pullbacks.append(pullback)
        self.runs["forward"] += 1
        return frames, pullbacks

    def pull(self, pullbacks, cotangents) -> np.ndarray:
        """sum_j M'_j^T c_j: the pullbacks chained backwards, c_j added at time j."""
        self.runs["adjoint"] += 1
        lam = np.zeros(self.B.size)
        for pullback, c in zip(reversed(pullbacks), reversed(cotangents)):
            lam = lam + c
            if pullback is not None:
                back = pullback(unflatten(self.model, lam))
                lam = flatten(self.model, {n: back[n] for n in self.names})
        return lam


class Linearization:
    """The window linearised about the trajectory from x_b + B^(1/2) v: innovations, the
    tangent-linear map dv -> (H M'_j B^(1/2) dv)_j and its adjoint."""

    def __init__(self, window: Window, v):
        self.window, self.v = window, np.array(v, dtype=np.float64)
        x0 = window.initial(self.v)
        frames, self.pullbacks = window.record(x0)
        self.starts = [x0, *frames[:-1]]                    # each chunk's initial state
        self.innovation = window.y - np.stack([window.H(x) for x in frames])
        r = self.innovation / window.sigma
        self.Jb, self.Jo = 0.5 * float(self.v @ self.v), 0.5 * float(np.sum(r * r))
        self.J = self.Jb + self.Jo

    def tl(self, dv) -> np.ndarray:
        """(H M'_j B^(1/2) dv)_j, (times, observations), by forward mode (``jvp``)."""
        w, model = self.window, self.window.model
        tangent = unflatten(model, w.B.sqrt(dv))
        out = []
        for start, steps in zip(self.starts, w.chunks):
            if steps:
                args = model.kernel_args(unflatten(model, start.copy()), w.params, int(steps))
                _, dots = jvp(model.kernel, args, tangent)
                tangent = {n: dots[n] for n in w.names}
            out.append(w.H(flatten(model, tangent)))
        w.runs["tangent"] += 1
        return np.stack(out)

    def ad(self, obs) -> np.ndarray:
        """B^(1/2)^T sum_j M'_j^T H^T obs_j: the transpose of :meth:`tl` (pullbacks)."""
        w = self.window
        return w.B.sqrt_adjoint(w.pull(self.pullbacks, [w.H.adjoint(o) for o in obs]))

    def hessian(self, dv) -> np.ndarray:
        """The Gauss-Newton Hessian I + B^(1/2)^T M'^T H^T R^-1 H M' B^(1/2) times dv."""
        return dv + self.ad(self.tl(dv) / self.window.sigma ** 2)


@dataclass
class History:
    """Per iteration: J, J_b, J_o, |grad J| / |grad J_0|, the outer loop (0 for L-BFGS)
    and whether J is Gauss-Newton's quadratic model (inner iterations) rather than the
    nonlinear cost (L-BFGS; each outer loop's start; the last entry, at the analysis)."""
    J: list = field(default_factory=list)
    Jb: list = field(default_factory=list)
    Jo: list = field(default_factory=list)
    grad: list = field(default_factory=list)
    outer: list = field(default_factory=list)
    quadratic: list = field(default_factory=list)

    def add(self, J, Jb, Jo, grad, outer=0, quadratic=False):
        for column, value in zip((self.J, self.Jb, self.Jo, self.grad, self.outer),
                                 (J, Jb, Jo, grad, outer)):
            column.append(float(value))
        self.quadratic.append(bool(quadratic))

    def __len__(self):
        return len(self.J)


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
    history, pairs = History(), []
    v = np.zeros(window.B.size)
    J, Jb, Jo, g = window.cost_and_grad(v)
    g0 = float(np.linalg.norm(g)) or 1.0
    history.add(J, Jb, Jo, np.linalg.norm(g) / g0)
    message = f"{int(max_iter)} iterations"
    for _ in range(int(max_iter)):
        if history.grad[-1] < gtol:
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
        history.add(J, Jb, Jo, np.linalg.norm(g) / g0)
    if history.grad[-1] < gtol:
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
    history, v, g0, iterations = History(), np.zeros(window.B.size), None, 0
    message = f"{int(outer_loops)} outer loops"
    for k in range(int(outer_loops)):
        lin = Linearization(window, v)
        b = -v + lin.ad(lin.innovation / window.sigma ** 2)     # -grad J at dv = 0
        bnorm = float(np.linalg.norm(b))
        g0 = g0 or bnorm or 1.0
        history.add(lin.J, lin.Jb, lin.Jo, bnorm / g0, k)
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
            history.add(Jq, Jb, Jq - Jb, np.sqrt(rr) / g0, k, quadratic=True)
            iterations += 1
            if np.sqrt(rr) / g0 < gtol:
                break
            p = r + (rr / rr_old) * p
        v = v + dv
    else:
        J, Jb, Jo, g = window.cost_and_grad(v)
        history.add(J, Jb, Jo, np.linalg.norm(g) / (g0 or 1.0), int(outer_loops))
    return Result(v, history, iterations, message)
