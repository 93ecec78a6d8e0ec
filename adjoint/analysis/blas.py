"""Matrix products written as loops become MatMul library nodes (BLAS gemm).

A nest of three counted loops over the whole of each dimension whose only statement is
``C[i, j] += s * A[i, k] * B[k, j]`` (any loop order; ``A[k, i]``, ``B[j, k]`` for
transposes; ``s`` a product of scalars and constants, possibly absent) computes
``C += s * (A @ B)``: it becomes ``C += A @ B`` as one MatMul or, with a factor, the
product into a new transient and a map adding ``s`` times it to ``C`` (so the adjoint
needs no rule beyond those of MatMul and tasklets). BLAS sums over ``k`` in another
order than the loop: the results agree to rounding.

Before matching, a loop whose iterations each touch their own elements of everything
they write (gemm's ``for i`` holding ``C[i, :] *= beta`` and the product of row i) is
distributed, statement by statement, into loops of their own, when that exposes a
product; any other nest is left as written.
"""
from dataclasses import replace

import numpy as np
import sympy as sp

from ..sdfg.arithmetic import factors_of
from ..library.matmul import MatMul
from ..library.matvec import MatVecPair
from ..schedule.tape import uses_tape
from ..sdfg.nodes import (Container, LoopRegion, MapScope, Memlet, Sequence, State,
                          Tasklet, every_element, index_loads, self_update, walk)
from ..sdfg.visit import Transformer, flattened
from .dependence import READ, Scope, accesses, counted


def products(sdfg):
    """The SDFG with every loop nest computing a matrix product over whole containers
    replaced by MatMul nodes."""
    rewrite = _Products(dict(sdfg.containers))
    body = rewrite.region(sdfg.body)
    return sdfg.replace(body=body, containers=rewrite.containers)


def paired(sdfg):
    """The SDFG with each two matrix-vector products of one matrix (or two rank-1 updates
    of one matrix, the adjoint of two such products) in one sequence as one
    ``MatVecPair`` (one pass over the matrix), where they may meet: each statement
    between them moves before the pair (the first moving down past it) or after it
    (the second moving up), in order, swapping only statements that commute. After
    differentiation (the pair has no derivative rules), on the CPU."""
    return sdfg.replace(body=_Pairs().region(sdfg.body))


class _Pairs(Transformer):
    def elements(self, elements):
        out = [state for e in super().elements(elements) for state in _one_per_product(e)]
        k = 0
        while k < len(out):
            for j in range(k + 1, len(out)):
                moves = _meeting(out[k], out[j], out[k + 1:j])
                if moves is not None:
                    first, second = _vector_product(out[k]), _vector_product(out[j])
                    pair = State((MatVecPair(first, second, first.line),), out[k].label)
                    out[k:j + 1] = [*moves[0], pair, *moves[1]]
                    break
            else:
                k += 1          # else what now stands at k may pair in turn
        return out


def _one_per_product(region):
    """A state holding a matrix-vector product or an outer product among other nodes as
    one state per node, in order (so each product may pair); other regions as they are."""
    nodes = region.nodes if isinstance(region, State) else ()
    if len(nodes) < 2 or not any(_vector_product(State((n,))) for n in nodes):
        return [region]
    return [State((n,), region.label) for n in nodes]


def _vector_product(region):
    """The MatMul of a matrix and a vector, or of two vectors (an outer product), that
    is all of ``region``, else None."""
    nodes = region.nodes if isinstance(region, State) else ()
    if len(nodes) == 1 and isinstance(nodes[0], MatMul) and (
            nodes[0].gemv() is not None or nodes[0].outer() is not None):
        return nodes[0]
    return None


def _meeting(first, second, between):
    """(the regions ``between`` that run before the pair, those after) when the states
    ``first`` and ``second`` hold products of one kind on one matrix (see _same_matrix)
    that may run together: each region between commutes with ``second`` (which moves up
    past it) or else with ``first`` (which moves down past it), and so does each region
    that one, running before the pair now, may not move up past; else None."""
    one, other = _vector_product(first), _vector_product(second)
    if one is None or other is None or not _same_matrix(one, other) or \
            one.gemv() and not _commute(first, second):
        return None
    ahead = [not _commute(r, second) for r in between]     # must run before the pair
    moved = True
    while moved:        # and what such a region needs to have run first (gemver's reverse)
        moved = False
        for i, r in enumerate(between):
            if not ahead[i] and any(ahead[j] and not _commute(r, between[j])
                                    for j in range(i + 1, len(between))):
                ahead[i] = moved = True
    if any(a and not _commute(r, first) for r, a in zip(between, ahead)):
        return None
    return [r for r, a in zip(between, ahead) if a], [r for r, a in zip(between, ahead) if not a]


def _same_matrix(first, second):
    """Two products of one matrix (``gemv``: its name and dims), or two outer products
    into one matrix, the second adding to what the first left there (and reading it
    nowhere else)."""
    if first.gemv() is not None:
        return second.gemv() is not None and first.gemv()[:2] == second.gemv()[:2]
    return second.outer() is not None and second.accumulate and \
        (first.out, first.out_dims) == (second.out, second.out_dims) and \
        first.out not in (second.a, second.b)


def _commute(r, q):
    """Whether regions ``r`` and ``q`` may swap: neither writes what the other touches,
    and not both push or pop (the tape's order is theirs)."""
    (r_reads, r_writes), (q_reads, q_writes) = _touches(r), _touches(q)
    return not (r_writes & (q_reads | q_writes) or q_writes & r_reads or
                uses_tape(r) and uses_tape(q))


def _touches(region):
    """(containers ``region`` reads, those it writes or adds into)."""
    touched = [(a.data, a.kind) for a in accesses(region)]
    return {d for d, kind in touched if kind == READ}, {d for d, kind in touched if kind != READ}


class _Products(Transformer):
    def __init__(self, containers):
        super().__init__()
        self.containers = containers    # grows by the transients of scaled products

    def loop(self, loop):
        """The regions replacing ``loop``: its distributed pieces, products as MatMuls,
        when one is a product; else the loop with its body rewritten."""
        pieces = _distributed(loop)
        matches = [_match(piece, self.containers) for piece in pieces]
        if not any(matches):
            return [super().loop(loop)]
        return [piece if match is None else State(self.matmul(**match), f"matmul_{loop.line}")
                for piece, match in zip(pieces, matches)]

    def matmul(self, out, a, b, trans_a, trans_b, scale, scalars, own, product, line):
        """``out += scale * op(a) @ op(b)`` as library nodes."""
        dims = {name: self.containers[name].shape for name in (out, a, b)}
        if scale == 1:
            return (MatMul(out, dims[out], a, dims[a], b, dims[b], trans_a, trans_b, True,
                           line),)
        p = self._transient(dims[out])

        def add(m):
            inputs = scalars + ((product, Memlet(p, m.subset)), (own, m))
            return (Tasklet(inputs, ((m, own + scale * product),), line),)
        return (MatMul(p, dims[out], a, dims[a], b, dims[b], trans_a, trans_b, False, line),
                *every_element(self.containers[out], add, line))

    def _transient(self, shape):
        n = 1
        while f"__product{n}" in self.containers:
            n += 1
        c = Container(f"__product{n}", np.dtype(np.float64), shape, True)
        self.containers[c.name] = c
        return c.name


def _distributed(loop):
    """``loop`` split into one loop per statement of its body (and, recursively, of the
    loops in it) as far as that is legal, in program order."""
    if not _independent(loop):
        return [loop]
    return [replace(loop, body=Sequence((inner,)))
            for element in flattened(loop.body)
            for inner in (_distributed(element) if isinstance(element, LoopRegion)
                          else [element])]


def _independent(loop):
    """Whether ``loop``'s iterations may run in any order: its body is counted loops and
    dataflow without tape or library nodes, and the loop variable is the index, in one
    dimension, of every access to each container the body writes, so each iteration
    touches its own elements of those; everything else is only read. Running each
    statement for all iterations in turn is then what the loop does."""
    if not counted(loop):
        return False
    for node, context in walk(loop.body):
        if not all(isinstance(c, LoopRegion) and counted(c) and c.var != loop.var
                   for c in context):
            return False
        tasks = node.body if isinstance(node, MapScope) else (node,)
        if not all(isinstance(t, Tasklet) for t in tasks):
            return False
    scope = Scope(loop.body)
    if any(index_loads(e) for a in scope.accesses if a.node is not None for e in a.subset):
        return False
    return all(_indexed_by(loop.var, [a.subset for a in scope.by_data[name]])
               for name in scope.written)


def _indexed_by(var, subsets):
    """Whether ``var`` is the index in one same dimension of every subset."""
    rank = len(subsets[0])
    return any(all(len(s) == rank and s[d] == var for s in subsets) for d in range(rank))


def _match(loop, containers):
    """The product ``loop`` computes, as :meth:`_Products.matmul`'s arguments, or None."""
    nest = _perfect_nest(loop, 3)
    if nest is None:
        return None
    loops, t = nest
    update = _scaled_product(t, containers)
    if update is None:
        return None
    own, scale, scalars, factors = update
    (out, _), = t.outputs
    reads = t.connector_memlets()
    roles = _operands(out, [reads[f] for f in factors], {lp.var for lp in loops})
    if roles is None:
        return None
    a, b, trans_a, trans_b = roles
    names = (out.data, a.data, b.data)
    if len(set(names)) != 3 or any(containers[n].dtype != np.float64 for n in names) or \
            not _whole(loops, (out, a, b), containers):
        return None
    product = next(f for f in factors if reads[f] == a)
    return dict(out=out.data, a=a.data, b=b.data, trans_a=trans_a, trans_b=trans_b,
                scale=scale, scalars=scalars, own=own, product=product, line=t.line)


def _scaled_product(t, containers):
    """(connector of the old value, scale, its (connector, memlet) inputs, the two
    connectors reading matrices) for a tasklet ``x = x + scale * X * Y`` whose scale
    reads only scalar containers; else None."""
    update = self_update(t)
    if update is None or update[0] != "sum" or not isinstance(update[2], sp.Mul):
        return None
    _, own, rest = update
    reads = t.connector_memlets()
    args = factors_of(rest)             # BLAS sums in its own order: within rounding
    factors = [f for f in args if f in reads and len(reads[f].subset) == 2]
    scale = sp.Mul(*[f for f in args if f not in factors])
    scalars = tuple((c, m) for c, m in t.inputs if c in scale.free_symbols)
    if len(factors) != 2 or scale.free_symbols != {c for c, _ in scalars} or \
            any(containers[m.data].shape for _, m in scalars):
        return None
    return own, scale, scalars, factors


def _operands(out, factors, loop_vars):
    """(a, b, trans_a, trans_b) when ``out[i, j]`` is the product of ``a[i, k]`` (or
    ``a[k, i]``) and ``b[k, j]`` (or ``b[j, k]``), i, j, k the three loop variables."""
    summed = loop_vars - set(out.subset)
    if len(out.subset) != 2 or len(loop_vars) != 3 or len(summed) != 1:
        return None
    (i, j), (k,) = out.subset, summed
    a, b = sorted(factors, key=lambda m: i not in m.subset)
    trans_a, trans_b = _orientation(a.subset, i, k), _orientation(b.subset, k, j)
    if trans_a is None or trans_b is None:
        return None
    return a, b, trans_a, trans_b


def _whole(loops, memlets, containers):
    """Whether each loop runs from 0 by 1 up to the size of every dimension it indexes."""
    stops = {lp.var: lp.stop for lp in loops}
    return all(lp.start == 0 and lp.step == 1 for lp in loops) and all(
        sp.expand(n - stops[v]) == 0
        for m in memlets for v, n in zip(m.subset, containers[m.data].shape))


def _perfect_nest(loop, depth):
    """(the ``depth`` loops, the tasklet) when ``loop`` nests that many counted loops,
    each the only statement of the one around it, around a single tasklet; else None."""
    loops = [loop]
    while True:
        if not counted(loops[-1]):
            return None
        body = list(flattened(loops[-1].body))
        if len(body) != 1:
            return None
        if len(loops) == depth:
            inner = body[0]
            if isinstance(inner, State) and len(inner.nodes) == 1 and \
                    isinstance(inner.nodes[0], Tasklet) and len(inner.nodes[0].outputs) == 1:
                return loops, inner.nodes[0]
            return None
        if not isinstance(body[0], LoopRegion):
            return None
        loops.append(body[0])


def _orientation(subset, row, col):
    """False for ``[row, col]``, True for the transpose ``[col, row]``, else None."""
    return {(row, col): False, (col, row): True}.get(tuple(subset))
