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
differentiated. CPU tensors reach the engine without copies (``tensor.numpy(force=True)``
views of contiguous tensors; a non-contiguous one is copied contiguous; ``item()`` for a 0-d
tensor of a number parameter), and results come back as tensors over the engine's arrays
(``torch.from_numpy``). What the tensors' shapes, dtypes and devices and the numbers'
values decide (a ``TorchCall``) is made once per those and reused. An output that no
gradient reaches gets no cotangent (``set_materialize_grads(False)``: none made as zeros,
none read: its adjoint starts at zero).

``device="cuda"``: the tensors live on a GPU. The engine takes host arrays on every target
(on ``adjoint.configure(device="cuda")`` its runtime copies them to the GPU and back per
call), so CUDA tensors go to the host (``numpy(force=True)`` copies) and the results back
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
        # a call per tensors' shapes, dtypes and devices and numbers' types and values
        key = tuple([(v.shape, v.dtype, v.device) if isinstance(v, torch.Tensor) else
                     (type(v), v) for v in args])
        try:
            call = calls.get(key)
        except TypeError:                       # an unhashable static: not a number
            call = None
        if call is None:
            positions = tuple(p for p, v in enumerate(args) if isinstance(v, torch.Tensor))
            _check_arguments(k, args, positions, device)
            call = calls[key] = TorchCall(k, args, positions, options, device)
        flat = _KernelFunction.apply(call, *[args[p] for p in call.operands])
        return call.returned(flat)

    wrapped.kernel = k
    wrapped.__name__ = k.__name__
    wrapped.__doc__ = k.__doc__
    return wrapped


class TorchCall(Call):
    """A :class:`Call` with what its tensors need, decided once (the call is per shapes,
    dtypes and devices): how each operand reaches the engine (``item()`` for an int or
    float parameter, else a NumPy view), its tensor's dtype (its gradient's), the device."""

    def __init__(self, k, args, positions, options, device):
        examples = list(args)
        for p in positions:
            examples[p] = _example(args[p])
        super().__init__(k, examples, positions, options)
        self.device, self.cpu = device, device.type == "cpu"
        self.hosts = [torch.Tensor.item if self.kinds[p] in ("int", "float") else _host
                      for p in positions]
        # per operand: where ``adjoint`` gives its gradient (None: not floating), its dtype
        at = {p: j for j, p in enumerate(self.floating)}
        self.gradients = [(at.get(p), _numpy_dtype(args[p].dtype)) for p in positions]
        # a returned number's cotangent as a number, the others' as arrays
        self.cotangent_hosts = [torch.Tensor.item if shape == () else _host
                                for shape, _ in self.results]

    def host(self, tensors):
        """The operands as the engine takes them."""
        return [host(t) for host, t in zip(self.hosts, tensors)]

    def tensor(self, value, dtype=None):
        """A tensor over ``value`` (the engine's own array: no copy on the CPU)."""
        out = torch.from_numpy(np.asarray(value, dtype, order="C"))
        return out if self.cpu else out.to(self.device)


class _KernelFunction(torch.autograd.Function):
    """forward: the kernel; backward: its adjoint; jvp: its tangent kernel."""

    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call = call
        ctx.save_for_backward(*tensors)
        ctx.save_for_forward(*tensors)
        ctx.set_materialize_grads(False)        # an output given no gradient: None, not zeros
        operands = call.host(tensors)
        if any(ctx.needs_input_grad[1:]):       # a backward may follow: its forward sweep
            flat, ctx.sweep = call.recorded(operands)
        else:
            flat, ctx.sweep = call.forward(operands), None
        return tuple([call.tensor(o) for o in flat])

    @staticmethod
    def backward(ctx, *cotangents):
        call, tensors = ctx.call, ctx.saved_tensors     # (refused if changed in place)
        needs = ctx.needs_input_grad[1:]
        if not any(needs):
            return (None,) * (1 + len(tensors))
        # the forward's sweep reverses once; another backward (retain_graph) runs anew
        sweep, ctx.sweep = ctx.sweep, None
        operands = None if sweep else call.host(tensors)
        cotangents = [None if c is None else host(c)         # None: no gradient reached it
                      for host, c in zip(call.cotangent_hosts, cotangents)]
        back = call.adjoint(operands, cotangents, sweep)
        return (None,) + tuple([None if j is None or not need else call.tensor(back[j], dtype)
                                for (j, dtype), need in zip(call.gradients, needs)])

    @staticmethod
    def jvp(ctx, _call, *tangents):
        call, tensors = ctx.call, ctx.saved_tensors
        at = dict(zip(call.operands, zip(tensors, tangents)))
        given = [np.zeros(tuple(at[p][0].shape)) if at[p][1] is None else _host(at[p][1])
                 for p in call.floating]
        dots = call.tangent(call.host(tensors), given)
        return tuple([call.tensor(d, dtype) for d, (_, dtype) in zip(dots, call.results)])


def _host(t):
    """A tensor's NumPy array: a view of a CPU tensor's memory (PyTorch's ``detach()``,
    without a Python call for it), a copy of a GPU tensor's; the engine's calls make a
    strided one contiguous."""
    return t.numpy(force=True)


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
