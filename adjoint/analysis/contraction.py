"""Array contraction: a temporary that lives within one point of one map becomes a scalar
of that map's body, so it takes no memory and no memory traffic.

Vectorised code names its intermediate results (``t1 = v45 * ct; t2 = 2 * t1; ...``), and
map fusion (analysis/fusion.py) runs their statements point by point in one map; each
named array still went through memory, a whole array written and read back per name
(Veros' equation of state: about 100 of them). A float temporary ``T`` is contracted
when, in every entry of a module that touches it,

- every access to ``T`` is in the body of one map, all at one subset naming a different
  element for each point (``injective``), so that no point sees another's element;
- each point's first access writes it: a plain write, or an accumulation (an adjoint's
  ``+=``) where the buffer would hold zero, that is when the map is in no loop and no
  other entry touches ``T``;

and nothing outside the entry points reads it (``kept``: arguments, returned values,
the adjoints a sweep seeds or returns). Each point then keeps its own copy of the scalar
(``MapScope.private``, from zero: what the buffer held for an accumulation), and the
container becomes a scalar. In a gradient module this contracts the adjoints' own
temporaries and the forward's that no other entry reads, or that each point of the
reverse map recomputes (autodiff/remat.py); one the reverse reads back stays whole.
"""
from dataclasses import replace

from ..sdfg.nodes import LoopRegion, MapScope, Memlet, State, Tasklet, regions
from ..sdfg.visit import Transformer
from .dependence import READ, SUM, injective, node_accesses, own_accesses


def contract(entries, containers, kept=frozenset()):
    """(entries, containers, names): the entry SDFGs (one module's, sharing
    ``containers``) with every contractible temporary (see the module docstring) a
    private scalar of its map, the containers with those as scalars, and their names."""
    names = {n for n, c in containers.items() if n not in kept and not c.is_scalar
             and c.dtype.kind in "fb"}   # floats and masks: never an index
    homes = [_homes(sdfg, names) for sdfg in entries]
    touched = {}
    for home in homes:
        for name in home:
            touched[name] = touched.get(name, 0) + 1
    chosen = set()
    for name in names:
        verdicts = [home[name] for home in homes if name in home]
        if verdicts and all(v is not None and (v[1] or touched[name] == 1)
                            for v in verdicts):
            chosen.add(name)
    if not chosen:
        return list(entries), dict(containers), frozenset()
    entries = [sdfg.replace(body=_Contraction(chosen).region(sdfg.body)) for sdfg in entries]
    containers = {n: replace(c, shape=()) if n in chosen else c for n, c in containers.items()}
    return [e.replace(containers=containers) for e in entries], containers, frozenset(chosen)


def _homes(sdfg, names):
    """{name: (its map, whether a plain write comes first at each point) or None when it
    cannot be contracted in this entry} for the ``names`` the entry touches."""
    home, subsets, first = {}, {}, {}
    for r, context in regions(sdfg.body):
        in_loop = any(isinstance(c, LoopRegion) for c in context)
        if isinstance(r, State):
            inner = frozenset(c.var for c in context if isinstance(c, LoopRegion))
            groups = [(n, node_accesses(n, inner)) for n in r.nodes]
        else:
            groups = [(None, own_accesses(r, context, sdfg.containers))]
        for node, found in groups:
            owner = node if isinstance(node, MapScope) and all(
                isinstance(t, Tasklet) for t in node.body) else None
            for a in found:
                if a.data not in names:
                    continue
                if owner is None or home.setdefault(a.data, owner) is not owner or \
                        subsets.setdefault(a.data, a.subset) != a.subset:
                    home[a.data] = None
                    continue
                if a.data not in first:
                    first[a.data] = None if a.kind == READ or (a.kind == SUM and in_loop) \
                        else a.kind != SUM
    out = {}
    for name, owner in home.items():
        ok = owner is not None and first[name] is not None and \
            injective(subsets[name], owner.params)
        out[name] = (owner, first[name]) if ok else None
    return out


class _Contraction(Transformer):
    def __init__(self, names):
        super().__init__()
        self.names = names

    def node(self, node):
        if not isinstance(node, MapScope) or not all(isinstance(t, Tasklet) for t in node.body):
            return node   # a map with pushes or pops owns no contracted temporary (_homes)
        private = sorted({m.data for t in node.body for m in _memlets(t)} & self.names)
        if not private:
            return node
        body = tuple(Tasklet(tuple((c, self._memlet(m)) for c, m in t.inputs),
                             tuple((self._memlet(m), e) for m, e in t.outputs), t.line)
                     for t in node.body)
        return replace(node, body=body, private=tuple(private))

    def _memlet(self, m):
        return Memlet(m.data, (), m.wcr) if m.data in self.names else m


def _memlets(t):
    return [m for _, m in t.inputs] + [m for m, _ in t.outputs]
