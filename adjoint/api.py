"""The public API: ``kernel``, ``grad``, ``value_and_grad``, ``vjp``."""
import functools
import inspect
import math
import re
import threading
import types
import weakref
from dataclasses import replace

import numpy as np
import sympy as sp

from . import pipeline
from .autodiff import tangent_name
from .analysis.activity import filled_first, written_containers
from .codegen.c import FAILED
from .errors import AdjointError, ArgumentError, AssertionFailed, BoundsError, LinAlgError
from .options import CUDA_SETTINGS, options, set_options, target
from .sweep import Sweep
from .frontend import RESULT, call_sizes, holds, read_source, type_of_value
from .frontend.outside import HIDDEN, function_value, is_constant, outside_reads, value_key
from .frontend.source import KernelFunction, check_parameters, decorated_source, \
    function_tree, with_defaults
from .runtime.arguments import Binding, as_complex, as_parts, signature
from .runtime.cuda import require_cuda
from .runtime.memory import SMALL, BufferPool, HostMemory, idle, on_device
from .sdfg import to_text
from .sdfg.nodes import library_nodes

BINDINGS = 16       # argument signatures a kernel keeps the checks of (see Kernel.bound)
LOSS = types.MappingProxyType({RESULT: 1.0})      # the cotangent grad pulls back


class Kernel(KernelFunction):
    """A compiled kernel. Calling it behaves like the Python function (in place)."""

    def __init__(self, func):
        super().__init__(func)
        self.py_func = functools.wraps(func)(functools.partial(_run_as_python, func))
        self._parameters = tuple(inspect.signature(func).parameters.values())
        self._source, self._source_fixed = None, ()
        self._outside = {}          # function values -> (hidden arrays, fixed values)
        self._specs = {}
        self._bindings = {}         # signature -> (target, specialisation, Binding)
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        args = self.positional(args, kwargs)
        spec, binding, args = self.bound(args)
        return spec.call(binding, args)

    def bound(self, args) -> tuple:
        """(specialisation, Binding, the values its entry points take) for ``args``: the
        values are ``args`` without the functions, strings, None and tuples of constants
        among them (constants of the
        specialisation) and with the arrays the kernel reads from outside its body (hidden
        arguments, read again at every call). The specialisation's look-up and the
        arguments' checks run once per argument signature (runtime/arguments.py) and
        target; the last BINDINGS signatures keep them (a call's sizes, its argument
        types: every later call like it skips both), for kernels called without functions
        and reading no arrays from outside."""
        key = signature(args)
        here = target()
        hit = self._bindings.get(key)
        if hit is not None and hit[0] is here and _unchanged(hit[3]):
            return hit[1], hit[2], args
        spec, values = self._specialized(args, here)
        binding = Binding(spec.sdfg, values, spec.written_arrays)
        if binding.reusable and values is args:
            with self._lock:
                while len(self._bindings) >= BINDINGS:
                    del self._bindings[next(iter(self._bindings))]
                self._bindings[key] = (here, spec, binding, spec.fixed)
        return spec, binding, values

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
        return self._specialized(args, target())[0]

    def _specialized(self, args, here):
        """(the specialisation for ``args`` and target ``here``, the values its entry
        points take: see ``bound``; ``args`` itself when they are the same)."""
        defaults = self._defaults(args)
        names = list(self._declared)[:len(args)]
        functions = {n: v for n, v in zip(names, args)       # and strings, None, tuples
                     if function_value(v) or (_constant_argument(v) and not self._declared[n])}
        given = [(n, v) for n, v in zip(names, args) if n not in functions]
        types = {n: self._declared[n] or type_of_value(n, v) for n, v in given}
        outside, fixed = self._outside_reads(functions)
        found = tuple(get() for _, _, get in outside)      # the frontend knows them by id
        for (name, label, _), value in zip(outside, found):
            types[name] = type_of_value(name[2:], value, what=f"the array {label}")
        now = tuple((get, _read(get)) for _, get in fixed)
        key = (here,) + tuple((n, _type_key(t)) for n, t in types.items()) + \
            tuple((n, "=", type(v).__name__, repr(v)) for n, v in defaults.items()) + \
            tuple((n, "function", v) for n, v in functions.items()) + \
            tuple(value_key(v) for _, v in now)                     # held: no id reuse
        sizes = call_sizes(types, {**dict(given), **{n: v for (n, _, _), v in
                                                      zip(outside, found)}})
        specs = self._specs.setdefault(key, [])     # each holds for its sizes' decisions
        spec = next((s for s in specs if holds(s.sdfg.decisions, sizes)), None)
        if spec is None:
            if self._source is not None and not _unchanged(self._source_fixed):
                self._source = None             # read again: its namespace is a snapshot
            if self._source is None:
                self._source_fixed = now
                func = self.__wrapped__
                self._source = decorated_source(func) if hasattr(func, "__wrapped__") \
                    else read_source(func)
            constants = {**defaults, **functions}
            src = with_defaults(self._source, constants) if constants else self._source
            src = replace(src, outside=tuple((n, v) for (n, _, _), v in zip(outside, found)),
                          renamed=src.renamed + tuple((label, e) for n, label, _ in outside
                                                      for e in (n, n[2:])))
            fwd = pipeline.lower_forward(src, self.__name__, types, here, sizes)
            spec = Specialization(fwd, now)
            specs.append(spec)
        if not functions and not found:
            return spec, args
        return spec, tuple(v for _, v in given) + tuple(map(_readable, found))

    def _outside_reads(self, functions):
        """([(hidden argument, label, getter)] of the arrays from outside that the kernel,
        called with the function values ``functions``, reads; [(label, getter)] of the
        other values it reads from outside), found once per functions."""
        key = tuple(functions.values())
        if key not in self._outside:
            check_parameters(self.__wrapped__)
            arrays, fixed = outside_reads(self.__wrapped__, _tree, key)
            self._outside[key] = _hidden_names(arrays), fixed
        return self._outside[key]

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
        return "\n\n".join(spec.explain() for spec in self.specializations)

    @property
    def specializations(self) -> list:
        """Every specialisation compiled so far, in the order they were."""
        return [spec for specs in self._specs.values() for spec in specs]

    def release(self):
        """Free the buffers kept between calls for reuse (the last forward call's
        transients, the last gradient call's copies and tapes, gradients dropped since,
        the frames of small calls); the compiled code stays."""
        for spec in self.specializations:
            spec.pool.clear()
            spec.transients.clear()
        for _, _, binding, _ in list(self._bindings.values()):
            binding.memo.clear()            # small calls' frames (the plans are remade)

    def __repr__(self):
        return f"<adjoint.kernel {self.__name__}>"


def _constant_argument(value):
    """Arguments that are constants of the specialisation, as functions are: strings,
    None and tuples of constants (``enforce_boundaries(arr, "u")``) given to parameters
    without an annotation; numbers and arrays are the compiled code's arguments."""
    return isinstance(value, (str, type(None), tuple)) and is_constant(value)


def _read(get):
    """A value from outside read again, or a marker no compiled value equals (a name
    deleted since: compiling anew then reports it)."""
    try:
        return get()
    except (KeyError, AttributeError, ValueError):
        return _GONE


_GONE = object()


def _unchanged(fixed):
    """Whether every value from outside is still the one the code was compiled with."""
    for get, value in fixed:
        now = _read(get)
        if now is not value and value_key(now) != value_key(value):
            return False
    return True


def _hidden_names(found):
    """[(hidden argument, label, getter)]: ``__outside_<label>``, one name per array."""
    out, taken = [], set()
    for label, get in found:
        name = HIDDEN + re.sub(r"\W", "_", label)
        while name in taken:
            name += "_"
        taken.add(name)
        out.append((name, label, get))
    return out


def _readable(value):
    """A hidden argument as the compiled code takes it: kernels only read these, so a
    contiguous copy of a strided array (a module-level ``A.T``) reads the same values."""
    if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
        return np.ascontiguousarray(value)
    return value


def _tree(func):
    found = function_tree(func)
    return None if found is None else found[0]


def _run_as_python(func, *args, **kwargs):
    """Call the undecorated function with its size symbols bound to the arguments' sizes,
    so ``range(N)`` works in plain Python: the reference semantics of the kernel. The
    kernels it calls run as Python too."""
    if inspect.ismethod(func):
        return _run_as_python(func.__func__, func.__self__, *args, **kwargs)
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

    def __init__(self, forward, fixed=()):
        self.forward, self.sdfg = forward, forward.sdfg
        self.fixed = fixed          # ((getter, value)) read from outside when compiled
        self._backward, self._tangent, self._sizes = {}, {}, {}
        self.last_sweep = None
        self.pullbacks = {}     # (backward, plan) -> containers vjp's pullbacks read, write
        self.setups = {}        # (backward, sizes) -> sweep.Setup
        self.pool = BufferPool()        # host buffers a finished gradient call gave back
        self.transients = BufferPool()  # those of the last forward call
        self.floating_arguments = [a for a in self.sdfg.arguments if (
            a.kind == "float" or (a.kind == "array" and a.dtype.kind in "fc"))
            and not a.name.startswith(HIDDEN)]
        self.floating = [a.name for a in self.floating_arguments]
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

    def call(self, binding, args):
        """Run the forward on ``args``, bound by ``binding``: the transients it does not
        return take the last call's buffers (fresh memory faults in page by page: 8 MB
        cost hdiff-limiter's forward about 1 ms), zeroed unless the program fills them
        first; what it returns is new."""
        if binding.read_only:
            binding.writable(self.written_arrays)
        syms, values = binding.values(args)
        module = self.forward.module
        plan = binding.memo.get("forward") or binding.memo.setdefault(
            "forward", ForwardPlan(self, syms))
        if binding.ranges:                      # the sizes were checked by the plan
            self.verify(module, syms)
        if plan.framed:             # every buffer it makes is small: one frame, reused
            frame = idle(plan.frames, module, plan.frame_slots)
            buffers = plan.fill(frame, values)
            status = module.call(0, syms, frame.table)
        else:
            mem = HostMemory(self.transients, None if on_device(module) else module)
            buffers, held = plan.buffers(mem, values)
            status = module.call(0, syms, buffers)
            mem.close(held)
        if status <= FAILED:                    # a library call failed
            raise self.failed(FAILED - status)
        result = returned_value({name: as_list(
            number(buffers[k][0]) if shape is None else buffers[k].reshape(shape)
            if number is not complex else as_complex(buffers[k].reshape(shape)),
            name in self.sdfg.lists) for k, name, shape, number in plan.returns}) \
            if plan.single is None else float(buffers[plan.single][0])
        if plan.framed:
            plan.frames.append(frame)
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
        return math.prod(self.shape(container, syms))

    def shape(self, container, syms):
        """The shape of ``container`` at the sizes ``syms``, once per distinct sizes:
        each size at these values (Container.volume()'s symbolic Max(0, N - 2) took
        sympy ~8 ms per array to build; substituting into every returned array's shape
        per call was most of a small kernel's call)."""
        # a name may have two shapes: contracted in one module, whole in another
        key = (container.name, container.shape, syms[:-2].tobytes())
        if key not in self._sizes:
            self._sizes[key] = tuple(self._at(container.shape, syms))
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
        status = module.call(entry, syms, buffers, tape, position)
        if status <= FAILED:
            raise self.failed(FAILED - status)
        return status

    def failed(self, line):
        """The error of a node at ``line`` that stopped the call (codegen: ``fail``): a
        failed assert's AssertionFailed, a library call's LinAlgError."""
        nodes = [node for node in library_nodes(self.sdfg.body)
                 if node.line == line and getattr(node, "failure", None)]
        reasons = sorted({node.failure for node in nodes})
        if any(node.kind == "assert" for node in nodes):
            return AssertionFailed(f"{self.sdfg.filename}:{line}: {' or '.join(reasons)}")
        why = " or ".join(reasons) or "a linear-algebra routine failed"
        return LinAlgError(f"{self.sdfg.filename}:{line}: {why}")

    def returned(self, name, buffer, syms):
        """One returned container's value from its flat buffer."""
        c = self.sdfg.containers[name]
        if c.is_scalar:                 # a Python number, as the kernel's own type
            return int(buffer[0]) if c.dtype.kind in "iu" else float(buffer[0])
        value = buffer.reshape(self.shape(c, syms))
        return as_list(as_complex(value) if c.complex else value, name in self.sdfg.lists)

    def user(self, name, value):
        """An argument's buffer as the caller sees it: a complex array from its parts."""
        return as_complex(value) if self.sdfg.containers[name].complex else value

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


class ForwardPlan:
    """How a forward call at given sizes gets its buffers, made once per Binding:
    ``slots`` per container (name, elements, dtype, how: None for an argument,
    "returned" ("returned filled" where the program fills it first: a new array
    without zeros, as NumPy's results are), "filled" for a transient the program fills
    first, "zeros"), ``returns``
    (buffer index, name, shape; None for a number). Where every transient is small (and
    on the CPU), they and the returned numbers live in a Frame (runtime/memory.py) that
    the next call reuses with its pointer table (``framed``); otherwise transients large
    enough come from the specialisation's pool (the last call's buffers)."""

    def __init__(self, spec, syms):
        spec.verify(spec.forward.module, syms)      # before allocating from these sizes
        arguments = {a.name for a in spec.sdfg.arguments if a.kind != "int"}
        self.slots, self.returns, self.frame_slots, self.frames = [], [], [], []
        for k, c in enumerate(spec.forward.layout.containers):
            size, dtype = spec.volume(c, syms), np.dtype(c.dtype)
            if c.name in arguments:
                how = None
            elif c.name in spec.sdfg.returns:
                how = "returned filled" if c.name in spec.filled_first and not c.is_scalar \
                    else "returned"
                number = complex if c.complex else int if dtype.kind in "iu" else float
                self.returns.append((k, c.name, None if c.is_scalar else spec.shape(c, syms),
                                     number))
            else:
                filled = c.name in spec.filled_first and dtype == np.float64
                how = "filled" if filled else "zeros"
            self.slots.append((c.name, size, dtype, how))
            framed = how == "zeros" or how == "filled" or (how == "returned" and c.is_scalar)
            self.frame_slots.append((c.name, (size,), dtype) if framed else (c.name, None, None))
        order = {n: k for k, n in enumerate(spec.sdfg.returns)}
        self.returns.sort(key=lambda r: order[r[1]])     # in the order the kernel returns
        # the buffer of the one number a kernel returns, the common case
        self.single = self.returns[0][0] if [r[1:] for r in self.returns] == \
            [(RESULT, None, float)] else None
        self.framed = not on_device(spec.forward.module) and all(
            size * dtype.itemsize < SMALL for _, size, dtype, how in self.slots
            if how in ("zeros", "filled"))

    def fill(self, frame, values):
        """The buffers of a framed call: the frame's views, zeroed; the arguments, and
        new arrays for the arrays it returns (zeros unless the program fills them first),
        pointed to by the frame's table."""
        frame.block.fill(0)
        buffers = list(frame.buffers)
        for k, name in frame.in_place:
            buffer = values.get(name)
            if buffer is None:
                _, size, dtype, how = self.slots[k]
                buffer = (np.empty if how == "returned filled" else np.zeros)(size, dtype)
            buffers[k] = buffer
            frame.table.point(k, buffer)
        return buffers

    def buffers(self, mem, values):
        """(buffers, the transients among them) of a call with large transients: those
        from ``mem`` (the specialisation's pool, zeroed on the module's threads)."""
        held, buffers = [], []
        for name, size, dtype, how in self.slots:
            if how is None:
                buffers.append(values[name])
            elif how == "returned filled":      # np.zeros' memset (32 MB: 1 ms) saved
                buffers.append(np.empty(size, dtype))
            elif how == "returned":
                buffers.append(np.zeros(size, dtype))
            else:
                held.append(mem.empty(size) if how == "filled" else mem.zeros(size, dtype))
                buffers.append(held[-1])
        return buffers, held


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


def as_list(value, listed):
    """A returned list grown by append (``SDFG.lists``) as the list Python returns: its
    numbers, or its rows (arrays); other values as they are."""
    if not listed:
        return value
    return value.tolist() if value.ndim == 1 else list(value)


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
    if spec.sdfg.result is not None and spec.sdfg.containers[RESULT].complex:
        raise AdjointError(f"{k.__name__}() returns a complex number: grad needs a real "
                           "loss (abs(z) ** 2, z.real); or use vjp with a complex cotangent")
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
    run = _differentiated(kernel(k), wrt, memory_budget, policy, snapshots)

    def value_and_gradient(*args):
        return run(args, True)

    functools.update_wrapper(value_and_gradient, kernel(k).py_func)
    return value_and_gradient


def grad(k: Kernel, wrt, memory_budget=None, policy=None, snapshots=None):
    """``f(*args) -> gradient`` of the returned scalar w.r.t. ``wrt`` (name or tuple)."""
    run = _differentiated(kernel(k), wrt, memory_budget, policy, snapshots)

    def gradient(*args):
        return run(args, False)[1]

    functools.update_wrapper(gradient, kernel(k).py_func)
    return gradient


def _differentiated(k, wrt, memory_budget, policy, snapshots):
    """``run(args, value) -> (loss, gradients)``, the loss None unless ``value``: one
    Sweep per call; ``wrt`` checked and the backward looked up once per specialisation."""
    single = isinstance(wrt, str)
    derivatives = {}        # specialisation -> (names, its backward)

    def run(args, value):
        spec, binding, args = k.bound(args)
        found = derivatives.get(spec)
        if found is None:
            names = _check_wrt(k, spec, wrt)
            found = derivatives[spec] = names, spec.backward(names, {RESULT})
        names, bwd = found
        sweep = Sweep(spec, bwd, args, value, False, memory_budget, policy, snapshots, binding,
                      LOSS)
        cot = sweep.reverse(LOSS, names)
        spec.last_sweep = sweep
        return sweep.result(), cot[wrt] if single else tuple([cot[n] for n in names])

    return run


def vjp(k: Kernel, *args, memory_budget=None, policy=None, snapshots=None):
    """``(outputs, pullback)``: outputs maps each written array and ``"return"`` (the
    returned value, a tuple for a tuple) to its final value; ``pullback(cotangents)``, the
    cotangents keyed the same way (a tuple's elements also as ``"return0"``,
    ``"return1"``, ...), maps every floating argument to its cotangent at entry, at the
    values of this call (what it reads of the caller's arrays is copied)."""
    k = kernel(k)
    spec, binding, args = k.bound(args)
    outputs = set(spec.written_arrays) | set(spec.sdfg.returns)
    sweep = Sweep(spec, spec.backward(spec.floating, outputs), args, reusable=True,
                  budget=memory_budget, policy=policy, snapshots=snapshots, binding=binding)
    spec.last_sweep = sweep
    outs = {n: spec.user(n, sweep.output(n)) for n in spec.written_arrays}
    for n in spec.sdfg.returns:
        outs[output_key(n)] = spec.returned(n, sweep.output(n), sweep.syms)
    containers = {output_key(n): n for n in outputs}

    # An array argument the kernel only reads is an output too, equal to its input: its
    # cotangent goes to its gradient unchanged.
    unchanged = {a.name: np.shape(v) for a, v in zip(spec.sdfg.arguments, args)
                 if a.kind == "array" and a.name in spec.floating and a.name not in outs}

    def pullback(cotangents):
        cotangents = _list_elements(k, spec, _elements(k, spec, cotangents, "cotangent"),
                                    outs)
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
            back[n] = back[n] + np.asarray(cotangents[n], dtype=back[n].dtype)
        return back

    # Its buffers are the next call's once the pullback is gone, even while spec.last_sweep
    # (explain, diagnostics) still refers to the sweep.
    weakref.finalize(pullback, sweep.close)
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


def _list_elements(k, spec, given, outs):
    """The cotangents of a returned list (``SDFG.lists``) as one array: given whole under
    its key, or element by element as ``"return0"``, ``"return1"``, ... (the keys of a
    tuple's elements; those not given are zero) where the kernel returns one list."""
    given = dict(given)
    for name in spec.sdfg.lists:
        key = output_key(name)
        if key in given:
            given[key] = np.asarray(given[key], dtype=np.float64)
    if tuple(spec.sdfg.lists) != (RESULT,) or spec.sdfg.returns != (RESULT,):
        return given
    parts = {n: v for n, v in given.items() if re.fullmatch(r"return\d+", n)}
    if not parts:
        return given
    whole = np.zeros(np.shape(outs["return"]))
    if "return" in given:
        raise ArgumentError("cotangents for 'return' and for its elements "
                            f"{sorted(parts)}: give the list or its elements, not both")
    for n, v in parts.items():
        index = int(n[len("return"):])
        if index >= len(whole):
            raise ArgumentError(f"cotangent for {n!r}: {k.__name__}() returns a list of "
                                f"{len(whole)}")
        whole[index] = v
        del given[n]
    given["return"] = whole
    return given


def jvp(k: Kernel, primals, tangents):
    """Forward mode: ``(outputs, output_tangents)`` for tangents of some floating arguments.

    ``outputs`` is as in :func:`vjp`; ``output_tangents`` maps the same keys to the
    directional derivatives. The caller's arrays are not modified.
    """
    k = kernel(k)
    spec, binding, primals = k.bound(tuple(primals))
    unknown = set(tangents) - set(spec.floating)
    if unknown:
        raise ArgumentError(f"tangents given for {sorted(unknown)}, but the floating arguments "
                            f"of {k.__name__}() are {spec.floating}")
    syms, values = binding.values(primals)
    for name in spec.written_arrays:
        values[name] = values[name].copy()
    for name, t in tangents.items():
        expected = np.shape(spec.user(name, values[name])) \
            if spec.argument(name).kind == "array" else ()
        if np.shape(t) != expected:
            raise ArgumentError(f"tangent for {name!r} has shape {np.shape(t)}, the argument "
                                f"has shape {expected}")
        values[tangent_name(name)] = as_parts(np.array(t, dtype=spec.argument(name).dtype)) \
            .reshape(-1)
    tan = spec.tangent(tangents)
    buffers = spec.buffers(values, syms, tan.layout.containers)
    spec.run(tan.module, 0, syms, buffers)
    by_name = {c.name: b for c, b in zip(tan.layout.containers, buffers)}
    outs, dots = {}, {}
    for name in spec.written_arrays:
        d = by_name.get(tangent_name(name))
        d = d.reshape(by_name[name].shape) if d is not None else np.zeros_like(by_name[name])
        outs[name], dots[name] = spec.user(name, by_name[name]), spec.user(name, d)
    for name in spec.sdfg.returns:
        key = output_key(name)
        outs[key] = spec.returned(name, by_name[name], syms)
        d = by_name.get(tangent_name(name))
        d = np.zeros_like(by_name[name]) if d is None else d
        dots[key] = spec.returned(name, d, syms)
    return _as_returned(spec, outs), _as_returned(spec, dots)


def configure(**changes):
    """Change engine options: ``adjoint.configure(cflags=("-O2",), cache_dir="/scratch/k")``.
    A CUDA target is checked now (nvcc, a GPU), not at the first call."""
    saved = set_options(**changes)
    if options.device == "cuda" and CUDA_SETTINGS & set(changes):
        try:
            require_cuda(target())
        except Exception:
            set_options(**saved)
            raise
    return options
