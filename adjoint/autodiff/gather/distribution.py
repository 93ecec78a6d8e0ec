"""The nest's body is distributed into one loop nest per scattered target, in statement
order. A target is scattered when its terms' shifts differ, or when it is a second
index into a part that other iterations reach (``g[i]`` and ``g[k-1-i]``); when this
is legal: legality.py.
"""
from dataclasses import dataclass, field, replace

import sympy as sp

from ...analysis.dependence import same_iteration, stride
from ...sdfg.nodes import Memlet


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
