"""Innermost loops that reduce (dot products, row sums, maxima) as SIMD reductions."""
import sympy as sp

from ..analysis.dependence import forward_only, injective
from ..sdfg.nodes import Pop, Push, Tasklet, as_reduction, index_loads
from .decisions import Reduction


def simd_reduction(var, body, containers, upward=True, private=()):
    """The Reduction when an innermost loop over ``var`` reduces into elements
    fixed across its iterations (a dot product, a row sum or maximum: ``s += ...``,
    ``y[i] += A[i, j] * x[j]``, ``m = max(m, x[j])``) and its iterations meet only
    in lexically forward dependences, which SIMD chunks preserve: those elements are
    read nowhere in the loop, and an element other iterations access too is accessed
    first by the earlier iteration's earlier statement (a fused band of a gathered
    adjoint: ``g[v] += ...`` then ``g[v - 1] = 0``; only in a loop running ``upward``,
    since the reduction runs it so). The tasklets then write those updates as
    reductions (a memlet's ``wcr``: sum, max or min). Else None. ``containers``: by
    name, for the dtypes (a sum in the vector's lanes is a float's); ``private``: a
    map's scalars each point has its own copy of (contracted temporaries, their ``+=``
    no sum across points), which meet no other iteration."""
    if not body or not all(isinstance(t, Tasklet) for t in body):
        return None
    body = [as_reduction(t) for t in body]
    sums, own = [], {}
    for t in body:
        for m, _ in t.outputs:
            if m.data in private:
                continue
            if any(index_loads(e) for e in m.subset):
                return None
            if m.wcr and not any(var in e.free_symbols for e in m.subset):
                if containers[m.data].dtype.kind != "f":
                    return None
                if m not in sums:
                    sums.append(m)
            elif injective(m.subset, (var,)):
                own.setdefault(m.data, set()).add(m.subset)
            else:
                return None
    summed = {m.data for m in sums}
    accessed = {}
    for t in body:
        for m in [m for _, m in t.inputs] + [m for m, _ in t.outputs]:
            if m.data not in private:
                accessed.setdefault((m.data, m.subset), set()).add(m.wcr)
    # A container only added into may take both kinds of sums (syrk's adjoint:
    # gA[i, k] += ... over j and gA[j, k] += ...): additions commute, and the fixed
    # element's share waits in its accumulator.
    added = {n for n in summed & own.keys()
             if all(wcr == "sum" for (name, _), ops in accessed.items() if name == n
                    for wcr in ops)}
    if not sums or (summed & own.keys()) - added or any(
            m.data in summed for t in body for _, m in t.inputs):
        return None
    if any(len(accessed[m.data, m.subset]) > 1 for m in sums):   # one operation each
        return None
    if any(len(own[n]) > 1 for n in added):
        return None
    if not forward_only(var, body, set(own) - added, upward):
        return None
    return Reduction(tuple(sums), tuple(body))


def as_access(node):
    """A push as a tasklet reading its element, a pop as one writing it (for the checks
    of simd_reduction); tasklets as they are."""
    if isinstance(node, Push):
        return Tasklet(((sp.Symbol("__pushed", real=True), node.memlet),), (), node.line)
    if isinstance(node, Pop):
        return Tasklet((), ((node.memlet, sp.Integer(0)),), node.line)
    return node
