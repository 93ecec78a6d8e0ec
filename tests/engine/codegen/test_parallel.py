"""Parallel loops and maps (OpenMP): which are parallel, and that threads change nothing
but the rounding of sums."""
import numpy as np
import pytest

from adjoint import float64, grad, kernel, options, symbol
from adjoint.analysis.parallel import parallelize
from adjoint.codegen import translation_units
from adjoint.sdfg.nodes import LoopRegion, MapScope, walk
from adjoint.corpus.arrays import masked_updates
from adjoint.corpus.more import conv2d, make_conv2d
from kernel_testing import check_vjp_and_jvp

N = symbol("N")


@kernel
def jacobi(A: float64[N, N], B: float64[N, N], T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                B[i, j] = 0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j])
        A[1:-1, 1:-1] = np.tanh(B[1:-1, 1:-1])
    return np.sum(A * A)


@kernel
def row_norms(A: float64[N, N], out: float64[N]) -> float:
    for i in range(N):
        s = 0.0                      # private to each row
        for j in range(N):
            s += A[i, j] * A[i, j]
        out[i] = np.sqrt(s)
    return np.sum(out)


@kernel
def step_norms(A: float64[N, N], T: int) -> float:
    total = 0.0
    for t in range(T):
        A[:, :] = 0.5 * A + 0.1 * np.sin(A)
        total += np.sum(A * A)       # a sum into a scalar, inside a sequential loop
    return total


@kernel
def seidel_row(A: float64[N, N]) -> float:
    total = 0.0
    for i in range(1, N - 1):
        for j in range(1, N - 1):
            A[i, j] = 0.25 * (A[i - 1, j] + A[i, j - 1] + A[i + 1, j] + A[i, j + 1])
        total += A[i, 1]             # carried from row to row
    return total


@kernel
def column_sums(A: float64[N, N], w: float64[N]) -> float:
    c = np.zeros(N)
    for i in range(N):
        for j in range(N):
            c[j] += A[i, j] * w[i]           # every row adds into every column
    return np.sum(c * c)


@kernel
def scaled_outer(A: float64[N, N], a: float64[N], b: float64[N]) -> float:
    A += a[:, None] * b[None, :]             # the adjoint of b is a sum over the rows
    return np.sum(A * A)


def _parallel_vars(k, args):
    spec = k.specialize(args)
    marked = parallelize(spec.sdfg)
    out = set()
    for node, context in walk(marked.body):
        out |= {str(r.var) for r in context if isinstance(r, LoopRegion) and r.parallel}
        if isinstance(node, MapScope) and node.parallel:
            out.add("map")
    return out


def test_dependence_analysis():
    A = np.ones((6, 6))
    assert _parallel_vars(jacobi, (A, A.copy(), 1)) == {"i", "map"}   # not t, not j (inside)
    assert _parallel_vars(row_norms, (A, np.ones(6))) == {"i", "map"}
    assert _parallel_vars(seidel_row, (A,)) == set()        # rows depend on rows


def test_sums_that_rows_share_go_through_per_thread_copies():
    """A top-level loop whose rows all add into a column sum runs on threads, each
    adding into a copy of its own (``sums``)."""
    spec = column_sums.specialize((np.ones((6, 6)), np.ones(6)))
    loops = [r for _, ctx in walk(parallelize(spec.sdfg).body) for r in ctx
             if isinstance(r, LoopRegion) and r.parallel]
    assert loops and all(r.sums == ("c",) for r in loops)


def test_a_taped_reverse_loop_sums_through_copies_with_its_adjoint_scalars_private():
    """conv2d's reverse over filters pops one value per pixel, adds into the image's
    adjoint at pixels the other filters add into too, and carries the adjoint of the
    per-pixel sum, zero whenever a pixel starts and ends: it runs on threads, the image
    adjoint through per-thread copies, the scalar private (each copy from zero)."""
    spec = conv2d.specialize(make_conv2d(np.random.default_rng(0), 6))
    reverse = next(r.reverse for r in spec.backward(frozenset({"x", "w"}), frozenset(
        {"__return"})).adjoint.regions if r.name.startswith("loop over f"))
    top, = (r for r in parallelize(reverse).body.elements if isinstance(r, LoopRegion))
    assert top.parallel and top.sums == ("__g_x",) and "__g_s" in top.private


@pytest.mark.parametrize("k,make,wrt", [
    (jacobi, lambda r: (r.random((240, 240)), np.zeros((240, 240)), 3), "A"),
    (row_norms, lambda r: (r.random((260, 260)), np.zeros(260)), "A"),
    (step_norms, lambda r: (r.random((260, 260)), 3), "A"),
    (column_sums, lambda r: (r.random((260, 260)), r.random(260)), "A"),
    (scaled_outer, lambda r: (r.random((260, 260)), r.random(260), r.random(260)), "A"),
    (conv2d, lambda r: make_conv2d(r, 40), "x"),
    (masked_updates, lambda r: (2 * r.random(20000), r.random(20000), 0.4), "lo")],
    ids=["jacobi", "rows", "steps", "columns", "outer", "conv2d", "masked"])
def test_threads_change_only_the_rounding_of_sums(k, make, wrt, monkeypatch):
    """(masked_updates: a record loop that pushes into slots and sums into scalars, and
    its reverse, which pops and adds into a scalar: each through per-thread partial
    sums, SIMD accumulators within a thread's share.)"""
    args = make(np.random.default_rng(0))
    results = {}
    for threads in (1, 2, 2):
        monkeypatch.setattr(options, "threads", threads)
        work = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        ret = k(*work)
        g = grad(k, wrt=wrt)(*args)
        results.setdefault(threads, []).append((ret, work, g))
    (r1, w1, g1), = results[1]
    (r2, w2, g2), (r2b, w2b, g2b) = results[2]
    assert r2 == r2b and np.array_equal(g2, g2b)          # deterministic with 2 threads
    for a, b in zip(w1, w2):
        if isinstance(a, np.ndarray):
            assert np.array_equal(a, b)                       # elementwise work: identical
    assert r2 == pytest.approx(r1, rel=1e-13)                 # sums: rounding only
    np.testing.assert_allclose(g2, g1, rtol=1e-12)
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    assert r1 == pytest.approx(k.py_func(*ref), rel=1e-11)


@pytest.mark.c_source
def test_generated_code_uses_openmp_where_it_pays():
    jacobi(np.ones((5, 5)), np.ones((5, 5)), 1)
    _, (source, *_) = translation_units(jacobi.specializations[0].forward.source)
    # the loop over i and the map inside t: a plain `if` on the size; the final sum: a clause
    assert source.count("#pragma omp parallel\n") == 2
    assert source.count("#pragma omp parallel if(") == 1


@pytest.mark.c_source
def test_parallel_nests_inside_loops_are_generated_once():
    """A parallel loop or map inside a sequential loop is one function, called on the
    whole range below the work threshold and on each thread's share above it: there is
    no serial copy of it for the C compiler to optimise a second time."""
    jacobi(np.ones((5, 5)), np.ones((5, 5)), 1)
    source = jacobi.specializations[0].forward.source
    stores = [line.strip().split(" = ")[0] for line in source.splitlines()
              if line.lstrip().startswith(("v_A[", "v_B["))]
    assert sorted(stores) == ["v_A[n_N*(i___m1_0 + 1) + i___m1_1 + 1]", "v_B[n_N*i_i + i_j]"]
    for shared in ("sc_shared0(", "sc_shared1("):       # defined, called twice
        assert source.count(shared) == 3


@kernel
def matvec(A: float64[N, N], x: float64[N], y: float64[N]) -> float:
    for i in range(N):
        for j in range(N):
            y[i] += A[i, j] * x[j]           # a dot product per row
    return np.sum(y)


@kernel
def running_sum(x: float64[N], y: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s += x[i]
        y[i] = s                             # reads the sum every iteration: stays in order
    return s


@kernel
def forward_dependence(x: float64[N], y: float64[N]) -> float:
    s = 0.0
    for i in range(1, N - 1):
        y[i] = 2.0 * x[i]
        s += y[i - 1] * x[i]                 # reads what the previous iteration wrote
    return s


@kernel
def backward_dependence(x: float64[N], y: float64[N]) -> float:
    s = 0.0
    for i in range(1, N - 1):
        s += y[i - 1] * x[i]                 # reads y[i - 1] before ...
        y[i] = 2.0 * x[i]                    # ... the previous iteration wrote it last
    return s


@pytest.mark.c_source
def test_simd_sums_keep_lexically_forward_dependences_only():
    """A loop whose iterations meet only in lexically forward dependences (what a SIMD
    chunk preserves) still sums under ``omp simd``; a backward one stays in order."""
    rng = np.random.default_rng(5)
    x = rng.random(50)
    for k in (forward_dependence, backward_dependence):
        y = rng.random(50)
        want = k.py_func(x.copy(), y.copy())
        assert k(x, y) == pytest.approx(want, rel=1e-13)
    assert "omp simd" in forward_dependence.specializations[0].forward.source
    assert "omp simd" not in backward_dependence.specializations[0].forward.source


@pytest.mark.c_source
def test_inner_sums_vectorise_as_simd_reductions():
    rng = np.random.default_rng(3)
    A, x = rng.random((300, 300)), rng.random(300)
    y = np.zeros(300)
    assert matvec(A, x, y) == pytest.approx(float(np.sum(A @ x)), rel=1e-13)
    np.testing.assert_allclose(y, A @ x, rtol=1e-13)
    source = matvec.specializations[0].forward.source
    assert "#pragma omp simd reduction(+:sc_acc0)" in source
    assert "v_y[i_i] += sc_acc0;" in source          # one update of y[i] per row
    y = np.zeros(300)
    assert running_sum(x, y) == pytest.approx(float(np.sum(x)), rel=1e-13)
    np.testing.assert_allclose(y, np.cumsum(x), rtol=1e-13)
    assert "omp simd" not in running_sum.specializations[0].forward.source


@kernel
def row_filter(A: float64[N, N], out: float64[N, N]) -> float:
    for i in range(N):
        for j in range(N):
            s = 0.0                  # written first in every j iteration, read only there
            for k in range(N):
                s += A[i, k] * A[k, j]
            out[i, j] = np.tanh(s)
    return np.sum(out)


def test_a_scalar_private_to_an_inner_loop_is_private_to_the_outer_one():
    A = np.ones((6, 6))
    assert "i" in _parallel_vars(row_filter, (A, np.zeros((6, 6))))
    rng = np.random.default_rng(5)
    A, out = rng.random((80, 80)), np.zeros((80, 80))
    ref = np.zeros((80, 80))
    assert row_filter(A, out) == pytest.approx(row_filter.py_func(A, ref), rel=1e-12)
    np.testing.assert_allclose(out, ref, rtol=1e-12)


@kernel
def relax(p: float64[N, N], b: float64[N, N], dx: float, T: int) -> float:
    for t in range(T):
        pn = p.copy()
        p[1:-1, 1:-1] = ((pn[1:-1, 2:] + pn[1:-1, :-2]) * dx**2 - b[1:-1, 1:-1]) / (2 * (dx**2 + 1.0))
    return np.sum(p * p)


@pytest.mark.c_source
def test_scalars_an_inner_loop_only_reads_are_read_before_it():
    """cavity_flow's pressure iterations: the reverse sweep's inner loops read dx at every
    element while they store adjoints, and GCC, which cannot prove the stores leave it
    alone, reloaded it and recomputed dx**2 + 1 and its quotient per vector. Read into a
    local before the loop (the sum into dx's adjoint stays an accumulator); the gradient,
    dx's too, matches central differences."""
    rng = np.random.default_rng(3)
    args = (rng.random((12, 12)), rng.random((12, 12)), 0.7, 3)
    check_vjp_and_jvp(relax, relax.py_func, args, rng)
    spec = relax.specializations[-1]
    source = spec.backward(frozenset({"p", "b", "dx"}), frozenset({"__return"})).source
    before, loop = source.split("#pragma omp simd reduction(+:sc_acc0)\n", 1)
    loop = loop.split("v___g_dx[0] += sc_acc0;", 1)[0]
    assert before.rstrip().endswith("const double sc_inv_dx = v_dx[0];")
    assert "c_in3 = sc_inv_dx;" in loop and "v_dx[0]" not in loop


def test_divisions_by_loop_invariants_are_grouped_for_hoisting():
    """``g * dy**2 / (2 dx**2 + 2 dy**2)`` is printed with the fixed factors grouped, so
    the C compiler can compute the quotient once per loop; cheap factors stay as they are."""
    import sympy as sp
    from adjoint.codegen.statements import _factor_out
    g, a, dx, dy = sp.symbols("g a dx dy", real=True)
    (out,) = _factor_out([g * dy**2 / (2 * dx**2 + 2 * dy**2)], {dx, dy})
    grouped = [u for u in sp.preorder_traversal(out) if isinstance(u, sp.UnevaluatedExpr)]
    assert grouped and grouped[0].args[0] == dy**2 / (2 * dx**2 + 2 * dy**2)
    assert _factor_out([3 * a * dx + g], {dx}) == [3 * a * dx + g]


def test_flat_recording_loops_place_tape_values_by_iteration():
    """leapfrog records x and y in its i loop: iteration k's values go to fixed slots
    (sc_tp + c * n + k), not through a running sc_tp++, so the record loop has no chain
    between iterations, and the reverse loop, whose only other link is the sum into
    g_a, vectorises as a simd reduction."""
    import re
    from adjoint.corpus.loops import CASES_BY_NAME
    from kernel_testing import rng_for
    case = CASES_BY_NAME["leapfrog"]
    spec = case.kernel.specialize(case.make_args(rng_for("slots")))
    src = spec.backward(frozenset(case.wrt), frozenset({"__return"})).source
    assert "sc_tape[sc_tp++]" not in src and "sc_tape[--sc_tp]" not in src
    assert re.search(r"sc_tape\[sc_tp \+ 1 \* n\w+ \+ k\w+\] = v_x\[", src)
    assert re.search(r"v_x\[\w+\] = sc_tape\[sc_tp \+ 1 \* n\w+ \+ k\w+\];", src)
    assert "#pragma omp simd reduction(+:sc_acc0)" in src


def test_a_loop_adding_into_fixed_and_own_elements_of_one_array_vectorises(monkeypatch):
    """syrk's adjoint, its loops kept (without BLAS; with it the product is a MatMul),
    adds into gA[i, k] (fixed across the j loop) and gA[j, k] (its own element): both
    only additions, so gA[i, k]'s share waits in a local accumulator and the loop is a
    simd reduction (it ran serially, 14x the forward's time)."""
    import re
    from adjoint.corpus.more import CASES
    from kernel_testing import rng_for
    monkeypatch.setattr(options, "blas", False)
    case = {c.name: c for c in CASES}["syrk"]
    args = case.make_args(rng_for("syrk-simd"))
    src = case.kernel.specialize(args).backward(frozenset(case.wrt),
                                                frozenset({"__return"})).source
    assert re.search(r"#pragma omp simd reduction\(\+:sc_acc\d+, sc_acc\d+\)\s*\n\s*"
                     r"for \(int64_t i_j = 0; i_j < i_i \+ 1", src)
    g = grad(case.kernel, wrt="A")(*args)
    alpha, beta, C, A = args
    R = np.tril(beta * C + alpha * A @ A.T) + np.triu(C, 1)
    L = np.tril(2 * R)                      # dloss/dC_new on the written triangle
    want = alpha * (L @ A + L.T @ A)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)


@pytest.mark.c_source
def test_a_loop_deciding_on_data_records_and_reverses_on_threads(monkeypatch):
    """limited_flux decides on data in every iteration of a row loop. Its flag is
    recorded once per iteration (test_records), so its record and reverse loops run on
    threads, each row's flags in its own block of the tape (the column loops place them
    in slots): 1 and 2 threads give the same gradient, bit for bit."""
    from test_records import limited_flux, limited_flux_gradient
    rng = np.random.default_rng(11)
    u, c = rng.standard_normal((200, 201)), 0.5 + rng.random((200, 201))
    spec = limited_flux.specialize((u, c))
    src = spec.backward(frozenset({"u", "c"}), frozenset({"__return"})).source
    assert "sc_tape[sc_tp++]" not in src and "sc_tape[--sc_tp]" not in src
    assert src.count("int64_t sc_tp = sc_tp0 + (ki_i) * (sc_trip(0, n_M - 1, 1));") == 1
    assert src.count("int64_t sc_tp = sc_tp0 + (ki_i + 1) * (sc_trip(0, n_M - 1, 1));") == 1
    grads = []
    for threads in (1, 2, 2):
        monkeypatch.setattr(options, "threads", threads)
        grads.append(grad(limited_flux, wrt=("u", "c"))(u, c))
    for one, two, again in zip(*grads):
        assert np.array_equal(one, two) and np.array_equal(two, again)
    for got, want in zip(grads[0], limited_flux_gradient(u, c)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_edges_of_gathered_nests_run_on_threads(monkeypatch):
    """heat-3d's gathered adjoint tests, per element of its thin edges, which of its
    seven terms apply: seven statements an element, so an edge slab of N x N elements
    is worth threads (on one thread the edges took a third of the reverse sweep at
    N = 80). The loops over the two sides and over a slab's two planes are too short
    to share; the rows inside are shared, and the result does not depend on it."""
    from adjoint.corpus.loops import CASES_BY_NAME
    from kernel_testing import fd_atol, fd_directional, run_reference
    case = CASES_BY_NAME["heat3d"]
    rng = np.random.default_rng(4)
    args = (rng.random((72, 72, 72)), rng.random((72, 72, 72)), 1)
    src = case.kernel.specialize(args).backward(frozenset({"A"}),
                                                frozenset({"__return"})).source
    edges = [_block(src, k) for k in range(len(src))
             if src.startswith("for (int64_t i___side_i = 0;", k)]
    assert len(edges) == 2 and all("#pragma omp parallel" in e for e in edges)
    grads = {}
    for threads in (1, 2):
        monkeypatch.setattr(options, "threads", threads)
        grads[threads] = grad(case.kernel, wrt="A")(*args)
    assert np.array_equal(grads[1], grads[2])
    d = rng.standard_normal(args[0].shape)
    loss = lambda a: run_reference(case.kernel, a)[0]             # noqa: E731
    want = fd_directional(loss, args, {"A": 0}, {"A": d})
    assert np.sum(grads[2] * d) == pytest.approx(want, rel=1e-7, abs=fd_atol(loss(args)))


def _block(src, start):
    """The C from ``start`` to the brace that closes the block opened there."""
    depth, k = 0, src.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(src[k], 0)
        if depth == 0:
            return src[start:k + 1]
        k += 1
@kernel
def squash_steps(u: float64[N], T: int) -> float:
    for t in range(T):
        u[:] = 0.9 * np.tanh(u) + 0.05 * u     # records u: the reverse needs tanh'(old u)
    return np.sum(u * u)


@kernel
def squash_rows(A: float64[N, N]) -> float:
    for i in range(N):
        for j in range(N):
            A[i, j] = np.tanh(A[i, j]) + 0.1 * A[i, j] * A[i, j]
    return np.sum(A * A)


@kernel
def squash_slices(A: float64[N, N]) -> float:
    for i in range(N):
        A[i, :] = np.tanh(A[i, :]) + 0.1 * A[i, :]     # a recording map in the loop
    return np.sum(A * A)


@kernel
def squash_planes(A: float64[N, N], T: int) -> float:
    for t in range(T):
        A[:, :] = 0.9 * np.tanh(A) + 0.05 * A
    return np.sum(A * A)


@pytest.mark.c_source
def test_recording_nests_run_on_threads():
    """Maps that record run on threads, as the loops of their reverse, in the record
    and in the reverse; inside a time loop, as one function over each thread's share
    that takes the tape and the positions: a flat map keeps its slots
    (sc_tp + c * n + k), the rows of a 2-D one start at their own tape positions
    (sc_tp0 + k * m), as loops that record do (squash_rows)."""
    import re

    def backward(k, args):
        return k.specialize(args).backward(frozenset({"u" if k is squash_steps else "A"}),
                                           frozenset({"__return"})).source
    src = backward(squash_steps, (np.ones(5), 2))
    shared = re.findall(r"static SC_SHARED void \w+\(([^)]*)\) \{\n(.*?)\n\}", src, re.S)
    tape = [body for params, body in shared
            if "double *restrict sc_tape, const int64_t sc_tp, const int64_t n" in params]
    assert len(tape) == 2        # the record's pushes and the reverse's pops
    assert re.search(r"sc_tape\[sc_tp \+ 0 \* n\w+ \+ k\w+\] = v_u\[", tape[0])
    assert re.search(r"v_u\[\w+\] = sc_tape\[sc_tp \+ 0 \* n\w+ \+ k\w+\];", tape[1])
    src = backward(squash_planes, (np.ones((5, 5)), 2))
    assert src.count("double *restrict sc_tape, const int64_t sc_tp0, int64_t sc_k0") == 2
    for k, args in ((squash_rows, (np.ones((5, 5)),)), (squash_slices, (np.ones((5, 5)),)),
                    (squash_planes, (np.ones((5, 5)), 2))):
        src = backward(k, args)
        assert src.count("const int64_t sc_tp0 = sc_tp;") == 2, k.py_func.__name__
        assert re.search(r"int64_t sc_tp = sc_tp0 \+ \(k\w+\) \* \(sc_trip", src)
        assert re.search(r"int64_t sc_tp = sc_tp0 \+ \(k\w+ \+ 1\) \* \(sc_trip", src)


@pytest.mark.parametrize("k,make", [
    (squash_steps, lambda r: (r.standard_normal(40000), 3)),
    (squash_rows, lambda r: (r.standard_normal((200, 200)),)),
    (squash_slices, lambda r: (r.standard_normal((200, 200)),)),
    (squash_planes, lambda r: (r.standard_normal((200, 200)), 2))],
    ids=["flat", "rows", "slices", "planes"])
def test_recording_nests_on_threads_give_the_serial_gradient(k, make, monkeypatch):
    """Above the work threshold: two threads' gradient equals one thread's, and finite
    differences."""
    from kernel_testing import fd_atol, fd_directional, run_reference
    args = make(np.random.default_rng(1))
    wrt = "u" if k is squash_steps else "A"
    grads = {}
    for threads in (1, 2):
        monkeypatch.setattr(options, "threads", threads)
        grads[threads] = grad(k, wrt=wrt)(*args)
    assert np.array_equal(grads[1], grads[2])
    d = np.random.default_rng(2).standard_normal(args[0].shape)
    loss = lambda a: run_reference(k, a)[0]             # noqa: E731
    want = fd_directional(loss, args, {wrt: 0}, {wrt: d})
    assert np.sum(grads[2] * d) == pytest.approx(want, rel=1e-7, abs=fd_atol(loss(args)))


def test_a_loop_pushing_a_sum_of_counts_moves_the_tape_past_all_of_them(monkeypatch):
    """gramschmidt's j loop pushes R[k, j] and a column of A, M + 1 values per iteration:
    on threads the tape position moves past (M + 1) * n of them once the loop is done,
    not M + n (the next column overwrote the record, and the gradient was wrong)."""
    from adjoint.corpus.more import CASES_BY_NAME, make_gramschmidt
    from kernel_testing import fd_atol, fd_directional, run_reference
    case = CASES_BY_NAME["gramschmidt"]
    rng = np.random.default_rng(6)
    args = make_gramschmidt(rng, 150)
    src = case.kernel.specialize(args).backward(frozenset({"A"}), frozenset({"__return"})).source
    assert "sc_tp += (sc_trip(0, n_M, 1) + 1) * ni_j;" in src
    monkeypatch.setattr(options, "threads", 2)
    g = grad(case.kernel, wrt="A")(*args)
    d = rng.standard_normal(args[0].shape)
    loss = lambda a: run_reference(case.kernel, a)[0]             # noqa: E731
    want = fd_directional(loss, args, {"A": 0}, {"A": d})
    assert np.sum(g * d) == pytest.approx(want, rel=1e-6, abs=fd_atol(loss(args)))


def test_threads_zero_after_another_count_restores_the_starting_team(monkeypatch):
    """``threads=0`` means the team OpenMP started with; ``omp_set_num_threads`` is
    process-wide, so after ``threads=1`` a 0 passed on as 0 left every module on one."""
    from types import SimpleNamespace
    from adjoint.runtime.module import CompiledModule, default_threads
    calls = []
    module = SimpleNamespace(threads=0, lib=SimpleNamespace(sc_set_threads=calls.append))
    monkeypatch.setattr(options, "threads", 1)
    CompiledModule._threads(module)
    monkeypatch.setattr(options, "threads", 0)
    CompiledModule._threads(module)
    assert calls == [1, default_threads()] and calls[1] >= 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")
    assert default_threads() == 3
