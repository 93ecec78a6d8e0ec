"""Matrix products written as loops become MatMul library nodes (BLAS gemm).

A *summation* is a counted loop over ``k`` around a perfect nest (loops, a map at the
bottom) whose one statement adds ``s * A[i, k] * B[k, j]`` (or a sum of such terms;
``A[k, i]``, ``B[j, k]`` transposed; ``s`` a product of scalars and constants) to an
element free of k -- ``C[i, j] += ...``, an accumulator ``acc += ...``, ``s[p] += ...`` --
or a map over ``k`` summing such a term (``np.sum(a[:, i] * b[:, j])``); ``A[r, q, k]``
is a stack of rows, i the pair ``(r, q)``. When k runs over the whole summed dimension,
i and j over a rectangle or a triangle of the product (each bound a number, the size or
another loop's variable, plus a number), and the outermost loop of i, j and k (the one
the rewrite starts from) writes the operands only after the summation has read them, in
the iteration reading the elements written (doitgen's ``A[r, q, p] = s[p]`` after row
``(r, q)``'s sums; ``dependence.same_iteration``), the products are computed before that
loop, one transient ``P`` per scale by MatMuls (two for ``A B^T + B A^T``), and the
summation becomes the statement adding ``s * P[i, j]`` where it added the sum: the
loops around it (the triangle, ``X[i, j] = f(acc)``) stay as written, reading P. The
product over the whole rectangle costs up to twice a triangle's flops but runs at
BLAS's speed; the adjoint needs no rule beyond those of MatMul and tasklets. Where the
loop nest is nothing but ``C[i, j] += s * A @ B``'s terms over whole dimensions, the
MatMuls add into C itself, or, with a scale, a map adds ``s * P`` to C. BLAS sums over ``k`` in another order than the loop: the results
agree to rounding.

Before matching, a loop whose iterations each touch their own elements of everything
they write (gemm's ``for i`` holding ``C[i, :] *= beta`` and the product of row i) is
distributed, statement by statement, into loops of their own, when that exposes a
product; any other nest is left as written.
"""
from dataclasses import replace
from typing import NamedTuple

import numpy as np
import sympy as sp

from ..sdfg.arithmetic import factors_of, terms_of
from ..library.matmul import MatMul
from ..library.matvec import MatVecPair
from ..schedule.tape import uses_tape
from ..sdfg.nodes import (Container, LoopRegion, MapScope, Memlet, Sequence, State,
                          Tasklet, every_element, index_loads, renamed, self_update,
                          tasklets, walk)
from ..sdfg.visit import Transformer, flattened, leaves
from .dependence import READ, Scope, accesses, counted, same_iteration


def products(sdfg):
    """The SDFG with the matrix products its loop nests sum computed by MatMul nodes."""
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
        self.containers = containers    # grows by the products' transients

    def loop(self, loop):
        """The regions replacing ``loop``: its distributed pieces, each with its summations
        hoisted out as products, when one has any; else the loop with its body rewritten."""
        pieces = _distributed(loop)
        hoisted = [self.hoisted(piece) for piece in pieces]
        if not any(hoisted):
            return [super().loop(loop)]
        return [region for piece, regions in zip(pieces, hoisted)
                for region in (regions or [piece])]

    def hoisted(self, loop):
        """[a state of MatMuls, ``loop`` reading their products] for the summations of
        ``loop`` (see _Summations), only the MatMuls where they add into a whole matrix
        all ``loop`` does; None when there is none."""
        label = f"matmul_{loop.line}"
        sums = _Summations(loop, self)
        whole = _adding_whole(loop, self.containers)
        if whole is not None:
            return [State(self.added(whole, sums), label)]
        residual = sums.region(loop)
        if not sums.nodes:
            return None
        rest = self.region(residual)
        return [State(tuple(sums.nodes), label), *(rest if isinstance(rest, list) else [rest])]

    def added(self, found, sums):
        """The nodes adding a summation's products to the whole matrix it adds them to:
        MatMuls straight into it, or, with a scale, into a transient that a map adds to
        it times the scale (one map, which fusion may join to the next)."""
        t = found.tasklet
        (out, _), = t.outputs
        if found.groups[0][0] == 1:
            return tuple(_matmul(out.data, found.dims(), term, True, self.containers, t.line)
                         for term in found.groups[0][1])
        update = sums.reading(found)
        return (*sums.nodes, *every_element(
            self.containers[out.data],
            lambda m: (renamed(update, dict(zip(found.at(), m.subset))),), t.line))

    def transient(self, shape):
        n = 1
        while f"__product{n}" in self.containers:
            n += 1
        c = Container(f"__product{n}", np.dtype(np.float64), shape, True)
        self.containers[c.name] = c
        return c.name


class _Summations(Transformer):
    """One loop with each summation in it (see _match) whose loops all lie in it, the loop
    one of them, replaced by a read of its products, computed by the MatMuls ``nodes``
    before the loop, where the values they read are those the summation would have read
    (see ``unchanged``)."""

    def __init__(self, loop, products):
        super().__init__()
        self.products = products
        self.scope = Scope(loop)
        self.contexts = {t: context for t, context, _ in tasklets(loop)}
        self.position = {t: n for n, t in enumerate(self.contexts)}    # program order
        self.nodes = []

    def loop(self, loop):
        """A loop over the summed index around a perfect nest: the nest without it."""
        nest = _perfect_nest(loop)
        found = nest and self.summation((*self.loops, *nest[0]), loop.var, nest[1])
        if not found:
            return super().loop(loop)
        return _replaced(loop.body, self.reading(found))

    def node(self, node):
        """A map summing over one index (``np.sum(a[:, i] * b[:, j])``): one tasklet."""
        if isinstance(node, MapScope) and len(node.params) == 1 and len(node.body) == 1:
            (levels, t), = leaves(node)
            found = isinstance(t, Tasklet) and \
                self.summation((*self.loops, *levels), node.params[0], t)
            if found:
                return self.reading(found)
        return node

    def summation(self, chain, k, t):
        found = _match(chain, k, t, self.products.containers)
        return found if found and self.unchanged(found, chain) else None

    def unchanged(self, found, chain):
        """Whether the loop writes the summation's operands only after it has read them:
        each write comes later in the program, and only in the iteration of the loops
        around both that reads the elements it writes (dependence.same_iteration), doitgen's
        ``A[r, q, p] = s[p]`` after row ``(r, q)``'s sums."""
        t, variables = found.tasklet, {lp.var for lp in chain}
        for term in (term for _, terms in found.groups for term in terms):
            for read in (term.a, term.b):
                for w in self.scope.by_data[read.data]:
                    if w.kind == READ:
                        continue
                    if self.position.get(w.node, -1) <= self.position[t]:
                        return False
                    common = [lp.var for lp in chain
                              if any(lp is c for c in self.contexts[w.node])]
                    if not same_iteration(w.subset, read.subset, common,
                                          w.inner | variables):
                        return False
        return True

    def reading(self, found):
        """The summation's tasklet adding its products, one per scale, to what it sums
        into; their MatMuls joining ``nodes``."""
        t, added, reads = found.tasklet, [], []
        for scale, terms in found.groups:
            p = self.products.transient(found.shape)
            self.nodes += [_matmul(p, found.dims(), term, n > 0, self.products.containers,
                                   t.line) for n, term in enumerate(terms)]
            connector = terms[0].connector      # the first term's first factor now reads p
            added.append(scale * connector)
            reads.append((connector, Memlet(p, found.at())))
        value = sp.Add(*added) if found.own is None else found.own + sp.Add(*added)
        inputs = tuple((c, m) for c, m in t.inputs
                       if c in value.free_symbols and c not in dict(reads))
        (out, _), = t.outputs
        return Tasklet(inputs + tuple(reads), ((out, value),), t.line)


def _matmul(out, dims, term, accumulate, containers, line):
    """``out (+)= op(a) @ op(b)`` for a term of a summation."""
    a, b = term.a.data, term.b.data
    return MatMul(out, dims, a, _as_matrix(containers[a].shape), b,
                  _as_matrix(containers[b].shape), term.trans_a, term.trans_b, accumulate, line)


def _as_matrix(shape):
    """(rows, cols) of a container seen as a matrix, its leading dimensions stacked."""
    return sp.Mul(*shape[:-1]), shape[-1]


def _replaced(region, tasklet):
    """A perfect nest (see _perfect_nest) with ``tasklet`` in place of its own."""
    if isinstance(region, LoopRegion):
        return replace(region, body=_replaced(region.body, tasklet))
    if isinstance(region, Sequence):
        return Sequence(tuple(_replaced(e, tasklet) for e in flattened(region)))
    node, = region.nodes
    return replace(region, nodes=(replace(node, body=(tasklet,))
                                  if isinstance(node, MapScope) else tasklet,))


def _adding_whole(loop, containers):
    """The summation ``loop`` is when it is three perfectly nested loops over whole
    dimensions adding products of one scale to each element of a matrix once (``C[i, j]
    += s * A[i, k] * B[k, j]``, any loop order), else None."""
    nest = _perfect_nest(loop)
    if nest is None or len(nest[0]) != 3:
        return None
    levels, t = nest
    (out, _), = t.outputs
    summed = [lp.var for lp in levels if lp.var not in out.subset]
    found = len(summed) == 1 and _match(levels, summed[0], t, containers)
    if not found or found.own is None or len(found.groups) != 1 or \
            tuple(out.subset) != found.at() or \
            not all(_whole(levels, (out, term.a, term.b), containers)
                    for term in found.groups[0][1]):
        return None
    return found


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


class _Term(NamedTuple):
    """``op(a) @ op(b)`` in a summation: ``connector`` reads its first factor."""
    connector: sp.Symbol
    a: Memlet
    b: Memlet
    trans_a: bool
    trans_b: bool


class _Summation(NamedTuple):
    """A tasklet adding products to what it writes: ``own`` reads its old value (None
    where it sums into its output); the products, of ``shape``, are read at ``rows``
    (loop variables, several for a stack of rows) and ``cols``, grouped as ``(scale,
    terms)``, one product per scale."""
    tasklet: Tasklet
    own: object
    rows: tuple
    cols: sp.Symbol
    shape: tuple
    groups: tuple

    def dims(self):
        return _as_matrix(self.shape)

    def at(self):
        return (*self.rows, self.cols)


def _match(chain, k, t, containers):
    """The products the tasklet ``t`` sums over the loop variable ``k`` inside the loops
    ``chain`` (outermost first, map parameters as loops), as a _Summation -- t
    ``x += s * A[i, k] * B[k, j]`` or a sum of such terms (``A[k, i]``, ``B[j, k]``:
    transposed; ``s`` a product of scalars and constants; x free of k). Only where k
    runs over the whole summed dimension, i and j over a rectangle or a triangle of the
    product, ``chain``'s first loop is over one of them and the loops inside k's do not
    depend on it; else None."""
    update = _summing(t)
    if update is None:
        return None
    own, rest = update
    (out, _), = t.outputs
    levels = {lp.var: lp for lp in chain}
    if any(k in sp.sympify(e).free_symbols for e in out.subset):
        return None
    order = [lp.var for lp in chain]
    terms = [_product(term, t, k, order, containers) for term in terms_of(rest)]
    if None in terms or len({(i, j) for _, _, (i, j), _ in terms}) != 1:
        return None
    rows, cols = terms[0][2]
    shapes, sizes = {s for _, _, _, (s, _) in terms}, {n for _, _, _, (_, n) in terms}
    if len(shapes) != 1 or len(sizes) != 1 or chain[0].var not in (*rows, cols, k):
        return None
    (shape,), (n,) = shapes, sizes
    inner = chain[order.index(k) + 1:]
    operands = {m.data for _, term, _, _ in terms for m in (term.a, term.b)}
    if not _summed_whole(levels[k], n) or \
            not all(_spans(levels[v], size, order) for v, size in zip((*rows, cols), shape)) or \
            any(k in sp.sympify(x).free_symbols for lp in inner
                for x in (lp.start, lp.stop, lp.step)) or out.data in operands or \
            any(containers[name].dtype != np.float64 for name in operands):
        return None
    groups = {}
    for scale, term, _, _ in terms:
        groups.setdefault(scale, []).append(term)
    return _Summation(t, own, rows, cols, shape,
                      tuple((scale, tuple(group)) for scale, group in groups.items()))


def _summing(t):
    """(connector of the old value, the value added) for a tasklet ``x = x + f``, (None,
    f) for one summing f into its one output; else None."""
    if len(t.outputs) == 1 and t.outputs[0][0].wcr == "sum":
        return None, t.outputs[0][1]
    update = self_update(t)
    if update is None or update[0] != "sum":
        return None
    return update[1], update[2]


def _product(term, t, k, order, containers):
    """(scale, its _Term, (i, j), (the product's shape, summed size)) for a term ``scale *
    A[i, k] * B[k, j]`` (A or B transposed; ``A[r, q, k]``: a stack of rows, i the tuple
    ``(r, q)``) of ``t``'s value, i and j distinct variables of ``order``, i's first
    before j there, the scale reading only scalar containers; else None."""
    reads = t.connector_memlets()
    args = factors_of(term)             # BLAS sums in its own order: within rounding
    factors = [f for f in args if f in reads and len(reads[f].subset) >= 2]
    scale = sp.Mul(*[f for f in args if f not in factors])
    scalars = {c for c, m in t.inputs if c in scale.free_symbols}
    if len(factors) != 2 or scale.free_symbols != scalars or \
            any(containers[reads[c].data].shape for c in scalars):
        return None
    sides = [_side(reads[f].subset, k) for f in factors]
    if None in sides or not all(v in order for other, _ in sides for v in other):
        return None
    if order.index(sides[0][0][0]) > order.index(sides[1][0][0]):
        factors, sides = factors[::-1], sides[::-1]
    (i, a_first), (j, b_first) = sides
    if len(j) != 1 or j[0] in i:
        return None
    j, = j
    (a, b), shapes = (reads[f] for f in factors), [containers[reads[f].data].shape
                                                   for f in factors]
    shape = (shapes[0][1:] if a_first else shapes[0][:-1]) + (shapes[1][1 if b_first else 0],)
    summed = {shapes[0][0 if a_first else -1], shapes[1][0 if b_first else 1]}
    if len(summed) != 1:
        return None
    return scale, _Term(factors[0], a, b, a_first, not b_first), (i, j), (shape, summed.pop())


def _side(subset, k):
    """(the other indices, whether k comes first) of a subset indexing one dimension by
    ``k``, the first or the last of two, the last of more, the others distinct variables
    free of k; else None."""
    subset = tuple(subset)
    if subset.count(k) != 1 or k not in (subset[0], subset[-1]) or \
            len(subset) > 2 and subset[0] == k:
        return None
    other = subset[1:] if subset[0] == k else subset[:-1]
    if not all(isinstance(v, sp.Symbol) for v in other) or len(set(other)) != len(other):
        return None
    return other, subset[0] == k


def _summed_whole(loop, size):
    """Whether ``loop`` runs from 0 by 1 up to ``size``."""
    return loop.start == 0 and loop.step == 1 and sp.expand(loop.stop - size) == 0


def _spans(loop, size, variables):
    """Whether ``loop`` runs by 1 over a dimension of ``size`` but for a triangle and a few
    rows (each bound a number, or the size or another of ``variables`` plus one; not a
    fixed number of trips), so a product over the whole of it wastes little."""
    def bound(e):
        rest = sp.expand(e - sp.expand(e).as_coeff_Add()[0])
        return rest == 0 or sp.expand(rest - size) == 0 or \
            (rest in variables and rest != loop.var)
    return loop.step == 1 and bound(loop.start) and bound(loop.stop) and \
        not sp.expand(loop.stop - loop.start).is_number


def _whole(loops, memlets, containers):
    """Whether each loop runs from 0 by 1 up to the size of every dimension it indexes."""
    stops = {lp.var: lp.stop for lp in loops}
    return all(lp.start == 0 and lp.step == 1 for lp in loops) and all(
        sp.expand(n - stops[v]) == 0
        for m in memlets for v, n in zip(m.subset, containers[m.data].shape))


def _perfect_nest(loop):
    """(the loops, the tasklet) when ``loop`` nests counted loops, each the only statement
    of the one around it, around a single tasklet with one output or a map of one (its
    parameters then the innermost loops); else None."""
    loops = [loop]
    while counted(loops[-1]):
        body = list(flattened(loops[-1].body))
        if len(body) != 1:
            return None
        if isinstance(body[0], LoopRegion):
            loops.append(body[0])
            continue
        nodes = body[0].nodes if isinstance(body[0], State) else ()
        if len(nodes) != 1:
            return None
        (levels, t), *more = leaves(nodes[0])
        if more or not isinstance(t, Tasklet) or len(t.outputs) != 1:
            return None
        return (*loops, *levels), t
    return None
