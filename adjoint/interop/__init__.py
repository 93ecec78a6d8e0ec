"""Compiled kernels inside other frameworks' autodiff: ``adjoint.interop.jax.to_jax`` and
``adjoint.interop.torch.to_torch``. Each imports its framework only when imported itself
(both are optional extras), and both share :mod:`adjoint.interop.calls`: what a kernel's
call takes and gives back in functional form (arguments the kernel writes become outputs),
and its forward, tangent and adjoint on NumPy arrays."""
