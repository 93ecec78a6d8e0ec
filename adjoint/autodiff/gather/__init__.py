"""Scatter -> gather: reverse sweeps of stencils rewritten so each iteration owns its output.

The adjoint of ``B[i] = c*(A[i-1] + A[i] + A[i+1])`` scatters: iteration ``i`` adds to
``gA[i-1]``, ``gA[i]`` and ``gA[i+1]``, so neighbouring iterations update the same
element and the loop can neither vectorise nor run on threads without atomics.
Substituting ``u = i + o`` in the term with offset ``o`` turns it into a gather,
``gA[u] += c*gB[u - o]``, where every iteration writes one element of its own.

The rewrite, by concern (each module's docstring has the detail):
``nests`` finds the perfect nests of counted loops (and scatter maps) and makes their
strides unit steps; ``legality`` says when the body may be distributed (every part of an
array local, read only or only summed into); ``distribution`` splits the body into terms
and groups them into one nest per scattered target; ``bands`` fuses the distributed
nests again on the CPU; ``emit`` cuts each band's rows into pieces and edges and builds
the loops. This module walks the reverse sweep and puts the pieces together.
"""
import sympy as sp

from ...sdfg.nodes import (ConditionalRegion, LoopRegion, MapScope, Sequence, State, Tasklet,
                           index_loads)
from ...sdfg.visit import Transformer
from .bands import _alone, _bands, _unless_threads
from .distribution import _folded, _groups, _terms
from .emit import _emit
from .legality import _legal, _parts
from .nests import _Nest, _accesses, _forwards, _loop_nest, _unit_stride, _with_body


MAX_LOOPS = 256      # innermost loops one nest may become; beyond, it stays a scatter


def gather(region, device):
    """``region`` with every scatter nest of constant offsets rewritten into gathers, for
    ``device`` ("cpu": bands and edge rows; "cuda": every group a grid of points)."""
    return _Gather(device == "cpu").region(region)


class _Gather(Transformer):
    def __init__(self, cpu):
        super().__init__()
        self.cpu = cpu

    def loop(self, loop):
        nest, leading = _loop_nest(loop)
        rewritten = _rewrite(nest, leading, loop.line, self.cpu) if nest is not None else None
        if rewritten is None and nest is not None and not leading and \
                _legal(*_unit_stride(nest, ())):
            return _forwards(loop)      # independent iterations: unit stride, no permutes
        if rewritten is None:
            return super().loop(loop)
        restores = (_with_body(loop, State(leading)),) if leading else ()
        scatter = _with_body(loop, State(nest.tasklets))
        return Sequence(restores + (_guarded(*rewritten, scatter, loop.line),))

    def state(self, state):
        return _state(state, self.cpu)


def _state(state, cpu):
    """A state whose scatter maps become gathered loop nests (the state is split there)."""
    parts, run = [], []
    for node in state.nodes:
        rewritten = _map(node, cpu)
        if rewritten is None:
            run.append(node)
            continue
        if run:
            parts.append(State(tuple(run), state.label))
            run = []
        parts.append(_guarded(*rewritten, State((node,), state.label), node.line))
    if not parts:
        return state
    if run:
        parts.append(State(tuple(run), state.label))
    return Sequence(tuple(parts))


def _guarded(condition, loops, scatter, line):
    gathered = Sequence(tuple(loops))
    if condition == sp.true:
        return gathered
    return ConditionalRegion(((condition, gathered), (None, Sequence((scatter,)))), line)


def _map(node, cpu):
    """(condition, loop nests) replacing a scatter map, or None."""
    if not isinstance(node, MapScope) or not all(isinstance(t, Tasklet) for t in node.body):
        return None
    if not all(s.is_Integer for _, _, s in node.ranges):
        return None
    return _rewrite(_Nest(node.params, node.ranges, node.body), (), node.line, cpu)


def _rewrite(nest, leading, line, cpu):
    """(condition under which the gathered nests are exact, the loop nests replacing
    ``nest`` after its ``leading`` nodes), or None when it has no scatter or the
    rewrite does not apply."""
    nest, leading = _unit_stride(nest, leading)
    memlets = _accesses(nest, leading)
    if any(index_loads(e) for m in memlets for e in m.subset) or not _legal(nest, leading):
        return None
    part, terms = _parts(memlets, nest.vars), []
    for t in nest.tasklets:
        split = _terms(t, nest.vars, part)
        if split is None:
            return None
        terms += split
    groups = _folded(_groups(terms, nest.vars))
    if all(g.key is None for g in groups):
        return None
    if len(nest.vars) == 1 and any(len(m.subset) > 1 for m in memlets):
        bands = [_alone(group, nest.vars) for group in groups]    # a row of bigger arrays
    else:
        bands = _bands(groups, nest.vars, cpu)
    loops = [n for band in bands for n in _emit(band, nest, line, cpu)]
    if len(bands) < len(groups) and len(nest.vars) == 1:
        loops = [_unless_threads(groups, nest, loops, line)]
    if sum(_innermost(n) for n in loops) > MAX_LOOPS:
        return None
    condition = sp.And(*(sp.Ge(hi - lo, max(offsets) - min(offsets))
                         for band in bands if band.gathered
                         for (lo, hi), offsets in zip(nest.bounds,
                                                      zip(*(t.shift for t in band.terms())))
                         if max(offsets) > min(offsets)))
    return condition, loops


def _innermost(region):
    """Number of innermost loops in a nest."""
    if isinstance(region, Sequence):
        return sum(_innermost(e) for e in region.elements)
    if isinstance(region, LoopRegion):
        return max(_innermost(region.body), 1)
    return 0
