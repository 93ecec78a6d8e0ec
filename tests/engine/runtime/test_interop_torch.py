"""Compiled kernels inside PyTorch (adjoint.interop.torch.to_torch): forward results
against the kernel run as plain Python, torch.autograd.gradcheck in float64 (reverse and
forward mode: central differences), gradients against the engine's own, the same
functional convention as to_jax. Skipped where PyTorch is not installed."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from adjoint import ArgumentError, grad, symbol  # noqa: E402
from adjoint.interop.torch import to_torch  # noqa: E402
from adjoint.corpus.loops import (jacobi1d, make_jacobi1d, make_roughness, make_wave1d, relax,  # noqa: E402
                    roughness, step_and_energy, wave1d)
from kernel_testing import copy_args, rng_for, run_reference  # noqa: E402

N = symbol("N")


def tensors(args, requires_grad=False):
    return tuple(torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad)
                 if isinstance(a, (np.ndarray, float)) else a for a in args)


def test_forward_without_copies_and_the_written_arrays():
    args = make_jacobi1d(rng_for("torch-jacobi1d"))
    A, B, T = tensors(args)
    saved_A = A.clone()
    loss, A1, B1 = to_torch(jacobi1d)(A, B, T)
    want_loss, (want_A, want_B, _) = run_reference(jacobi1d, args)
    np.testing.assert_array_equal(A1.numpy(), want_A)
    np.testing.assert_array_equal(B1.numpy(), want_B)
    assert float(loss) == jacobi1d(*copy_args(args))
    assert torch.equal(A, saved_A)                       # the caller's tensor is not written
    out = to_torch(relax)(torch.linspace(0.0, 1.0, 9, dtype=torch.float64) ** 2, 0.8, 3)
    assert isinstance(out, tuple) and len(out) == 1


CASES = {
    "jacobi1d": (jacobi1d, make_jacobi1d),        # stencil, writes A and B, int T
    "wave1d": (wave1d, make_wave1d),             # three written arrays, float c2
    "roughness": (roughness, make_roughness),    # a scalar loss, writes nothing
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    k, make = CASES[name]
    args = tensors(make(rng_for("torch-grads-" + name)), requires_grad=True)
    assert torch.autograd.gradcheck(to_torch(k), args, check_forward_ad=True)


def test_gradcheck_of_tuples_returned_and_written():
    u = torch.sin(torch.linspace(0.0, 2.0, 10, dtype=torch.float64)).requires_grad_()
    c = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(to_torch(step_and_energy), (u, c), check_forward_ad=True)
    f = to_torch(relax)
    assert torch.autograd.gradcheck(lambda u, w: f(u, w, 3), (u, c), check_forward_ad=True)


def test_gradients_are_the_engines():
    args = make_wave1d(rng_for("torch-wave-engine"))
    up, u, un, c2, T = tensors(args, requires_grad=True)
    to_torch(wave1d)(up, u, un, c2, T)[0].backward()
    want = grad(wave1d, wrt=("up", "u", "un", "c2"))(*copy_args(args))
    for t, w in zip((up, u, un, c2), want):
        np.testing.assert_allclose(t.grad.numpy(), w, rtol=1e-13, atol=1e-15)


def test_python_floats_and_ints_are_constants():
    x, w, lam = make_roughness(rng_for("torch-constants"))
    xt = torch.tensor(x, requires_grad=True)
    to_torch(roughness)(xt, torch.tensor(w), lam).backward()
    np.testing.assert_allclose(xt.grad.numpy(), grad(roughness, wrt="x")(x, w, lam), rtol=1e-14)
    T = torch.tensor(3)                                  # a 0-d integer tensor: an int
    A, B, _ = make_jacobi1d(rng_for("torch-int-tensor"))
    got = to_torch(jacobi1d)(torch.tensor(A), torch.tensor(B), T)[0]
    assert float(got) == jacobi1d(A.copy(), B.copy(), 3)


def test_errors_name_the_argument():
    f = to_torch(jacobi1d)
    with pytest.raises(ArgumentError, match="'A' has dtype float32"):
        f(torch.ones(8), torch.ones(8, dtype=torch.float64), 2)
    with pytest.raises(ArgumentError, match="argument 'B'.*got ndarray"):
        f(torch.ones(8, dtype=torch.float64), np.ones(8), 2)


def test_the_kernel_runs_once_forward_and_backward(monkeypatch):
    """Tensors that require grad: the forward is the differentiated call's forward sweep,
    whose reverse the backward runs (as many entry points as value_and_grad); a second
    backward (retain_graph) runs a sweep anew; a change in place in between is refused."""
    from adjoint import value_and_grad
    from adjoint.runtime.module import CompiledModule
    x, w, lam = make_roughness(rng_for("torch-once"))
    entries = []
    original = CompiledModule.call
    monkeypatch.setattr(CompiledModule, "call",
                        lambda self, *a, **k: entries.append(a[0]) or original(self, *a, **k))
    f, vg = to_torch(roughness), value_and_grad(roughness, wrt="x")
    for _ in range(2):                          # the second round: everything compiled
        entries.clear()
        want = vg(x, w, lam)[1]
        engine = len(entries)
        entries.clear()
        xt = torch.tensor(x, requires_grad=True)
        loss = f(xt, torch.tensor(w), lam)
        loss.backward(retain_graph=True)
    assert len(entries) == engine
    np.testing.assert_allclose(xt.grad.numpy(), want, rtol=1e-14)
    loss.backward()
    np.testing.assert_allclose(xt.grad.numpy(), 2 * want, rtol=1e-14)
    loss = f(xt, torch.tensor(w), lam)
    with torch.no_grad():
        xt.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_call_at_other_shapes_is_its_own():
    """What the wrapper decides once per call (its Call: argument converters, dtypes, the
    backward) is per shapes and statics: calls at one shape, another and the first
    again are right each time, forward and both modes."""
    f = to_torch(jacobi1d)
    for n, T in ((16, 3), (9, 3), (16, 2), (16, 3)):
        A, B, _ = make_jacobi1d(rng_for(f"torch-shapes-{n}"), n)
        loss, A1, B1 = f(torch.tensor(A), torch.tensor(B), T)
        want_loss, (want_A, want_B, _) = run_reference(jacobi1d, (A, B, T))
        np.testing.assert_array_equal(A1.numpy(), want_A)
        np.testing.assert_array_equal(B1.numpy(), want_B)
        np.testing.assert_allclose(float(loss), want_loss, rtol=1e-14)    # a sum's rounding
        args = tensors((A, B), requires_grad=True)
        assert torch.autograd.gradcheck(lambda A, B: f(A, B, T), args, check_forward_ad=True)


@pytest.mark.parametrize("n", [10, 40000])          # one frame of buffers; pooled buffers
def test_an_output_no_gradient_reaches_adds_nothing(n):
    """An output whose gradient PyTorch leaves undefined is given no cotangent (none made
    as zeros): its adjoint starts at zero, also in a call after one that seeded it."""
    f = to_torch(step_and_energy)
    u = torch.tensor(np.sin(np.linspace(0.0, 3.0, n)), requires_grad=True)
    c = torch.tensor(0.2, dtype=torch.float64, requires_grad=True)
    v, energy = f(u, c)
    (v.sum() + energy).backward()                   # seeds v's adjoint
    u.grad = c.grad = None
    v, energy = f(u, c)
    energy.backward()                               # v's gradient: undefined
    un, vn, cn = u.detach().numpy(), v.detach().numpy(), float(c)
    lap = un[2:] - 2.0 * un[1:-1] + un[:-2]         # energy = |v|^2 / 2, v = u + c lap(u)
    want_u = vn.copy()
    want_u[2:] += cn * vn[1:-1]
    want_u[1:-1] -= 2.0 * cn * vn[1:-1]
    want_u[:-2] += cn * vn[1:-1]
    np.testing.assert_allclose(u.grad.numpy(), want_u, rtol=1e-12, atol=1e-14)
    terms = vn[1:-1] * lap                          # a sum that cancels: scaled tolerance
    np.testing.assert_allclose(float(c.grad), np.sum(terms), atol=1e-12 * np.abs(terms).sum())


def test_strided_tensors():
    """A non-contiguous tensor (a slice with a step; autograd's expanded cotangent of a
    sum) reaches the kernel as its values."""
    x, w, lam = make_roughness(rng_for("torch-strided"))
    wide = torch.tensor(np.repeat(x, 2), requires_grad=True)
    loss = to_torch(roughness)(wide[::2], torch.tensor(w), lam)
    assert float(loss) == roughness(x, w, lam)
    loss.backward()
    want = np.zeros(2 * len(x))
    want[::2] = grad(roughness, wrt="x")(x, w, lam)
    np.testing.assert_allclose(wide.grad.numpy(), want, rtol=1e-14)
    u = torch.tensor(np.sin(np.linspace(0.0, 2.0, 10)), requires_grad=True)
    v, _ = to_torch(step_and_energy)(u, 0.2)
    v.sum().backward()                                  # v's cotangent: ones, stride 0
    want = np.ones(10)                                  # (I + c L)^T ones, L the stencil
    want[2:] += 0.2
    want[1:-1] -= 0.4
    want[:-2] += 0.2
    np.testing.assert_allclose(u.grad.numpy(), want, rtol=1e-14)
