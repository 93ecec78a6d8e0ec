"""Compiled kernels as JAX functions: ``to_jax(kernel)``.

    f = to_jax(smooth)                        # smooth(A: float64[N, N], T: int) -> float
    loss, A_final = f(A, 50)                  # smooth writes A: it becomes an output
    jax.grad(lambda A: f(A, 50)[0])(A)        # the engine's adjoint (reverse sweep)
    jax.jvp(lambda A: f(A, 50), (A,), (dA,))  # the engine's tangent kernel (jvp)
    jax.jit(f), jax.vmap(f, in_axes=(0, None))

Each call is one JAX primitive, ``adjoint_kernel``, in three modes that carry their rules
side by side (JAX's own way of defining an operation): ``forward`` (the kernel), whose JVP
rule is ``tangent`` (the tangent kernel, linear in the tangents), whose transpose is
``adjoint`` (the reverse sweep of :func:`adjoint.vjp`, run once). So ``jax.jvp`` runs the
tangent kernel, and ``jax.grad``/``jax.vjp``/``jax.linearize`` transpose it into the
adjoint, on one and the same function. ``jax.custom_vjp`` would have lost ``jax.jvp``
(JAX allows one of the two on a function) and ``jax.custom_jvp`` would ask JAX to
transpose a callback, which it cannot; ``jax.custom_derivatives.linear_call`` pairs a
linear call with its transpose but has no batching rule, so ``vmap(grad(f))`` failed.

How the engine is reached: through ``jax.interpreters.mlir.emit_python_callback``, the XLA
FFI call into Python that ``jax.pure_callback`` is built on, not through
``pure_callback`` itself nor a C FFI handler. ``pure_callback`` turns every operand back
into a ``jax.Array`` (a ``device_put``) before calling: ~35 us per operand on this
machine, so three operands alone broke the 50 us budget; here the engine gets NumPy
views of XLA's buffers (read-only, never written: the forward writes copies). A C FFI
handler would skip Python, but a call to the engine is Python (argument checks, buffer
pools, the store/recompute plan of reverse mode), so it would have to be rewritten in C.
Under ``jit`` XLA calls the engine once per primitive; outside ``jit`` each mode's call is
compiled once per signature by ``jax.jit`` and reused.

``vmap``: the batching rule moves every batch axis to the front (broadcasting unbatched
operands) and binds the same primitive; the callback loops over the leading axes, one
kernel call per batch element (nested ``vmap`` adds leading axes).

Arguments: arrays (JAX or NumPy) and floats are operands (floats as 0-d arrays, so they
are differentiable); Python ints are static, their values part of the call (outside
``jit`` each new value compiles its own small XLA wrapper once; a jit-ed function gets
its int arguments traced unless they are ``static_argnums``); traced integers (0-d
integer arrays) are operands given to the kernel as ints. A returned array whose shape depends on an int needs it static.
Kernels on float64 arrays need ``jax.config.update("jax_enable_x64", True)``.
Second derivatives (``jax.hessian``) are not available: the tangent and adjoint kernels
are not differentiated again.
"""
import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from ..api import kernel
from ..errors import ArgumentError
from .calls import Call

kernel_p = Primitive("adjoint_kernel")
kernel_p.multiple_results = True
MODES = ("forward", "tangent", "adjoint")
_ENGINE = threading.Lock()      # XLA may run independent callbacks on several threads


def to_jax(k, memory_budget=None, policy=None, snapshots=None):
    """A function of JAX arrays that runs the compiled ``k``, differentiable in both modes.

    It returns what ``k`` returns when ``k`` writes no argument, else the tuple
    ``(return value, *final values of the written arrays in argument order)`` (without
    the first element when ``k`` returns nothing). ``memory_budget``, ``policy`` and
    ``snapshots`` are :func:`adjoint.value_and_grad`'s, for reverse mode."""
    k = kernel(k)
    options = dict(memory_budget=memory_budget, policy=policy, snapshots=snapshots)
    calls = {}

    @functools.wraps(k.py_func)
    def wrapped(*args, **kwargs):
        args = k.positional(args, kwargs)
        operands, positions = _operands(k, args)
        key = tuple((p, type(v).__name__, v) for p, v in enumerate(args) if p not in positions)
        key += tuple((np.shape(v), str(v.dtype)) for v in operands)
        call = calls.get(key)
        if call is None:
            examples = list(args)
            for p, v in zip(positions, operands):
                examples[p] = _example(v)
            call = calls[key] = JaxCall(k, examples, positions, options)
        return call.returned(kernel_p.bind(*operands, call=call, mode="forward"))

    wrapped.kernel = k
    return wrapped


class JaxCall(Call):
    """A :class:`Call` as the primitive's parameter: the (shape, dtype) of each mode's
    results without batch axes (``wanted``), each mode's step and the callback."""

    def __init__(self, k, examples, operands, options):
        super().__init__(k, examples, operands, options)
        out = [(s, jax.dtypes.canonicalize_dtype(d)) for s, d in self.results]
        at = dict(zip(self.operands, zip(self.shapes, self.dtypes)))
        self.wanted = {"forward": out, "tangent": out,
                       "adjoint": [at[p] for p in self.floating]}
        self.steps = {"forward": lambda operands, _: self.forward(operands),
                      "tangent": self.tangent, "adjoint": self.adjoint}
        self.jitted = {}

    def __repr__(self):
        return f"<{self.kernel.__name__}>"

    def batch(self, shapes):
        """The leading (batch) axes of operands of these shapes."""
        if not shapes:
            return ()
        return tuple(shapes[0][:len(shapes[0]) - len(self.shapes[0])])

    def run(self, mode, *arrays):
        """The callback: ``mode`` on NumPy arrays, once per batch element."""
        n = len(self.operands)
        step, wanted = self.steps[mode], self.wanted[mode]
        batch = self.batch([a.shape for a in arrays[:n]])
        with _ENGINE:
            if not batch:
                return tuple([np.asarray(r, d) for r, (_, d) in
                              zip(step(arrays[:n], arrays[n:]), wanted)])
            outs = [np.empty(batch + s, d) for s, d in wanted]
            for i in np.ndindex(*batch):
                parts = [a[i] for a in arrays]
                for out, r in zip(outs, step(parts[:n], parts[n:])):
                    out[i] = r
            return tuple(outs)


def _operands(k, args):
    """(the arguments passed as JAX arrays, their positions); Python ints stay static."""
    names = list(k._declared)
    operands, positions = [], []
    for p, v in enumerate(args):
        if isinstance(v, (bool, int, np.integer)):
            continue
        if isinstance(v, (float, np.floating, np.ndarray)):
            v = jnp.asarray(v)
        elif not isinstance(v, jax.Array):          # tracers are jax.Arrays too
            raise ArgumentError(f"argument {names[p]!r} of {k.__name__}(): expected a JAX or "
                                f"NumPy array, an int or a float, got {type(v).__name__}")
        operands.append(v)
        positions.append(p)
    return operands, tuple(positions)


def _example(value):
    """A stand-in for a JAX value at trace time, of its type and shape."""
    dtype = np.dtype(value.dtype)
    if np.ndim(value) == 0:
        return 0 if dtype.kind in "iub" else 0.0
    return np.zeros(np.shape(value), dtype)


# ---- the primitive's rules -----------------------------------------------------------------
def _abstract_eval(*avals, call, mode):
    batch = call.batch([a.shape for a in avals[:len(call.operands)]])
    return [jax.core.ShapedArray(batch + s, d) for s, d in call.wanted[mode]]


def _impl(*args, call, mode):
    """Outside jit: each mode's call compiled once (by jax.jit) and reused."""
    if mode not in call.jitted:
        call.jitted[mode] = jax.jit(functools.partial(kernel_p.bind, call=call, mode=mode))
    return call.jitted[mode](*args)


def _lowering(ctx, *args, call, mode):
    results, _, _ = mlir.emit_python_callback(
        ctx, functools.partial(call.run, mode), None, list(args), ctx.avals_in,
        ctx.avals_out, has_side_effect=False, returns_token=False)
    return results


def _jvp(primals, tangents, *, call, mode):
    """forward -> tangent (linear in the tangents of the floating operands)."""
    if mode != "forward":
        raise NotImplementedError(f"{call.kernel.__name__}(): second derivatives of compiled "
                                  "kernels are not available (the tangent and adjoint "
                                  "kernels are not differentiated again)")
    outs = kernel_p.bind(*primals, call=call, mode="forward")
    at = dict(zip(call.operands, tangents))
    dots = [ad.instantiate_zeros(at[p]) for p in call.floating]
    return outs, kernel_p.bind(*primals, *dots, call=call, mode="tangent")


def _transpose(cts, *args, call, mode):
    """tangent <-> adjoint: cotangents for the linear inputs, None for the operands."""
    n = len(call.operands)
    operands, linear = args[:n], args[n:]
    cts = [ad.instantiate_zeros(ct) for ct in cts]
    other = "adjoint" if mode == "tangent" else "tangent"
    back = kernel_p.bind(*operands, *cts, call=call, mode=other)
    return [None] * n + [b if ad.is_undefined_primal(x) else None
                         for b, x in zip(back, linear)]


def _batch(args, dims, *, call, mode):
    """Every batch axis to the front, unbatched operands broadcast; the callback loops."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    moved = [jnp.broadcast_to(a, (size,) + a.shape) if d is None else jnp.moveaxis(a, d, 0)
             for a, d in zip(args, dims)]
    outs = kernel_p.bind(*moved, call=call, mode=mode)
    return outs, [0] * len(outs)


kernel_p.def_abstract_eval(_abstract_eval)
kernel_p.def_impl(_impl)
mlir.register_lowering(kernel_p, _lowering)
ad.primitive_jvps[kernel_p] = _jvp
ad.primitive_transposes[kernel_p] = _transpose
batching.primitive_batchers[kernel_p] = _batch
