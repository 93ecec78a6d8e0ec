"""The hybrid model of the two-scale Lorenz-96 system (models/lorenz96_2scale.py): the
one-scale model on the K slow variables plus a small neural network standing for the
subgrid tendency -(h c / b) sum_j Y_{j,k} the fast variables would add,

    dX_k/dt = X_{k-1} (X_{k+1} - X_{k-2}) - X_k + F + U(X_{k-1}, X_k, X_{k+1})
    U       = um + us * (w3 . tanh(W2 tanh(W1 z + b1) + b2) + b3),  z = (x - xm) / xs

a local closure (the same network at every k, from X_k and its two neighbours) with two
tanh layers of H units, stepped with RK4 like the truth. ``xm, xs`` scale the inputs and
``um, us`` the output to O(1) (set from the training data); ``um = us = 0`` is the
one-scale model with no closure. Three kernels share the network (plain functions,
inlined into each): ``hybrid_run`` (the model in place, keeping a trajectory),
``rollout_loss`` (n-step rollouts from truth states against the truth: online training)
and ``closure_loss`` (the network against diagnosed subgrid tendencies: offline
training); ``adjoint.value_and_grad`` of the last two gives the loss and its gradient
with respect to the weights in one call. ``WEIGHTS`` names the weight arguments,
``init_weights`` draws them.
"""
import numpy as np

from adjoint import float64, kernel, symbol

K, H, B, S, N, T = (symbol(n) for n in ("K", "H", "B", "S", "N", "T"))
WEIGHTS = ("W1", "b1", "W2", "b2", "w3", "b3")


def closure(X, W1, b1, W2, b2, w3, b3, xm, xs, um, us):
    """The subgrid tendency at every slow variable, from it and its two neighbours."""
    z = (np.array([np.roll(X, 1), X, np.roll(X, -1)]) - xm) / xs      # (3, K)
    a1 = np.tanh(W1 @ z + b1[:, None])                                # (H, K)
    a2 = np.tanh(W2 @ a1 + b2[:, None])
    return um + us * (w3 @ a2 + b3[0])


def tendency(X, F, W1, b1, W2, b2, w3, b3, xm, xs, um, us):
    """dX/dt of the hybrid: the one-scale Lorenz-96 plus the closure."""
    return ((np.roll(X, -1) - np.roll(X, 2)) * np.roll(X, 1) - X + F
            + closure(X, W1, b1, W2, b2, w3, b3, xm, xs, um, us))


def rk4_step(X, F, dt, W1, b1, W2, b2, w3, b3, xm, xs, um, us):
    """One RK4 step of the hybrid (a new array)."""
    k1 = tendency(X, F, W1, b1, W2, b2, w3, b3, xm, xs, um, us)
    k2 = tendency(X + 0.5 * dt * k1, F, W1, b1, W2, b2, w3, b3, xm, xs, um, us)
    k3 = tendency(X + 0.5 * dt * k2, F, W1, b1, W2, b2, w3, b3, xm, xs, um, us)
    k4 = tendency(X + dt * k3, F, W1, b1, W2, b2, w3, b3, xm, xs, um, us)
    return X + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


@kernel
def hybrid_run(X: float64[K], out: float64[T, K], W1: float64[H, 3], b1: float64[H],
               W2: float64[H, H], b2: float64[H], w3: float64[H], b3: float64[1], xm: float,
               xs: float, um: float, us: float, F: float, dt: float, every: int):
    """``T * every`` RK4 steps of the hybrid from ``X`` (in place); ``out[t]`` is the
    state after ``(t + 1) * every`` steps."""
    for t in range(T):
        for s in range(every):
            X[:] = rk4_step(X, F, dt, W1, b1, W2, b2, w3, b3, xm, xs, um, us)
        out[t] = X


@kernel
def rollout_loss(X0: float64[B, K], Xt: float64[B, S, K], W1: float64[H, 3],
                 b1: float64[H], W2: float64[H, H], b2: float64[H], w3: float64[H],
                 b3: float64[1], xm: float, xs: float, um: float, us: float, F: float,
                 dt: float) -> float:
    """Mean squared error of S-step rollouts of the hybrid from each ``X0[i]`` against
    the truth ``Xt[i, s]`` after step s + 1."""
    loss = 0.0
    for i in range(B):
        X = X0[i].copy()
        for s in range(S):
            X = rk4_step(X, F, dt, W1, b1, W2, b2, w3, b3, xm, xs, um, us)
            loss += np.sum((X - Xt[i, s]) ** 2)
    return loss / (B * S * K)


@kernel
def closure_loss(Xs: float64[N, K], Us: float64[N, K], W1: float64[H, 3], b1: float64[H],
                 W2: float64[H, H], b2: float64[H], w3: float64[H], b3: float64[1],
                 xm: float, xs: float, um: float, us: float) -> float:
    """Mean squared error of the closure against the subgrid tendencies ``Us[n]`` at
    the truth's slow states ``Xs[n]``."""
    loss = 0.0
    for n in range(N):
        loss += np.sum((closure(Xs[n], W1, b1, W2, b2, w3, b3, xm, xs, um, us) - Us[n]) ** 2)
    return loss / (N * K)


def init_weights(hidden: int, rng) -> dict:
    """Glorot-uniform weights, zero biases (float64 arrays named as ``WEIGHTS``)."""
    def glorot(rows, cols):
        limit = np.sqrt(6.0 / (rows + cols))
        return rng.uniform(-limit, limit, (rows, cols))
    return {"W1": glorot(hidden, 3), "b1": np.zeros(hidden), "W2": glorot(hidden, hidden),
            "b2": np.zeros(hidden), "w3": glorot(1, hidden)[0], "b3": np.zeros(1)}


def no_closure(hidden: int) -> dict:
    """Weights of the right shapes for the one-scale model (used with um = us = 0)."""
    return {n: np.zeros_like(w) for n, w in init_weights(hidden, np.random.default_rng(0)).items()}
