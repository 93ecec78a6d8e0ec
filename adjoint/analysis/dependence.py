"""Accesses and dependences: which elements a region's statements touch, and whether
two accesses can meet in different iterations. The one place passes ask (in the spirit
of Devito's ``Scope``): parallel loops and maps (``analysis.parallel``), CUDA kernels
(``analysis.device``), loop distribution (``analysis.blas``), map fusion, the
containers a kernel touches (``analysis.activity``), scatter -> gather
(``autodiff.gather``), the adjoints' first touches, checkpointing, codegen's simd
reductions and the frontend's overlap test.

Accesses (:func:`accesses`, :class:`Scope`): in program order, what each statement
reads (a tasklet's inputs, a push) and writes (a tasklet's outputs, ``sum`` where they
accumulate; a pop; a matrix product's whole containers), the integer-array elements
that indices, loop bounds, map ranges and integer conditions load, and the flags that
branch conditions and loop exits read. Each knows the variables of the loops and maps
around it inside the region (``inner``).

Index forms. An index is affine in some variables when each has an integer coefficient
(:func:`linear_form`; :func:`stride` when it uses one of them). An index *pins* a
variable v when it is ``a*v + g``, a a nonzero number and g free of the other
variables asked about (:func:`isolates`): equal elements then mean equal values of v.
Two accesses can name one element only in one iteration of loops over some variables
when every variable is pinned in a dimension where both indices are the same
(:func:`same_iteration`; :func:`injective`: an access and itself, one element per
point). :func:`distance` tells how far apart in the iteration space two affine
accesses meet; :func:`other_lattice` that two strided indices never do.

Loops. :func:`counted`: the loop runs every value of its range (no ``while``, no
``break``), so its trip count is known when it starts; :func:`countable`: ``sc_check``
can count its iterations from the sizes (at most a range's values, bounds loading no
integer array); :func:`trips_taped`: its trip count goes through the tape.
"""
import functools
import math
from dataclasses import dataclass
from typing import Optional

import sympy as sp

from ..sdfg.nodes import (ConditionalRegion, LibraryNode, LoopRegion, MapScope, Pop, Push, State,
                          Tasklet, as_reduction, condition_containers, index_loads, regions)

READ, WRITE, SUM = "read", "write", "sum"


@dataclass(frozen=True)
class Access:
    """One access: ``kind`` is READ, WRITE or SUM (an accumulation); ``subset`` None is
    the whole container (a library node's operands); ``node`` the statement making it
    (None for loop bounds and conditions)."""
    data: str
    subset: Optional[tuple]
    kind: str
    inner: frozenset = frozenset()
    node: object = None


def accesses(region, containers=None, reductions=False):
    """Every access of ``region`` in program order (a loop's bounds and exit test where
    it starts). ``containers``: the SDFG's, to tell the flags conditions read (without
    them only integer-array loads count there); ``reductions``: see node_accesses."""
    for r, context in regions(region):
        yield from own_accesses(r, context, containers, reductions)


def own_accesses(region, context, containers=None, reductions=False):
    """The accesses a region makes itself, not those of the regions inside it."""
    inner = frozenset(r.var for r in context if isinstance(r, LoopRegion))
    if isinstance(region, LoopRegion):
        out = _loads([x for x in (region.start, region.stop, region.step) if x is not None],
                     inner)
        if region.exit is not None:
            out += condition_accesses(region.exit, containers, inner | {region.var})
        return out
    if isinstance(region, ConditionalRegion):
        return [a for cond, _ in region.branches if cond is not None
                for a in condition_accesses(cond, containers, inner)]
    if isinstance(region, State):
        return [a for node in region.nodes for a in node_accesses(node, inner, reductions)]
    return []


def node_accesses(node, inner=frozenset(), reductions=False):
    """The accesses of a dataflow node in the order it makes them (a tasklet reads all
    its inputs, then writes its outputs); ``inner``: the variables around it.
    ``reductions``: a self-update (``s = s + x``, ``np.maximum(m, x)``, see
    nodes.as_reduction) is a reduction into its element without the read: SUM, or
    WRITE for a maximum or minimum."""
    inner = frozenset(inner)
    if isinstance(node, MapScope):
        out = _loads([x for r in node.ranges for x in r], inner)
        inside = inner | set(node.params)
        return out + [a for t in node.body for a in node_accesses(t, inside, reductions)]
    if isinstance(node, Tasklet):
        t = as_reduction(node) if reductions else node
        out = [a for _, m in t.inputs for a in _element(m, READ, inner, node)]
        out += _loads([e for _, e in t.outputs], inner, node)
        return out + [a for m, _ in t.outputs
                      for a in _element(m, SUM if m.wcr == "sum" else WRITE, inner, node)]
    if isinstance(node, Push):
        return _element(node.memlet, READ, inner, node)
    if isinstance(node, Pop):
        return _element(node.memlet, WRITE, inner, node)
    if isinstance(node, LibraryNode):     # whole containers, in the order it says
        return [Access(name, None, kind, inner, node) for name, kind in node.accesses()]
    raise TypeError(f"not a dataflow node: {node!r}")


def condition_accesses(condition, containers, inner=frozenset()):
    """The reads of a condition: the flags (scalar containers) and integer-array elements."""
    flags = sorted(condition_containers(condition, containers)) if containers is not None \
        else []
    return [Access(name, (), READ, frozenset(inner)) for name in flags] + \
        _loads([condition], inner)


def _element(memlet, kind, inner, node):
    """The loads of a memlet's subset, then the access of its element."""
    return _loads(memlet.subset, inner, node) + \
        [Access(memlet.data, tuple(memlet.subset), kind, inner, node)]


def _loads(exprs, inner, node=None):
    return [Access(name, args, READ, frozenset(inner), node)
            for e in exprs for name, args in _loaded(e)]


@functools.lru_cache(maxsize=1 << 16)
def _loaded(expr):
    """(integer array, subset) of each element ``expr`` loads, in a fixed order (indices
    repeat over the statements, and passes ask about them again and again)."""
    if isinstance(expr, (int, sp.Integer, sp.Symbol)):
        return ()
    return tuple(sorted(((name, tuple(f.args)) for name, f in index_loads(expr)), key=str))


class Scope:
    """The accesses of a region (see :func:`accesses`), by container."""

    def __init__(self, region, containers=None, reductions=False):
        self.accesses = list(accesses(region, containers, reductions))
        self.by_data = {}
        for a in self.accesses:
            self.by_data.setdefault(a.data, []).append(a)

    @property
    def written(self):
        """Containers written or summed into, in the order of their first write."""
        return list(dict.fromkeys(a.data for a in self.accesses if a.kind != READ))

    @property
    def read(self):
        return {a.data for a in self.accesses if a.kind == READ}

    @property
    def assigned(self):
        """Containers written other than by sums."""
        return {a.data for a in self.accesses if a.kind == WRITE}

    def kinds(self, name):
        return {a.kind for a in self.by_data.get(name, ())}

    def library(self):
        """Whether the region holds a library node (a matrix product, a factorisation)."""
        return any(isinstance(a.node, LibraryNode) for a in self.accesses)

    def meeting(self, name, variables):
        """Pairs (x, y) of accesses to ``name``, x a write or a sum, that may name one
        element in different iterations of the loops over ``variables``."""
        group = self.by_data.get(name, ())
        for x in group:
            if x.kind == READ:
                continue
            for y in group:
                if not same_iteration(x.subset, y.subset, variables, x.inner | y.inner):
                    yield x, y


# ---- index forms -----------------------------------------------------------------------
def linear_form(e, variables):
    """(integer coefficient of each variable, the rest) of ``e``, or None."""
    used = sp.sympify(e).free_symbols
    coefficients = tuple(sp.diff(e, v) if v in used else sp.Integer(0) for v in variables)
    if not all(c.is_Integer for c in coefficients):
        return None
    return coefficients, sp.expand(e - sum(c * v for c, v in zip(coefficients, variables)))


def stride(e, variables):
    """``(v, a, c)`` with ``e = a*v + c`` for the one variable v of ``variables`` that e
    uses, a a nonzero integer and c free of the variables; or None."""
    form = linear_form(e, variables)
    if form is None:
        return None
    used = [(v, a) for v, a in zip(variables, form[0]) if a]
    if len(used) != 1:
        return None
    (v, a), = used
    return v, int(a), form[1]


def other_lattice(x, y, variables):
    """Whether indices ``x = c + s*p`` and ``y = d + t*q`` (each with at most one of the
    ``variables``, integer strides) never meet: gcd(s, t) does not divide c - d."""
    fx, fy = linear_form(x, variables), linear_form(y, variables)
    if fx is None or fy is None or sum(map(bool, fx[0])) > 1 or sum(map(bool, fy[0])) > 1:
        return False
    g = math.gcd(*(abs(int(a)) for a in fx[0] + fy[0]))
    d = sp.expand(fx[1] - fy[1])
    return g > 1 and d.is_Integer and int(d) % g != 0


def isolates(e, v, others):
    """Whether ``e`` is ``a*v + g`` with a a nonzero number and g free of ``others``
    (and of integer-array loads): equal values mean equal ``v``."""
    return _isolates(e, v, frozenset(others))


@functools.lru_cache(maxsize=1 << 16)
def _isolates(e, v, others):
    e = sp.expand(e)
    a = sp.diff(e, v)
    if not a.is_number or a == 0 or index_loads(e):
        return False
    return not ((e - a * v).free_symbols & set(others))


def same_iteration(x, y, variables, inner=frozenset()):
    """Whether subsets ``x`` and ``y`` can name one element only in one iteration of the
    loops over ``variables``: each variable pinned (see isolates: beside none of the
    other variables or the ``inner`` ones) in a dimension where both are the same."""
    if x is None or y is None:
        return False                # a whole container meets every element
    variables = set(variables)
    return all(any(sp.expand(a - b) == 0 and isolates(a, v, (variables - {v}) | set(inner))
                   for a, b in zip(x, y)) for v in variables)


def injective(subset, params):
    """Each parameter alone, with a nonzero constant coefficient, in some dimension: a
    different element for every point."""
    return same_iteration(subset, subset, params)


NEVER, ANY = "never", "any"      # distance: no two points meet; cannot be told


def distance(x, y, n):
    """``u - w`` per variable (``n`` of them) where subset ``x`` at point u names the
    element subset ``y`` names at w (both as linear_forms); NEVER if no such points,
    ANY if they cannot be told (not affine alike, or some variable free)."""
    d = {}
    for fx, fy in zip(x, y):
        if fx is None or fy is None or fx[0] != fy[0]:
            return ANY
        apart = sp.expand(fy[1] - fx[1])
        if not apart.is_Integer:
            return ANY
        used = [(k, a) for k, a in enumerate(fx[0]) if a]
        if not used:
            if apart:
                return NEVER
            continue
        if len(used) > 1:
            return ANY
        (k, a), = used
        if apart % a or d.setdefault(k, apart // a) != apart // a:
            return NEVER
    if len(d) < n:
        return ANY
    return tuple(int(d[k]) for k in range(n))


def forward_only(var, body, names, upward):
    """Whether iterations of a loop over ``var`` running ``body`` (tasklets) meet at
    the elements of containers ``names`` only in lexically forward dependences: of two
    accesses (one a write) that name one element in different iterations, the earlier
    iteration's comes first in the body (a tasklet reads its inputs before it writes).
    Accesses must be affine in ``var`` alike (``a*var + c``, c apart by integers) or
    never meet; iterations meet at all only in a loop running ``upward``. SIMD chunks
    keep such dependences (codegen's simd reductions)."""
    by_name = {}
    for k, t in enumerate(body):
        found = [(2 * k, m, False) for _, m in t.inputs] + \
            [(2 * k + 1, m, True) for m, _ in t.outputs]
        for position, m, writes in found:
            if m.data in names:
                forms = tuple(linear_form(e, (var,)) for e in m.subset)
                by_name.setdefault(m.data, []).append((position, m.subset, forms, writes))
    for group in by_name.values():
        for x in group:
            for y in group:
                if x[0] < y[0] and (x[3] or y[3]):
                    apart = distance(x[2], y[2], 1)     # x's iteration minus y's
                    if apart is ANY or apart is not NEVER and (
                            apart[0] > 0 or apart[0] and not upward):
                        return False        # unknown, or y's iteration earlier: backward
                elif x[0] == y[0] and x[3] and y[3] and x[1] != y[1]:
                    return False
    return True


# ---- private scalars -------------------------------------------------------------------
def private_scalar(name, loop, body, containers):
    """Whether the scalar ``name`` is private to each iteration of ``loop`` (a loop of
    ``body``): a transient written before any read in every iteration, and read neither
    outside the loop nor by its exit test."""
    if not containers[name].transient or \
            _first_access(loop.body, name, containers) != "write":
        return False
    if loop.exit is not None and name in condition_containers(loop.exit, containers):
        return False
    return not any(a.data == name and a.kind == READ
                   for r, context in regions(body)
                   if r is not loop and not any(c is loop for c in context)
                   for a in own_accesses(r, context, containers))


def _first_access(region, name, containers):
    """'write' if the body's first access to the scalar is an unconditional write not
    reading it (a pop counts as one), or if every access lies in one inner loop each
    iteration of which writes it first (``s = ...`` inside a row loop); 'read'
    otherwise; None if never accessed."""
    for k, element in enumerate(region.elements):
        if isinstance(element, LoopRegion) and _mentions(element, name, containers):
            alone = not any(_mentions(e, name, containers) for e in region.elements[k + 1:])
            return "write" if alone and _first_access(element.body, name, containers) == \
                "write" else "read"
        if isinstance(element, State):
            for node in element.nodes:
                kinds = [a.kind for a in node_accesses(node) if a.data == name]
                if isinstance(node, (Tasklet, Pop)) and kinds:
                    return "read" if READ in kinds else "write"
                if kinds:
                    return "read"
        elif _mentions(element, name, containers):
            return "read"
    return None


def _mentions(region, name, containers):
    return any(a.data == name for a in accesses(region, containers))


# ---- loops -----------------------------------------------------------------------------
def counted(loop):
    """Whether ``loop`` runs every value of ``range(start, stop, step)``: no ``while``,
    no ``break``, so its trip count is known when it starts."""
    return loop.stop is not None and loop.exit is None


def countable(loop):
    """Whether ``sc_check`` can count the loop's iterations from the sizes: at most the
    values of a range (a ``break`` may end it early) whose bounds load no integer array."""
    return loop.stop is not None and not index_loads(loop.start) and \
        not index_loads(loop.stop)


def trips_taped(loop):
    """Whether the loop's trip count goes through the tape: pushed after a loop that may
    end early, popped before its reverse."""
    return loop.tape_trips or (loop.reverse and loop.exit is not None)
