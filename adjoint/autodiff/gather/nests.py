"""Finding the nests to rewrite: perfect rectangular nests of counted loops (and scatter
maps), the restores and flag readers that run first, strides made unit steps.

Strides. A loop of constant step s other than 1 or -1 runs over its iteration count
k (``i = start + |s|*k``), so its indices become ``a*k + c``, |a| a multiple of s: each
reaches a lattice of elements, ``c mod a``. Where every access to an array indexes a
dimension so, the array splits into *parts*, one per lattice, that never share an
element (red-black: the odd half-step reads ``u[i-1], u[i+1]`` and writes ``u[i]``, on
the other lattice). A target ``gA[a*k + c]`` with ``m`` the integer part of c is
gathered over ``u = sign(a)*k + m // |a|`` as ``gA[|a|*u + c - |a|*(m // |a|)]``: the
terms of one lattice differ by integer shifts of u and are cut as above; a reversed
index (a < 0) is gathered upwards in memory.
"""
from dataclasses import dataclass, replace

import sympy as sp

from ...analysis.dependence import countable, counted
from ...frontend.functions import floordiv
from ...sdfg.arithmetic import substitute
from ...sdfg.nodes import (SEGMENT, ConditionalRegion, LoopRegion, Memlet, Pop, Sequence,
                           State, Tasklet, divides, guarded_branches)


@dataclass(frozen=True)
class _Nest:
    """A rectangular nest, outermost first: variable k takes the values
    ``range(*ranges[k])``."""
    vars: tuple
    ranges: tuple
    tasklets: tuple

    @property
    def bounds(self):
        """``(lo, hi)`` per variable of a unit-stride nest: ``lo <= v < hi``."""
        return tuple((lo, hi) for lo, hi, _ in self.ranges)


def _loop_nest(loop):
    """(the perfect, rectangular nest of counted loops rooted at ``loop``, the nodes of
    its body that run first in a nest of their own), or (None, ()). Those are the
    restores, and the tasklets up to the last one reading a *flag*: a restored value
    of one element that every iteration pops before reading (a decision on data,
    recorded in the forward sweep). They run in the loops' own order, which is the
    tape's: legal when no tasklet before a restore touches the restored array, and
    when the distribution is (see _legal)."""
    variables, ranges, region = [], [], loop
    while True:
        r = _loop_range(region)
        if r is None:
            return None, ()
        variables.append(region.var)
        ranges.append(r)
        elements = region.body.elements
        if len(elements) != 1 or not isinstance(elements[0], LoopRegion):
            break
        region = elements[0]
    states = [e if isinstance(e, State) else _selects(e) for e in elements]
    if None in states or any(e.free_symbols & set(variables) for r in ranges for e in r):
        return None, ()
    nodes, tasks = [], []
    for node in (n for e in states for n in e.nodes):
        if isinstance(node, Tasklet):
            tasks.append(node)
        elif not isinstance(node, Pop) or any(
                node.memlet.data in {m.data for m in _memlets(t)} for t in tasks):
            return None, ()
        nodes.append(node)
    flags = _flags(nodes, variables)
    readers = [k for k, t in enumerate(tasks) if {m.data for _, m in t.inputs} & flags]
    first = tasks[:readers[-1] + 1] if readers else []
    leading = tuple(n for n in nodes if isinstance(n, Pop) or any(n is t for t in first))
    return _Nest(tuple(variables), tuple(ranges), tuple(tasks[len(first):])), leading


def _selects(region):
    """A decision on flags whose branches only hold tasklets, as a state of those
    tasklets, each write made a select: ``x = taken ? value : x`` (``+= taken ? value :
    0`` for a sum); else None. Both sides are computed, so no integer division (which
    can trap), and no branch may write a flag a later guard reads."""
    if not isinstance(region, ConditionalRegion):
        return None
    tasklets = []
    for guard, body in guarded_branches(region):
        taken = guard.condition
        if any(s.is_integer for s in taken.free_symbols):
            return None             # a condition on indices: not a decision on data
        flags = {s.name: s for s in taken.free_symbols}
        states = body.elements if isinstance(body, Sequence) else (body,)
        nodes = [n for e in states if isinstance(e, State) for n in e.nodes]
        if not all(isinstance(e, State) for e in states) or not all(
                isinstance(n, Tasklet) and not divides(n) for n in nodes):
            return None
        for t in nodes:
            if {m.data for m, _ in t.outputs} & flags.keys():
                return None
            tasklets.append(_select(t, taken, flags))
    return State(tuple(tasklets))


def _select(t, taken, flags):
    """Tasklet ``t`` writing only where ``taken`` holds (see _selects)."""
    inputs, outputs = list(t.inputs), []
    reads = {m: c for c, m in inputs}
    for name, symbol in sorted(flags.items()):     # connectors named apart from the flags
        conn = sp.Symbol(f"__flag{len(inputs)}", real=True)
        inputs.append((conn, Memlet(name, ())))
        taken = taken.xreplace({symbol: conn})
    for m, e in t.outputs:
        if m.wcr:
            outputs.append((m, sp.Piecewise((e, taken), (0, True))))
            continue
        old = reads.get(replace(m, wcr=None))
        if old is None:
            old = reads[m] = sp.Symbol(f"__old{len(inputs)}", real=True)
            inputs.append((old, m))
        outputs.append((m, sp.Piecewise((e, taken), (old, True))))
    return Tasklet(tuple(inputs), tuple(outputs), t.line)


def _flags(nodes, variables):
    """Arrays that the nest's restores write at one element, which no tasklet writes
    and every access reaches without the loop variables."""
    popped = {n.memlet.data for n in nodes if isinstance(n, Pop)}
    subsets = {}
    for n in nodes:
        if isinstance(n, Tasklet):
            popped -= {m.data for m, _ in n.outputs}
        for m in _memlets(n):
            subsets.setdefault(m.data, set()).add(m.subset)
    return {name for name in popped if len(subsets[name]) == 1 and not any(
        e.free_symbols & set(variables) for e in next(iter(subsets[name])))}


def _with_body(loop, state):
    """The nest rooted at ``loop`` with ``state`` as its innermost body."""
    inner = loop.body.elements
    if len(inner) == 1 and isinstance(inner[0], LoopRegion):
        return replace(loop, body=Sequence((_with_body(inner[0], state),)))
    return replace(loop, body=Sequence((state,)))


def _forwards(loop):
    """The perfect nest rooted at ``loop`` with every loop running forwards."""
    inner = loop.body.elements
    if len(inner) == 1 and isinstance(inner[0], LoopRegion):
        return replace(loop, reverse=False, body=Sequence((_forwards(inner[0]),)))
    return replace(loop, reverse=False)


def _loop_range(loop):
    """``(start, stop, step)``: the loop's values are ``range(start, stop, step)``, or None."""
    if not (counted(loop) and countable(loop)) or not loop.step.is_Integer:
        return None
    if loop.segment:                    # a checkpointing segment: iterations [__k0, __k1)
        k0, k1 = SEGMENT
        return loop.start + loop.step * k0, loop.start + loop.step * k1, loop.step
    return loop.start, loop.stop, loop.step


def _unit_stride(nest, leading):
    """``nest`` and its leading nodes over unit-stride variables running upwards in memory
    (reversed vector accesses need permutes): a variable of step -1 covers its values
    upwards; one of another step s becomes ``start + |s|*k`` for its iteration count k
    in ``[0, n)``, or ``(-n, 0]`` when s < 0 (n iterations)."""
    variables, ranges, at = [], [], {}
    for v, (start, stop, step) in zip(nest.vars, nest.ranges):
        if step == 1:
            variables.append(v)
            ranges.append((start, stop, step))
        elif step == -1:
            variables.append(v)
            ranges.append((stop + 1, start + 1, sp.Integer(1)))
        else:
            k = sp.Symbol(f"__k_{v.name}", integer=True)
            variables.append(k)
            if step > 0:
                ranges.append((sp.Integer(0), floordiv(stop - start + step - 1, step),
                               sp.Integer(1)))
            else:
                ranges.append((1 - floordiv(start - stop - step - 1, -step), sp.Integer(1),
                               sp.Integer(1)))
            at[v] = start + abs(step) * k
    tasklets = tuple(_substituted(t, at) for t in nest.tasklets) if at else nest.tasklets
    leading = tuple(replace(n, memlet=_at(n.memlet, at)) if isinstance(n, Pop)
                    else _substituted(n, at) for n in leading) if at else leading
    return _Nest(tuple(variables), tuple(ranges), tasklets), leading


def _substituted(t, at):
    return Tasklet(tuple((c, _at(m, at)) for c, m in t.inputs),
                   tuple((_at(m, at), substitute(e, at)) for m, e in t.outputs), t.line)


def _at(memlet, at):
    return replace(memlet, subset=tuple(sp.expand(e.xreplace(at)) for e in memlet.subset))


def _memlets(node):
    if isinstance(node, Pop):
        return [node.memlet]
    return [m for _, m in node.inputs] + [m for m, _ in node.outputs]


def _accesses(nest, leading):
    return [m for n in leading + nest.tasklets for m in _memlets(n)]
