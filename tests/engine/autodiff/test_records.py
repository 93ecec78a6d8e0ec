"""What the recording forward pushes, and the gradients that come out without it.

A write is recorded only when a reverse partial reads the container at or after it in
program order (the reverse restores back to the first reader only), and a max/min
reduction ``acc = np.maximum(acc, v)`` is reversed from the final ``acc`` without any record.
Every gradient here is checked against central finite differences or a hand derivation.
"""
import numpy as np

from adjoint import float64, grad, kernel, symbol
from adjoint.sdfg.nodes import LoopRegion, MapScope, Memlet, Push, walk
from adjoint.corpus.arrays import CASES_BY_NAME
from kernel_testing import (arg_names, assert_arrays_close, fd_gradient, rng_for,
                            run_reference)

N = symbol("N")
M = symbol("M")


def pushed(k, args, wrt):
    """The containers the recording forward pushes, one entry per Push node."""
    spec = k.specialize(args)
    adj = spec.backward(frozenset(wrt), frozenset({"__return"})).adjoint
    nodes = [leaf for r in adj.regions for node, _ in walk(r.record.body)
             for leaf in (node.body if isinstance(node, MapScope) else (node,))]
    return sorted(node.memlet.data for node in nodes if isinstance(node, Push))


def check_fd(k, args, wrt, rtol=1e-6):
    names = arg_names(k)
    index_of = {n: i for i, n in enumerate(names)}
    loss = lambda a: run_reference(k, a)[0]            # noqa: E731
    got = grad(k, wrt=wrt)(*args)
    got = got if isinstance(got, tuple) else (got,)
    for name, g in zip((wrt,) if isinstance(wrt, str) else wrt, got):
        assert_arrays_close(g, fd_gradient(loss, args, index_of, name), rtol, what=name)


def test_writes_before_their_first_reader_are_not_recorded():
    """gesummv: ``tmp``, the row sums and ``y`` are written before any partial reads
    them (the sums' partials read ``A``, ``B``, ``x``): nothing is pushed. Before, every
    ``sum2[i] += B[i, j] x[j]`` pushed (N*N values)."""
    case = CASES_BY_NAME["gesummv_vec"]
    args = case.make_args(rng_for("records-gesummv"))
    assert pushed(case.kernel, args, case.wrt) == []
    check_fd(case.kernel, args, ("A", "x", "alpha", "beta"))


def test_in_a_map_only_writes_after_a_reader_are_recorded():
    """masked_updates' statements fuse into one map. ``x[x > 1] *= 0.5`` reads the ``x``
    it overwrites, ``y[y > 0.5] = ...`` the ``y`` it overwrites: pushed. The first
    write of ``y`` and the mask ``m`` come before their readers: not pushed."""
    case = CASES_BY_NAME["masked_updates"]
    args = case.make_args(rng_for("records-masked"))
    assert pushed(case.kernel, args, case.wrt) == ["x", "y"]
    check_fd(case.kernel, args, ("x", "y"))


@kernel
def running_max(x: float64[N]) -> float:
    m = x[0] * 2.0
    s = 0.0
    for i in range(1, x.shape[0]):
        m = np.maximum(m, x[i])
        s += m * m                   # reads every intermediate maximum
    return s + m


@kernel
def column_min(A: float64[N, M], w: float64[M]) -> float:
    return np.sum(w * np.min(A, axis=0))


@kernel
def seeded_max(x: float64[N]) -> float:
    m = 2.0 * x[0]
    for i in range(1, x.shape[0]):
        m = np.maximum(m, x[i])
    return m


@kernel
def read_then_max(x: float64[N]) -> float:
    m = x[0] * x[1]
    s = m * m                        # needs m from before the reduction overwrites it
    for i in range(2, x.shape[0]):
        m = np.maximum(m, x[i])
    return s + m


@kernel
def read_then_max_inside(x: float64[N]) -> float:
    m = x[0] * x[1]
    s = m * m
    if x.shape[0] > 2:               # the loop is not a region of its own here
        for i in range(2, x.shape[0]):
            m = np.maximum(m, x[i])
    return s + m


def test_max_reduction_records_nothing():
    """logsumexp and softmax rows: the running maximum is not pushed (it was N values)."""
    for name in ("logsumexp", "softmax_rows"):
        case = CASES_BY_NAME[name]
        args = case.make_args(rng_for(f"records-{name}"))
        assert pushed(case.kernel, args, case.wrt) == [], name
        check_fd(case.kernel, args, case.wrt[0])


def test_min_over_an_axis():
    A = rng_for("records-colmin").standard_normal((6, 4))
    w = rng_for("records-colmin-w").standard_normal(4)
    assert pushed(column_min, (A, w), ("A",)) == []
    g = grad(column_min, wrt="A")(A, w)
    want = np.zeros_like(A)
    want[A.argmin(axis=0), np.arange(4)] = w
    assert_arrays_close(g, want, 1e-15, what="d min")


def test_the_starting_value_keeps_the_derivative_when_it_wins():
    x = np.array([3.0, 1.0, 5.0, 2.0])          # 2 * 3 = 6 beats every later value
    assert_arrays_close(grad(seeded_max, wrt="x")(x), np.array([2.0, 0, 0, 0]), 0,
                        what="seed wins")
    x = np.array([1.0, 4.0, 5.0, 2.0])          # 5 wins
    assert_arrays_close(grad(seeded_max, wrt="x")(x), np.array([0, 0, 1.0, 0]), 0,
                        what="x[2] wins")


def test_a_maximum_read_inside_its_loop_is_recorded():
    """``s += m * m`` reads every intermediate maximum: the reduction is reversed
    step by step from the record, not from the final value."""
    x = rng_for("records-running").standard_normal(7)
    assert "m" in pushed(running_max, (x,), ("x",))
    check_fd(running_max, (x,), "x")


def test_a_maximum_read_before_its_reduction_is_recorded():
    """``s = m * m`` reads the ``m`` the reduction then overwrites: its reverse needs that
    value back, so the reduction records (in a region of its own or in the same one)."""
    for k, salt in ((read_then_max, 0), (read_then_max_inside, 1)):
        for x in (np.array([2.0, 1.5, 0.5, 1.0, 2.5]),       # the reduction starts ahead
                  rng_for("records-read-first", salt).standard_normal(6)):
            assert "m" in pushed(k, (x,), ("x",))
            check_fd(k, (x,), "x")


@kernel
def relax(p: float64[N], b: float64[N], nit: int, w: float) -> float:
    for t in range(3):
        for q in range(nit):                 # overwrites p, reads no p in any partial
            p[1:-1] = 0.5 * (p[2:] + p[:-2]) - w * b[1:-1]
        b[:] = b * p                          # reads p: p must come back per step
    return np.sum(p * p)


def test_an_inner_loop_that_only_overwrites_is_recorded_by_one_snapshot():
    """p is pushed whole before the q loop (N values per step), not at each of its
    nit * (N - 2) writes; the reverse pops it back after reversing the q loop."""
    p, b = rng_for("records-relax").standard_normal((2, 9))
    args = (p, b, 5, 0.3)
    spec = relax.specialize(args)
    adj = spec.backward(frozenset({"p", "b", "w"}), frozenset({"__return"})).adjoint
    depths = [len(context) for r in adj.regions for node, context in walk(r.record.body)
              for leaf in (node.body if isinstance(node, MapScope) else (node,))
              if isinstance(leaf, Push) and leaf.memlet.data == "p"]
    assert depths and all(d == 1 for d in depths)      # inside t only, never inside q
    check_fd(relax, args, ("p", "b", "w"))


@kernel
def wave_tanh(u: float64[N], v: float64[N], c: float, T: int) -> float:
    for t in range(T):
        lap = np.zeros_like(u)
        lap[1:-1] = np.tanh(u[2:] - 2.0 * u[1:-1] + u[:-2])    # costly: recorded
        v += c * lap
        u[1:-1] = u[1:-1] + 0.1 * v[1:-1]
    return np.sum(u * u) + 0.5 * np.sum(v * v)


def test_writes_over_a_pushed_whole_container_write_are_not_recorded():
    """``lap = np.zeros_like(u)`` pushes the old ``lap`` whole; ``lap[1:-1] = ...`` then
    overwrites zeros nobody reads: it pushes nothing (one value per element and step,
    not two), and popping the zeros' record restores the step's starting ``lap``."""
    rng = rng_for("records-wave")
    args = (rng.standard_normal(12), rng.standard_normal(12), 0.25, 3)
    assert pushed(wave_tanh, args, ("u", "v", "c")) == ["lap", "u"]
    check_fd(wave_tanh, args, ("u", "v", "c"))


@kernel
def scale_square_shift(A: float64[N, M], w: float64[N], B: float64[N, M]) -> float:
    A *= w[:, np.newaxis]             # pushes A whole (d/dw reads it) ...
    B[:] = A * A                      # ... and, in the same fused map, reads what it wrote
    A[1:] = A[1:] - A[0]
    return np.sum(B) + np.sum(A * A)


def test_a_whole_write_read_later_in_its_own_map_keeps_the_next_write_recorded():
    """row_broadcast: ``A[1:] = A[1:] - A[0]`` overwrites values no partial reads after
    ``A *= w``'s whole-container push: no push. When the scaled values are read in the
    same map (``B = A * A``), that overwrite must push them."""
    case = CASES_BY_NAME["row_broadcast"]
    args = case.make_args(rng_for("records-rows"))
    assert pushed(case.kernel, args, case.wrt) == ["A"]
    check_fd(case.kernel, args, case.wrt)
    rng = rng_for("records-square")
    args = (rng.standard_normal((4, 5)), rng.standard_normal(4), np.zeros((4, 5)))
    assert pushed(scale_square_shift, args, ("A", "w")) == ["A", "A"]
    check_fd(scale_square_shift, args, ("A", "w"))


@kernel
def scaled_running_max(x: float64[N]) -> float:
    m = x[0]
    for i in range(1, x.shape[0]):
        m = np.maximum(m, m * x[i])         # the candidate depends on m: not a plain reduction
    return m


def test_a_maximum_whose_candidate_reads_the_accumulator_is_recorded():
    x = np.array([1.5, 1.2, 0.5, 1.3, 0.8])
    assert "m" in pushed(scaled_running_max, (x,), ("x",))
    check_fd(scaled_running_max, (x,), "x")


@kernel
def limited_flux(u: float64[N, M], c: float64[N, M]) -> float:
    flx = np.zeros((N, M))
    for i in range(N):
        for j in range(M - 1):
            flx[i, j] = c[i, j] * (u[i, j + 1] - u[i, j])
            if flx[i, j] * u[i, j] > 0.0:        # a decision on data in every iteration
                flx[i, j] *= 0.5
    return np.sum(flx * flx)


def limited_flux_args(rng, n=6, gap=1e-2):
    """Inputs whose decisions finite differences cannot flip."""
    while True:
        u, c = rng.standard_normal((n, n + 1)), 0.5 + rng.random((n, n + 1))
        if np.all(np.abs(c[:, :-1] * np.diff(u, axis=1) * u[:, :-1]) > gap):
            return u, c


def limited_flux_gradient(u, c):
    """(d/du, d/dc) of limited_flux, by hand."""
    flx = c[:, :-1] * np.diff(u, axis=1)
    scale = np.where(flx * u[:, :-1] > 0.0, 0.5, 1.0)
    g = 2 * flx * scale * scale                 # d loss / d flx before the limiter
    gu = np.zeros_like(u)
    gu[:, 1:] += g * c[:, :-1]
    gu[:, :-1] -= g * c[:, :-1]
    gc = np.zeros_like(c)
    gc[:, :-1] = g * np.diff(u, axis=1)
    return gu, gc


def _first_loop(region):
    while not isinstance(region, LoopRegion):
        region = region.elements[0]
    return region


def test_a_decision_in_a_loop_is_recorded_once_per_iteration():
    """limited_flux's flag is written first in every j iteration and read only there:
    its value is pushed once, at the end of the iteration, and popped at the start of
    the reversed one. Pushing its previous value before each write chained every
    iteration to the one before; now the record and reverse loops over rows are
    parallel, the flag private to each thread. (The reverse restores the flags and
    selects on them in a nest of its own, before the gathered nests: autodiff/gather/.)"""
    from adjoint.analysis.parallel import parallelize
    from adjoint.sdfg.nodes import Pop, State
    args = limited_flux_args(rng_for("records-flux"))
    adj = limited_flux.specialize(args).backward(frozenset({"u", "c"}),
                                                 frozenset({"__return"})).adjoint
    region = next(r for r in adj.regions if r.name.startswith("loop over i"))
    flag, = (name for name in adj.recorded if name.startswith("__if"))
    assert pushed(limited_flux, args, ("u", "c")) == [flag]
    for sdfg, tape, end in ((region.record, Push, -1), (region.reverse, Pop, 0)):
        rows = _first_loop(sdfg.body)
        columns, = rows.body.elements
        at = columns.body.elements[end]             # the end (record), the start (reverse)
        assert isinstance(at, State) and isinstance(at.nodes[0], tape)     # statements: identity
        assert at.nodes[0].memlet == Memlet(flag)
        marked = _first_loop(parallelize(sdfg).body)
        assert marked.parallel and marked.private == (flag,)
    check_fd(limited_flux, args, ("u", "c"))
    for got, want in zip(grad(limited_flux, wrt=("u", "c"))(*args), limited_flux_gradient(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@kernel
def scratch_product(A: float64[N]) -> float:
    tmp = np.zeros(N)
    for i in range(1, N - 1):
        tmp[i] = A[i - 1] * A[i + 1]
    return np.sum(tmp * A)


def test_the_reverse_of_a_first_write_leaves_its_adjoint_alone():
    """``tmp = np.zeros(N)`` is the first access of ``tmp``: no step of the reverse
    sweep after its reverse reads tmp's adjoint, so that reverse is empty (it was a
    pass zeroing the adjoint)."""
    args = (rng_for("first-write").random(9),)
    adj = scratch_product.specialize(args).backward(frozenset({"A"}),
                                                    frozenset({"__return"})).adjoint
    first = adj.regions[0]
    assert first.writes == {"tmp"} and not list(walk(first.reverse.body))
    check_fd(scratch_product, args, ("A",))
    A = args[0]
    want = np.zeros_like(A)
    want[1:-1] = A[:-2] * A[2:]
    want[:-2] += A[1:-1] * A[2:]
    want[2:] += A[1:-1] * A[:-2]
    np.testing.assert_allclose(grad(scratch_product, wrt="A")(A.copy()), want, rtol=1e-13)


def test_a_sum_in_a_scalar_is_recorded_once_per_iteration():
    """conv2d's ``s = bias[f]``, then ``s += w * x`` over the stencil: only the first
    write pushes, so the value s ends each iteration with is pushed then and popped at
    the start of the reversed iteration; no iteration's record reads another's, and the
    record loop runs on threads."""
    from adjoint.analysis.parallel import parallelize
    from adjoint.corpus.more import conv2d, make_conv2d
    args = make_conv2d(rng_for("conv-record"), 6)
    adj = conv2d.specialize(args).backward(frozenset({"x", "w"}),
                                           frozenset({"__return"})).adjoint
    region = next(r for r in adj.regions if r.name.startswith("loop over f"))
    assert "s" in adj.recorded
    marked = _first_loop(parallelize(region.record).body)
    assert marked.parallel and "s" in marked.private
    check_fd(conv2d, args, ("x", "w"))


@kernel
def rewritten_scalar(a: float64[N], b: float64[N], y: float64[N]) -> float:
    for i in range(N):
        s = a[i]
        y[i] = s * s
        s = b[i] * s            # pushes: y's partial needs the s it overwrites
        y[i] += 3.0 * s
    return np.sum(y * y)


def test_a_scalar_written_twice_per_iteration_keeps_its_pushes():
    """Pushing at the end of the iteration instead needs the one pushing write to be
    the iteration's first access to the scalar: here the reverse of ``y[i] = s * s``
    needs the s that the second write overwrites, so both writes keep their pushes."""
    rng = rng_for("rewritten-scalar")
    args = (rng.random(7), rng.random(7), np.zeros(7))
    record = rewritten_scalar.specialize(args).backward(
        frozenset({"a", "b"}), frozenset({"__return"})).adjoint.regions[0].record
    assert sum(isinstance(n, Push) and n.memlet.data == "s" for n, _ in walk(record.body)) == 2
    check_fd(rewritten_scalar, args, ("a", "b"))
