"""Slices whose extent depends on loop variables, and batched matrix products (issue 20).

Products and reductions over ``A[i, :j]``, ``x[:k]``, ``data[:, i:]`` lower to loops with
no temporary (a dot product) or to a temporary allocated once per call at its largest
size (frontend/extents.py); stacks of matrices times a matrix are one MatMul; other
batched products and einsums of several operands are sums over maps. Kernels written
here in the styles real code uses; each against its plain Python function (forward),
central differences (gradient) and the gradient (tangent)."""
import inspect

import numpy as np
import pytest

from adjoint import KernelSyntaxError, float64, grad, jvp, kernel, options, symbol
from adjoint.frontend.functions import floordiv, python_mod
from adjoint.library import MatMul
from adjoint.sdfg import MapScope, Push, Tasklet
from adjoint.sdfg.nodes import walk
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar, copy_args,
                            fd_atol, fd_directional, rng_for, run_reference)

N, M, K, B = symbol("N"), symbol("M"), symbol("K"), symbol("B")
P, Q, R = symbol("P"), symbol("Q"), symbol("R")


# ---- kernels -------------------------------------------------------------------------------
@kernel
def forward_substitution(L: float64[N, N], b: float64[N], x: float64[N]) -> float:
    for i in range(N):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]
    return np.sum(x * x)


@kernel
def doolittle(A: float64[N, N], L: float64[N, N], U: float64[N, N]) -> float:
    for i in range(N):
        for j in range(i, N):
            U[i, j] = A[i, j] - np.dot(L[i, :i], U[:i, j])
        L[i, i] = 1.0
        for j in range(i + 1, N):
            L[j, i] = (A[j, i] - L[j, :i] @ U[:i, i]) / U[i, i]
    return np.sum(U * U) + np.sum(np.sin(L))


@kernel
def reversed_dots(a: float64[N], b: float64[N], c: float64[N], w: float64[N], s: float) -> float:
    for k in range(1, N):
        c[k] = np.dot(np.flip(a[:k + 1]), b[:k + 1])
        w[:k] -= s * c[k] * np.flip(w[:k])
    return np.sum(c * c) + np.sum(w * w)


@kernel
def upper_gram(D: float64[N, M], G: float64[M, M]) -> float:
    for i in range(M):
        G[i, i:] = G[i:, i] = np.tanh(D[:, i] @ D[:, i:])
    return np.sum(np.sin(G))


@kernel
def tails(A: float64[N, N], Bm: float64[N, M], C: float64[N, M]) -> float:
    for i in range(N):
        for j in range(M):
            C[i, j] += np.dot(A[i + 1:, i], Bm[i + 1:, j])
        C[i, :] *= 0.5
    return np.sum(C * C)


@kernel
def leading_blocks(A: float64[N, N], x: float64[N]) -> float:
    s = 0.0
    for i in range(1, N):
        s += np.sum(np.tanh(A[:i, :i] @ x[:i])) + np.sum((x[:i] @ A[:i, i:]) ** 2)
    return s


@kernel
def stacked(A: float64[P, Q, R], W: float64[R, R]) -> float:
    A[:] = np.reshape(np.reshape(A, (P, Q, 1, R)) @ W, (P, Q, R))
    return np.sum(A * A)


def stacked_sizes(p, q, r, A, W):      # unannotated, sizes passed as numbers
    A[:] = np.reshape(np.reshape(A, (p, q, 1, r)) @ W, (p, q, r))
    return np.sum(np.sin(A))


# Sizes passed as numbers (not known to be >= 0): a product's dims are its operands' as
# allocated, negative sizes counting as 0.
def reshaped_sizes(p, q, x, W):
    return np.sum(np.tanh(np.reshape(x, (p, q)) @ W))


@kernel
def batches(X: float64[B, N, K], Y: float64[B, K, M], Z: float64[K, M], v: float64[K]) -> float:
    return (np.sum(np.sin(X @ Y)) + np.sum(np.cos(np.matmul(X[0], Y))) + np.sum((X @ v) ** 2)
            + np.sum(np.tanh(v @ Y)) + np.sum(np.einsum("bik,bkm->bmi", X, Y) ** 2)
            + np.sum(np.einsum("bik,bkm,km->b", X, Y, Z) ** 2))


def _args(name, rng):
    spd = rng.standard_normal((5, 5))
    spd = spd @ spd.T + 5.0 * np.eye(5)
    return {
        "forward_substitution": (rng.standard_normal((6, 6)) + 6.0 * np.eye(6),
                                 rng.standard_normal(6), np.zeros(6)),
        "doolittle": (spd, np.zeros((5, 5)), np.zeros((5, 5))),
        "reversed_dots": (rng.standard_normal(7), rng.standard_normal(7), np.zeros(7),
                          rng.standard_normal(7), 0.3),
        "upper_gram": (rng.standard_normal((6, 5)), np.eye(5)),
        "tails": (rng.standard_normal((5, 5)), rng.standard_normal((5, 3)),
                  rng.standard_normal((5, 3))),
        "leading_blocks": (0.5 * rng.standard_normal((6, 6)), rng.standard_normal(6)),
        "stacked": (rng.standard_normal((2, 3, 4)), 0.5 * rng.standard_normal((4, 4))),
        "stacked_sizes": (2, 3, 4, rng.standard_normal((2, 3, 4)),
                          0.5 * rng.standard_normal((4, 4))),
        "reshaped_sizes": (2, 3, rng.standard_normal(6), rng.standard_normal((3, 4))),
        "batches": (rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 3)),
                    rng.standard_normal((4, 3)), rng.standard_normal(4)),
    }[name]


KERNELS = [forward_substitution, doolittle, reversed_dots, upper_gram, tails, leading_blocks,
           stacked, kernel(stacked_sizes), kernel(reshaped_sizes), batches]


def _floats(k, args):
    return [n for n, a in zip(arg_names(k), args) if isinstance(a, (np.ndarray, float))]


def check(k, args, rtol=1e-8):
    """Forward (the return value and every argument afterwards) against ``py_func``; the
    gradient along a random direction against central differences; the tangent too."""
    want, after = run_reference(k, args)
    work = copy_args(args)
    assert_close_scalar(k(*work), want, 1e-12, what=f"{k.__name__} forward")
    for got, ref in zip(work, after):
        if isinstance(ref, np.ndarray):
            assert_arrays_close(got, ref, 1e-12, what=f"{k.__name__} arguments")
    wrt = _floats(k, args)
    names = arg_names(k)
    rng = rng_for(k.__name__, "direction")
    d = {n: rng.standard_normal(np.shape(args[names.index(n)])) for n in wrt}
    d = {n: float(v) if not np.shape(v) else v for n, v in d.items()}
    grads = grad(k, wrt=tuple(wrt))(*args)
    ad = sum(float(np.sum(g * d[n])) for n, g in zip(wrt, grads))
    fd = fd_directional(lambda a: k.py_func(*copy_args(a)), args,
                        {n: names.index(n) for n in wrt}, d)
    assert_close_scalar(ad, fd, rtol, fd_atol(want), f"{k.__name__} gradient")
    tangent = jvp(k, args, d)[1]["return"]
    assert_close_scalar(tangent, ad, 1e-10, 1e-12, f"{k.__name__} tangent")


@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.__name__)
def test_forward_gradient_and_tangent(k):
    check(k, _args(k.__name__, rng_for(k.__name__)))


# ---- what the lowering makes of them -------------------------------------------------------
def _sdfg(k, args):
    return k.specialize(args).forward.sdfg


def test_a_dot_over_a_loop_slice_is_a_loop_without_temporaries():
    """``L[i, :i] @ x[:i]``: a sum into a number, no array and no BLAS call."""
    sdfg = _sdfg(forward_substitution, _args("forward_substitution", rng_for("dot")))
    transients = [c for c in sdfg.containers.values() if c.transient]
    assert transients and all(c.is_scalar for c in transients)
    assert not any(isinstance(node, MatMul) for node, _ in walk(sdfg.body))


def test_a_temporary_sized_by_the_loop_is_allocated_at_its_largest():
    """``D[:, i] @ D[:, i:]`` has M - i elements; its buffer is allocated once, at M."""
    sdfg = _sdfg(upper_gram, _args("upper_gram", rng_for("largest")))
    loop_vars = {r.var for _, context in walk(sdfg.body) for r in context}
    shapes = [c.shape for c in sdfg.containers.values() if c.transient and not c.is_scalar]
    assert (M,) in shapes
    assert not any(set().union(*(n.free_symbols for n in s)) & loop_vars for s in shapes)


def test_sums_into_a_refilled_temporary_record_nothing():
    """The temporary is reset every iteration and then only summed into: its reset
    records it once per iteration (tanh's derivative reads it), the sums push nothing
    (else N*M^2/2 values)."""
    args = _args("upper_gram", rng_for("records"))
    adj = upper_gram.specialize(args).backward(frozenset({"D"}), frozenset({"__return"})).adjoint
    sums = [node for r in adj.regions for node, _ in walk(r.record.body)
            if isinstance(node, MapScope) and any(m.wcr for t in node.body
                                                  if isinstance(t, Tasklet) for m, _ in t.outputs)]
    assert sums and not any(isinstance(t, Push) for node in sums for t in node.body)


def test_a_stack_times_a_matrix_is_one_product_on_the_array_in_place():
    """``reshape(A, (P, Q, 1, R)) @ W``: one MatMul of A's rows as they are stored."""
    sdfg = _sdfg(stacked, _args("stacked", rng_for("stack")))
    products = [node for node, _ in walk(sdfg.body) if isinstance(node, MatMul)]
    assert len(products) == 1 and products[0].a == "A"
    assert not any(name.startswith("__operand") for name in sdfg.containers)


def test_dropping_a_unit_axis_needs_no_division():
    """The product of shape (p, q, 1, W's columns) read back as (p, q, r): the sizes pair
    up (r and W's columns through the equal volumes), so no index is divided."""
    k = kernel(stacked_sizes)
    sdfg = _sdfg(k, _args("stacked_sizes", rng_for("unit")))
    stores = [t for node, _ in walk(sdfg.body) if isinstance(node, MapScope) for t in node.body
              if any(m.data == "A" for m, _ in t.outputs)]
    assert stores and not any(e.has(floordiv, python_mod) for t in stores
                              for _, m in t.inputs for e in m.subset)


# ---- the GPU code, emulated ----------------------------------------------------------------
@pytest.mark.parametrize("k", [forward_substitution, upper_gram, stacked], ids=lambda k: k.__name__)
def test_cuda_emulated(k, monkeypatch):
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    args = _args(k.__name__, rng_for(k.__name__, "cuda"))
    check(k, args)
    assert "__global__" in k.specialize(args).forward.source


# ---- what stays unsupported: located errors ------------------------------------------------
def unaffine(A: float64[N, N], x: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        s += np.sum(A[:i * i, :] @ x)
    return s


def named_slice(x: float64[N]) -> float:
    s = 0.0
    for i in range(N):
        t = x[:i] * 2.0
        s += np.sum(t)
    return s


def dot_3d(X: float64[B, N, K], Y: float64[B, K, M]) -> float:
    return np.sum(np.dot(X, Y))


@pytest.mark.parametrize("func,args,message", [
    (unaffine, (np.ones((3, 3)), np.ones(3)), "affine in the loop variables"),
    (named_slice, (np.ones(3),), "bound to a name must have sizes known on entry"),
    (dot_3d, (np.ones((2, 3, 4)), np.ones((2, 4, 3))), "write @ or np.matmul"),
])
def test_unsupported_forms_name_their_line(func, args, message):
    _, first = inspect.getsourcelines(func)
    line = first + (1 if func is dot_3d else 3)
    with pytest.raises(KernelSyntaxError, match=message) as err:
        kernel(func)(*args)
    assert err.value.line == line
