"""Scatter -> gather rewrite of stencil adjoints (autodiff/gather/): the reverse sweep
of a stencil writes each adjoint element from one iteration, so it runs in parallel and
vectorises, and the gradient still matches finite differences at every size, including
sizes where the gathered core is empty and only edge slabs run."""
import numpy as np
import pytest
import sympy as sp

from adjoint import float64, grad, kernel, symbol
from adjoint.analysis.parallel import parallelize, shared_sums
from adjoint.options import options
from adjoint.sdfg.nodes import (SEGMENT, THREADS, Guard, LoopRegion, MapScope, Pop, Tasklet,
                                walk)

from adjoint.corpus.loops import heat3d, make_heat3d
from kernel_testing import (arg_names, assert_arrays_close, copy_args, fd_directional, fd_gradient,
                            rng_for)

N = symbol("N")


@kernel
def smooth1d(A: float64[N], B: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            B[i] = 0.3 * A[i - 1] + 0.5 * A[i] + 0.2 * A[i + 1]
        for i in range(1, N - 1):
            A[i] = B[i - 1] - 0.5 * B[i + 1]
    return np.sum(A * A)


@kernel
def nonlinear2d(A: float64[N, N], B: float64[N, N], w: float64[N, N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = w[i, j] * (A[i - 1, j] + A[i + 1, j]) + A[i, j - 1] * A[i, j + 1]
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = np.tanh(B[i, j])
    return np.sum(A * A)


@kernel
def two_statements(A: float64[N], B: float64[N], C: float64[N]) -> float:
    for t in range(2):
        for i in range(1, N - 1):
            B[i] = A[i - 1] * A[i]
            C[i] = B[i] + 3.0 * A[i + 1]
        for i in range(1, N - 1):
            A[i] = C[i] * 0.5
    return np.sum(C * C)


@kernel
def backwards(A: float64[N], B: float64[N]) -> float:
    for t in range(3):
        for i in range(N - 2, 0, -1):
            B[i] = A[i + 1] - A[i - 1] * i
        for i in range(1, N - 1):
            A[i] = np.sin(B[i])
    return np.sum(A)


@kernel
def transposed(A: float64[N, N], B: float64[N, N], c: float) -> float:
    for t in range(2):
        for i in range(0, N - 1):
            for j in range(0, N):
                B[i, j] = c * A[j, i + 1] + A[j, i]
        for i in range(N):
            for j in range(N):
                A[i, j] = B[i, j] * B[i, j]
    return np.sum(A)


@kernel
def sliced(A: float64[N], B: float64[N], T: int) -> float:
    for t in range(T):
        B[1:-1] = A[:-2] + 2.0 * A[2:] - A[1:-1]
        A[1:-1] = np.cos(B[1:-1])
    return np.sum(A * B)


@kernel
def top_level(A: float64[N], B: float64[N]) -> float:
    for i in range(1, N - 1):       # the kernel's own loop: a checkpointing segment
        B[i] = A[i - 1] * A[i + 1]
    return np.sum(B * B)


@kernel
def red_black(u: float64[N], f: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1, 2):
            u[i] = np.sin(u[i - 1]) * u[i + 1] + f[i] * u[i]
        for i in range(N - 2, 0, -2):
            u[i] = 0.5 * (u[i - 1] + u[i + 1]) * f[i]
    return np.sum(u * u)


@kernel
def stride3(A: float64[N], B: float64[N], T: int) -> float:
    for t in range(T):
        for i in range(2, N - 4, 3):
            B[i] = A[i - 2] * A[i + 1] + 0.5 * A[i + 4] - A[i]
        for i in range(N - 3, 1, -3):
            A[i] = np.cos(B[i + 2]) * A[i - 1] + B[i - 1] + 0.3 * A[i + 2]
    return np.sum(A * A) + np.sum(B)


@kernel
def checkerboard(A: float64[N, N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1, 2):
            for j in range(N - 2, 0, -2):
                A[i, j] = 0.25 * (A[i - 1, j] + A[i + 1, j] + A[i, j - 1] * A[i, j + 1])
    return np.sum(A * A)


@kernel
def mirrored(y: float64[N], z: float64[N], a: float) -> float:
    for k in range(2, N):
        for i in range(k):
            z[i] = y[i] + a * y[k - 1 - i]      # durbin's update: i and k-1-i meet
        for i in range(1, k):
            y[i] = np.sin(z[i] + a * z[k - i] * z[k - 1 - i])
    return np.sum(y * y)


@kernel
def limited(A: float64[N, N], B: float64[N, N]) -> float:
    for i in range(1, N - 1):
        for j in range(1, N - 1):
            B[i, j] = A[i + 1, j] - A[i - 1, j]
            if B[i, j] * A[i, j] > 0.0:         # a flux limiter: a decision on data
                B[i, j] = 0.5 * B[i, j]
    return np.sum(B * B * A)


@kernel
def top_level_strided(A: float64[N], B: float64[N]) -> float:
    for i in range(N - 2, 0, -2):   # a checkpointing segment of a strided loop
        B[i] = A[i - 1] * A[i + 1]
    return np.sum(B * B)


STRIDED = {
    "red_black": (red_black, lambda r, n: (r.random(n), r.random(n), 3), ("u", "f")),
    "stride3": (stride3, lambda r, n: (r.random(n), r.random(n), 2), ("A", "B")),
    "checkerboard": (checkerboard, lambda r, n: (r.random((n, n)), 2), ("A",)),
    "top_level_strided": (top_level_strided, lambda r, n: (r.random(n), r.random(n)), ("A",)),
}

CASES = {
    "smooth1d": (smooth1d, lambda r, n: (r.random(n), r.random(n), 3), ("A",)),
    "nonlinear2d": (nonlinear2d, lambda r, n: (r.random((n, n)), r.random((n, n)),
                                               r.random((n, n)), 2), ("A", "w")),
    "two_statements": (two_statements, lambda r, n: (r.random(n), r.random(n), r.random(n)),
                       ("A",)),
    "backwards": (backwards, lambda r, n: (r.random(n), r.random(n)), ("A",)),
    "transposed": (transposed, lambda r, n: (r.random((n, n)), r.random((n, n)), 0.7),
                   ("A", "c")),
    "sliced": (sliced, lambda r, n: (r.random(n), r.random(n), 3), ("A",)),
    "top_level": (top_level, lambda r, n: (r.random(n), r.random(n)), ("A",)),
    "mirrored": (mirrored, lambda r, n: (r.random(n), r.random(n), 0.7), ("y", "a")),
    "limited": (limited, lambda r, n: (r.standard_normal((n, n)), r.random((n, n))), ("A",)),
    **STRIDED,
}


def _reverse_sweeps(k, args, wrt):
    spec = k.specialize(args)
    return [parallelize(r.reverse) for r in spec.backward(frozenset(wrt),
                                                          frozenset({"__return"})).adjoint.regions]


def _scatters(sdfg, sizes):
    """Adjoint updates that several iterations share and that run at ``sizes``: maps with
    shared sums, and, in loop nests no enclosing loop of which is parallel, a tasklet
    adding into an array at two elements of the same lattice (the adjoint of one
    stencil statement; a fused band's groups read, zero and add into neighbours of the
    elements other groups add into, dependences that point forwards). (The
    scatter a gathered nest keeps for ranges too short to gather runs only below those
    sizes, or in the first iterations of a loop around a triangular nest: guards are
    taken at the last iteration of the loops around them.)"""
    found = []
    for node, context in walk(sdfg.body):
        loops = [r for r in context if isinstance(r, LoopRegion)]
        last = {**sizes, **{r.var: (r.stop - 1).subs(sizes) for r in loops if r.step == 1}}
        if any(isinstance(r, Guard) and r.condition.subs(last) == sp.false for r in context):
            continue
        if isinstance(node, MapScope) and shared_sums(node):
            found.append(node)
        elif isinstance(node, Tasklet) and loops and not any(r.parallel for r in loops):
            sums = [m for m, _ in node.outputs if m.wcr]
            if any(x.data == y.data and x.subset != y.subset and
                   _may_meet(x.subset, y.subset, loops) for x in sums for y in sums):
                found.append(node)
    return found


def _may_meet(x, y, loops):
    """Whether subsets ``x`` and ``y`` may name one element in some two iterations: not
    when, in some dimension, both are ``a*v + c`` of a loop variable v stepping by s, c
    apart by an integer that is no multiple of ``a*s``."""
    for ex, ey in zip(x, y):
        apart = sp.expand(ex - ey)
        for loop in loops:
            a = sp.diff(ex, loop.var)
            if a.is_Integer and a != 0 and a == sp.diff(ey, loop.var) and apart.is_Integer \
                    and apart % (a * loop.step) != 0:
                return False
    return True


@pytest.mark.parametrize("name", sorted(CASES))
def test_reverse_sweep_of_a_stencil_has_no_scatter(name):
    k, make, wrt = CASES[name]
    sizes = {N: 64, SEGMENT[0]: 0, SEGMENT[1]: 6}
    for sdfg in _reverse_sweeps(k, make(rng_for(name), 16), wrt):
        assert not _scatters(sdfg, sizes), f"{name}: a scatter is left in\n{sdfg.body}"


def test_flags_are_restored_in_a_nest_of_their_own():
    """A decision on data in a stencil loop: the reverse pops each flag and selects on
    it in a nest that runs first, in the tape's order; the nests after it gather."""
    k, make, wrt = CASES["limited"]
    nodes = [(node, context) for sdfg in _reverse_sweeps(k, make(rng_for("flags"), 16), wrt)
             for node, context in walk(sdfg.body)]
    leading = [c for n, c in nodes if isinstance(n, Pop) and n.memlet.data.startswith("__if")]
    selects = [n for n, c in nodes if isinstance(n, Tasklet) and c in leading]
    assert leading and selects
    for node in selects:
        (m, e), = node.outputs
        assert m.data == "__g_B" and isinstance(e, sp.Piecewise)


def test_in_place_lattice_update_is_one_pass():
    """The adjoint of an in-place red-black half-step adds into one lattice from the
    other, which it then zeroes: both in one pass, the zeroing lagging behind the sums
    that read it (where the gather runs, not in the scatter kept for short ranges)."""
    k, make, wrt = STRIDED["red_black"]
    bodies = {}
    for sdfg in _reverse_sweeps(k, make(rng_for("fold"), 16), wrt):
        for node, context in walk(sdfg.body):
            if isinstance(node, Tasklet) and any(isinstance(r, LoopRegion) and
                                                 r.var.name.startswith("__k_") for r in context):
                bodies.setdefault(context, []).extend(m for m, _ in node.outputs)
    zeroing = [c for c, outputs in bodies.items()
               if any(m.data == "__g_u" and not m.wcr for m in outputs)]
    assert len(zeroing) >= 2
    for context in zeroing:
        assert any(m.data == "__g_u" and m.wcr for m in bodies[context])


def test_both_edges_of_a_dimension_are_one_nest():
    """The two edges of a gathered dimension (one width) run as one nest over their side,
    so the per-element tests of the edge terms are generated, and compiled, once."""
    k, make, wrt = CASES["nonlinear2d"]
    edge_terms = []
    for sdfg in _reverse_sweeps(k, make(rng_for("edges"), 8), wrt):
        for node, context in walk(sdfg.body):
            variables = {r.var for r in context if isinstance(r, LoopRegion)}
            if isinstance(node, Tasklet) and any(isinstance(g, Guard) and g.condition.free_symbols
                                                 & variables for g in context):
                edge_terms.append(context)
    assert edge_terms
    for context in edge_terms:
        sides = [r for r in context if isinstance(r, LoopRegion) and
                 r.var.name.startswith("__side_")]
        assert len(sides) == 1 and (sides[0].start, sides[0].stop) == (0, 2)


HEAT3D = (heat3d, make_heat3d, ("A",))


@pytest.mark.parametrize("name", ["nonlinear2d", "checkerboard", "heat3d"])
def test_edge_slabs_test_rows_not_elements(name):
    """On the thin edges of the outer dimensions a gathered nest tests, per row, which
    terms apply, and runs each over its stretch of the row: no test inside a row loop."""
    k, make, wrt = {**CASES, "heat3d": HEAT3D}[name]
    edges = 0
    for sdfg in _reverse_sweeps(k, make(rng_for("rows"), 8), wrt):
        for node, context in walk(sdfg.body):
            loops = [r for r in context if isinstance(r, LoopRegion)]
            tests = [g for g in context if isinstance(g, Guard) and
                     g.condition.free_symbols & {r.var for r in loops}]
            if isinstance(node, Tasklet) and tests:
                edges += 1
                inner = loops[-1].var
                assert all(inner not in g.condition.free_symbols for g in tests), \
                    f"{name}: {inner} tested inside its loop"
    assert edges


def _bands_in(name):
    """Per innermost loop of the reverse sweeps: (whether a thread-count condition
    encloses it, the loops around it, the containers each of its tasklets writes)."""
    k, make, wrt = CASES[name]
    found = {}
    for sdfg in _reverse_sweeps(k, make(rng_for("bands"), 16), wrt):
        for node, ctx in walk(sdfg.body):
            loops = [r for r in ctx if isinstance(r, LoopRegion)]
            if isinstance(node, Tasklet) and loops:
                threads = any(isinstance(g, Guard) and THREADS in g.condition.free_symbols
                              for g in ctx)
                _, _, written = found.setdefault(id(loops[-1]), (threads, loops, set()))
                written.add(frozenset(m.data for m, _ in node.outputs))
    return list(found.values())


@pytest.mark.parametrize("name", ["smooth1d", "two_statements", "sliced"])
def test_gathered_groups_of_a_1d_nest_fuse_for_one_thread(name):
    """The gathers of one reverse nest and the zeroing after them run as one band (one
    pass over the arrays), moved along the row so that each reads what an earlier one
    wrote behind its stores; a 1-D band would serialise the only loop, so with several
    threads (a condition on the thread count) the groups' own nests run instead."""
    assert any(threads and len(written) >= 2 for threads, _, written in _bands_in(name)), \
        f"{name}: no band of several targets under a thread-count condition"


def test_gathered_groups_of_a_2d_nest_fuse_along_rows():
    """Rows stay independent in a 2-D band: no thread-count condition, outer loop
    parallel."""
    assert any(len(written) >= 2 and not threads and any(r.parallel for r in loops[:-1])
               for threads, loops, written in _bands_in("nonlinear2d"))


@pytest.mark.parametrize("threads,n", [(1, 200), (2, 20000)])
@pytest.mark.parametrize("name", ["smooth1d", "two_statements", "sliced", "red_black",
                                  "stride3"])
def test_banded_gradient_matches_a_directional_difference(name, threads, n, monkeypatch):
    """At sizes past the bands' spread (the finite-difference tests below run the
    scatter kept for short ranges): <grad, v> against a central difference of the
    compiled forward along v, with one thread (the band) and two (the groups' nests).
    (Not the kernels whose derivatives grow with N like i**T or c**N, where no step h
    resolves the difference.)"""
    monkeypatch.setattr(options, "threads", threads)
    k, make, wrt = CASES[name]
    args = make(rng_for(name, n), n)
    index_of = {a: i for i, a in enumerate(arg_names(k))}
    rng = np.random.default_rng(n)
    directions = {w: rng.standard_normal(np.shape(args[index_of[w]])) for w in wrt}
    got = grad(k, wrt=wrt)(*copy_args(args))
    got = got if isinstance(got, tuple) else (got,)
    want = fd_directional(lambda a: float(k(*copy_args(a))), args, index_of, directions)
    along = sum(float(np.sum(g * directions[w])) for w, g in zip(wrt, got))
    assert abs(along - want) <= 1e-7 * max(abs(want), 1.0), (along, want)


@pytest.mark.parametrize("n", [3, 4, 5, 9])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gathered_gradient_matches_finite_differences(name, n):
    _check_finite_differences(name, n)


@pytest.mark.parametrize("n", [2, 6, 7, 10, 11, 16])
@pytest.mark.parametrize("name", sorted(STRIDED))
def test_strided_gradient_matches_finite_differences(name, n):
    """Odd and even sizes, each lattice's first and last element at an edge or not, and
    nests shorter than their shifts' spread (stride3 below N = 10: the scatter runs)."""
    _check_finite_differences(name, n)


@pytest.mark.parametrize("n", [3, 4, 6])
def test_gathered_3d_gradient_matches_finite_differences(n):
    """Edge slabs of two outer dimensions, rows of the third (n = 3: no core)."""
    _check_finite_differences("heat3d", n)


def _check_finite_differences(name, n):
    k, make, wrt = {**CASES, "heat3d": HEAT3D}[name]
    args = make(rng_for(name, n), n)
    index_of = {a: i for i, a in enumerate(arg_names(k))}
    got = grad(k, wrt=wrt)(*copy_args(args))
    got = got if isinstance(got, tuple) else (got,)
    f = lambda a: float(k.py_func(*copy_args(a)))        # noqa: E731
    for name_wrt, g in zip(wrt, got):
        want = fd_gradient(f, args, index_of, name_wrt)
        assert_arrays_close(g, want, 1e-7, f"{name} n={n} d/d{name_wrt}")


@pytest.mark.parametrize("k", [top_level, top_level_strided], ids=lambda k: k.__name__)
@pytest.mark.parametrize("policy", ["recompute_all", "revolve"])
def test_gathered_segments_under_checkpointing(policy, k):
    """A checkpointed top-level stencil reverses segment by segment: each gathered
    segment covers exactly the iterations the scatter did."""
    args = (rng_for("segments").random(41), np.zeros(41))
    want = grad(k, wrt="A", policy="store_all")(*copy_args(args))
    got = grad(k, wrt="A", policy=policy, snapshots=3)(*copy_args(args))
    np.testing.assert_allclose(got, want, rtol=1e-13)
