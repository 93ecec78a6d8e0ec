"""Reverse-mode gradients against central finite differences of ``py_func`` (float64).

Directional checks: for a random direction d, <grad, d> must match the fourth-order
central difference of the reference along d to a relative 1e-6 (the difference itself
is accurate to ~1e-10 at h = 1e-4; see kernel_testing.fd_directional).  The float32
kernel is held to 2e-3 against the float64 reference.
"""
import numpy as np
import sympy as sp
import pytest

from adjoint import grad, value_and_grad, vjp
from adjoint.autodiff.partials import partial
from adjoint.sdfg.nodes import Push, walk
from adjoint.corpus.loops import CASES, CASES_BY_NAME
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar,
                            assert_untouched, copy_args, fd_atol, fd_directional,
                            fd_gradient, inner,
                            random_direction, rng_for, run_reference, snapshot)

GRAD_RTOL = 1e-6
GRAD_RTOL_F32 = 2e-3


def rtol_for(case):
    return GRAD_RTOL_F32 if case.float32 else GRAD_RTOL


def same_rtol(case):
    """Two engine results that should agree up to summation order."""
    return 1e-5 if case.float32 else 1e-12


def loss_of(kernel):
    return lambda args: run_reference(kernel, args)[0]


def check_gradient(kernel, args, name, g, rng, rtol, what):
    """<g, d> against finite differences of the reference loss along a random d."""
    names = arg_names(kernel)
    index_of = {n: k for k, n in enumerate(names)}
    a = args[index_of[name]]
    if isinstance(a, np.ndarray):
        assert isinstance(g, np.ndarray), f"{what}: gradient wrt {name!r} is {type(g)}"
        assert g.shape == a.shape, f"{what}: gradient shape {g.shape} != {a.shape}"
    else:
        assert isinstance(g, float), f"{what}: gradient wrt float {name!r} is {type(g)}"
    d = random_direction(rng, a)
    f = loss_of(kernel)
    want = fd_directional(f, args, index_of, {name: d})
    got = inner(g, d)
    assert_close_scalar(got, want, rtol, fd_atol(f(args)), what=f"{what}: <grad {name}, d>")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_grad_matches_finite_differences(case):
    rng = rng_for(case.name, salt="grad")
    args = case.make_args(rng)
    saved = snapshot(args)
    grads = grad(case.kernel, wrt=case.wrt)(*args)
    assert_untouched(args, saved, "grad")
    assert isinstance(grads, tuple) and len(grads) == len(case.wrt)
    for name, g in zip(case.wrt, grads):
        check_gradient(case.kernel, args, name, g, rng, rtol_for(case), case.name)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_grad_every_entry(case):
    """The whole gradient, entry by entry, against coordinate-wise finite differences.

    Directional checks can hide an error in one small entry; the corpus sizes are small
    enough to difference every coordinate of every argument.  Entries are compared
    relative to the largest entry of that gradient.
    """
    args = case.make_args(rng_for(case.name, salt="entries"))
    names = arg_names(case.kernel)
    index_of = {n: k for k, n in enumerate(names)}
    grads = grad(case.kernel, wrt=case.wrt)(*args)
    f = loss_of(case.kernel)
    atol = fd_atol(f(args))
    for name, g in zip(case.wrt, grads):
        want = fd_gradient(f, args, index_of, name)
        got = np.asarray(g, dtype=np.float64)
        assert got.shape == np.shape(want)
        scale = float(np.max(np.abs(want)))
        err = np.abs(got - want)
        bad = err > rtol_for(case) * scale + atol
        assert not bad.any(), (
            f"{case.name}: d loss / d {name}: {int(bad.sum())} of {bad.size} entries off; "
            f"worst at {np.unravel_index(np.argmax(err), np.shape(err)) if np.ndim(err) else ()}"
            f": got {got.flat[np.argmax(err)]!r}, want {np.ravel(want)[np.argmax(err)]!r}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_grad_single_name_equals_tuple(case):
    args = case.make_args(rng_for(case.name, salt="single"))
    saved = snapshot(args)
    all_grads = grad(case.kernel, wrt=case.wrt)(*args)
    for name, g_all in zip(case.wrt, all_grads):
        g = grad(case.kernel, wrt=name)(*args)
        if isinstance(g_all, np.ndarray):
            assert_arrays_close(g, g_all, same_rtol(case), what=f"grad wrt {name!r}")
        else:
            assert isinstance(g, float)
            assert_close_scalar(g, g_all, same_rtol(case), 1e-300, what=f"grad wrt {name!r}")
    assert_untouched(args, saved, "grad")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_value_and_grad(case):
    args = case.make_args(rng_for(case.name, salt="vg"))
    saved = snapshot(args)
    loss, grads = value_and_grad(case.kernel, wrt=case.wrt)(*args)
    assert_untouched(args, saved, "value_and_grad")
    rtol = 1e-4 if case.float32 else 1e-12
    want, _ = run_reference(case.kernel, args)
    assert_close_scalar(float(loss), want, rtol, what="loss vs py_func")
    forward = case.kernel(*copy_args(args))
    assert_close_scalar(float(loss), float(forward), rtol, what="loss vs compiled forward")
    plain = grad(case.kernel, wrt=case.wrt)(*args)
    for name, g, h in zip(case.wrt, grads, plain):
        what = f"value_and_grad vs grad wrt {name!r}"
        if isinstance(h, np.ndarray):
            assert_arrays_close(g, h, same_rtol(case), what=what)
        else:
            assert_close_scalar(g, h, same_rtol(case), 1e-300, what=what)


# ------------------------------------------------------------------------------ vjp

def random_cotangents(case, args, rng):
    names = arg_names(case.kernel)
    cot = {}
    for w in case.writes:
        a = args[names.index(w)]
        cot[w] = rng.standard_normal(a.shape).astype(a.dtype)
    cot["return"] = float(rng.standard_normal())
    return cot


def weighted_outputs(kernel, cot):
    """phi(args) = sum_w <cot[w], final w> + cot["return"] * loss, from the reference."""
    names = arg_names(kernel)

    def phi(args):
        ret, final = run_reference(kernel, args)
        total = cot.get("return", 0.0) * ret
        for w, c in cot.items():
            if w != "return":
                total += inner(c, final[names.index(w)])
        return total
    return phi


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_vjp_outputs_and_dot_product_identity(case):
    rng = rng_for(case.name, salt="vjp")
    args = case.make_args(rng)
    names = arg_names(case.kernel)
    index_of = {n: k for k, n in enumerate(names)}
    saved = snapshot(args)
    outs, pullback = vjp(case.kernel, *args)
    assert_untouched(args, saved, "vjp")

    # Outputs: the final value of every written array, and the loss.
    rtol = 1e-4 if case.float32 else 1e-12
    want_ret, want_final = run_reference(case.kernel, args)
    assert "return" in outs
    assert_close_scalar(float(outs["return"]), want_ret, rtol, what="vjp return")
    assert set(case.writes) <= set(outs), f"vjp outputs {sorted(outs)} lack {case.writes}"
    assert set(outs) <= set(names) | {"return"}
    for w in case.writes:
        assert_arrays_close(outs[w], want_final[index_of[w]], rtol, what=f"vjp output {w!r}")

    # Pullback: a cotangent at entry for every floating argument; the dot-product identity
    # sum_a <cot_a, d_a> = d/ds phi(args + s d) with all floating arguments moved at once.
    cot_in = random_cotangents(case, args, rng)
    cot_saved = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in cot_in.items()}
    cot = pullback(cot_in)
    assert_untouched(args, saved, "pullback")
    for k, v in cot_in.items():
        if isinstance(v, np.ndarray):
            assert np.array_equal(v, cot_saved[k]), f"pullback modified the cotangent {k!r}"
    assert set(cot) == set(case.wrt), f"pullback gave {sorted(cot)}, want {sorted(case.wrt)}"
    directions = {}
    got = 0.0
    for a in case.wrt:
        value = args[index_of[a]]
        if isinstance(value, np.ndarray):
            assert np.shape(cot[a]) == value.shape, f"cotangent {a!r} shape {np.shape(cot[a])}"
        else:
            assert isinstance(cot[a], float), f"cotangent of float {a!r} is {type(cot[a])}"
        directions[a] = random_direction(rng, value)
        got += inner(cot[a], directions[a])
    phi = weighted_outputs(case.kernel, cot_in)
    want = fd_directional(phi, args, index_of, directions)
    assert_close_scalar(got, want, rtol_for(case), fd_atol(phi(args)),
                        what=f"{case.name}: dot-product identity")


def _pullback(case, args, cot):
    """A fresh vjp per pullback call (the tests do not rely on calling a pullback twice)."""
    _, pullback = vjp(case.kernel, *args)
    return pullback(cot)


def _assert_same_cotangents(a, b, what, rtol):
    assert set(a) == set(b)
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert_arrays_close(a[k], b[k], rtol, what=f"{what} {k!r}")
        else:
            assert_close_scalar(a[k], b[k], rtol, 1e-300, what=f"{what} {k!r}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_missing_cotangents_are_zero(case):
    rng = rng_for(case.name, salt="missing")
    args = case.make_args(rng)
    names = arg_names(case.kernel)
    cot = random_cotangents(case, args, rng)
    zeros = {w: np.zeros_like(cot[w]) for w in case.writes}

    # Only the loss: the same as explicit zero array cotangents, and the same as grad.
    only_return = _pullback(case, args, {"return": 1.0})
    _assert_same_cotangents(only_return, _pullback(case, args, {**zeros, "return": 1.0}),
                            "missing array cotangent", same_rtol(case))
    grads = grad(case.kernel, wrt=case.wrt)(*args)
    _assert_same_cotangents(only_return, dict(zip(case.wrt, grads)), "pullback vs grad",
                            same_rtol(case))

    # Only arrays: the same as an explicit zero for the loss.
    if case.writes:
        arrays_only = {w: cot[w] for w in case.writes}
        _assert_same_cotangents(_pullback(case, args, arrays_only),
                                _pullback(case, args, {**arrays_only, "return": 0.0}),
                                "missing loss cotangent", same_rtol(case))

    # Nothing at all: every cotangent is zero.
    nothing = _pullback(case, args, {})
    assert set(nothing) == set(case.wrt)
    for a in case.wrt:
        assert np.all(np.asarray(nothing[a]) == 0.0), f"cotangent {a!r} not zero"
        value = args[names.index(a)]
        if isinstance(value, np.ndarray):
            assert np.shape(nothing[a]) == value.shape


# ---------------------------------------------------------------- models.seidel

def seidel_args(rng, n=12, tsteps=4):
    A = rng.random((n, n))
    w = np.full((3, 3), 1.0 / 9.0) + 0.01 * rng.standard_normal((3, 3))
    return A, w, tsteps


def test_seidel2d_forward():
    from simcore.models.seidel import polybench_init, polybench_weights, seidel2d
    for args in (seidel_args(rng_for("seidel-fwd")),
                 (polybench_init(12), polybench_weights(), 4)):
        want_ret, want = run_reference(seidel2d, args)
        got = copy_args(args)
        ret = seidel2d(*got)
        assert_close_scalar(float(ret), want_ret, 1e-12, what="seidel2d return")
        assert_arrays_close(got[0], want[0], 1e-12, what="seidel2d A")


def test_seidel2d_gradient():
    from simcore.models.seidel import seidel2d
    rng = rng_for("seidel-grad")
    args = seidel_args(rng)
    saved = snapshot(args)
    gA, gw = grad(seidel2d, wrt=("A", "w"))(*args)
    assert_untouched(args, saved, "grad")
    check_gradient(seidel2d, args, "A", gA, rng, GRAD_RTOL, "seidel2d")
    check_gradient(seidel2d, args, "w", gw, rng, GRAD_RTOL, "seidel2d")
    # Every entry of w, one at a time (a 3x3 weight gradient is cheap to check fully).
    index_of = {"A": 0, "w": 1, "TSTEPS": 2}
    f = loss_of(seidel2d)
    for idx in np.ndindex(3, 3):
        e = np.zeros((3, 3))
        e[idx] = 1.0
        want = fd_directional(f, args, index_of, {"w": e})
        assert_close_scalar(float(gw[idx]), want, GRAD_RTOL, fd_atol(f(args)),
                            what=f"seidel2d dloss/dw{idx}")


def test_seidel2d_vjp():
    from simcore.models.seidel import seidel2d
    rng = rng_for("seidel-vjp")
    args = seidel_args(rng)
    outs, pullback = vjp(seidel2d, *args)
    want_ret, want = run_reference(seidel2d, args)
    assert_arrays_close(outs["A"], want[0], 1e-12, what="vjp A")
    assert_close_scalar(float(outs["return"]), want_ret, 1e-12, what="vjp return")
    cot_in = {"A": rng.standard_normal(args[0].shape), "return": 0.7}
    cot = pullback(cot_in)
    assert set(cot) == {"A", "w"}
    dA, dw = rng.standard_normal(args[0].shape), rng.standard_normal((3, 3))
    phi = weighted_outputs(seidel2d, cot_in)
    want = fd_directional(phi, args, {"A": 0, "w": 1, "TSTEPS": 2}, {"A": dA, "w": dw})
    got = inner(cot["A"], dA) + inner(cot["w"], dw)
    assert_close_scalar(got, want, GRAD_RTOL, fd_atol(phi(args)), what="seidel2d identity")


# ------------------------------------------------------- hand-derived gradients

def test_prefix_sum_gradient_by_hand():
    """loss = sum_i (sum_{k<=i} x_k)^2  =>  dloss/dx_k = 2 * sum_{i>=k} c_i, c = cumsum(x)."""
    case = CASES_BY_NAME["prefix_sum"]
    (x,) = case.make_args(rng_for("by-hand"))
    c = np.cumsum(x)
    want = 2.0 * np.cumsum(c[::-1])[::-1]
    g = grad(case.kernel, wrt="x")(x)
    assert_arrays_close(g, want, 1e-12, what="prefix-sum gradient")


def test_gemm_gradient_by_hand():
    """loss = |beta C + alpha A B|^2: dC = 2 beta R, dA = 2 alpha R B^T, dB = 2 alpha A^T R."""
    case = CASES_BY_NAME["gemm"]
    C, A, B, alpha, beta = case.make_args(rng_for("gemm-by-hand"))
    R = beta * C + alpha * A @ B
    gC, gA, gB, galpha, gbeta = grad(case.kernel, wrt=case.wrt)(C, A, B, alpha, beta)
    assert_arrays_close(gC, 2 * beta * R, 1e-12, what="dC")
    assert_arrays_close(gA, 2 * alpha * R @ B.T, 1e-12, what="dA")
    assert_arrays_close(gB, 2 * alpha * A.T @ R, 1e-12, what="dB")
    assert_close_scalar(galpha, float(np.sum(2 * R * (A @ B))), 1e-12, what="dalpha")
    assert_close_scalar(gbeta, float(np.sum(2 * R * C)), 1e-12, what="dbeta")


def test_only_writes_a_partial_needs_are_recorded():
    """gemm's ``C *= beta`` needs C's old value (d/dbeta); the k-loop's ``C += ...``
    needs none and, since C is read only where it is overwritten, pushes nothing: the
    tape holds N*M values, not N*M*K."""
    case = CASES_BY_NAME["gemm"]
    args = case.make_args(rng_for("gemm-tape"))
    spec = case.kernel.specialize(args)
    adj = spec.backward(frozenset(case.wrt), frozenset({"__return"})).adjoint
    pushes = [ctx for r in adj.regions for node, ctx in walk(r.record.body)
              if isinstance(node, Push)]
    assert pushes and all(len(ctx) == 2 for ctx in pushes)     # inside (i, j) only, not k
    C = args[0]
    g = grad(case.kernel, wrt="beta")(*args)
    R = args[4] * C + args[3] * args[1] @ args[2]
    assert_close_scalar(g, float(np.sum(2 * R * C)), 1e-12, what="dbeta")


def test_a_quotient_rule_partial_divides_once():
    """d/dy x*y/(y*y + c) over its common denominator: one division, same value."""
    x, y = sp.symbols("x y", real=True)
    d = partial(x * y / (y ** 2 + sp.Float(0.01)), y)
    assert len([p for p in d.atoms(sp.Pow) if p.exp.is_negative]) == 1
    at = {x: 0.7, y: -1.3}
    want = 0.7 / (1.69 + 0.01) - 2 * 0.7 * 1.69 / (1.69 + 0.01) ** 2
    assert abs(float(d.subs(at)) - want) < 1e-14
