"""IR nodes: containers, memlets, dataflow nodes, control-flow regions.

All nodes are frozen dataclasses; passes build new graphs instead of mutating.
Index expressions and tasklet bodies are sympy expressions.

Identity and equality: what occurs in a program -- the statements (``Tasklet``,
``MapScope``, library nodes, ``Push``, ``Pop``), the regions (``State``, ``Sequence``,
``LoopRegion``, ``ConditionalRegion``) and the ``SDFG`` -- compares by identity
(``eq=False``): a statement written twice is two statements even when its text, line
and operands are equal, so passes key sets and dicts on the nodes themselves. A node
object occurs at most once in an SDFG; a pass that changes one builds a new one.
What describes -- ``Container``, ``Argument``, ``Memlet``, ``Guard`` -- compares by value.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional, Union

import numpy as np
import sympy as sp
from sympy.core.function import AppliedUndef

from .arithmetic import np_maximum, np_minimum, substitute


@dataclass(frozen=True)
class Container:
    """A named piece of memory: an array, or a scalar when ``shape == ()``. ``complex``:
    the kernel's complex array (``frontend/complexes.py``), its last axis of two the
    real and imaginary parts, of ``dtype``, as NumPy lays it out. ``values``: ``(lo, hi)``
    for an integer array the engine writes and indexes with (``np.histogram``'s bins), each
    write of which keeps to that range; indices loading it are bounded by it (an
    argument's range is checked on entry instead)."""
    name: str
    dtype: np.dtype
    shape: tuple = ()
    transient: bool = False
    complex: bool = False
    values: tuple = None

    @property
    def is_scalar(self):
        return self.shape == ()

    def strides(self):
        """Element strides of the C-contiguous layout, as sympy expressions."""
        out, acc = [], sp.Integer(1)
        for size in reversed(self.shape):
            out.append(acc)
            acc = acc * size
        return tuple(reversed(out))

    def volume(self):
        """Number of elements; a negative size (``N - 2`` at ``N = 1``) counts as 0."""
        return sp.Mul(*(sp.Max(0, n) for n in self.shape)) if self.shape else sp.Integer(1)


@dataclass(frozen=True)
class Argument:
    """A parameter of the kernel in call order: ``kind`` is 'array', 'float' or 'int'."""
    name: str
    kind: str
    dtype: np.dtype
    shape: tuple = ()


@dataclass(frozen=True)
class Memlet:
    """Movement of exactly one element ``data[subset]``; ``wcr='sum'`` accumulates."""
    data: str
    subset: tuple = ()
    wcr: Optional[str] = None

    def __str__(self):
        idx = ", ".join(str(i) for i in self.subset)
        op = " (+=)" if self.wcr else ""
        return f"{self.data}[{idx}]{op}" if self.subset else f"{self.data}{op}"


@dataclass(frozen=True, eq=False)
class Tasklet:
    """Reads every input into its connector, then writes each output in order.

    ``inputs``: (connector symbol, memlet) pairs; ``outputs``: (memlet, sympy
    expression over the connectors and integer symbols) pairs.
    """
    inputs: tuple
    outputs: tuple
    line: int = 0

    def connector_memlets(self):
        return {conn: m for conn, m in self.inputs}


@dataclass(frozen=True, eq=False)
class MapScope:
    """A parallel scope: ``body`` runs once for every point of the ranges."""
    params: tuple
    ranges: tuple          # (start, stop, step) per parameter
    body: tuple            # tasklets
    line: int = 0
    parallel: bool = False  # run with threads (analysis.parallel)
    schedule: object = None  # how it runs: a schedule.MapSchedule (the scheduling pass)
    private: tuple = ()     # scalars each point keeps its own copy of, from zero: the
                            # temporaries contracted into the body (analysis.contraction)


class LibraryNode:
    """A statement on whole containers that carries its own rules (``adjoint/library/``,
    one file per kind): subclasses are frozen dataclasses (``eq=False``) with a ``line``
    field, and every pass asks them through these methods instead of knowing the kind.

    ``accesses()``: (container, "read" | "write" | "sum") in the order the node makes them,
    each access covering the whole container (``analysis/dependence.py``);
    ``operands()``: (container, (rows, cols)) the node sees as row-major float64 matrices,
    checked by ``sdfg/validate.py`` together with ``invalid()``; ``text()``: its line in the
    text form; ``work()``: factors of its operation count (the plan's cost);
    ``reverse_reads(active)``: the containers whose forward values its adjoint reads;
    ``vjp(d)``/``jvp(d)``: its reverse and tangent rules as nodes (``library.base.Rules``);
    ``assigning(name)``: the node assigning what it sums into (optional);
    ``prototypes(library)``/``emit(gen)``: the C declarations it needs from the linked
    BLAS/LAPACK and its C (a library call, or loops when ``gen.library`` is None);
    ``device_kernel``: whether CUDA runs it as kernels of its own (``emit_cuda(host)``)
    rather than in the single thread of the statements around it (its loops)."""
    kind = "library node"
    device_kernel = False

    def accesses(self):
        raise NotImplementedError(self.kind)

    def reads(self):
        """Containers whose values the node reads (a sum reads its target)."""
        return tuple(dict.fromkeys(n for n, k in self.accesses() if k != "write"))

    def writes(self):
        """Containers the node writes or sums into."""
        return tuple(dict.fromkeys(n for n, k in self.accesses() if k != "read"))

    def overwrites(self):
        """Containers the node assigns (not sums into): their adjoint is zero before it."""
        return tuple(dict.fromkeys(n for n, k in self.accesses() if k == "write"))

    def operands(self):
        raise NotImplementedError(self.kind)

    def invalid(self, containers):
        """What is wrong with the node beyond its operands' shapes (a message), or None."""
        return None

    def text(self):
        raise NotImplementedError(self.kind)

    def work(self):
        raise NotImplementedError(self.kind)

    def reverse_reads(self, active):
        raise NotImplementedError(f"{self.kind} at line {self.line}: no reverse rule")

    def vjp(self, d):
        raise NotImplementedError(f"{self.kind} at line {self.line}: no reverse rule")

    def assigning(self, name):
        """The node assigning the container ``name`` it sums into, whole (nothing was added
        to it before: ``autodiff/first_touch.py``), or None where the kind cannot."""
        return None

    def jvp(self, d):
        raise NotImplementedError(f"{self.kind} at line {self.line}: no tangent rule")

    def prototypes(self, library):
        return ()

    def emit(self, gen):
        raise NotImplementedError(f"{self.kind} at line {self.line}: no C emission")

    def emit_cuda(self, host):
        raise NotImplementedError(f"{self.kind} at line {self.line}: no CUDA kernel")


@dataclass(frozen=True, eq=False)
class Push:
    """Save ``memlet``'s element on the tape (before it is overwritten)."""
    memlet: Memlet
    line: int = 0


@dataclass(frozen=True, eq=False)
class Pop:
    """Restore ``memlet``'s element from the tape (reverse sweep)."""
    memlet: Memlet
    line: int = 0


DataflowNode = Union[Tasklet, MapScope, LibraryNode, Push, Pop]


@dataclass(frozen=True, eq=False)
class State:
    """A dataflow graph; its nodes run in order (a chain of tasklets and maps)."""
    nodes: tuple
    label: str = ""


@dataclass(frozen=True, eq=False)
class Sequence:
    """Control-flow regions executed one after another."""
    elements: tuple = ()


@dataclass(frozen=True, eq=False)
class LoopRegion:
    """``for var in range(start, stop, step)``; ``reverse`` visits the same values backwards.

    ``exit`` (a condition on flags) ends the loop early after an iteration (``break``,
    ``while``); ``stop=None`` makes it unbounded. Such loops have a data-dependent trip
    count: with ``tape_trips`` the forward pushes it after the loop, and a reversed
    loop with an ``exit`` pops it back instead of computing it."""
    var: sp.Symbol
    start: sp.Expr
    stop: Optional[sp.Expr]
    step: sp.Expr
    body: Sequence
    line: int = 0
    reverse: bool = False
    exit: Optional[sp.Basic] = None
    tape_trips: bool = False
    segment: bool = False   # run only iterations [__k0, __k1) of the range (checkpointing)
    parallel: bool = False  # iterations run with threads (analysis.parallel)
    private: tuple = ()     # scalar containers each thread keeps its own copy of
    sums: tuple = ()        # containers only added into: each thread adds into its own
                            # zeroed copy, added to the container in thread order after
    zeroed: tuple = ()      # scalars zero whenever an iteration starts and ends (adjoints
                            # of per-iteration records): private, each copy from zero
    schedule: object = None  # how it runs: a schedule.LoopSchedule (the scheduling pass)


LOAD = "__load_"


def index_load(container_name, subset):
    """An element of an integer array used inside an index (``A[idx[i]]``): an integer
    sympy function named after the container, applied to the element's subset."""
    return sp.Function(LOAD + container_name, integer=True)(*subset)


def index_loads(expr):
    """(container name, load) for every integer-array element ``expr`` reads."""
    return [(f.func.__name__[len(LOAD):], f) for f in sp.sympify(expr).atoms(AppliedUndef)
            if f.func.__name__.startswith(LOAD)]


def readable(text):
    """Engine names in messages as the user wrote them: ``idx[i]`` for index loads."""
    return re.sub(LOAD + r"(\w+)\(([^()]*)\)", r"\1[\2]", str(text))


def value_range(container_name):
    """Symbols holding the smallest and largest value of an integer array for a call."""
    return (sp.Symbol(f"__min_{container_name}", integer=True),
            sp.Symbol(f"__max_{container_name}", integer=True))


def flag_symbol(container_name):
    """The value of a scalar container inside a condition (a decision made on data)."""
    return sp.Symbol(container_name, real=True)


def condition_containers(condition, containers):
    """Names of the scalar containers a branch condition reads."""
    return {s.name for s in condition.free_symbols if s.name in containers}


@dataclass(frozen=True, eq=False)
class ConditionalRegion:
    """``if``/``elif``/``else``: (condition, body) pairs; condition None is ``else``.

    Conditions are over integer symbols and, for decisions on data, flag symbols
    naming scalar containers that a tasklet filled just before the region."""
    branches: tuple
    line: int = 0
    schedule: object = None  # how it runs: a schedule.BranchSchedule (the scheduling pass)


Region = Union[State, Sequence, LoopRegion, ConditionalRegion]


@dataclass(frozen=True, eq=False)
class SDFG:
    """A whole kernel: arguments, containers, integer symbols and a control-flow tree."""
    name: str
    arguments: tuple
    containers: dict
    symbols: tuple          # integer symbols the C entry points take by value
    body: Sequence
    result: Optional[str] = None
    filename: str = "<kernel>"
    assumptions: tuple = ()  # (condition on symbols, line, message): checked before each call
    returns: tuple = ()      # containers of the returned values: ("__return",) for one
    #                          value, ("__return0", "__return1", ...) for a tuple
    decisions: tuple = ()    # conditions on symbols the call's values decided while lowering
    #                          (an extent that is 1 broadcasts): what this SDFG holds for
    lists: frozenset = frozenset()  # returned containers holding a list grown by append
    #                          (frontend/lists.py): the kernel returns them as lists

    def container(self, name) -> Container:
        return self.containers[name]

    def replace(self, **changes) -> "SDFG":
        from dataclasses import replace
        return replace(self, **changes)


# Iteration bounds of a segment loop, the last two integer arguments of every entry point.
SEGMENT = (sp.Symbol("__k0", integer=True), sp.Symbol("__k1", integer=True))
# The threads a parallel loop would get (C: omp_get_max_threads(), 1 without OpenMP); in
# conditions of CPU code only, choosing between code for one thread and for several.
THREADS = sp.Symbol("__threads", integer=True, positive=True)


class trips(sp.Function):
    """The number of values of ``range(start, stop, step)`` (C: ``sc_trip``)."""
    is_integer = True

    @classmethod
    def eval(cls, start, stop, step):
        if all(x.is_Integer for x in (start, stop, step)) and step != 0:
            return sp.Integer(len(range(int(start), int(stop), int(step))))


@dataclass(frozen=True)
class Guard:
    """A condition enclosing a node (one branch of a ConditionalRegion) in a walk's context."""
    condition: sp.Basic


def elements(body):
    """The elements of a Sequence, empty states left out."""
    return [e for e in body.elements if not (isinstance(e, State) and not e.nodes)]


def loops(region):
    """Every LoopRegion of ``region``, outer ones first, in program order."""
    if isinstance(region, LoopRegion):
        yield region
        yield from loops(region.body)
    elif isinstance(region, Sequence):
        for element in region.elements:
            yield from loops(element)
    elif isinstance(region, ConditionalRegion):
        for _, branch in region.branches:
            yield from loops(branch)


def walk(region):
    """Yield (node, context) for every dataflow node in program order; the context
    is the tuple of enclosing LoopRegions and Guards, outermost first."""
    for r, context in regions(region):
        if isinstance(r, State):
            for node in r.nodes:
                yield node, context


def regions(region):
    """Yield (region, context) for ``region`` and every region inside it, in program
    order, each with the context ``walk`` gives its nodes."""
    yield from _regions(region, ())


def _regions(region, context):
    yield region, context
    if isinstance(region, Sequence):
        for element in region.elements:
            yield from _regions(element, context)
    elif isinstance(region, LoopRegion):
        yield from _regions(region.body, context + (region,))
    elif isinstance(region, ConditionalRegion):
        for guard, body in guarded_branches(region):
            yield from _regions(body, context + (guard,))
    elif not isinstance(region, State):
        raise TypeError(f"not a region: {region!r}")


def guarded_branches(region: ConditionalRegion):
    """(Guard, body) per branch: a branch runs when its condition holds and no earlier one did."""
    taken = []
    for cond, body in region.branches:
        yield Guard(sp.And(*[sp.Not(c) for c in taken], sp.true if cond is None else cond)), body
        taken.append(cond)


def divides(t):
    """Whether a tasklet computes an integer quotient or remainder (which can trap): the
    frontend's ``floordiv`` and ``python_mod``, known here by name as to the printer."""
    memlets = [m for _, m in t.inputs] + [m for m, _ in t.outputs]
    exprs = [e for _, e in t.outputs] + [i for m in memlets for i in m.subset]
    return any(type(f).__name__ in ("floordiv", "python_mod")
               for e in exprs for f in sp.sympify(e).atoms(sp.Function))


def self_update(t):
    """``(operation, connector reading x, f)`` for a tasklet ``x = x + f`` (or ``f + x``,
    ``x - f``), ``np.maximum(x, f)`` or ``np.minimum(x, f)`` whose only output is ``x``, read
    by that connector alone and not in ``f``; else None. Reductions and running maxima
    have this form. The value's own top node must be that operation: ``x = x + a + b``
    is ``(x + a) + b``, which a sum of ``a + b`` would round differently."""
    if len(t.outputs) != 1 or t.outputs[0][0].wcr:
        return None
    (m, expr), = t.outputs
    own = [c for c, i in t.inputs if i == m]
    if len(own) != 1 or any(i.data == m.data and i != m for _, i in t.inputs):
        return None
    kinds = {sp.Add: "sum", np_maximum: "max", np_minimum: "min"}
    if type(expr) not in kinds or len(expr.args) != 2 or own[0] not in expr.args:
        return None
    rest = expr.args[1 - expr.args.index(own[0])]
    return None if own[0] in rest.free_symbols else (kinds[type(expr)], own[0], rest)


def as_reduction(t):
    """``t`` as an update of its output whose memlet's ``wcr`` names the operation (see
    self_update), or ``t`` itself."""
    update = self_update(t)
    if update is None:
        return t
    op, own, rest = update
    (m, _), = t.outputs
    inputs = tuple((c, i) for c, i in t.inputs if c != own)
    return Tasklet(inputs, ((Memlet(m.data, m.subset, op), rest),), t.line)


def renamed(t, rename):
    """The tasklet ``t`` with the index symbols ``rename`` maps replaced."""
    def memlet(m):
        return replace(m, subset=tuple(e.xreplace(rename) for e in m.subset))
    return Tasklet(tuple((c, memlet(m)) for c, m in t.inputs),
                   tuple((memlet(m), substitute(e, rename)) for m, e in t.outputs), t.line)


def every_element(container, make, line=0):
    """A map over all elements of ``container`` running ``make(memlet)``'s nodes (or the
    nodes alone for a scalar)."""
    if not container.shape:
        return make(Memlet(container.name))
    params = tuple(sp.Symbol(f"__e{k}", integer=True) for k in range(len(container.shape)))
    ranges = tuple((sp.Integer(0), n, sp.Integer(1)) for n in container.shape)
    return (MapScope(params, ranges, tuple(make(Memlet(container.name, params))), line),)


def library_nodes(region):
    """Yield every library node of a region in program order."""
    for node, _ in walk(region):
        if isinstance(node, LibraryNode):
            yield node


def tasklets(region):
    """Yield (tasklet, context, enclosing map or None) in program order."""
    for node, context in walk(region):
        if isinstance(node, Tasklet):
            yield node, context, None
        elif isinstance(node, MapScope):
            for t in node.body:         # a recording forward also has pushes in maps
                if isinstance(t, Tasklet):
                    yield t, context, node
