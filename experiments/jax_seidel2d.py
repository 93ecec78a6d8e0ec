"""seidel2d in JAX, written the way a JAX user would port models/seidel.py:
nested ``lax.fori_loop`` over t, i, j with ``A.at[i, j].set(...)``, float64,
``jax.jit(jax.grad(...))`` for the gradients.  Import fails cleanly (ImportError)
when JAX is not installed.
"""
import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)


def seidel2d(A, w, TSTEPS):
    N = A.shape[0]

    def point(i, j, A):
        return A.at[i, j].set(w[0, 0] * A[i - 1, j - 1] + w[0, 1] * A[i - 1, j]
                              + w[0, 2] * A[i - 1, j + 1] + w[1, 0] * A[i, j - 1]
                              + w[1, 1] * A[i, j] + w[1, 2] * A[i, j + 1]
                              + w[2, 0] * A[i + 1, j - 1] + w[2, 1] * A[i + 1, j]
                              + w[2, 2] * A[i + 1, j + 1])

    def row(i, A):
        return lax.fori_loop(1, N - 1, lambda j, A: point(i, j, A), A)

    def sweep(t, A):
        return lax.fori_loop(1, N - 1, row, A)

    return lax.fori_loop(0, TSTEPS - 1, sweep, A)


def loss(A, w, TSTEPS):
    return jnp.sum(seidel2d(A, w, TSTEPS))


def compiled(TSTEPS, A, w):
    """Ahead-of-time compiled forward, grad w.r.t. A and grad w.r.t. w for these shapes
    (TSTEPS static, so the loops have static trip counts and are reverse-differentiable)."""
    fns = {"fwd": loss, "grad_A": jax.grad(loss, argnums=0), "grad_w": jax.grad(loss, argnums=1)}
    return {k: jax.jit(f, static_argnums=2).lower(A, w, TSTEPS).compile() for k, f in fns.items()}
