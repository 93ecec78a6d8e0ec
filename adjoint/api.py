"""The public API: ``kernel``, ``grad``, ``value_and_grad``, ``vjp``."""
import functools
import inspect
import math
import re
import types

import numpy as np
import sympy as sp

from . import pipeline
from .autodiff import tangent_name
from .analysis.activity import filled_first, written_containers
from .errors import AdjointError, ArgumentError, BoundsError
from .options import target
from .sweep import Sweep
from .frontend import RESULT, declared_types, read_source, type_of_value
from .frontend.source import refuse_unreadable, with_defaults
from .runtime.arguments import bind
from .runtime.memory import BufferPool, HostMemory, on_device
from .sdfg import to_text


class Kernel:
    """A compiled kernel. Calling it behaves like the Python function (in place)."""

    def __init__(self, func):
        refuse_unreadable(func)
        functools.update_wrapper(self, func)
        self.py_func = functools.wraps(func)(functools.partial(_run_as_python, func))
        self._declared = declared_types(func)
        self._parameters = tuple(inspect.signature(func).parameters.values())
        self._source = None
        self._specs = {}

    def __call__(self, *args, **kwargs):
        args = self.positional(args, kwargs)
        spec = self.specialize(args)
        syms, values = bind(spec.sdfg, args, spec.written_arrays)
        return spec.call(values, syms)

    def positional(self, args, kwargs):
        """``args`` and keyword arguments as Python binds them, in parameter order up to
        the last one given (defaults fill the gaps)."""
        if not kwargs:
            return tuple(args)
        try:
            given = inspect.signature(self.__wrapped__).bind(*args, **kwargs)
        except TypeError as exc:
            raise ArgumentError(f"{self.__name__}(): {exc}") from None
        names = list(self._declared)
        last = max(names.index(n) for n in given.arguments)
        given.apply_defaults()
        return tuple(given.arguments[n] for n in names[:last + 1])

    def specialize(self, args) -> "Specialization":
        """The compiled forward for the types of ``args`` (annotations where given); the
        parameters after them take their default values, constants of the specialisation."""
        defaults = self._defaults(args)
        names = list(self._declared)[:len(args)]
        types = {n: self._declared[n] or type_of_value(n, v) for n, v in zip(names, args)}
        key = (target(),) + tuple((n, _type_key(t)) for n, t in types.items()) + \
            tuple((n, "=", type(v).__name__, repr(v)) for n, v in defaults.items())
        if key not in self._specs:
            if self._source is None:
                self._source = read_source(self.__wrapped__)
            src = with_defaults(self._source, defaults) if defaults else self._source
            fwd = pipeline.lower_forward(src, self.__name__, types)
            self._specs[key] = Specialization(fwd)
        return self._specs[key]

    def _defaults(self, args):
        """{parameter: default value} of the parameters ``args`` leaves out."""
        params = self._parameters
        required = sum(p.default is p.empty for p in params)
        if not required <= len(args) <= len(params):
            names = ", ".join(p.name for p in params)
            count = f"{required} to {len(params)}" if required < len(params) else len(params)
            raise ArgumentError(f"{self.__name__}() takes {count} arguments ({names}), "
                                f"got {len(args)}")
        return {p.name: p.default for p in params[len(args):]}

    def explain(self, *args) -> str:
        """The SDFG, its index proofs and, per derivative compiled so far, what is recorded."""
        if args:
            self.specialize(args)
        if not self._specs:
            return f"{self.__name__}: not compiled yet; call explain(*args) with example arguments"
        return "\n\n".join(spec.explain() for spec in self._specs.values())

    def release(self):
        """Free the buffers kept between calls for reuse (the last forward call's
        transients, the last gradient call's copies and tapes, gradients dropped since);
        the compiled code stays."""
        for spec in self._specs.values():
            spec.pool.clear()
            spec.transients.clear()

    def __repr__(self):
        return f"<adjoint.kernel {self.__name__}>"


def _run_as_python(func, *args, **kwargs):
    """Call the undecorated function with its size symbols bound to the arguments' sizes,
    so ``range(N)`` works in plain Python: the reference semantics of the kernel. The
    kernels it calls run as Python too."""
    sizes = {}
    annotations = inspect.get_annotations(func, eval_str=True)
    given = inspect.signature(func).bind(*args, **kwargs)     # kernels calling kernels
    given.apply_defaults()                                    # may use keywords, defaults
    for name, value in given.arguments.items():
        shape = getattr(annotations.get(name), "shape", ())
        for size, actual in zip(shape, np.shape(value)):
            if isinstance(size, sp.Symbol):
                sizes[size.name] = actual
    callees = {n: v.py_func for n, v in func.__globals__.items() if isinstance(v, Kernel)}
    closure = tuple(_as_python_cell(c) for c in func.__closure__ or ())
    if not sizes and not callees and closure == (func.__closure__ or ()):
        return func(*args, **kwargs)
    scope = {**func.__globals__, **callees, **sizes}
    bound = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__,
                               closure or None)
    return bound(*args, **kwargs)


def _as_python_cell(cell):
    """A closure cell, with a kernel in it replaced by the kernel's Python function."""
    try:
        value = cell.cell_contents
    except ValueError:
        return cell
    return types.CellType(value.py_func) if isinstance(value, Kernel) else cell


def _type_key(t):
    return (t.dtype.str, t.shape) if hasattr(t, "shape") else t.__name__


class Specialization:
    """One kernel compiled for one set of argument types, with its derivatives."""

    def __init__(self, forward):
        self.forward, self.sdfg = forward, forward.sdfg
        self._backward, self._tangent, self._sizes = {}, {}, {}
        self.plans, self.last_sweep = {}, None
        self.pullback_reads = {}    # (backward, plan) -> containers vjp's pullbacks read
        self.tape_sizes = {}    # (backward, sizes) -> {region: tape length that sufficed}
        self.pool = BufferPool()        # host buffers a finished gradient call gave back
        self.transients = BufferPool()  # those of the last forward call
        self.floating = [a.name for a in self.sdfg.arguments
                         if a.kind == "float" or (a.kind == "array" and a.dtype.kind == "f")]
        written = written_containers(self.sdfg)     # tasklets, maps and matrix products
        self.written_arrays = [a.name for a in self.sdfg.arguments
                               if a.kind == "array" and a.name in written]
        self.filled_first = filled_first(self.sdfg)    # their buffers need no zeros

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

    def call(self, values, syms):
        """Run the forward on the bound arguments ``values``: the transients it does not
        return take the last call's buffers (fresh memory faults in page by page: 8 MB
        cost hdiff-limiter's forward about 1 ms), zeroed unless the program fills them
        first; what it returns is new."""
        module = self.forward.module
        self.verify(module, syms)
        helper = None if on_device(module) else module          # zeroes on its threads
        mem, held, buffers = HostMemory(self.transients, helper), [], []
        for c in self.forward.layout.containers:
            if c.name in values:
                buffers.append(values[c.name])
            elif c.name in self.sdfg.returns:
                buffers.append(self.zeros(c, syms))
            else:
                size = self.volume(c, syms)
                filled = c.name in self.filled_first and c.dtype == np.float64
                held.append(mem.empty(size) if filled else mem.zeros(size, c.dtype))
                buffers.append(held[-1])
        self.run(module, 0, syms, buffers)
        result = self.result(buffers, syms)
        mem.close(held)
        return result

    def buffers(self, values, syms, containers=None):
        """One ndarray per container of the layout: arguments as given, the rest zeros."""
        containers = containers or self.forward.layout.containers
        return [values[c.name] if c.name in values else self.zeros(c, syms) for c in containers]

    def zeros(self, container, syms):
        """A flat zero buffer for ``container`` at the sizes ``syms``."""
        return np.zeros(self.volume(container, syms), container.dtype)

    def volume(self, container, syms):
        """Number of elements of ``container`` at the sizes ``syms``."""
        key = (container.name, syms[:-2].tobytes())
        if key not in self._sizes:
            # each size at these values, then the product: Container.volume()'s symbolic
            # Max(0, N - 2) took sympy ~8 ms per array to build (hdiff_limiter's first
            # call in a warm process: 52 ms)
            self._sizes[key] = math.prod(self._at(container.shape, syms))
        return self._sizes[key]

    def _at(self, exprs, syms):
        """Integer expressions of the sizes at the values ``syms``, clipped at zero
        (xreplace, not subs: ~50x slower)."""
        env = dict(zip(self.sdfg.symbols, (sp.Integer(int(v)) for v in syms[:-2])))
        return [max(0, int(sp.sympify(e).xreplace(env))) for e in exprs]

    def outside(self, container, box, syms):
        """(shape, the index tuples of the parts of ``container`` outside ``box``) at the
        sizes ``syms``; ``box`` is ``(lo, hi)`` per dimension."""
        key = (container.name, box, syms[:-2].tobytes())
        if key not in self._sizes:
            shape = tuple(self._at(container.shape, syms))
            bounds = self._at([b for pair in box for b in pair], syms)
            parts, inner = [], [slice(None)] * len(shape)
            for d, n in enumerate(shape):
                lo = min(bounds[2 * d], n)
                hi = min(max(lo, bounds[2 * d + 1]), n)
                for part in ((0, lo), (hi, n)):
                    if part[1] > part[0]:
                        parts.append(tuple(inner[:d]) + (slice(*part),) + tuple(inner[d + 1:]))
                inner[d] = slice(lo, hi)
            self._sizes[key] = (shape, parts)
        return self._sizes[key]

    def verify(self, module, syms):
        """Raise BoundsError naming the line when an index, size or trip count fails its
        check at these sizes (evaluated once per distinct sizes): before anything is
        allocated from sizes that may overflow."""
        status, _ = module.check(syms)
        if status:
            check = self.forward.checks[status - 1]
            sizes = ", ".join(f"{_size_name(s.name)}={v}"
                              for s, v in zip(self.sdfg.symbols, syms[:-2])
                              if _size_name(s.name))
            raise BoundsError(f"{self.sdfg.filename}:{check.line}: {check.message}"
                              + (f" (at {sizes})" if sizes else ""))

    def run(self, module, entry, syms, buffers, tape=None, position=0):
        self.verify(module, syms)
        return module.call(entry, syms, buffers, tape, position)

    def result(self, buffers, syms):
        """What the kernel returns: a float, an array, a tuple of them, or None."""
        index = {c.name: k for k, c in enumerate(self.forward.layout.containers)}
        values = {n: self.returned(n, buffers[index[n]], syms) for n in self.sdfg.returns}
        return returned_value(values)

    def returned(self, name, buffer, syms):
        """One returned container's value from its flat buffer."""
        c = self.sdfg.containers[name]
        if c.is_scalar:                 # a Python number, as the kernel's own type
            return int(buffer[0]) if c.dtype.kind in "iu" else float(buffer[0])
        env = dict(zip(self.sdfg.symbols, (int(v) for v in syms[:-2])))
        return buffer.reshape(tuple(max(int(sp.sympify(n).subs(env)), 0) for n in c.shape))

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
                         f"{sorted(adj.active)}; overwritten values recorded: "
                         f"{sorted(adj.recorded) or 'nothing'}")
        lines += _launch_plans(self)
        if self.last_sweep is not None:
            sweep = self.last_sweep
            lines.append(sweep.plan.describe())
            lines.append(f"measured peak of the engine's allocations: "
                         f"{sweep.ledger.peak / 2**20:.2f} MiB")
        return "\n".join(lines)


def _launch_plans(spec):
    """For CUDA modules: which loops and maps run as kernels, on the host, or in one GPU
    thread (the plan the generated source starts with)."""
    from .codegen.cuda import launch_plan
    modules = [("forward", spec.forward)]
    modules += [(f"derivative w.r.t. {sorted(w)}", b) for (w, _), b in spec._backward.items()]
    modules += [(f"tangent w.r.t. {sorted(w)}", t) for w, t in spec._tangent.items()]
    lines = []
    for what, artefact in modules:
        if on_device(artefact.module):
            lines.append(f"GPU launch plan of the {what}:")
            lines += ["  " + line for line in launch_plan(artefact.source)]
    return lines


def _size_name(symbol):
    """How a size reads in messages: ``N``, or ``A.shape[0]`` for the sizes the engine
    names after an unannotated argument (``__A_0``); None for other internal symbols."""
    m = re.fullmatch(r"__(.+)_(\d+)", symbol)
    if m:
        return f"{m.group(1)}.shape[{m.group(2)}]"
    return None if symbol.startswith("__") else symbol


def output_key(name):
    """``__return`` -> ``"return"``, ``__return1`` -> ``"return1"``: vjp/jvp keys."""
    return name[2:] if name.startswith(RESULT) else name


def returned_value(values):
    """A kernel's return value from {container: value}: one value or a tuple."""
    if not values:
        return None
    if list(values) == [RESULT]:
        return values[RESULT]
    return tuple(values.values())


def kernel(func):
    """Compile ``func`` (a loop kernel in plain Python) to C with derivatives."""
    return func if isinstance(func, Kernel) else Kernel(func)


# ---- derivatives ---------------------------------------------------------------------------
def _check_wrt(k, spec, wrt):
    names = (wrt,) if isinstance(wrt, str) else tuple(wrt)
    for n in names:
        if n not in spec.floating:
            raise ArgumentError(f"wrt={n!r}: {k.__name__}() has no floating-point argument "
                                f"{n!r}; differentiable arguments: {spec.floating}")
    if spec.sdfg.result is None:
        what = "returns no scalar" if not spec.sdfg.returns else \
            f"returns {', '.join(output_key(n) for n in spec.sdfg.returns)}, not one number"
        raise AdjointError(f"{k.__name__}() {what}: grad needs a loss; use vjp with "
                           "cotangents for its outputs instead")
    return names


def value_and_grad(k: Kernel, wrt, memory_budget=None, policy=None, snapshots=None):
    """``f(*args) -> (loss, gradient)``; gradients w.r.t. each name in ``wrt`` at entry.

    ``memory_budget`` (bytes or "512MiB") bounds what reverse mode keeps; ``policy`` is
    'ilp' (default: cheapest plan within the budget), 'store_all', 'recompute_all' or
    'revolve' (with ``snapshots``)."""
    k = kernel(k)
    plan = dict(budget=memory_budget, policy=policy, snapshots=snapshots)

    def run(*args, _value=True):
        spec = k.specialize(args)
        names = _check_wrt(k, spec, wrt)
        sweep = Sweep(spec, spec.backward(names, {RESULT}), args, run_forward=_value, **plan)
        cot = sweep.reverse({RESULT: 1.0}, wanted=names)
        spec.last_sweep = sweep
        grads = tuple(cot[n] for n in names)
        return sweep.result(), grads[0] if isinstance(wrt, str) else grads

    functools.update_wrapper(run, k.py_func)
    return run


def grad(k: Kernel, wrt, memory_budget=None, policy=None, snapshots=None):
    """``f(*args) -> gradient`` of the returned scalar w.r.t. ``wrt`` (name or tuple)."""
    vg = value_and_grad(k, wrt, memory_budget, policy, snapshots)

    def run(*args):
        return vg(*args, _value=False)[1]

    functools.update_wrapper(run, kernel(k).py_func)
    return run


def vjp(k: Kernel, *args, memory_budget=None, policy=None, snapshots=None):
    """``(outputs, pullback)``: outputs maps each written array and ``"return"`` (the
    returned value, a tuple for a tuple) to its final value; ``pullback(cotangents)``, the
    cotangents keyed the same way (a tuple's elements also as ``"return0"``,
    ``"return1"``, ...), maps every floating argument to its cotangent at entry, at the
    values of this call (what it reads of the caller's arrays is copied)."""
    k = kernel(k)
    spec = k.specialize(args)
    outputs = set(spec.written_arrays) | set(spec.sdfg.returns)
    sweep = Sweep(spec, spec.backward(spec.floating, outputs), args, reusable=True,
                  budget=memory_budget, policy=policy, snapshots=snapshots)
    spec.last_sweep = sweep
    outs = {n: sweep.value(n).copy() for n in spec.written_arrays}
    for n in spec.sdfg.returns:
        value = spec.returned(n, sweep.value(n), sweep.syms)
        outs[output_key(n)] = value.copy() if isinstance(value, np.ndarray) else value
    containers = {output_key(n): n for n in outputs}

    # An array argument the kernel only reads is an output too, equal to its input: its
    # cotangent goes to its gradient unchanged.
    unchanged = {a.name: np.shape(v) for a, v in zip(spec.sdfg.arguments, args)
                 if a.kind == "array" and a.name in spec.floating and a.name not in outs}

    def pullback(cotangents):
        cotangents = _elements(k, spec, cotangents, "cotangent")
        unknown = set(cotangents) - set(outs) - set(unchanged)
        if unknown:
            raise ArgumentError(f"cotangents given for {sorted(unknown)}, but the outputs of "
                                f"{k.__name__}() are {_output_names(spec)} (and the arrays "
                                f"it only reads, {sorted(unchanged)})")
        for n, v in cotangents.items():
            want = np.shape(outs[n]) if n in outs else unchanged[n]
            if np.shape(v) != want:
                raise ArgumentError(f"cotangent for {n!r} has shape {np.shape(v)}, the output "
                                    f"has shape {want}")
        back = sweep.reverse({containers[n]: v for n, v in cotangents.items() if n in outs})
        for n in set(cotangents) & set(unchanged):
            back[n] = back[n] + np.asarray(cotangents[n], dtype=np.float64)
        return back

    return _as_returned(spec, outs), pullback


def _output_names(spec):
    return sorted(spec.written_arrays) + ["return"] * bool(spec.sdfg.returns)


def _as_returned(spec, values):
    """{output: value} with a returned tuple under ``"return"`` (as the kernel returns it)."""
    if len(spec.sdfg.returns) < 2:
        return values
    out = {n: v for n, v in values.items() if n in spec.written_arrays}
    out["return"] = tuple(values[output_key(n)] for n in spec.sdfg.returns)
    return out


def _elements(k, spec, given, what):
    """``{"return": (a, b)}`` -> ``{"return0": a, "return1": b}`` (the per-element names,
    which are accepted too) for a kernel returning a tuple."""
    given = dict(given)
    if len(spec.sdfg.returns) < 2 or "return" not in given:
        return given
    parts = given.pop("return")
    names = [output_key(n) for n in spec.sdfg.returns]
    if not isinstance(parts, (tuple, list)) or len(parts) != len(names):
        raise ArgumentError(f"{what} for 'return': {k.__name__}() returns a tuple of "
                            f"{len(names)}; give a tuple of {len(names)} {what}s")
    twice = sorted(set(names) & set(given))
    if twice:
        raise ArgumentError(f"{what}s for 'return' and for {twice}: give the tuple or its "
                            "elements, not both")
    given.update(zip(names, parts))
    return given


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
    spec.run(tan.module, 0, syms, buffers)
    by_name = {c.name: b for c, b in zip(tan.layout.containers, buffers)}
    outs, dots = {}, {}
    for name in spec.written_arrays:
        outs[name] = by_name[name]
        d = by_name.get(tangent_name(name))
        dots[name] = d.reshape(outs[name].shape) if d is not None else np.zeros_like(outs[name])
    for name in spec.sdfg.returns:
        key = output_key(name)
        outs[key] = spec.returned(name, by_name[name], syms)
        d = by_name.get(tangent_name(name))
        d = np.zeros_like(by_name[name]) if d is None else d
        dots[key] = spec.returned(name, d, syms)
    return _as_returned(spec, outs), _as_returned(spec, dots)
