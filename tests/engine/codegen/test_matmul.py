"""Matrix products (@, np.dot, np.matmul, .dot) as library nodes: BLAS or loops,
with adjoints that are matrix products again."""
import re

import numpy as np
import pytest

from adjoint import (BoundsError, KernelSyntaxError, float32, float64, grad, jvp, kernel,
                     options, symbol)

N, M, K = symbol("N"), symbol("M"), symbol("K")


@kernel
def mlp(x: float64[N, K], W1: float64[K, M], W2: float64[M], b: float64[M]) -> float:
    h = np.tanh(x @ W1 + b)
    y = h @ W2
    return np.sum(y * y) + W2 @ W2


@kernel
def gram(A: float64[N, K], B: float64[N, M]) -> float:
    C = A.T @ B
    D = np.dot(C, C.T)
    return np.sum(D * D)


@kernel
def recurrent(A: float64[N, N], x: float64[N], T: int) -> float:
    for t in range(T):
        x[:] = np.tanh(A @ x)          # the product is overwritten every step: recorded
    return np.sum(x * x)


@kernel
def mixed_operands(A: float64[N, K], v: float64[N], w: float32[K]) -> float:
    u = v[::-1] @ A                    # a reversed slice and a float32 operand: copied
    return np.sum(np.matmul(A, w) * v) + u.dot(u)


@kernel
def contractions(A: float64[N, K], B: float64[M, K], x: float64[N], y: float64[K]) -> float:
    C = np.einsum("ik,jk->ij", A, B)             # a matrix product: BLAS
    v = np.einsum("ij,j->i", A, y)
    t = np.einsum("ij,ij->", A, A) + np.einsum("i,i", x, x)
    D = np.outer(x, y) * A
    return np.sum(C * C) + np.sum(v) + t + np.einsum("ii", C @ C.T) + np.sum(D)


@kernel
def vector_products(A: float64[N, K], x: float64[K], y: float64[N]) -> float:
    """Matrix-vector products every way round (BLAS dgemv, their adjoints too)."""
    return np.sum((A @ x) * y) + np.sum(np.tanh(y @ A) * x) + np.sum((A.T @ y) * x) + \
        np.sum((x @ A.T) * y) + y @ (A @ x)


@kernel
def pairs(A: float64[N, K], p: float64[K], r: float64[N], x1: float64[N],
          B: float64[K, K]) -> float:
    """Products of one matrix, two by two in one pass over it (NPBench's bicg, mvt, atax):
    a row dot product with an update of the whole output, two of either kind, a strided
    vector, one adding into its output; and one that may not move up (its vector is
    written in between)."""
    s, q = r @ A, A @ p
    x1 += A @ B[1, :]
    t = B[:, 2] @ A.T
    u = A @ p
    p[0] = u[1]
    v = A @ p
    return np.sum(s * B[0, :]) + np.sum(q * x1) + np.sum(t * t) + np.sum((A.T @ (A @ p)) * p) + \
        np.sum(v * u)


@kernel
def rank_one_pairs(A: float64[N, K], p: float64[K], r: float64[N], w: float64[K],
                   z: float64[N]) -> float:
    """NPBench's bicg, weighted: the matrix's adjoint is two outer products, paired into
    one pass that assigns it (nothing touched it before; first touch), the second moving
    up past its vector's adjoint being zeroed, the first down past the other's made."""
    s, q = r @ A, A @ p
    return np.sum(s * w) + np.sum(np.sin(q) * z)


@kernel
def touched_pairs(A: float64[N, K], p: float64[K], r: float64[N]) -> float:
    """As rank_one_pairs, the matrix's adjoint touched before (A * A's reverse runs
    first): the pass adds both outer products to it."""
    s, q = r @ A, A @ p
    return np.sum(s * s) + np.sum(q * q) + np.sum(A * A)


@kernel
def chained_pairs(A: float64[N, N], y: float64[N], x: float64[N]) -> float:
    """NPBench's gemver: the second outer product's vector is made from the first's
    transposed product (x's adjoint), so those run before the pair, the zeroing of the
    first's vector after it."""
    x += 0.5 * y @ A
    w = 1.5 * A @ x
    return np.sum(w * w)


@kernel
def taped_between(A: float64[N, K], p: float64[K], r: float64[N], x: float64[N],
                  y: float64[N]) -> float:
    """Overwrites recorded between the products: their restores (pops) between the
    outer products of the reverse keep their order whichever side of the pair."""
    s = r @ A
    x[:] = np.sin(x) * s[0]
    y[:] = np.cos(y * x)
    q = A @ p
    return np.sum(s * s) + np.sum(q * x * y)


@kernel
def symmetric(A: float64[N, K], W: float64[N, N], V: float64[K, K]) -> float:
    """A matrix times its own transpose, both ways (BLAS dsyrk and a mirrored triangle)."""
    return np.sum((A @ A.T) * W) + np.sum(np.dot(A.T, A) * V)


@kernel
def scaled(alpha: float, beta: float, A: float64[N, K], B: float64[K, M], x: float64[K]) -> float:
    """Numbers times matrices read in place: the number scales the product instead."""
    y = alpha * A @ x + A.T.T @ x * beta
    C = A @ (B * beta) + (2.0 * A) @ (B * alpha)
    return np.sum(y * y) + np.sum(np.tanh(C) * C) + np.sum((alpha * A.T) @ A)


@kernel
def reshaped(A: float64[N, M, K], C: float64[K, K], P: int, Q: int) -> float:
    """NPBench's doitgen: a reshaped argument's rows multiplied in place (its volume is
    checked on entry), then written back."""
    A[:] = np.reshape(np.reshape(A, (P, Q, 1, K)) @ C, (P, Q, K))
    return np.sum(A * A)


def _args(k, rng):
    return {
        "symmetric": (rng.standard_normal((5, 3)), rng.standard_normal((5, 5)),
                      rng.standard_normal((3, 3))),
        "scaled": (0.7, -1.3, rng.standard_normal((4, 3)), rng.standard_normal((3, 5)),
                   rng.standard_normal(3)),
        "reshaped": (rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 4)), 2, 3),
        "vector_products": (rng.standard_normal((5, 7)), rng.standard_normal(7),
                            rng.standard_normal(5)),
        "rank_one_pairs": (rng.standard_normal((6, 5)), rng.standard_normal(5),
                           rng.standard_normal(6), rng.standard_normal(5),
                           rng.standard_normal(6)),
        "taped_between": (rng.standard_normal((6, 5)), rng.standard_normal(5),
                          rng.standard_normal(6), rng.standard_normal(6),
                          rng.standard_normal(6)),
        "chained_pairs": (rng.standard_normal((5, 5)), rng.standard_normal(5),
                          rng.standard_normal(5)),
        "touched_pairs": (rng.standard_normal((6, 5)), rng.standard_normal(5),
                          rng.standard_normal(6)),
        "pairs": (rng.standard_normal((6, 5)), rng.standard_normal(5), rng.standard_normal(6),
                  rng.standard_normal(6), rng.standard_normal((5, 5))),
        "mlp": (rng.standard_normal((5, 3)), rng.standard_normal((3, 4)),
                rng.standard_normal(4), rng.standard_normal(4)),
        "gram": (rng.standard_normal((6, 3)), rng.standard_normal((6, 4))),
        "recurrent": (0.4 * rng.standard_normal((5, 5)), rng.standard_normal(5), 4),
        "mixed_operands": (rng.standard_normal((4, 3)), rng.standard_normal(4),
                           rng.standard_normal(3).astype(np.float32)),
        "contractions": (rng.standard_normal((3, 4)), rng.standard_normal((5, 4)),
                         rng.standard_normal(3), rng.standard_normal(4)),
    }[k.__name__]


KERNELS = [mlp, gram, recurrent, mixed_operands, contractions, vector_products, pairs,
           rank_one_pairs, touched_pairs, chained_pairs, taped_between, symmetric, scaled,
           reshaped]


def _copy(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _floating(k, args):
    names = k.__wrapped__.__code__.co_varnames[:len(args)]
    return [n for n, a in zip(names, args) if isinstance(a, float) or
            isinstance(a, np.ndarray) and a.dtype == np.float64]


@pytest.mark.parametrize("blas", [True, False], ids=["blas", "loops"])
@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.__name__)
def test_forward_gradient_and_tangent(k, blas, monkeypatch):
    monkeypatch.setattr(options, "blas", blas)
    rng = np.random.default_rng(7)
    args = _args(k, rng)
    assert k(*_copy(args)) == pytest.approx(k.py_func(*_copy(args)), rel=1e-12)
    wrt = tuple(_floating(k, args))
    grads = grad(k, wrt=wrt)(*args)
    names = k.__wrapped__.__code__.co_varnames[:len(args)]
    d = {n: rng.standard_normal(np.shape(args[names.index(n)])) for n in wrt}
    h = 1e-6

    def f(s):
        return k.py_func(*[a + s * d[n] if n in d else a for n, a in zip(names, _copy(args))])
    want = (f(h) - f(-h)) / (2 * h)
    got = sum(float(np.sum(g * d[n])) for n, g in zip(wrt, grads))
    assert got == pytest.approx(want, rel=1e-6)
    assert jvp(k, args, d)[1]["return"] == pytest.approx(got, rel=1e-10)


@pytest.mark.c_source
def test_products_call_blas_when_installed():
    pytest.importorskip("scipy_openblas64")
    gram(*_args(gram, np.random.default_rng(0)))
    spec = gram.specializations[0]
    assert "sc_dgemm(" in spec.forward.source
    assert "C.T" not in spec.forward.source and "[matmul" in gram.explain()


@pytest.mark.c_source
def test_matrix_vector_products_call_gemv():
    """dgemm with one column runs at half dgemv's speed (NPBench's atax, bicg, mvt)."""
    pytest.importorskip("scipy_openblas64")
    args = _args(vector_products, np.random.default_rng(0))
    spec = vector_products.specialize(args)
    source = spec.forward.source            # two products of one matrix: one pass (below)
    assert source.count("sc_dgemv(") + 2 * source.count("one pass over") >= 5
    assert "sc_dgemm(" not in source
    assert "sc_dgemm(" not in spec.backward(frozenset({"A", "x"}),
                                            frozenset({"__return"})).source


@pytest.mark.c_source
def test_products_of_one_matrix_pass_over_it_once():
    """Forward and reverse sweep: the products pair up where the second may move up to the
    first (not the one whose vector is written in between, which BLAS runs alone)."""
    args = _args(pairs, np.random.default_rng(0))
    spec = pairs.specialize(args)
    assert spec.forward.source.count("one pass over the matrix") == 3
    assert spec.forward.source.count("sc_dgemv(") == 2      # u = A @ p, and A.T @ (A @ p)
    backward = spec.backward(frozenset({"A", "p", "r"}), frozenset({"__return"})).source
    assert backward.count("one pass over") >= 3


@pytest.mark.c_source
@pytest.mark.parametrize("k, assigned", [(rank_one_pairs, True), (touched_pairs, False),
                                         (chained_pairs, True)],
                         ids=["first touch", "touched", "chained"])
def test_two_outer_products_into_one_adjoint_pass_over_it_once(k, assigned):
    """The reverse of two products of one matrix: its adjoint's two rank-1 updates in one
    pass (no dger), assigning it where nothing touched it before; and the two transposed
    products reading the matrix in one pass too."""
    args = _args(k, np.random.default_rng(0))
    backward = k.specialize(args).backward(frozenset(_floating(k, args)),
                                           frozenset({"__return"})).source
    assert backward.count("two rank-1 updates, one pass") == 1 and "sc_dger(" not in backward
    assert ("sc_row[sc_j] = (sc_row[sc_j] + " not in backward) == assigned
    # the forward's pair in the forward and record entries, the reverse's own
    assert backward.count("two products, one pass over the matrix") == \
        (0 if k is chained_pairs else 3)


@pytest.mark.c_source
def test_an_outer_product_assigned_writes_each_element_once():
    """gesummv's matrix adjoints, first touched by an outer product: each element
    assigned, not zeroed (a memset per row) and then added to."""
    @kernel
    def squashed(A: float64[N, K], x: float64[K]) -> float:
        return np.sum(np.sin(A @ x))
    args = (np.random.default_rng(0).standard_normal((4, 3)), np.ones(3))
    backward = squashed.specialize(args).backward(frozenset({"A"}),
                                                  frozenset({"__return"})).source
    assert re.search(r"v___g_A\[[^]]*\] = sc_a \* ", backward)
    assert not re.search(r"v___g_A\[[^]]*\] = 0\.0", backward)
    g = grad(squashed, wrt="A")(*args)
    np.testing.assert_allclose(g, np.cos(args[0] @ args[1])[:, None] * args[1][None, :],
                               rtol=1e-13)


@pytest.mark.c_source
def test_products_with_their_own_transpose_call_syrk():
    """``A @ A.T`` is dsyrk (half dgemm's work, as NumPy; NPBench's covariance2), its other
    triangle mirrored; a product adding into its output stays dgemm."""
    pytest.importorskip("scipy_openblas64")
    spec = symmetric.specialize(_args(symmetric, np.random.default_rng(0)))
    source = spec.forward.source
    assert source.count("sc_dsyrk(") == 2 and "sc_dgemm(" not in source
    assert "sc_dsyrk(101, 121, 111," in source and "sc_dsyrk(101, 121, 112," in source


def test_scaled_and_reshaped_operands_are_read_in_place():
    """``alpha * A @ x`` multiplies A itself and scales the product (NPBench's gesummv
    copied alpha * A first); a reshaped argument whose volume is checked on entry is the
    product's operand as it is (doitgen copied it through a division per element)."""
    args = _args(scaled, np.random.default_rng(0))
    sdfg = scaled.specialize(args).sdfg
    assert not [n for n in sdfg.containers if n.startswith("__operand")]
    assert "__matmul1 = A @ x" in scaled.explain()
    args = _args(reshaped, np.random.default_rng(0))
    sdfg = reshaped.specialize(args).sdfg
    assert not [n for n in sdfg.containers if n.startswith("__operand")]
    with pytest.raises(BoundsError, match="do not match"):
        reshaped(np.ones((2, 3, 4)), np.ones((4, 4)), 3, 3)


def test_mismatched_inner_sizes():
    def bad(A: float64[3, 4], B: float64[3, 4]) -> float:
        return np.sum(A @ B)
    with pytest.raises(KernelSyntaxError, match="do not match"):
        kernel(bad)(np.ones((3, 4)), np.ones((3, 4)))

    @kernel
    def checked(A: float64[N, K], B: float64[M, N]) -> float:
        return np.sum(A @ B)
    with pytest.raises(BoundsError, match="do not match"):
        checked(np.ones((2, 3)), np.ones((4, 2)))


def bad_operands(A: float64[3, 3]) -> float:
    return np.sum(np.einsum("ij,jk", A))


def bad_ellipsis(A: float64[3, 3]) -> float:
    return np.sum(np.einsum("i...->i", A))


def bad_output(A: float64[3, 3]) -> float:
    return np.sum(np.einsum("ij->iq", A))


@pytest.mark.parametrize("func,message", [(bad_operands, "one subscript per operand"),
                                          (bad_ellipsis, "no ellipsis"),
                                          (bad_output, "from the inputs")])
def test_einsum_errors_name_the_problem(func, message):
    with pytest.raises(KernelSyntaxError, match=message):
        kernel(func)(np.ones((3, 3)))
