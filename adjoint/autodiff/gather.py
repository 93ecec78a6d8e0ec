"""Scatter -> gather: reverse sweeps of stencils rewritten so each iteration owns its output.

The adjoint of ``B[i] = c*(A[i-1] + A[i] + A[i+1])`` scatters: iteration ``i`` adds to
``gA[i-1]``, ``gA[i]`` and ``gA[i+1]``, so neighbouring iterations update the same
element and the loop can neither vectorise nor run on threads without atomics.
Substituting ``u = i + o`` in the term with offset ``o`` turns it into a gather,
``gA[u] += c*gB[u - o]``, where every iteration writes one element of its own.

The terms' ranges differ by their offsets. Over the *core* of the outer dimensions,
where every term's range covers them, each row is cut at every ``lo + o`` and
``hi + o`` of the innermost dimension and runs its pieces one after another (short
edge pieces, then the long middle that vectorises), each with the terms that apply
there: every element is visited once and rows stay contiguous. Around that core, on
the thin edges of each outer dimension, each row tests which terms apply to it and
runs each of those over its stretch of the row (on the GPU every element tests each
term: a thread per element). Every element read is one
the scatter read. The cuts are in this order when every range is at least as long as
the spread of the offsets; a nest shorter than that (checked once, before it runs)
keeps the original scatter.

Strides. A loop of constant step s other than 1 or -1 runs over its iteration count
k (``i = start + |s|*k``), so its indices become ``a*k + c``, |a| a multiple of s: each
reaches a lattice of elements, ``c mod a``. Where every access to an array indexes a
dimension so, the array splits into *parts*, one per lattice, that never share an
element (red-black: the odd half-step reads ``u[i-1], u[i+1]`` and writes ``u[i]``, on
the other lattice). A target ``gA[a*k + c]`` with ``m`` the integer part of c is
gathered over ``u = sign(a)*k + m // |a|`` as ``gA[|a|*u + c - |a|*(m // |a|)]``: the
terms of one lattice differ by integer shifts of u and are cut as above; a reversed
index (a < 0) is gathered upwards in memory.

The nest's body is distributed into one loop nest per scattered target, in statement
order. A target is scattered when its terms' shifts differ, or when it is a second
index into a part that other iterations reach (``g[i]`` and ``g[k-1-i]``). This is
legal when every part of an array the nest touches is
* local: always accessed at the same element, a different one per iteration;
* read only; or
* only accumulated into (never read or assigned in the nest),
so the only dependences between iterations are additions, which commute (the
gathered sums round differently from the scatter, within reassociation error).
Restores from the tape run first, in the loops' own order. A reversed nest of such
iterations without offsets runs forwards (reversed vector loads need permutes). After
the gather of an in-place lattice update, the terms that zero the lattice it read run
in its nest, each element after the sums that read it: one pass instead of two.

On the CPU the distributed nests then fuse again into *bands* (see _bands): each runs
in the band's nest shifted along the innermost dimension far enough that it touches
every element after the earlier nests did, so a reverse step passes over its arrays
once, not once per target. Outer dimensions never shift, so rows stay independent and
outer loops parallel; a 1-D band has only its one loop, so it runs on one thread, and
where threads would run the distributed nests run instead.
"""
from dataclasses import dataclass, field, replace

import sympy as sp

from ..analysis.dependence import (ANY, NEVER, countable, counted, distance, injective,
                                   linear_form, same_iteration, stride)
from ..analysis.parallel import PARALLEL_WORK
from ..frontend.functions import floordiv
from ..sdfg.arithmetic import substitute
from ..sdfg.nodes import (SEGMENT, THREADS, ConditionalRegion, LoopRegion, MapScope, Memlet,
                          Pop, Sequence, State, Tasklet, divides, guarded_branches,
                          index_loads)
from ..sdfg.visit import Transformer


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


@dataclass(frozen=True)
class _Term:
    """One output of a tasklet with the inputs its expression reads, and the parts of
    arrays (see _parts) it writes and reads. A target index ``a*v + c`` (c's integer
    part m) is ``|a|*(sign*v + shift) + c - |a|*shift`` with ``shift = m // |a|``:
    ``sign[k]`` and ``shift[k]`` per variable k (None: not an affine target)."""
    out: Memlet
    expr: sp.Expr
    inputs: tuple
    line: int
    target: tuple
    sources: frozenset
    shift: tuple = None
    sign: tuple = None


@dataclass
class _Group:
    """Terms sharing one loop nest: ``key`` names the gathered target, None runs the
    terms over the nest's own range at their own elements. ``lagged`` terms run at
    their own elements in a gathered nest, after its sums (see _lag)."""
    key: tuple
    terms: list = field(default_factory=list)
    lagged: list = field(default_factory=list)

    def everything(self):
        return self.terms + self.lagged

    def writes(self):
        return {t.target for t in self.everything()}

    def reads(self):
        return set().union(*(t.sources for t in self.everything()))


# ---- finding nests ---------------------------------------------------------------------
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


def _map(node, cpu):
    """(condition, loop nests) replacing a scatter map, or None."""
    if not isinstance(node, MapScope) or not all(isinstance(t, Tasklet) for t in node.body):
        return None
    if not all(s.is_Integer for _, _, s in node.ranges):
        return None
    return _rewrite(_Nest(node.params, node.ranges, node.body), (), node.line, cpu)


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


# ---- the rewrite -----------------------------------------------------------------------
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


def _memlets(node):
    if isinstance(node, Pop):
        return [node.memlet]
    return [m for _, m in node.inputs] + [m for m, _ in node.outputs]


def _accesses(nest, leading):
    return [m for n in leading + nest.tasklets for m in _memlets(n)]


def _legal(nest, leading):
    """Every part of an array (see _parts) is local, read only, only accumulated into,
    or a flag (see _loop_nest) that only the leading tasklets read: the nests the body
    is distributed into may then run one after another."""
    part = _parts(_accesses(nest, leading), nest.vars)
    subsets, reads, assigned, summed = {}, set(), set(), set()
    popped = {part[n.memlet] for n in leading if isinstance(n, Pop)}
    for t in (n for n in leading + nest.tasklets if isinstance(n, Tasklet)):
        reads.update(part[m] for _, m in t.inputs)
        for m, _ in t.outputs:
            (summed if m.wcr else assigned).add(part[m])
    for m in _accesses(nest, leading):
        subsets.setdefault(part[m], set()).add(m.subset)
    late_reads = {part[m] for t in nest.tasklets for _, m in t.inputs}
    flags = {key for key in popped - assigned - summed - late_reads
             if not any(e.free_symbols & set(nest.vars) for s in subsets[key] for e in s)}
    assigned |= popped
    for key, s in subsets.items():
        local = len(s) == 1 and bool(nest.vars) and injective(next(iter(s)), nest.vars)
        read_only = key not in assigned | summed
        sum_only = key not in reads | assigned
        if not (local or read_only or sum_only or key in flags):
            return False
    return True


def _parts(memlets, variables):
    """Each memlet's part of its array: the array itself, split by residues where the
    loop variables move in steps. In a dimension that every access to the array indexes
    as ``a*v + c``, with one variable v and one |a| > 1, and constants c apart by
    integers, the elements ``c mod a`` apart are never the same: a stride-2 loop
    writing ``u[2k+1]`` and adding into ``u[2k]`` and ``u[2k+2]`` touches two parts."""
    by_array = {}
    for m in memlets:
        by_array.setdefault(m.data, []).append(m)
    part = {}
    for name, accesses in by_array.items():
        forms = [[stride(e, variables) for e in m.subset] for m in accesses]
        split = [d for d, column in enumerate(zip(*forms)) if _lattice(column)]
        for m, form in zip(accesses, forms):
            part[m] = (name,) + tuple(
                int(form[d][2] - forms[0][d][2]) % abs(form[d][1]) for d in split)
    return part


def _lattice(forms):
    """Whether the dimension's indices ``(v, a, c)`` share v and |a| > 1, and their
    constants differ by integers."""
    if any(f is None for f in forms):
        return False
    (v, a, c), rest = forms[0], forms[1:]
    return abs(a) > 1 and all(w == v and b == a and (d - c).is_Integer for w, b, d in rest)


def _terms(t, variables, part):
    """The tasklet's outputs as terms, accumulations first: a tasklet reads all inputs
    before writing, so no term may write what a later one reads (None if one would)."""
    conns = t.connector_memlets()
    terms = []
    for m, e in sorted(t.outputs, key=lambda o: not o[0].wcr):
        used = tuple((c, conns[c]) for c in sorted(e.free_symbols & conns.keys(), key=str))
        shift, sign = _shift(m.subset, variables) if m.wcr else (None, None)
        terms.append(_Term(m, e, used, t.line, part[m], frozenset(part[x] for _, x in used),
                           shift, sign))
    for k, term in enumerate(terms):
        if any(term.target in later.sources for later in terms[k + 1:]):
            return None
    return terms


def _shift(subset, variables):
    """Per variable, the shift and the sign of its target index (see _Term); (None,
    None) unless every variable appears alone, affinely, in exactly one dimension."""
    shift, sign = {}, {}
    for e in subset:
        if not e.free_symbols & set(variables):
            continue
        form = stride(e, variables)
        if form is None or form[0] in shift:
            return None, None
        v, a, c = form
        shift[v] = int(c.as_coeff_Add()[0]) // abs(a)
        sign[v] = 1 if a > 0 else -1
    if len(shift) != len(variables):
        return None, None
    return tuple(shift[v] for v in variables), tuple(sign[v] for v in variables)


def _groups(terms, variables):
    """Terms into loop nests, in statement order. A term of a scattered key (see
    _scattered) joins the earlier gather into its target unless a nest in between writes
    what it reads or touches its target (moving it earlier must not change what it
    sees); other terms fuse with an ungathered nest just before them (their dependences
    stay within one iteration)."""
    scattered = _scattered(terms, variables)
    groups = []
    for term in terms:
        key = _target_key(term, variables) if term.shift is not None else None
        key = key if key in scattered else None
        home = None
        for k in range(len(groups) - 1, -1, -1):
            if key is not None and groups[k].key == key:
                between = groups[k + 1:]
                if not any(g.writes() & term.sources or term.target in g.reads() | g.writes()
                           for g in between):
                    home = groups[k]
                break
        if home is None and key is None and groups and groups[-1].key is None:
            home = groups[-1]
        if home is None:
            home = _Group(key)
            groups.append(home)
        home.terms.append(term)
    return groups


def _scattered(terms, variables):
    """The target keys whose elements several iterations add into: terms of one key
    with different shifts, or terms into a part that an earlier key's terms add into
    from other iterations too (``g[i]`` and ``g[k-1-i]``)."""
    subsets = {}
    for t in terms:
        if t.shift is not None:
            subsets.setdefault(t.target, {}).setdefault(_target_key(t, variables), []).append(
                t.out.subset)
    scattered = set()
    for by_key in subsets.values():
        earlier = []
        for key, own in by_key.items():
            if len(set(own)) > 1 or any(not same_iteration(x, y, variables)
                                        for x in own for y in earlier):
                scattered.add(key)
            earlier += own
    return scattered


def _folded(groups):
    """The groups with each ungathered one folded into the gather just before it, where
    _lag allows."""
    out = []
    for group in groups:
        lag = _lag(out[-1], group) if out and group.key is None else None
        if lag is None:
            out.append(group)
        else:
            sign = out[-1].terms[0].sign
            out[-1].lagged = [replace(t, shift=lag, sign=sign) for t in group.terms]
    return out


def _lag(gather, after):
    """The shift at which the terms of the ungathered group ``after`` can run in the
    nest of ``gather`` (one pass over the arrays instead of two), or None. Every element
    ``after`` writes that a gathered term reads must be read first: in the same row of
    the outer dimensions (one shift there) and at the same or an earlier point of the
    row (the lag is the largest innermost shift). Only for the adjoint of an in-place
    update on a lattice (red-black: sums into the even elements from the odd ones, which
    ``after`` then zeroes): a gather reading its own target's array is not threaded
    anyway, while folding serialises one that could be."""
    written = after.writes()
    if gather.key is None or gather.lagged or gather.writes() & (written | after.reads()):
        return None
    readers = [t for t in gather.terms if t.sources & written]
    if not any(p[0] == gather.key[0] for t in readers for p in t.sources & written):
        return None
    outer = {t.shift[:-1] for t in readers}
    if len(outer) != 1:
        return None
    return outer.pop() + (max(t.shift[-1] for t in readers),)


def _target_key(term, variables):
    """The target with its shifts removed, and its signs: terms with equal keys gather
    into one array, over one lattice of its elements."""
    back = _back(term, variables)
    return term.out.data, tuple(sp.expand(e.xreplace(back)) for e in term.out.subset), \
        term.sign


def _back(term, variables):
    """The term's iteration as a function of the gathered ``variables``: ``sign*(u -
    shift)`` for each u (its target then reads ``|a|*u + c - |a|*shift``)."""
    return {v: s * (v - o) for v, o, s in zip(variables, term.shift, term.sign)}


# ---- bands: gathered nests fused -------------------------------------------------------
@dataclass(frozen=True)
class _Band:
    """Consecutive groups run in one nest, each moved along the innermost dimension by its
    own alignment (see _bands). ``units`` in order: the gathered terms of a group (added
    up in one tasklet), then each lagged or ungathered term alone; every term placed
    (its shift includes the alignment). ``gathered``: some unit gathers."""
    units: tuple
    gathered: bool

    def terms(self):
        return [t for unit in self.units for t in unit]


MAX_SPREAD = 64     # most innermost shifts a band's terms may spread over
SLACK = 16          # elements a read stays behind the store it reads (see _bands)


def _bands(groups, variables, cpu):
    """The groups as bands: each group joins the band before it when it can run at
    every point right after the band's terms, moved by an alignment a along the
    innermost dimension. A pair of accesses to one element, one of them a write, gives
    a bound: the band reaches the element at point u, the group at w (before the move)
    with ``u - w = d``, so ``a >= d`` keeps the band first, and ``a >= d + SLACK`` when
    the group reads what the band wrote: a vector load that overlaps a store still in
    flight waits for it (minmod's band: 84 ms at a = d, 48 at d + 16, 56 unfused). Any
    other dimension must meet at the same point (d = 0 there), so rows stay
    independent and the outer loops parallel. Sums into one element from both commute
    (bound kept for the vectoriser: every dependence then points forwards, which SIMD
    chunks preserve). The band's arrays pass through the caches once instead of once
    per group. On the GPU every group stays a grid of independent points."""
    bands = []
    for group in groups:
        joined = _joined(bands[-1], group, variables) \
            if bands and cpu else None
        if joined is None:
            bands.append(_alone(group, variables))
        else:
            bands[-1] = joined
    return bands


def _alone(group, variables):
    """The band of one group."""
    return _Band(tuple(_units(group, _sign(group, None, variables), 0)), group.key is not None)


def _unless_threads(groups, nest, banded, line):
    """A band of a 1-D nest carries dependences along its only loop, which then cannot
    get threads: where threads would run (more than one, at least PARALLEL_WORK term
    instances), the groups' own nests run instead. (Two copies of the code: a 1-D nest
    over a row or column of bigger arrays, a boundary condition, is not banded; its
    work is small next to the nests over whole arrays, and its code would double.)"""
    plain = [n for group in groups for n in _emit(_alone(group, nest.vars), nest, line, True)]
    (lo, hi), = nest.bounds
    work = sum(len(group.everything()) for group in groups) * (hi - lo)
    threads = sp.And(sp.Gt(THREADS, 1), sp.Ge(work, PARALLEL_WORK))
    return ConditionalRegion(((threads, Sequence(tuple(plain))),
                              (None, Sequence(tuple(banded)))), line)


def _sign(group, band, variables):
    """The orientation the group's terms run in: its gathered terms', else the band's."""
    if group.key is not None:
        return group.terms[0].sign
    if band is not None and band.gathered:
        return next(t for t in band.terms() if t.sign is not None).sign
    return (1,) * len(variables)


def _units(group, sign, align):
    """The group's units (see _Band), placed ``align`` along the innermost dimension:
    an ungathered group's terms run at their own iteration (shift 0, whatever their
    target's offset)."""
    def placed(t, shift):
        return replace(t, shift=shift[:-1] + (shift[-1] + align,), sign=sign)
    if group.key is None:
        return [[placed(t, (0,) * len(sign))] for t in group.terms]
    return [[placed(t, t.shift) for t in group.terms]] + \
        [[placed(t, t.shift)] for t in group.lagged]


def _joined(band, group, variables):
    """``band`` with ``group`` joined (see _bands), or None."""
    sign = _sign(group, band, variables)
    if sign != band.terms()[0].sign:
        return None
    trial = [t for unit in _units(group, sign, 0) for t in unit]
    ours = [a for t in band.terms() for a in _placed_accesses(t, variables)]
    theirs = [a for t in trial for a in _placed_accesses(t, variables)]
    align = None
    for x in ours:
        for y in theirs:
            if x[0] != y[0] or x[2] == y[2] == "read":
                continue
            d = distance(x[1], y[1], len(variables))
            summed = x[2] == y[2] == "sum"
            if d is NEVER or summed and (d is ANY or any(d[:-1])):
                continue
            if d is ANY or any(d[:-1]):
                return None
            bound = d[-1] + (SLACK if x[2] != "read" and y[2] != "write" else 0)
            align = bound if align is None else max(align, bound)
    units = band.units + tuple(_units(group, sign, align or 0))
    shifts = [t.shift[-1] for unit in units for t in unit]
    if max(shifts) - min(shifts) > MAX_SPREAD:
        return None
    return _Band(units, band.gathered or group.key is not None)


def _placed_accesses(term, variables):
    """(array, each index at point u as a linear_form, "read" | "write" | "sum") of
    each access of a placed term (see _tasklet)."""
    back = _back(term, variables)

    def forms(subset):
        return tuple(linear_form(sp.expand(e.xreplace(back)), variables) for e in subset)
    out = [(m.data, forms(m.subset), "read") for _, m in term.inputs]
    target = _target_key(term, variables)[1]
    return out + [(term.out.data, forms(target), "sum" if term.out.wcr else "write")]


def _emit(band, nest, line, cpu):
    """Loop nests running the band's terms, each term over its own (shifted) range:
    over the core of the outer dimensions, rows cut along the innermost one; around
    that core, one thin edge per side and outer dimension, testing per row which terms
    apply there (see _edge_row). The rows are independent (see _bands), so edges may
    run after the core."""
    if not band.gathered:
        return [_loops(nest.vars, nest.bounds, tuple(_tasklet(u, ()) for u in band.units),
                       line)]
    terms, (*outer, inner) = band.terms(), range(len(nest.vars))
    bounds = _oriented(nest.bounds, terms[0].sign)
    spans = {id(t): [(lo + o, hi + o) for (lo, hi), o in zip(bounds, t.shift)] for t in terms}
    core = [(max(spans[id(t)][d][0] for t in terms), min(spans[id(t)][d][1] for t in terms))
            for d in range(len(nest.vars))]
    rows = []
    for piece in _intervals(sorted({t.shift[inner] for t in terms})):
        tasklets = _piece(band, piece, nest.vars)
        if tasklets:
            rows.append(_loops(nest.vars[inner:], [_range(piece, bounds[inner])], tasklets,
                               line))
    out = [_loops(nest.vars[:inner], core[:inner], None, line, Sequence(tuple(rows)))]
    union = [(min(spans[id(t)][d][0] for t in terms), max(spans[id(t)][d][1] for t in terms))
             for d in range(len(nest.vars))]
    depth = inner if cpu else len(nest.vars)     # the slabs' loops around their body
    for d in outer:
        body = Sequence(tuple(_edge_row(t, spans[id(t)], union, nest.vars, d, line) if cpu
                              else _when(_inside(spans[id(t)], union, nest.vars, d),
                                         State((_tasklet([t], nest.vars),)), line)
                              for t in terms))
        low, high = (union[d][0], core[d][0]), (core[d][1], union[d][1])
        edges = [e for e in (low, high) if sp.expand(e[1] - e[0]) != 0]
        if len(edges) == 2 and sp.expand(low[1] - low[0] - high[1] + high[0]) == 0 and cpu:
            out.append(_both_edges(nest, d, core, union, low, high, body, line))
            continue
        for edge in edges:
            out.append(_loops(nest.vars[:depth], (core[:d] + [edge] + union[d + 1:])[:depth],
                              None, line, body))
    return out


def _edge_row(term, span, union, variables, first, line):
    """The term over its stretch of a row of an edge slab, the outer dimensions from
    ``first`` on tested once per row: a unit-stride loop without tests (testing every
    element for every term cost heat-3d's gradient at N=40 a fifth of its time). On
    the GPU, where each element is a thread, the edges test per element."""
    row = _loops(variables[-1:], span[-1:], (_tasklet([term], variables),), line)
    return _when(_inside(span[:-1], union[:-1], variables[:-1], first), row, line)


def _piece(band, piece, variables):
    """The tasklets of a piece of a row: per unit, one adding up its terms that apply
    there."""
    units = ([t for t in unit if _applies(t.shift[-1], piece)] for unit in band.units)
    return tuple(_tasklet(terms, variables) for terms in units if terms)


def _oriented(bounds, sign):
    """The bounds of ``sign*v`` for each variable v in ``bounds``."""
    return [(lo, hi) if s > 0 else (1 - hi, 1 - lo) for (lo, hi), s in zip(bounds, sign)]


def _both_edges(nest, d, core, union, low, high, body, line):
    """The edges ``low`` and ``high`` of dimension ``d``, of one width, as one nest: a
    loop over the side ``s`` (0, 1) moves dimension d's range from one to the other.
    One copy of the edge code instead of two for the C compiler: its tests make it the
    costliest code to compile per line, and it runs on a few rows only. ``body`` is the
    code of one row (see _edge_row).
    (Not for CUDA: device analysis would see both sides write the same elements and
    make the edge kernels atomic.)"""
    v = nest.vars[d]
    s = sp.Symbol(f"__side_{v.name}", integer=True)
    edge = (low[0] + s * (high[0] - low[0]), low[1] + s * (high[1] - low[1]))
    inner = _loops(nest.vars[d:-1], [edge] + union[d + 1:-1], None, line, body)
    sides = LoopRegion(s, sp.Integer(0), sp.Integer(2), sp.Integer(1), Sequence((inner,)), line)
    return _loops(nest.vars[:d], core[:d], None, line, Sequence((sides,)))


def _inside(span, union, variables, first):
    """The condition that the variables from dimension ``first`` on lie in ``span``
    (bounds that the union's already imply left out)."""
    parts = []
    for (lo, hi), (ulo, uhi), v in list(zip(span, union, variables))[first:]:
        if sp.expand(lo - ulo) != 0:
            parts.append(sp.Ge(v, lo))
        if sp.expand(uhi - hi) != 0:
            parts.append(sp.Lt(v, hi))
    return sp.And(*parts)


def _when(condition, body, line):
    if condition == sp.true:
        return body
    return ConditionalRegion(((condition, Sequence((body,))),), line)


def _loops(variables, bounds, tasklets, line, body=None):
    """The nest of counted loops over ``bounds`` around ``tasklets`` (or ``body``)."""
    body = body if body is not None else Sequence((State(tasklets),))
    for v, (lo, hi) in reversed(list(zip(variables, bounds))):
        body = Sequence((LoopRegion(v, lo, hi, sp.Integer(1), body, line),))
    return body.elements[0] if len(body.elements) == 1 else body


def _intervals(offsets):
    """Consecutive cuts ``lo + o`` (for every offset), then ``hi + o``, as pairs of
    (side, offset): in this order when ``hi - lo >= max(o) - min(o)``."""
    cuts = [("lo", o) for o in offsets] + [("hi", o) for o in offsets]
    return list(zip(cuts, cuts[1:]))


def _applies(offset, piece):
    """Whether the term with ``offset`` runs on the whole piece: it starts at ``lo +
    offset`` and stops at ``hi + offset``."""
    (start_side, a), (stop_side, b) = piece
    return (start_side == "hi" or a >= offset) and (stop_side == "lo" or b <= offset)


def _range(piece, bounds):
    lo, hi = bounds
    return tuple((lo if side == "lo" else hi) + o for side, o in piece)


def _tasklet(terms, variables):
    """One tasklet adding up ``terms`` (gathered when ``variables``: the target's index
    becomes the loop variables, each term's inputs move back to its iteration)."""
    inputs, total = [], sp.Integer(0)
    for term in terms:
        back = _back(term, variables) if variables else {}
        rename = {}
        for conn, m in term.inputs:
            fresh = sp.Symbol(f"__in{len(inputs)}", real=True)
            rename[conn] = fresh
            inputs.append((fresh, Memlet(m.data, tuple(sp.expand(e.xreplace(back))
                                                       for e in m.subset))))
        total += term.expr.xreplace({**rename, **back})
    first = terms[0].out
    subset = _target_key(terms[0], variables)[1] if variables else first.subset
    return Tasklet(tuple(inputs), ((Memlet(first.data, subset, first.wcr), total),),
                   terms[0].line)
