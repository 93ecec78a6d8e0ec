"""A differentiated call whose plan keeps every region's tape runs its record entries in
one C call and its reverse entries in another, grad both in one (``sweep.py:
Setup.batches``, ``runtime/module.py: CompiledModule.runs``): results bitwise those of
one call per entry, a tape too short still restarts the forward sweep, vjp's pullbacks
still repeat."""
import numpy as np
import pytest

from adjoint import float64, grad, kernel, options, symbol, vjp
from adjoint.corpus import copy_args, rng_for
from adjoint.corpus.loops import gemm, make_gemm
from adjoint.runtime.module import CompiledModule
from adjoint.sweep import Sweep

N = symbol("N")
pytestmark = pytest.mark.skipif(options.device != "cpu", reason="C modules batch entries")


@kernel
def grow_then_sum(x: float64[N], y: float64[N]) -> float:
    """Four regions, one a while loop whose tape sc_check cannot size."""
    for i in range(N):
        y[i] = y[i] * x[i]
    while y[0] < 5000.0:
        y[0] = y[0] + 1.0
        y[2] = y[2] * (0.9999 + 0.0001 * x[2])
    return np.sum(y * y)


@pytest.fixture
def c_calls(monkeypatch):
    """Counts of C calls from sweeps: ``runs`` (batches) and ``call`` (one entry)."""
    counts = {"runs": 0, "call": 0}
    for name in counts:
        original = getattr(CompiledModule, name)

        def counted(self, *args, _original=original, _name=name):
            counts[_name] += 1
            return _original(self, *args)
        monkeypatch.setattr(CompiledModule, name, counted)
    return counts


def _per_entry(k, args):
    """Make the specialisation's sweeps at these sizes run one C call per entry."""
    spec = kernel(k).bound(args)[0]
    for setup in spec.setups.values():
        setup.batched = False


def _central_differences(k, args, name, h=1e-5):
    """The gradient w.r.t. argument ``name`` of the kernel run as Python."""
    position = [p.name for p in k._parameters].index(name)
    base = args[position]
    out = np.zeros_like(base)
    for j in np.ndindex(base.shape):
        values = []
        for step in (h, -h):
            moved = list(copy_args(args))
            moved[position] = base.copy()
            moved[position][j] += step
            values.append(k.py_func(*moved))
        out[j] = (values[0] - values[1]) / (2 * h)
    return out


def test_a_gradient_storing_every_region_is_one_c_call(c_calls):
    args = make_gemm(rng_for("gemm"), 4)
    g = grad(gemm, wrt="C")
    batched = g(*copy_args(args))
    assert c_calls == {"runs": 1, "call": 0}             # 2 regions: 4 entries before
    np.testing.assert_allclose(batched, _central_differences(gemm, args, "C"), rtol=1e-7)
    _per_entry(gemm, args)
    assert np.array_equal(g(*copy_args(args)), batched)
    assert c_calls["call"] == 4


def test_a_tape_too_short_restarts_the_forward_sweep_in_one_call(c_calls, monkeypatch):
    grown, original = [], Sweep._grow
    monkeypatch.setattr(Sweep, "_grow", lambda self, i: (grown.append(i), original(self, i)))
    args = np.array([1.5, 2.0, 0.5]), np.array([1.0, 3.0, 4.0])
    g = grad(grow_then_sum, wrt="x")
    first = g(*copy_args(args))
    assert grown and set(grown) == {2}          # the while loop's region, 4999 trips
    assert c_calls == {"runs": len(grown) + 1, "call": 0}   # one per tape length
    np.testing.assert_allclose(first, _central_differences(grow_then_sum, args, "x"),
                               rtol=1e-7, atol=1e-3)        # rounding: eps * 2.5e7 / h
    c_calls["runs"] = 0
    assert np.array_equal(g(*copy_args(args)), first)
    assert c_calls == {"runs": 1, "call": 0}             # the tape length that sufficed
    _per_entry(grow_then_sum, args)
    assert np.array_equal(g(*copy_args(args)), first)


def test_pullbacks_of_a_batched_sweep_repeat_and_match_one_call_per_entry(c_calls):
    args = np.array([1.5, 2.0, 0.5]), np.array([1.0, 3.0, 4.0])
    cotangent = {"y": np.array([1.0, -2.0, 0.5]), "return": 2.0}
    outputs, pullback = vjp(grow_then_sum, *copy_args(args))
    runs = c_calls["runs"]                      # records: one per tape length
    first, again = pullback(cotangent), pullback(cotangent)
    assert c_calls["runs"] == runs + 2 and c_calls["call"] == 0     # a reverse per pullback
    _per_entry(grow_then_sum, args)
    outputs_per_entry, pullback_per_entry = vjp(grow_then_sum, *copy_args(args))
    reference = pullback_per_entry(cotangent)
    for name in ("x", "y"):
        assert np.array_equal(first[name], reference[name])
        assert np.array_equal(again[name], reference[name])
    assert np.array_equal(outputs["y"], outputs_per_entry["y"])
