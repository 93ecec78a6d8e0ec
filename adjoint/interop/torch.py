"""Compiled kernels as PyTorch functions: ``to_torch(kernel)``.

    f = to_torch(smooth)                      # smooth(A: float64[N, N], T: int) -> float
    loss, A_final = f(A, 50)                  # A: a float64 tensor; smooth writes it
    loss.backward()                           # A.grad from the engine's adjoint

One ``torch.autograd.Function`` per call: ``forward`` runs the compiled kernel on copies
of the tensors it writes, ``backward`` the engine's adjoint (the reverse sweep of
:func:`adjoint.vjp`, run once, at the inputs saved by ``forward``; PyTorch's version
counters refuse the backward if they were changed in place since). Where a tensor
requires grad, ``forward`` is that sweep's forward (``Call.recorded``: the kernel runs
once, its tape kept until ``backward``, as PyTorch keeps its own saved values); a second
``backward`` (``retain_graph``) runs a sweep anew. ``jvp`` (forward-mode AD,
``torch.autograd.forward_ad``) the tangent kernel (:func:`adjoint.jvp`). It returns what
``to_jax`` returns: the kernel's return value when it writes no argument, else
``(return value, *final values of the written arrays in argument order)``, without the
first element when it returns nothing.

Tensors are operands (differentiated where they require grad; a 0-d tensor for an
``int`` parameter is read as an int); Python ints and floats are passed as they are, not
differentiated. CPU tensors reach the engine without copies (``tensor.numpy()`` views of
contiguous tensors; a non-contiguous one is made contiguous first), and results come
back as tensors over the engine's arrays (``torch.from_numpy``).

``device="cuda"``: the tensors live on a GPU. The engine takes host arrays on every target
(on ``adjoint.configure(device="cuda")`` its runtime copies them to the GPU and back per
call), so CUDA tensors go to the host (``tensor.cpu()``) and the results back
(``.to("cuda")``): two copies per call, not the zero-copy exchange DLPack would allow,
which would need the engine's CUDA runtime to take device pointers. Written, not tested
(no GPU where this was written).
"""
import functools

import numpy as np
import torch

from ..api import kernel
from ..errors import ArgumentError
from .calls import Call


def to_torch(k, device="cpu", memory_budget=None, policy=None, snapshots=None):
    """A function of tensors that runs the compiled ``k`` with PyTorch autograd through
    the engine's adjoint (and forward-mode AD through its tangent kernel).
    ``memory_budget``, ``policy`` and ``snapshots`` are :func:`adjoint.value_and_grad`'s."""
    k = kernel(k)
    device = torch.device(device)
    options = dict(memory_budget=memory_budget, policy=policy, snapshots=snapshots)
    calls = {}

    def wrapped(*args, **kwargs):
        args = k.positional(args, kwargs)
        positions = tuple(p for p, v in enumerate(args) if isinstance(v, torch.Tensor))
        key = tuple((p, type(v).__name__, v) if p not in positions else
                    (v.shape, v.dtype, v.device.type) for p, v in enumerate(args))
        try:
            call = calls.get(key)
        except TypeError:                       # an unhashable static: not a number
            call = None
        if call is None:
            _check_arguments(k, args, positions, device)
            examples = list(args)
            for p in positions:
                examples[p] = _example(args[p])
            call = calls[key] = Call(k, examples, positions, options)
        flat = _KernelFunction.apply(call, device, *(args[p] for p in positions))
        return call.returned(flat)

    wrapped.kernel = k
    wrapped.__name__ = k.__name__
    wrapped.__doc__ = k.__doc__
    return wrapped


class _KernelFunction(torch.autograd.Function):
    """forward: the kernel; backward: its adjoint; jvp: its tangent kernel."""

    @staticmethod
    def forward(ctx, call, device, *tensors):
        ctx.call, ctx.device = call, device
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        operands = [_host(t) for t in tensors]
        if any(ctx.needs_input_grad[2:]):       # a backward may follow: its forward sweep
            flat, ctx.sweep = call.recorded(operands)
        else:
            flat, ctx.sweep = call.forward(operands), None
        return tuple(_tensor(o, device) for o in flat)

    @staticmethod
    def backward(ctx, *cotangents):
        call, tensors = ctx.call, ctx.saved_tensors     # (refused if changed in place)
        if not any(ctx.needs_input_grad[2:]):
            return (None,) * (2 + len(tensors))
        # the forward's sweep reverses once; another backward (retain_graph) runs anew
        sweep, ctx.sweep = ctx.sweep, None
        operands = None if sweep else [_host(t) for t in tensors]
        back = call.adjoint(operands, [_host(c) for c in cotangents], sweep)
        at = dict(zip(call.floating, back))
        return (None, None) + tuple(
            _tensor(at[p], ctx.device, t.dtype) if p in at and need else None
            for p, t, need in zip(call.operands, tensors, ctx.needs_input_grad[2:]))

    @staticmethod
    def jvp(ctx, _call, _device, *tangents):
        call, tensors = ctx.call, ctx.saved_tensors
        at = dict(zip(call.operands, zip(tensors, tangents)))
        given = [np.zeros(tuple(at[p][0].shape)) if at[p][1] is None else _host(at[p][1])
                 for p in call.floating]
        dots = call.tangent([_host(t) for t in tensors], given)
        return tuple(_tensor(d, ctx.device, dtype) for d, (_, dtype) in zip(dots, call.results))


def _host(t):
    """A CPU tensor's NumPy view (a copy for one on a GPU, or not contiguous)."""
    t = t.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.cpu().contiguous()
    return t.numpy()


def _tensor(value, device, dtype=None):
    """A tensor over ``value`` (the engine's own array: no copy on the CPU)."""
    array = np.asarray(value, dtype=None if dtype is None else _numpy_dtype(dtype), order="C")
    out = torch.from_numpy(array)
    return out if device.type == "cpu" else out.to(device)


@functools.lru_cache(maxsize=None)
def _numpy_dtype(dtype):
    """NumPy's dtype for a torch dtype (NumPy's passes through)."""
    return torch.empty((), dtype=dtype).numpy().dtype if isinstance(dtype, torch.dtype) else dtype


def _example(t):
    """A stand-in of the tensor's type and shape (numbers for 0-d tensors)."""
    if t.dim() == 0:
        return 0 if not (t.is_floating_point() or t.is_complex()) else 0.0
    return np.zeros(tuple(t.shape), _numpy_dtype(t.dtype))


def _check_arguments(k, args, positions, device):
    """Tensors on the function's device; numbers for the rest."""
    names = list(k._declared)
    for p, v in enumerate(args):
        if p not in positions and not isinstance(v, (int, float, np.integer, np.floating)):
            raise ArgumentError(f"argument {names[p]!r} of {k.__name__}(): expected a tensor, "
                                f"an int or a float, got {type(v).__name__}")
    for p in positions:
        if args[p].device.type != device.type:
            raise ArgumentError(f"argument {names[p]!r} of {k.__name__}() is a tensor on "
                                f"{args[p].device}, but the function was made with "
                                f"to_torch(..., device={device.type!r})")
