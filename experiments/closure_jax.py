"""The hybrid Lorenz-96 model of models/lorenz96_hybrid.py written in pure JAX, the way
a JAX user would: the same network and RK4 step on one state, ``lax.scan`` over the
rollout's steps, ``jax.vmap`` over the minibatch, float64, and
``jax.jit(jax.value_and_grad(...))`` for a training step. Import fails cleanly
(ImportError) when JAX is not installed.
"""
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)

WEIGHTS = ("W1", "b1", "W2", "b2", "w3", "b3")


def closure(X, p, scales):
    xm, xs, um, us = scales
    z = (jnp.stack([jnp.roll(X, 1), X, jnp.roll(X, -1)]) - xm) / xs
    a1 = jnp.tanh(p["W1"] @ z + p["b1"][:, None])
    a2 = jnp.tanh(p["W2"] @ a1 + p["b2"][:, None])
    return um + us * (p["w3"] @ a2 + p["b3"][0])


def tendency(X, p, scales, F):
    return (jnp.roll(X, -1) - jnp.roll(X, 2)) * jnp.roll(X, 1) - X + F + closure(X, p, scales)


def rk4_step(X, p, scales, F, dt):
    k1 = tendency(X, p, scales, F)
    k2 = tendency(X + 0.5 * dt * k1, p, scales, F)
    k3 = tendency(X + 0.5 * dt * k2, p, scales, F)
    k4 = tendency(X + dt * k3, p, scales, F)
    return X + dt / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)


def rollout_loss(p, X0, Xt, scales, F, dt):
    """Mean squared error of rollouts from each ``X0[i]`` against ``Xt[i, s]``."""
    def one(x0, xt):
        def body(X, target):
            X = rk4_step(X, p, scales, F, dt)
            return X, jnp.sum((X - target) ** 2)
        _, errs = lax.scan(body, x0, xt)
        return jnp.sum(errs)
    return jnp.sum(jax.vmap(one)(X0, Xt)) / Xt.size


def compiled(p, X0, Xt, scales, F, dt):
    """Ahead-of-time compiled forward loss and training step for these shapes."""
    args = ({n: jnp.asarray(p[n]) for n in WEIGHTS}, jnp.asarray(X0), jnp.asarray(Xt),
            tuple(scales), F, dt)
    fns = {"forward": rollout_loss, "step": jax.value_and_grad(rollout_loss)}
    return {k: jax.jit(f).lower(*args).compile() for k, f in fns.items()}, args
