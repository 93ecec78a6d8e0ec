"""The JAX side of the benchmark: jitted forward and ``jit(grad)`` of the ports in
adjoint/corpus/jax_ports.py, compiled ahead of time for given arguments (integer arguments fixed)."""
import time

import numpy as np


def load():
    """The JAX runner, or (None, reason) when JAX is not installed."""
    try:
        return JaxRunner(), None
    except ImportError as exc:
        return None, f"JAX unavailable ({exc})"


class JaxRunner:
    def __init__(self):
        import jax
        from adjoint.corpus import jax_ports
        self.jax, self.jnp, self.ports = jax, jax.numpy, jax_ports

    @property
    def version(self):
        return self.jax.__version__

    def has(self, name, literal=False):
        return name in (self.ports.LITERAL if literal else self.ports.PORTS)

    def style(self, name):
        return self.ports.STYLE.get(name)

    def compile(self, name, names, args, wrt, forward=True, literal=False):
        """{"grad": fn, "fwd": fn, "dyn": device arguments, "compile_grad": s, ...}:
        the functions take the non-integer arguments only (``dyn``)."""
        static = set(self.ports.STATIC[name])
        port = (self.ports.LITERAL if literal else self.ports.PORTS)[name]
        fixed = {k: a for k, (n, a) in enumerate(zip(names, args)) if n in static}
        dyn_index = [k for k in range(len(names)) if k not in fixed]

        def f(*dyn):
            full = [None] * len(names)
            for k, a in fixed.items():
                full[k] = a
            for k, a in zip(dyn_index, dyn):
                full[k] = a
            return port(*full)

        dyn = tuple(self.jnp.asarray(args[k]) if isinstance(args[k], np.ndarray) else args[k]
                    for k in dyn_index)
        argnums = tuple(dyn_index.index(names.index(w)) for w in wrt)
        out = {"dyn": dyn}
        t0 = time.perf_counter()
        out["grad"] = self.jax.jit(self.jax.grad(f, argnums=argnums)).lower(*dyn).compile()
        out["compile_grad"] = time.perf_counter() - t0
        if forward:
            t0 = time.perf_counter()
            out["fwd"] = self.jax.jit(f).lower(*dyn).compile()
            out["compile_fwd"] = time.perf_counter() - t0
        return out

    def call(self, fn, dyn):
        return self.jax.block_until_ready(fn(*dyn))

    @staticmethod
    def as_numpy(grads):
        return tuple(np.asarray(g) for g in grads)
