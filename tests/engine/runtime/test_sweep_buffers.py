"""Buffer reuse across differentiated calls (``sweep.py``, ``runtime/memory.py``): a call
takes its buffers from its specialisation's pool and gives them back when it is over; the
gradients it returns are its adjoint buffers themselves, never overwritten by a later call
while any array refers to them (then they go back to the pool); the ledger and the plan's peak are unchanged; concurrent calls never
share a buffer."""
import threading

import numpy as np
import pytest

import adjoint
from adjoint import float64, grad, kernel, options, symbol, value_and_grad, vjp
from adjoint.runtime.memory import FRAMED, SMALL, BufferPool, _Handed
from adjoint.sweep import Sweep
from adjoint.corpus.loops import jacobi1d
from kernel_testing import fd_directional
from adjoint.corpus.planning import burgers

N = symbol("N")
smooth = jacobi1d         # linear in A: grad runs no forward sweep, records nothing
ON_HOST = options.device == "cpu"           # pytest --device=cuda...: GPU buffers, no pool
host_only = pytest.mark.skipif(not ON_HOST, reason="the buffer pool is for host buffers")


@kernel
def two_phases(u: float64[N], v: float64[N], T: int) -> float:
    """Two nonlinear loops whose tapes differ in size: under recompute_all the reverse of
    the first needs a bigger tape than the one the second released."""
    for t in range(4 * T):
        for i in range(1, N - 1):
            v[i] = u[i] - 0.01 * u[i] * u[i + 1]
        for i in range(1, N - 1):
            u[i] = v[i]
    for t in range(T):
        for i in range(1, N - 1):
            u[i] = u[i] - 0.02 * u[i] * u[i - 1]
    return np.sum(u * u)


n = FRAMED // 16            # 256 KiB arrays: pooled, and two are more than a Frame holds
assert n * 8 >= SMALL


def _smooth_args(seed, T=4):
    rng = np.random.default_rng(seed)
    return rng.random(n), rng.random(n), T


def _burgers_args(seed, T=40):
    x = np.linspace(0, 2 * np.pi, n)
    return np.sin(x + seed) + 0.5, np.zeros(n), 0.01, 0.1, T


def _fresh(k):
    """The same kernel compiled into new specialisations: an empty pool, the reference."""
    return kernel(k.__wrapped__)


def _spec(k, args):
    return k.specialize(args)


def _sweep(k, args):
    return _spec(k, args).last_sweep


# ---- allocations ----------------------------------------------------------------------------
@host_only
def test_a_call_allocates_only_while_the_caller_holds_gradients():
    args = _smooth_args(0)
    _spec(smooth, args).pool.clear()
    g = grad(smooth, wrt="A")
    kept = g(*args)
    first = _sweep(smooth, args).mem
    assert first.allocations >= 3          # copies of A and B, the adjoints (first call)
    out = g(*args)
    second = _sweep(smooth, args).mem
    assert second.allocations == 1         # the gradient handed to the caller, nothing else
    assert second.allocated_bytes == out.nbytes
    del out                                # dropped: its buffer goes back to the pool
    again = g(*args)
    assert _sweep(smooth, args).mem.allocations == 0
    np.testing.assert_array_equal(again, kept)
    assert not np.shares_memory(again, kept)


@host_only
def test_a_view_keeps_a_gradient_out_of_the_pool():
    g = grad(smooth, wrt="A")
    view = g(*_smooth_args(1))[100:200]    # the gradient itself is dropped at once
    want = view.copy()
    later = [g(*_smooth_args(2 + k)) for k in range(3)]
    np.testing.assert_array_equal(view, want)
    assert not any(np.shares_memory(view, other) for other in later)
    del view
    assert g(*_smooth_args(9)) is not None and _sweep(smooth, _smooth_args(9)).mem.allocations == 0


@host_only
def test_value_and_grad_allocates_only_what_it_returns():
    args = _smooth_args(1)
    vg = value_and_grad(smooth, wrt=("A", "B"))
    kept = vg(*args)
    vg(*args)
    assert _sweep(smooth, args).mem.allocations == 2      # the first call's are held
    assert kept is not None


@host_only
@pytest.mark.parametrize("plan", [dict(policy="store_all"), dict(policy="recompute_all"),
                                  dict(policy="revolve", snapshots=3)])
def test_tapes_and_snapshots_are_reused(plan):
    args = _burgers_args(0)
    _spec(burgers, args).pool.clear()
    g = grad(burgers, wrt=("u", "nu", "dt"), **plan)
    kept = g(*args)
    first = _sweep(burgers, args)
    assert first.mem.allocations >= 3
    g(*args)
    second = _sweep(burgers, args)
    assert second.mem.allocations == 1, plan     # the gradient w.r.t. u (the first is held)
    assert kept is not None
    assert second.ledger.peak == first.ledger.peak


# ---- results stay the caller's --------------------------------------------------------------
def test_successive_gradients_are_distinct_and_equal_to_fresh_computations():
    a1, a2 = _smooth_args(10), _smooth_args(11)
    saved = [x.copy() for x in a1[:2]]
    ref = grad(_fresh(smooth), wrt="A")
    want1, want2 = ref(*a1), ref(*a2)
    g = grad(smooth, wrt="A")
    r1 = g(*a1)
    keep1 = r1.copy()
    r2 = g(*a2)
    r3 = g(*a1)
    assert np.array_equal(r1, want1) and np.array_equal(r1, keep1)    # not overwritten
    assert np.array_equal(r2, want2)
    assert np.array_equal(r3, want1)
    for x, y in [(r1, r2), (r1, r3), (r2, r3)]:
        assert not np.shares_memory(x, y)
    r1[...] = np.nan                          # the caller may scribble on what it got
    r4 = g(*a1)
    assert np.array_equal(r4, want1) and np.array_equal(r2, want2)
    for x, s in zip(a1, saved):              # and its arguments are never written
        assert np.array_equal(x, s)
    pooled = _spec(smooth, a1).pool.buffers()
    assert pooled or not ON_HOST
    for r in (r2, r3, r4):
        assert not any(np.shares_memory(r, b) for b in pooled)


def test_value_and_grad_values_survive_the_release():
    args1, args2 = _burgers_args(1), _burgers_args(2)
    ref = value_and_grad(_fresh(burgers), wrt=("u", "nu"))
    vg = value_and_grad(burgers, wrt=("u", "nu"))
    (v1, g1), (v2, g2), (v3, g3) = vg(*args1), vg(*args2), vg(*args1)
    (w1, h1), (w2, h2) = ref(*args1), ref(*args2)
    assert v1 == w1 == v3 and v2 == w2 and v1 != v2
    assert np.array_equal(g1[0], h1[0]) and g1[1] == h1[1]
    assert np.array_equal(g2[0], h2[0]) and np.array_equal(g3[0], h1[0])
    assert not np.shares_memory(g1[0], g3[0])


def test_vjp_pullbacks_stay_independent_next_to_pooled_calls():
    args = _burgers_args(3)
    cot = {"return": 1.0, "u": np.linspace(0, 1, n)}
    _, pull_ref = vjp(_fresh(burgers), *args)
    want = pull_ref(cot)
    outs, pull = vjp(burgers, *args)
    first = pull(cot)
    g = grad(burgers, wrt="u")
    between = g(*args)                        # a pooled call on the same specialisation
    second = pull(cot)
    for name in ("u", "v"):
        assert np.array_equal(first[name], want[name])
        assert np.array_equal(second[name], want[name])
        assert not np.shares_memory(first[name], second[name])
    first["u"][...] = 0.0
    assert np.array_equal(pull(cot)["u"], want["u"])
    assert np.array_equal(between, grad(_fresh(burgers), wrt="u")(*args))


@kernel
def boxed(x: float64[N], y: float64[N]) -> float:
    """Adjoints the reverse sweep assigns first (autodiff/first_touch.py), each with an
    element outside its box that needs its zero."""
    s = np.sum(x * x)
    return s + np.sum(np.sin(y[1:]) * x[:-1])


def _owner(array):
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array.base


def test_vjp_pullbacks_hand_out_their_gradients():
    """Each pullback's gradients are its adjoint buffers handed over (no copy); the
    next pullback takes new ones and finds the zeros the first one found, also around
    the boxes assigned first."""
    rng = np.random.default_rng(5)
    args = rng.random(n), rng.random(n)
    spec = _spec(boxed, args)
    bwd = spec.backward(spec.floating, {"__return"})
    assert set(bwd.adjoint.assigned_first) == {"__g_x", "__g_y"}
    want = grad(_fresh(boxed), wrt=("x", "y"))(*args)
    _, pull = vjp(boxed, *args)
    results = [pull({"return": 1.0}) for _ in range(3)]
    for r in results:
        assert np.array_equal(r["x"], want[0]) and np.array_equal(r["y"], want[1])
    results[0]["x"][...] = np.nan            # the caller's: the next pullback is unchanged
    again = pull({"return": 1.0})
    assert np.array_equal(again["x"], want[0])
    grads = [r[k] for r in results + [again] for k in ("x", "y")]
    assert len({g.ctypes.data for g in grads}) == len(grads)
    if ON_HOST:                             # handed over: back to the pool once dropped
        assert all(isinstance(_owner(g), _Handed) for g in grads)


@host_only
def test_vjp_in_a_loop_allocates_nothing():
    """vjp and its pullback, called again and again with the results dropped: the
    gradients come back to the pool, as the argument copies and adjoints do."""
    rng = np.random.default_rng(6)
    args = rng.random(n), rng.random(n)
    for _ in range(3):
        _, pull = vjp(boxed, *args)
        pull({"return": 1.0})
        mem = _sweep(boxed, args).mem
        del pull
    assert mem.allocations == 0


def test_a_finished_sweep_runs_its_reverse_once():
    args = _smooth_args(4)
    spec = _spec(smooth, args)
    sweep = Sweep(spec, spec.backward(("A",), {"__return"}), args)
    sweep.reverse({"__return": 1.0}, wanted=("A",))
    assert sweep.state == {} and sweep.adjoints == {}     # last_sweep keeps no buffers
    with pytest.raises(adjoint.AdjointError, match="runs once"):
        sweep.reverse({"__return": 1.0})
    with pytest.raises(adjoint.AdjointError, match="over"):
        sweep.value("A")


# ---- the ledger -----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [burgers, two_phases])
@pytest.mark.parametrize("plan", [dict(policy="store_all"), dict(policy="recompute_all"),
                                  dict(policy="revolve", snapshots=2), "a third of store_all"])
def test_spares_stay_within_the_ledgers_peak(k, plan, monkeypatch):
    """What a call keeps for reuse while it runs never takes the engine's real holding
    above the measured peak; the peak is the same on every call and within the budget."""
    hold, free, seen = Sweep._hold, Sweep._free, []

    def check(sweep):
        seen.append(sweep.mem.spare_bytes)
        assert sweep.ledger.current + sweep.mem.spare_bytes <= sweep.ledger.peak

    def checked_hold(self, array):
        out = hold(self, array)
        check(self)
        return out

    def checked_free(self, array):
        free(self, array)
        check(self)

    monkeypatch.setattr(Sweep, "_hold", checked_hold)
    monkeypatch.setattr(Sweep, "_free", checked_free)
    args = _burgers_args(5) if k is burgers else _burgers_args(5)[:2] + (10,)
    if isinstance(plan, str):                   # a budget that forces checkpointing
        grad(k, wrt="u", policy="store_all")(*args)
        plan = dict(memory_budget=_sweep(k, args).ledger.peak // 3)
    g = grad(k, wrt="u", **plan)
    want = grad(_fresh(k), wrt="u", policy="store_all")(*args)
    peaks = []
    for _ in range(3):
        assert np.array_equal(g(*args), want)
        sweep = _sweep(k, args)
        peaks.append(sweep.ledger.peak)
        assert sweep.ledger.current == 0                  # handed out or given back
        assert _spec(k, args).pool.nbytes <= sweep.ledger.peak
        if "memory_budget" in plan:
            assert sweep.ledger.peak <= plan["memory_budget"]
    assert peaks[0] == peaks[1] == peaks[2]
    # store_all on the host: both sweeps in one C call, nothing released before the end
    stores = plan == dict(policy="store_all")
    assert any(seen) or not ON_HOST or stores, "no buffer was kept for reuse"


def test_the_pool_holds_at_most_the_last_call():
    pool = BufferPool()
    first = [np.zeros(1024), np.zeros(2048)]
    pool.give(first)
    pool.give([np.zeros(1024)])
    assert pool.nbytes == 8 * 1024
    assert not any(np.shares_memory(b, a) for b in pool.buffers() for a in first)
    pool.give([np.zeros(10)])                 # small buffers are not pooled
    assert pool.nbytes == 0


# ---- threads --------------------------------------------------------------------------------
@host_only
@pytest.mark.parametrize("count", [1001, 2**20 + 3])     # below and above the threaded size
def test_modules_zero_and_copy_whole_buffers(monkeypatch, count):
    """Compiled modules zero and copy the sweep's buffers on the engine's threads: every
    byte, also of a size that is no multiple of the threads' 4 KiB pieces."""
    monkeypatch.setattr(options, "threads", 2)
    module = _spec(smooth, _smooth_args(0)).forward.module
    src = np.random.default_rng(0).standard_normal(count).astype(np.float32)
    dst = np.full(count, np.nan, dtype=np.float32)
    module.copyto(dst, src)
    np.testing.assert_array_equal(dst, src)
    module.fill_zero(dst)
    assert not dst.any()


def test_concurrent_takes_never_share_a_buffer():
    pool = BufferPool()
    buffers = [np.empty(1024) for _ in range(400)]
    pool.give(buffers)
    key = (1024, np.dtype(np.float64))
    taken, start = [[] for _ in range(4)], threading.Barrier(4)

    def take(mine):
        start.wait()
        while (b := pool.take(key)) is not None:
            mine.append(b)

    threads = [threading.Thread(target=take, args=(t,)) for t in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = [b.ctypes.data for t in taken for b in t]
    assert len(got) == len(set(got)) == len(buffers)


def test_concurrent_gradients_are_correct(monkeypatch):
    monkeypatch.setattr(options, "threads", 1)
    inputs = [_smooth_args(20 + k) for k in range(4)]
    ref = grad(_fresh(smooth), wrt="A")
    want = [ref(*a) for a in inputs]
    g = grad(smooth, wrt="A")
    results, errors, start = {}, [], threading.Barrier(2)

    def work(t):
        try:
            start.wait()
            for rep in range(15):
                k = (rep + t) % len(inputs)
                results[t, rep] = (k, g(*inputs[k]))
        except Exception as exc:        # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, r in results.values():
        assert np.array_equal(r, want[k])
    arrays = [r for _, r in results.values()]
    assert len({a.ctypes.data for a in arrays}) == len(arrays)    # all alive, all distinct


# ---- the CUDA path (emulated on the CPU): device buffers are not pooled ----------------------
def test_emulated_cuda_successive_gradients(monkeypatch):
    args1, args2 = _smooth_args(30, T=2), _smooth_args(31, T=2)
    want1 = grad(_fresh(smooth), wrt="A")(*args1)
    want2 = grad(_fresh(smooth), wrt="A")(*args2)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    g = grad(_fresh(smooth), wrt="A")
    r1, r2, r3 = g(*args1), g(*args2), g(*args1)
    for got, want in [(r1, want1), (r2, want2), (r3, want1)]:
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not np.shares_memory(r1, r3)


@kernel
def temporaries(x: float64[N]) -> float:
    lap = np.zeros(N)                   # filled whole first: its buffer needs no zeros
    lap[1:-1] = x[2:] - 2.0 * x[1:-1] + x[:-2]
    part = np.empty(N)                  # written in part: the rest reads as zeros
    part[1:] = np.sin(x[1:]) * lap[1:]
    return np.sum(part * part) + np.sum(lap * x)


def _temporaries_in_numpy(x):
    """``temporaries`` as NumPy runs it where ``np.empty`` gives zeros: at these sizes
    it may give a freed buffer's values, which its central differences would read."""
    lap = np.zeros(len(x))
    lap[1:-1] = x[2:] - 2.0 * x[1:-1] + x[:-2]
    part = np.zeros(len(x))
    part[1:] = np.sin(x[1:]) * lap[1:]
    return np.sum(part * part) + np.sum(lap * x)


@host_only
def test_transients_the_program_fills_first_start_from_any_buffer():
    """A pooled buffer holds the last call's values: only a transient whose first access
    assigns every element may take one as it is; the others start from zeros."""
    spec = temporaries.specialize((np.ones(n),))
    assert "lap" in spec.filled_first and "part" not in spec.filled_first
    _right_on_pooled_buffers(temporaries, seed=7, reference=_temporaries_in_numpy)


def _right_on_pooled_buffers(k, seed, reference=None):
    """The gradient w.r.t. ``x``, twice (the second call reuses the pool): the same, and
    right along a random direction. ``x`` stays away from where ``limited`` jumps or
    bends (x = 0, neighbours equal): at these sizes central differences would meet one."""
    rng = np.random.default_rng(seed)
    x = 1.0 + 0.3 * (-1.0) ** np.arange(n) * rng.uniform(0.5, 1.0, n)
    v = rng.standard_normal(n)
    g = grad(k, wrt="x")
    first, again = g(x), g(x)
    np.testing.assert_array_equal(first, again)
    want = fd_directional(lambda a: float((reference or k.py_func)(*a)), (x,), {"x": 0},
                          {"x": v})
    assert float(first @ v) == pytest.approx(want, rel=1e-7)


@host_only
def test_forward_calls_reuse_their_transients():
    """A forward call's transients go back to the specialisation; the next call takes
    them (re-zeroed where the program does not fill them first: ``part[0]``)."""
    rng = np.random.default_rng(11)
    spec = temporaries.specialize((np.ones(n),))
    spec.transients.clear()
    x = rng.standard_normal(n)
    assert temporaries(x.copy()) == pytest.approx(temporaries.py_func(x.copy()), rel=1e-12)
    held = sorted(b.ctypes.data for b in spec.transients.buffers())
    assert len(held) == 2                       # lap and part
    for _ in range(2):
        x = rng.standard_normal(n)
        assert temporaries(x.copy()) == pytest.approx(temporaries.py_func(x.copy()), rel=1e-12)
        assert sorted(b.ctypes.data for b in spec.transients.buffers()) == held


@host_only
def test_release_frees_what_calls_keep():
    k = _fresh(temporaries)
    x = np.random.default_rng(12).standard_normal(n)
    want = grad(k, wrt="x")(x)
    k(x.copy())
    spec = _spec(k, (x,))
    assert spec.pool.nbytes > 0 and spec.transients.nbytes > 0
    k.release()
    assert spec.pool.nbytes == 0 and spec.transients.nbytes == 0
    np.testing.assert_array_equal(grad(k, wrt="x")(x), want)        # still compiled, right


@kernel
def limited(x: float64[N]) -> float:
    d = x[1:] - x[:-1]                  # assigned, then limited in place: one fused map
    d = np.where(d * x[1:] > 0.0, d, 0.1 * d)
    return np.sum(d * d)


@host_only
def test_a_transient_its_map_assigns_then_reads_back_needs_no_zeros():
    spec = limited.specialize((np.ones(n),))
    assert "d" in spec.filled_first
    _right_on_pooled_buffers(limited, seed=9)


@host_only
@pytest.mark.parametrize("policy", ["store_all", "recompute_all"])
def test_a_call_builds_its_pointer_table_once(policy, monkeypatch):
    """The entry points of one differentiated call share one table of buffer pointers
    (built per entry before, a third of a small kernel's gradient call), and the
    gradient is still right."""
    from adjoint.runtime import module
    built = []
    real = module.BufferTable.__init__
    monkeypatch.setattr(module.BufferTable, "__init__",
                        lambda self, buffers: built.append(1) or real(self, buffers))
    monkeypatch.setattr(options, "memory_policy", policy)
    u, v, _ = _smooth_args(5)
    g = grad(_fresh(two_phases), wrt="u")
    got = g(u.copy(), v.copy(), 2)
    assert len(built) == 1
    directions = {"u": np.random.default_rng(1).standard_normal(n)}
    want = fd_directional(lambda a: float(two_phases(a[0].copy(), a[1].copy(), 2)),
                          (u, v, 2), {"u": 0, "v": 1, "T": 2}, directions)
    assert abs(float(got @ directions["u"]) - want) <= 1e-6 * max(1.0, abs(want))


@kernel
def two_results(x: float64[N]):
    part = np.empty(N)                  # written in part: the rest reads as zeros
    part[1:] = x[1:] * 2.0
    return x + 1.0, part                # each filled whole (a copy): new arrays, no zeros


@host_only
@pytest.mark.parametrize("size", [16, 3 * SMALL // 8], ids=["framed", "large"])
def test_returned_arrays_the_program_fills_first_are_not_zeroed(size):
    """A returned array the program assigns whole is np.empty (np.zeros' memset of 32 MB
    was a fifth of NPBench's go_fast); a transient it writes in part still starts from
    zeros, also on memory that held other values (freed just before the call)."""
    x = np.random.default_rng(13).standard_normal(size)
    for _ in range(3):
        garbage = np.full(size, np.nan)
        del garbage
        filled, part = two_results(x)
        np.testing.assert_array_equal(filled, x + 1.0)
        assert part[0] == 0.0 and np.array_equal(part[1:], x[1:] * 2.0)
    _, _, binding, _ = next(iter(two_results._bindings.values()))
    hows = {name: how for name, _, _, how in binding.memo["forward"].slots}
    assert hows["__return0"] == hows["__return1"] == "returned filled"
    assert hows["part"] == "zeros"


@kernel
def trace_shift(a: float64[N, N]) -> float64[N, N]:
    trace = 0.0
    for i in range(N):
        trace += np.tanh(a[i, i])
    return a + trace


@host_only
def test_a_pullback_copies_only_what_its_entries_write():
    """The pullback's entries restore ``trace`` (recorded by the loop) and never touch the
    returned array: they work on a copy of the first only (they copied the whole result
    before), and vjp hands the result's buffer over instead of a copy. Whatever the caller
    does to it, every pullback gives the same cotangents (160 x 160: pooled, not framed)."""
    a = np.random.default_rng(14).standard_normal((160, 160))
    outs, pullback = vjp(trace_shift, a)
    np.testing.assert_allclose(outs["return"], a + np.sum(np.tanh(np.diag(a))), rtol=1e-12)
    sweep = trace_shift.specializations[0].last_sweep
    assert "__return" not in sweep.restored | sweep.touched
    assert np.shares_memory(outs["return"], sweep.state["__return"])      # handed over
    outs["return"][...] = np.nan
    cot = np.random.default_rng(15).standard_normal((160, 160))
    first, again = pullback({"return": cot})["a"], pullback({"return": cot})["a"]
    want = cot + np.diag(np.sum(cot) * (1 - np.tanh(np.diag(a)) ** 2))
    np.testing.assert_allclose(first, want, rtol=1e-12)
    np.testing.assert_array_equal(again, first)


@kernel
def smoothed_into(a: float64[N, N], out: float64[N, N], c: float):
    out[:, :] = c * np.tanh(a)                # assigns every element first, reads none
    out[1:, :] = out[1:, :] + 0.5 * out[:-1, :]


@pytest.mark.parametrize("size", [6, 160])      # framed, pooled
def test_an_output_argument_the_program_fills_first_is_not_copied(size):
    """vjp works on its own buffer for an array argument it writes (the caller's stays
    as it was), but one whose first access assigns every element (hdiff's ``out_field``)
    starts from any buffer of its shape: its values are never read, so they are not
    copied. Outputs and cotangents as the kernel run as Python and central differences."""
    rng = np.random.default_rng(16)
    a, out, c = rng.standard_normal((size, size)), np.full((size, size), np.nan), 0.7
    outs, pullback = vjp(smoothed_into, a, out, c)
    assert np.isnan(out).all()                                  # the caller's, untouched
    assert dict(smoothed_into.specializations[-1].last_sweep.setup.buffers)["out"] == "fresh"
    want = np.zeros((size, size))
    smoothed_into.py_func(a, want, c)
    np.testing.assert_allclose(outs["out"], want, rtol=1e-12, atol=1e-14)   # the engine's tanh
    cot = rng.standard_normal((size, size))
    back = pullback({"out": cot})
    assert not back["out"].any()                        # overwritten before any read
    da, dc = rng.standard_normal((size, size)), 0.3

    def loss(x):
        o = np.zeros((size, size))
        smoothed_into.py_func(x[0], o, x[1])
        return float(np.sum(cot * o))
    want_dot = fd_directional(loss, (a, c), {"a": 0, "c": 1}, {"a": da, "c": dc})
    got = float(np.sum(back["a"] * da) + back["c"] * dc)
    assert got == pytest.approx(want_dot, rel=1e-7)
