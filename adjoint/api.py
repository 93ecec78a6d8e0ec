"""The public API: ``kernel``, ``grad``, ``value_and_grad``, ``vjp``."""
import functools
import inspect
import types

import numpy as np
import sympy as sp

from . import pipeline
from .autodiff import adjoint_name, tangent_name
from .errors import AdjointError, ArgumentError, BoundsError
from .options import options
from .frontend import RESULT, declared_types, read_source, type_of_value
from .runtime.arguments import bind
from .sdfg import to_text


class Kernel:
    """A compiled kernel. Calling it behaves like the Python function (in place)."""

    def __init__(self, func):
        functools.update_wrapper(self, func)
        self.py_func = functools.wraps(func)(functools.partial(_run_as_python, func))
        self._declared = declared_types(func)
        self._source = None
        self._specs = {}

    def __call__(self, *args):
        spec = self.specialize(args)
        syms, values = bind(spec.sdfg, args)
        buffers = spec.buffers(values, syms)
        spec.run(spec.forward.module, "forward", syms, buffers)
        return spec.result(buffers)

    def specialize(self, args) -> "Specialization":
        """The compiled forward for the types of ``args`` (annotations where given)."""
        names = list(self._declared)
        if len(args) != len(names):
            raise ArgumentError(f"{self.__name__}() takes {len(names)} arguments "
                                f"({', '.join(names)}), got {len(args)}")
        types = {n: self._declared[n] or type_of_value(n, v) for n, v in zip(names, args)}
        key = tuple((n, _type_key(t)) for n, t in types.items())
        if key not in self._specs:
            if self._source is None:
                self._source = read_source(self.__wrapped__)
            fwd = pipeline.lower_forward(self._source, self.__name__, types)
            self._specs[key] = Specialization(fwd)
        return self._specs[key]

    def explain(self, *args) -> str:
        """The SDFG, its index proofs and, per derivative compiled so far, what is recorded."""
        if args:
            self.specialize(args)
        if not self._specs:
            return f"{self.__name__}: not compiled yet; call explain(*args) with example arguments"
        return "\n\n".join(spec.explain() for spec in self._specs.values())

    def __repr__(self):
        return f"<adjoint.kernel {self.__name__}>"


def _run_as_python(func, *args):
    """Call the undecorated function with its size symbols bound to the arguments' sizes,
    so ``range(N)`` works in plain Python: the reference semantics of the kernel."""
    sizes = {}
    annotations = inspect.get_annotations(func, eval_str=True)
    for name, value in zip(inspect.signature(func).parameters, args):
        shape = getattr(annotations.get(name), "shape", ())
        for size, actual in zip(shape, np.shape(value)):
            if isinstance(size, sp.Symbol):
                sizes[size.name] = actual
    if not sizes:
        return func(*args)
    scope = {**func.__globals__, **sizes}
    bound = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__,
                               func.__closure__)
    return bound(*args)


def _type_key(t):
    return (t.dtype.str, t.shape) if hasattr(t, "shape") else t.__name__


class Specialization:
    """One kernel compiled for one set of argument types, with its derivatives."""

    def __init__(self, forward):
        self.forward, self.sdfg = forward, forward.sdfg
        self._backward, self._tangent, self._sizes = {}, {}, {}
        self.floating = [a.name for a in self.sdfg.arguments if a.kind in ("array", "float")]
        written = {m.data for node in _tasklet_outputs(self.sdfg) for m in node}
        self.written_arrays = [a.name for a in self.sdfg.arguments
                               if a.kind == "array" and a.name in written]

    def argument(self, name):
        return next(a for a in self.sdfg.arguments if a.name == name)

    def tangent(self, wrt) -> pipeline.Tangent:
        key = frozenset(wrt)
        if key not in self._tangent:
            self._tangent[key] = pipeline.lower_tangent(self.forward, key)
        return self._tangent[key]

    def backward(self, wrt, outputs) -> pipeline.Backward:
        key = (frozenset(wrt), frozenset(outputs))
        if key not in self._backward:
            self._backward[key] = pipeline.lower_backward(self.forward, *key)
        return self._backward[key]

    def buffers(self, values, syms, containers=None):
        """One ndarray per container of the layout: arguments as given, the rest zeros."""
        containers = containers or self.forward.layout.containers
        return [values[c.name] if c.name in values else self.zeros(c, syms) for c in containers]

    def zeros(self, container, syms):
        """A flat zero buffer for ``container`` at the sizes ``syms``."""
        key = (container.name, syms.tobytes())
        if key not in self._sizes:
            env = dict(zip(self.sdfg.symbols, (int(v) for v in syms)))
            self._sizes[key] = int(container.volume().subs(env))
        return np.zeros(self._sizes[key], container.dtype)

    def run(self, module, entry, syms, buffers, tape=None, position=0):
        status, _ = module.check(syms)
        if status:
            check = self.forward.checks[status - 1]
            sizes = ", ".join(f"{s}={v}" for s, v in zip(self.sdfg.symbols, syms))
            raise BoundsError(f"{self.sdfg.filename}:{check.line}: {check.message} "
                              f"(at {sizes})")
        return module.call(entry, syms, buffers, tape, position)

    def result(self, buffers):
        if self.sdfg.result is None:
            return None
        k = [c.name for c in self.forward.layout.containers].index(RESULT)
        return float(buffers[k][0])

    def explain(self):
        lines = [to_text(self.sdfg)]
        if self.forward.checks:
            lines.append("index checks evaluated once per call signature:")
            lines += [f"  line {c.line}: {c.message}" for c in self.forward.checks]
        else:
            lines.append("every index proven in bounds for all sizes")
        for (wrt, outs), bwd in self._backward.items():
            adj = bwd.adjoint
            lines.append(f"derivative of {sorted(outs)} w.r.t. {sorted(wrt)}: active "
                         f"{sorted(adj.active)}; recorded on every write: "
                         f"{sorted(adj.recorded) or 'nothing'}")
        return "\n".join(lines)


def _tasklet_outputs(sdfg):
    from .sdfg.nodes import tasklets
    for t, _, _ in tasklets(sdfg.body):
        yield [m for m, _ in t.outputs]


def kernel(func):
    """Compile ``func`` (a loop kernel in plain Python) to C with derivatives."""
    return func if isinstance(func, Kernel) else Kernel(func)


# ---- derivatives ---------------------------------------------------------------------------
_UNUSED = np.empty(0)


class _Call:
    """The state of one differentiated call: buffers after the recording forward and the tape."""

    def __init__(self, k: Kernel, args, wrt, outputs, run_forward=True):
        self.spec = spec = k.specialize(args)
        self.bwd = spec.backward(wrt, outputs)
        self.containers = self.bwd.layout.containers
        self.names = [c.name for c in self.containers]
        self.syms = bind(spec.sdfg, args)[0]
        _, length = self.bwd.module.check(self.syms)
        self.tape = np.empty(length)        # an upper bound when decisions depend on data
        self.tape_end = 0
        self._start(args)
        if run_forward or self.bwd.adjoint.needs_forward:
            while True:
                self.tape_end = spec.run(self.bwd.module, "record", self.syms,
                                         self._buffers({}), self.tape)
                if self.tape_end >= 0:
                    break
                self._grow_tape()
                self._start(args)

    def _grow_tape(self):
        """A while loop ran longer than the tape: retry with twice the tape, up to the limit."""
        size = max(2 * self.tape.size, 1024)
        if size * 8 > options.tape_limit_bytes:
            raise AdjointError(f"{self.spec.sdfg.name}(): the tape outgrew "
                               f"{options.tape_limit_bytes / 2**30:.1f} GiB while recording; "
                               "does every while loop terminate? (engine option tape_limit_bytes)")
        self.tape = np.empty(size)

    def _start(self, args):
        """Fresh buffers holding the arguments' values (the caller's arrays stay untouched)."""
        spec = self.spec
        _, values = bind(spec.sdfg, args)
        for name in spec.written_arrays:
            values[name] = values[name].copy()
        primal = {c.name for c in spec.forward.layout.containers}
        self.state = {c.name: values[c.name] if c.name in values else spec.zeros(c, self.syms)
                      for c in self.containers if c.name in primal}

    def _buffers(self, adjoints):
        """Pointers in layout order; adjoints the recording forward never touches are empty."""
        return [self.state[n] if n in self.state else adjoints.get(n, _UNUSED)
                for n in self.names]

    def result(self):
        return float(self.state[RESULT][0]) if RESULT in self.state else None

    def pullback(self, cotangents):
        """Cotangents at entry of every floating argument, given those of the outputs."""
        adj = self.bwd.adjoint
        state = {n: (v.copy() if n in adj.recorded else v) for n, v in self.state.items()}
        adjoints = {c.name: self.spec.zeros(c, self.syms) for c in self.containers
                    if c.name not in self.state}
        for name, cot in cotangents.items():
            g = adjoint_name(name)
            if g in adjoints:
                adjoints[g][...] = np.asarray(cot, dtype=adjoints[g].dtype).reshape(-1)
        buffers = [state[n] if n in state else adjoints[n] for n in self.names]
        self.spec.run(self.bwd.module, "reverse", self.syms, buffers, self.tape, self.tape_end)
        out = {}
        for name in self.spec.floating:
            g = adjoints.get(adjoint_name(name))
            if g is None:
                g = np.zeros_like(self.state[name])
            out[name] = float(g[0]) if self._is_scalar(name) else g.reshape(self.state[name].shape)
        return out

    def _is_scalar(self, name):
        return self.spec.argument(name).kind == "float"


def _check_wrt(k, spec, wrt):
    names = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    for n in names:
        if n not in spec.floating:
            raise ArgumentError(f"wrt={n!r}: {k.__name__}() has no floating-point argument "
                                f"{n!r}; differentiable arguments: {spec.floating}")
    if spec.sdfg.result is None:
        raise AdjointError(f"{k.__name__}() returns no scalar: grad needs a loss; use vjp "
                           "with cotangents for its output arrays instead")
    return names


def value_and_grad(k: Kernel, wrt):
    """``f(*args) -> (loss, gradient)``; gradients w.r.t. each name in ``wrt`` at entry."""
    k = kernel(k)

    def run(*args, _value=True):
        names = _check_wrt(k, k.specialize(args), wrt)
        call = _Call(k, args, names, {RESULT}, run_forward=_value)
        cot = call.pullback({RESULT: 1.0})
        grads = tuple(cot[n] for n in names)
        return call.result(), grads[0] if isinstance(wrt, str) else grads

    functools.update_wrapper(run, k.py_func)
    return run


def grad(k: Kernel, wrt):
    """``f(*args) -> gradient`` of the returned scalar w.r.t. ``wrt`` (name or tuple)."""
    vg = value_and_grad(k, wrt)

    def run(*args):
        return vg(*args, _value=False)[1]

    functools.update_wrapper(run, kernel(k).py_func)
    return run


def vjp(k: Kernel, *args):
    """``(outputs, pullback)``: outputs maps each written array and ``"return"`` to its final
    value; ``pullback(cotangents)`` maps every floating argument to its cotangent at entry."""
    k = kernel(k)
    spec = k.specialize(args)
    outputs = set(spec.written_arrays) | ({RESULT} if spec.sdfg.result else set())
    call = _Call(k, args, spec.floating, outputs)
    outs = {n: call.state[n].copy() for n in spec.written_arrays}
    if spec.sdfg.result:
        outs["return"] = call.result()

    def pullback(cotangents):
        unknown = set(cotangents) - set(outs)
        if unknown:
            raise ArgumentError(f"cotangents given for {sorted(unknown)}, but the outputs of "
                                f"{k.__name__}() are {sorted(outs)}")
        renamed = {(RESULT if n == "return" else n): v for n, v in cotangents.items()}
        for n, v in renamed.items():
            if n != RESULT and np.shape(v) != outs[n].shape:
                raise ArgumentError(f"cotangent for {n!r} has shape {np.shape(v)}, the output "
                                    f"has shape {outs[n].shape}")
        return call.pullback(renamed)

    return outs, pullback


def jvp(k: Kernel, primals, tangents):
    """Forward mode: ``(outputs, output_tangents)`` for tangents of some floating arguments.

    ``outputs`` is as in :func:`vjp`; ``output_tangents`` maps the same keys to the
    directional derivatives. The caller's arrays are not modified.
    """
    k = kernel(k)
    primals = tuple(primals)
    spec = k.specialize(primals)
    unknown = set(tangents) - set(spec.floating)
    if unknown:
        raise ArgumentError(f"tangents given for {sorted(unknown)}, but the floating arguments "
                            f"of {k.__name__}() are {spec.floating}")
    syms, values = bind(spec.sdfg, primals)
    for name in spec.written_arrays:
        values[name] = values[name].copy()
    for name, t in tangents.items():
        expected = np.shape(values[name]) if spec.argument(name).kind == "array" else ()
        if np.shape(t) != expected:
            raise ArgumentError(f"tangent for {name!r} has shape {np.shape(t)}, the argument "
                                f"has shape {expected}")
        values[tangent_name(name)] = np.array(t, dtype=values[name].dtype).reshape(-1)
    tan = spec.tangent(tangents)
    buffers = spec.buffers(values, syms, tan.layout.containers)
    spec.run(tan.module, "tangent", syms, buffers)
    by_name = {c.name: b for c, b in zip(tan.layout.containers, buffers)}
    outs, dots = {}, {}
    for name in spec.written_arrays:
        outs[name] = by_name[name]
        d = by_name.get(tangent_name(name))
        dots[name] = d.reshape(outs[name].shape) if d is not None else np.zeros_like(outs[name])
    if spec.sdfg.result:
        outs["return"] = float(by_name[RESULT][0])
        d = by_name.get(tangent_name(RESULT))
        dots["return"] = float(d[0]) if d is not None else 0.0
    return outs, dots
