"""A kernel's call in functional form, on NumPy arrays: what ``to_jax`` and ``to_torch``
run inside their frameworks.

A framework passes some arguments as its own arrays (the *operands*: the values it
differentiates, traces or batches) and the rest as Python values fixed for the call
(*statics*: Python ints, and in PyTorch also plain floats). The kernel's outputs, in
order, are its returned value(s) and then the final values of the arrays it writes, in
argument order; a call never writes what it is given (the forward writes copies, and
``jvp`` and the reverse sweep copy anyway). Forward, tangent and adjoint are the engine's
own calls: the kernel, :func:`adjoint.jvp`, and the forward and reverse sweep that
:func:`adjoint.vjp` and its pullback run (run once)."""
import numpy as np

from ..api import jvp, kernel
from ..errors import ArgumentError
from ..runtime.arguments import bind
from ..sweep import Sweep


class Call:
    """One kernel called with one set of argument types and statics.

    ``examples`` are the call's arguments, or stand-ins of the same types and shapes
    (the frameworks' tracers become zero arrays, traced ints zeros); ``operands`` the
    positions of the ones the framework passes as arrays."""

    def __init__(self, k, examples, operands, options=None):
        self.kernel = k = kernel(k)
        self.options = dict(options or {})
        self._backwards = {}            # specialisation -> its backward for these outputs
        self.spec = spec = k.specialize(examples)
        sdfg = spec.sdfg
        self.names = [a.name for a in sdfg.arguments]
        self.kinds = [a.kind for a in sdfg.arguments]
        self.operands = tuple(operands)
        self.statics = {p: v for p, v in enumerate(examples) if p not in self.operands}
        self.floating = [p for p in self.operands if self.names[p] in spec.floating]
        self.written = [self.names.index(n) for n in spec.written_arrays]
        self.returns = list(sdfg.returns)
        if any(a.dtype.kind == "c" for a in sdfg.arguments) or \
                any(sdfg.containers[n].complex for n in self.returns):
            raise ArgumentError(f"{k.__name__}(): complex values are not passed to or from "
                                "JAX and PyTorch yet; call the kernel with NumPy arrays")
        if not self.returns and not self.written:
            raise ArgumentError(f"{k.__name__}() returns nothing and writes no argument: "
                                "called as a function it would give nothing")
        syms, _ = bind(sdfg, examples, spec.written_arrays)     # types and shapes, named
        self.shapes = [np.shape(examples[p]) for p in self.operands]
        self.dtypes = [_dtype(examples[p]) for p in self.operands]
        traced = {self.names[p] for p in self.operands if self.kinds[p] == "int"}
        self.results = [self._returned(n, syms, traced) for n in self.returns]
        self.results += [(np.shape(examples[p]), np.dtype(examples[p].dtype))
                         for p in self.written]
        # what every call repeats, decided once: the argument list's statics, how each
        # operand reaches the kernel, the outputs' names and
        # the floating operands' (whose cotangents ``adjoint`` gives)
        self._template = [self.statics.get(p) for p in range(len(self.names))]
        self._reading = [(p, _CONVERT.get(self.kinds[p], _array)) for p in self.operands]
        self._copying = [(p, _copy if p in self.written else convert)
                         for p, convert in self._reading]
        self.outputs = self.returns + [self.names[p] for p in self.written]
        self.floating_names = [self.names[p] for p in self.floating]

    def _returned(self, name, syms, traced):
        """(shape, dtype) of a returned container at the sizes ``syms``."""
        c = self.spec.sdfg.containers[name]
        if c.is_scalar:
            return (), np.dtype(np.float64)
        depends = sorted(traced & {s.name for e in c.shape for s in e.free_symbols})
        if depends:
            which = "them" if len(depends) > 1 else "it"
            raise ArgumentError(f"{self.kernel.__name__}() returns an array whose shape depends "
                                f"on {', '.join(depends)}: pass {which} as a Python int "
                                "(static), not as a traced value")
        return tuple(self.spec._at(c.shape, syms)), np.dtype(c.dtype)

    # ---- arguments and outputs ------------------------------------------------------------
    def arguments(self, operands, copy_written=False):
        """The kernel's positional arguments: statics, and the operands as the kernel takes
        them (ints and floats as numbers, arrays contiguous; copies of the written ones)."""
        args = self._template.copy()
        for (p, convert), v in zip(self._copying if copy_written else self._reading, operands):
            args[p] = convert(v)
        return tuple(args)

    def returned(self, flat):
        """The wrapped function's value from the flat outputs: the kernel's return value
        when it writes no argument, else ``(return value, *written arrays)`` (without the
        first element when it returns nothing)."""
        n = len(self.returns)
        value = None if n == 0 else flat[0] if n == 1 else tuple(flat[:n])
        written = tuple(flat[n:])
        if not written:
            return value
        return (value, *written) if n else written

    def _leaves(self, value):
        """A returned value (None, one value or a tuple) as a list of its elements."""
        n = len(self.returns)
        return [] if n == 0 else [value] if n == 1 else list(value)

    # ---- the three calls ------------------------------------------------------------------
    def forward(self, operands):
        """The flat outputs: the kernel run on copies of the arrays it writes."""
        args = self.arguments(operands, copy_written=True)
        value = self.kernel(*args)
        return self._leaves(value) + [args[p] for p in self.written]

    def tangent(self, operands, tangents):
        """The outputs' tangents for ``tangents`` of the floating operands (in order)."""
        given = {self.names[p]: _CONVERT.get(self.kinds[p], _array)(t)
                 for p, t in zip(self.floating, tangents)}
        _, dots = jvp(self.kernel, self.arguments(operands), given)
        return self._leaves(dots["return"] if self.returns else None) + \
            [dots[self.names[p]] for p in self.written]

    def recorded(self, operands):
        """(the flat outputs, the sweep that computed them): the differentiated call's
        forward sweep, for a framework that will ask for the adjoint (PyTorch's forward of
        tensors that require grad), so that the kernel runs once; :meth:`adjoint` given the
        sweep runs only its reverse."""
        sweep = self._sweep(operands)
        spec = sweep.spec
        values = [spec.returned(n, sweep.value(n), sweep.syms) for n in self.returns]
        values += [sweep.value(self.names[p]) for p in self.written]
        # copies: the reverse sweep restores the primal buffers, and they go back to the pool
        return [v.copy() if isinstance(v, np.ndarray) else v for v in values], sweep

    def adjoint(self, operands, cotangents, sweep=None):
        """The floating operands' cotangents (numbers for floats, arrays of the operands'
        shapes) for ``cotangents`` of the flat outputs: the sweep ``vjp`` runs, but run
        once (as ``value_and_grad`` runs it), so nothing is copied for a second pullback
        (``vjp`` copies its outputs, the arguments its pullback reads and, per pullback,
        the written state). ``sweep``: the one :meth:`recorded` returned (its reverse runs
        once), else a new one at ``operands``. A cotangent None is zero (PyTorch's for an
        output no gradient reaches): nothing is seeded, the adjoint starts at zero."""
        sweep = sweep or self._sweep(operands)
        seeds = {n: c for n, c in zip(self.outputs, cotangents) if c is not None}
        back = sweep.reverse(seeds, wanted=self.floating_names)
        return [back[n] for n in self.floating_names]

    def _sweep(self, operands):
        """The differentiated call at ``operands`` after its forward sweep."""
        spec, binding, args = self.kernel.bound(self.arguments(operands))
        backward = self._backwards.get(spec)
        if backward is None:
            backward = self._backwards[spec] = spec.backward(
                spec.floating, set(spec.written_arrays) | set(self.returns))
        sweep = Sweep(spec, backward, args, budget=self.options.get("memory_budget"),
                      policy=self.options.get("policy"),
                      snapshots=self.options.get("snapshots"), binding=binding)
        spec.last_sweep = sweep                     # for explain()
        return sweep


def _array(value):
    return np.asarray(value, order="C")


def _copy(value):
    return np.array(value, order="C")


_CONVERT = {"int": int, "float": float}


def _dtype(value):
    return np.dtype(getattr(value, "dtype", np.float64 if isinstance(value, float) else np.int64))
