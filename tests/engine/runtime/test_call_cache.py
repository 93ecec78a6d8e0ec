"""Call overhead (issue #25): a kernel's argument checks, sizes and buffer plans are made
once per argument signature and reused (runtime/arguments.py: ``Binding``), and small
calls keep their buffers and pointer table in a reused ``Frame`` (runtime/memory.py).
Every call that differs in what the checks depend on (shapes, strides, dtypes, read-only
flags, memory shared between arguments, index values, int sizes, the target) still gets
them, after any number of cached calls. Values against the kernel run as Python and
central differences; calls from several threads never share buffers."""
import threading

import numpy as np
import pytest

from adjoint import (ArgumentError, BoundsError, float64, grad, int64, kernel, options,
                     symbol, value_and_grad, vjp)
from adjoint import api
from adjoint.runtime import arguments, module
from adjoint.runtime.memory import FRAMED
from kernel_testing import fd_gradient

N, M = symbol("N"), symbol("M")
host_only = pytest.mark.skipif(options.device != "cpu",
                               reason="frames and the pool hold host buffers")


def _axpy(A: float64[N], B: float64[N], a: float) -> float:
    for i in range(N):
        B[i] = B[i] + a * A[i] * A[i]
    return np.sum(B * B)


axpy = kernel(_axpy)


@kernel
def gather(A: float64[N], idx: int64[M]) -> float:
    s = 0.0
    for j in range(M):
        s += A[idx[j]] * A[idx[j]]
    return s


@kernel
def head(A: float64[N], n: int) -> float:
    s = 0.0
    for i in range(n):
        s += A[i] * A[i]
    return s


@kernel
def doubled(A: float64[N, M]):
    return A * 2.0, np.sum(A)


def _x(n=8, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 1.5, n)


def _expect_axpy(A, B, a):
    B = B.copy()
    return axpy.py_func(A, B, a), B


# ---- the checks run once per signature -------------------------------------------------------
def test_repeated_calls_bind_once_and_take_sizes_from_the_cache(monkeypatch):
    """The first call of a signature runs bind's checks and evaluates the returned arrays'
    shapes; the next ones do neither (each call did both before)."""
    binds, shapes = [], []
    real_bind, real_at = arguments.bind, api.Specialization._at
    monkeypatch.setattr(arguments, "bind", lambda *a, **kw: binds.append(1) or real_bind(*a, **kw))
    monkeypatch.setattr(api.Specialization, "_at",
                        lambda self, *a: shapes.append(1) or real_at(self, *a))
    k = kernel(doubled.__wrapped__)
    A = _x(12).reshape(3, 4)
    k(A)
    first = len(binds), len(shapes)
    for _ in range(3):
        got, total = k(A)
        np.testing.assert_array_equal(got, A * 2.0)
        assert total == pytest.approx(np.sum(A), rel=1e-14)
    assert first[0] == 1 and (len(binds), len(shapes)) == first


@host_only
def test_a_small_gradient_call_reuses_its_frame(monkeypatch):
    """A small gradient call's buffers and pointer table are made on the first call only
    (one table per call before), and every call's gradient is right and its own."""
    built = []
    real = module.BufferTable.__init__
    monkeypatch.setattr(module.BufferTable, "__init__",
                        lambda self, buffers: built.append(1) or real(self, buffers))
    g = grad(kernel(_axpy), wrt="A")
    A, B = _x(), _x(seed=1)
    first = g(A, B, 0.7)
    assert len(built) == 1
    second = g(A * 2.0, B, 0.7)
    assert len(built) == 1
    want = fd_gradient(lambda a: axpy.py_func(a[0], a[1].copy(), a[2]), (A, B, 0.7),
                       {"A": 0, "B": 1, "a": 2}, "A")
    np.testing.assert_allclose(first, want, rtol=1e-7)
    assert not np.shares_memory(first, second)
    np.testing.assert_allclose(second, fd_gradient(
        lambda a: axpy.py_func(a[0], a[1].copy(), a[2]), (A * 2.0, B, 0.7),
        {"A": 0, "B": 1, "a": 2}, "A"), rtol=1e-7)


# ---- every check still fires after cached calls ----------------------------------------------
def _warm(k, *args):
    for _ in range(3):
        k(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])


def test_other_shapes_get_the_full_checks():
    _warm(axpy, _x(), _x(), 0.5)
    with pytest.raises(ArgumentError, match="inconsistent sizes"):
        axpy(_x(8), _x(9), 0.5)
    with pytest.raises(ArgumentError, match="dimensions"):
        axpy(_x(8), _x(16).reshape(2, 8), 0.5)
    A, B = _x(5), _x(5, seed=2)
    want, B_want = _expect_axpy(A, B, 0.5)
    assert axpy(A, B, 0.5) == pytest.approx(want, rel=1e-14)
    np.testing.assert_array_equal(B, B_want)


def test_other_dtypes_and_strides_get_the_full_checks():
    _warm(axpy, _x(), _x(), 0.5)
    with pytest.raises(ArgumentError, match="dtype float32"):
        axpy(_x(), _x().astype(np.float32), 0.5)
    strided = np.zeros(16)[::2]                 # shape (8,) as cached, other strides
    with pytest.raises(ArgumentError, match="C-contiguous"):
        axpy(_x(), strided, 0.5)                # written: refused
    read = np.linspace(0.0, 1.0, 16)[::2]       # read from a copy, at every call
    for k in range(3):
        B, want_B = _x(), _x()
        assert axpy(read, B, 0.5 + k) == axpy(np.ascontiguousarray(read), want_B, 0.5 + k)
        np.testing.assert_array_equal(B, want_B)
        read[:] = read * 2.0
    with pytest.raises(ArgumentError, match="must be a NumPy array"):
        axpy(list(_x()), _x(), 0.5)


def test_a_read_only_array_the_kernel_writes_is_refused_after_cached_calls():
    A, B = _x(), _x(seed=3)
    _warm(axpy, A, B, 0.5)
    frozen = B.copy()
    frozen.flags.writeable = False
    with pytest.raises(ArgumentError, match="read-only"):
        axpy(A, frozen, 0.5)
    # a gradient call copies what the kernel writes: read-only is fine there
    want = grad(axpy, wrt="A")(A, B.copy(), 0.5)
    np.testing.assert_array_equal(grad(axpy, wrt="A")(A, frozen, 0.5), want)
    np.testing.assert_array_equal(frozen, B)


def test_arguments_sharing_memory_are_refused_after_cached_calls():
    A, B = _x(), _x(seed=4)
    _warm(axpy, A, B, 0.5)
    with pytest.raises(ArgumentError, match="share memory"):
        axpy(A, A, 0.5)
    base = _x(12)
    with pytest.raises(ArgumentError, match="share memory"):
        axpy(base[:8], base[4:], 0.5)            # views: overlapping
    with pytest.raises(ArgumentError, match="share memory"):
        grad(axpy, wrt="A")(base[:8], base[4:], 0.5)
    base = _x(16)
    A, B = base[:8], base[8:]                   # views of one array, disjoint: fine
    want, B_want = _expect_axpy(A.copy(), B.copy(), 0.5)
    assert axpy(A, B, 0.5) == pytest.approx(want, rel=1e-14)
    np.testing.assert_array_equal(B, B_want)


def test_index_values_are_checked_on_every_call():
    A = _x()
    idx = np.array([0, 3, 7], dtype=np.int64)
    for _ in range(3):
        assert gather(A, idx) == gather.py_func(A, idx)
    with pytest.raises(BoundsError):
        gather(A, np.array([0, 3, 8], dtype=np.int64))      # same signature, out of range
    with pytest.raises(BoundsError):
        grad(gather, wrt="A")(A, np.array([-1, 3, 7], dtype=np.int64))
    small = np.array([1, 2, 3], dtype=np.int32)             # converted, checked each call
    assert gather(A, small) == gather.py_func(A, small)
    with pytest.raises((BoundsError, ArgumentError)):
        gather(A, np.array([1, 2, 9], dtype=np.int32))
    assert gather(A, idx) == gather.py_func(A, idx)


def test_int_sizes_are_part_of_the_signature():
    A = _x()
    for n in (8, 3, 8, 5):
        assert head(A, n) == pytest.approx(head.py_func(A, n), rel=1e-15)
    with pytest.raises(BoundsError):
        head(A, 9)
    with pytest.raises(ArgumentError, match="must be an int"):
        head(A, 3.0)
    assert head(A, 2) == pytest.approx(head.py_func(A, 2), rel=1e-15)


def test_floats_are_checked_on_every_call():
    A, B = _x(), _x(seed=5)
    _warm(axpy, A, B, 0.5)
    with pytest.raises(ArgumentError, match="must be a float"):
        axpy(A, B.copy(), "0.5")
    with pytest.raises(ArgumentError, match="too large"):
        axpy(A, B.copy(), 10**400)
    want, _ = _expect_axpy(A, B, 2)
    assert axpy(A, B.copy(), 2) == pytest.approx(want, rel=1e-14)   # an int for a float


def test_a_changed_target_gets_its_own_specialisation(monkeypatch):
    A, B = _x(), _x(seed=6)
    _warm(axpy, A, B, 0.5)
    before, _, _ = axpy.bound((A, B, 0.5))
    monkeypatch.setattr(options, "reassociate", True)
    after, _, _ = axpy.bound((A, B, 0.5))
    assert after is not before
    want, _ = _expect_axpy(A, B, 0.5)
    assert axpy(A, B.copy(), 0.5) == pytest.approx(want, rel=1e-12)


def test_the_kernel_keeps_a_bounded_number_of_signatures():
    A = _x()
    for n in range(1, 9):
        for m in range(1, 4):
            assert head(A[:n].copy(), min(m, n)) == pytest.approx(
                head.py_func(A[:n], min(m, n)), rel=1e-15)
    assert len(head._bindings) <= api.BINDINGS


# ---- what calls return is their own ------------------------------------------------------------
def test_returned_arrays_are_new_and_shaped_by_each_call():
    A = _x(12).reshape(3, 4)
    first, s1 = doubled(A)
    second, s2 = doubled(A + 1.0)
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, A * 2.0)
    np.testing.assert_array_equal(second, (A + 1.0) * 2.0)
    other, _ = doubled(_x(10).reshape(5, 2))
    assert other.shape == (5, 2)
    assert (s1, s2) == pytest.approx((np.sum(A), np.sum(A + 1.0)), rel=1e-14)


def test_value_and_grad_and_vjp_after_cached_calls():
    A, B = _x(), _x(seed=7)
    vg = value_and_grad(axpy, wrt=("A", "a"))
    for _ in range(3):
        value, (gA, ga) = vg(A, B, 0.3)
    index = {"A": 0, "B": 1, "a": 2}
    f = lambda args: axpy.py_func(args[0], args[1].copy(), args[2])    # noqa: E731
    assert value == pytest.approx(f((A, B, 0.3)), rel=1e-14)
    np.testing.assert_allclose(gA, fd_gradient(f, (A, B, 0.3), index, "A"), rtol=1e-7)
    assert ga == pytest.approx(fd_gradient(f, (A, B, 0.3), index, "a"), rel=1e-7)
    for _ in range(3):
        outs, pullback = vjp(axpy, A, B, 0.3)
        back = pullback({"return": 1.0})
    np.testing.assert_allclose(back["A"], gA, rtol=1e-12)
    np.testing.assert_array_equal(B, B)                    # the caller's B is not written
    assert outs["return"] == pytest.approx(value, rel=1e-14)


# ---- threads ---------------------------------------------------------------------------------
def test_concurrent_small_calls_never_share_a_frame():
    """Threads calling one kernel (the entry points run without the GIL) each get their
    own buffers: every forward value and gradient is that of its own arguments."""
    g = grad(axpy, wrt="A")
    inputs = [(_x(seed=s), _x(seed=100 + s), 0.1 * s) for s in range(8)]
    want = [(_expect_axpy(*args)[0], 2.0 * args[2] * 2.0 * _expect_axpy(*args)[1] * args[0])
            for args in inputs]          # d/dA sum(B'^2) = 2 B' * 2 a A
    errors = []

    def work(k):
        try:
            for r in range(60):
                j = (k + r) % len(inputs)
                A, B, a = inputs[j]
                value = axpy(A, B.copy(), a)
                gradient = g(A, B.copy(), a)
                if not (np.isclose(value, want[j][0], rtol=1e-14, atol=0)
                        and np.allclose(gradient, want[j][1], rtol=1e-13)):
                    errors.append((k, r, j))
        except Exception as exc:         # pragma: no cover - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


# ---- buffers kept between calls ----------------------------------------------------------------
@host_only
def test_release_drops_the_frames_of_small_calls(monkeypatch):
    built = []
    real = module.BufferTable.__init__
    monkeypatch.setattr(module.BufferTable, "__init__",
                        lambda self, buffers: built.append(1) or real(self, buffers))
    k = kernel(_axpy)
    g = grad(k, wrt="A")
    A, B = _x(), _x(seed=8)
    want = g(A, B, 0.2)
    g(A, B, 0.2)
    assert len(built) == 1
    k.release()
    np.testing.assert_array_equal(g(A, B, 0.2), want)
    assert len(built) == 2                      # a new frame, and its table


@host_only
def test_a_pullbacks_buffers_go_back_to_the_pool_once_it_is_gone():
    """vjp's sweep keeps its buffers for its pullbacks; once the pullback (and the sweep
    that explain() keeps) is gone they are the next call's: from the third call on, a
    vjp call allocates only the gradients its pullback hands over (its adjoint buffers,
    not copies), as the caller keeps the earlier ones (every call allocated all of them
    before)."""
    k = kernel(_axpy)
    n = FRAMED // 16                            # 256 KiB arrays: pooled, not framed
    A, B = _x(n), _x(n, seed=9)
    spec = k.specialize((A, B, 0.4))
    results = []
    for _ in range(3):
        outs, pullback = vjp(k, A, B, 0.4)
        results.append((outs["B"], pullback({"return": 1.0})))
        del outs, pullback
    mem = spec.last_sweep.mem
    assert mem.allocations == 2 and mem.allocated_bytes == A.nbytes + B.nbytes
    for got in results[1:]:
        np.testing.assert_array_equal(got[0], results[0][0])
        for name in ("A", "B", "a"):
            np.testing.assert_array_equal(got[1][name], results[0][1][name])
    np.testing.assert_array_equal(results[0][0], B + 0.4 * A * A)
