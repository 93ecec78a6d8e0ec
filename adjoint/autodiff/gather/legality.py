"""The distribution of a nest's body (distribution.py) is legal when every part of an
array the nest touches is
* local: always accessed at the same element, a different one per iteration;
* read only; or
* only accumulated into (never read or assigned in the nest),
so the only dependences between iterations are additions, which commute (the
gathered sums round differently from the scatter, within reassociation error).
Restores from the tape run first, in the loops' own order. A reversed nest of such
iterations without offsets runs forwards (reversed vector loads need permutes). After
the gather of an in-place lattice update, the terms that zero the lattice it read run
in its nest, each element after the sums that read it: one pass instead of two.
"""
from ...analysis.dependence import injective, stride
from ...sdfg.nodes import Pop, Tasklet
from .nests import _accesses


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
