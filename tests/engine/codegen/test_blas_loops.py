"""Matrix products written as loops (analysis/blas.py): with BLAS they become MatMul
nodes, forward and adjoint, the rest of the loop reading the product (a triangle, a
function of the sum); nests that are not a product of values the loop does not change
stay loops. Either way the results are those of the kernel run as Python, and the
gradients those of finite differences."""
import numpy as np
import pytest

from adjoint import float64, grad, jvp, kernel, options, symbol
from adjoint.library import MatMul
from adjoint.sdfg.nodes import tasklets, walk
from adjoint.corpus.loops import gemm, make_gemm
from adjoint.corpus.more import doitgen, k2mm, k3mm, make_doitgen, make_k2mm, make_k3mm
from kernel_testing import (arg_names, assert_arrays_close, assert_close_scalar, copy_args,
                            fd_atol, fd_directional, inner, random_direction, rng_for,
                            run_reference)

N, M, K = symbol("N"), symbol("M"), symbol("K")


def transposed(C: float64[N, M], A: float64[K, N], B: float64[M, K], alpha: float) -> float:
    for j in range(M):                  # another loop order, both operands transposed
        for k in range(K):
            for i in range(N):
                C[i, j] = C[i, j] - 0.5 * alpha * A[k, i] * B[j, k]
    return np.sum(C * C)


def row_prepared(C: float64[N, M], A: float64[N, K], B: float64[K, M]) -> float:
    for i in range(N):                  # row i of A is rescaled before row i's product
        for k in range(K):
            A[i, k] = 2.0 * A[i, k]
        for k in range(K):
            for j in range(M):
                C[i, j] += A[i, k] * B[k, j]
    return np.sum(C * C) + np.sum(A)


def triangular(C: float64[N, N], A: float64[N, K], B: float64[K, N]) -> float:
    for i in range(N):
        for j in range(i):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]
    return np.sum(C * C)


def dense(X: float64[N, K], W: float64[K, M], b: float64[M], H: float64[N, M]) -> float:
    for n in range(N):                  # the sum in a scalar, a function of it stored
        for m in range(M):
            s = b[m]
            for k in range(K):
                s += X[n, k] * W[k, m]
            H[n, m] = np.tanh(s)
    return np.sum(H * H)


def column_products(A: float64[K, N], B: float64[K, N], C: float64[N, N]) -> float:
    for i in range(N - 1):              # covariance's form: a sum of columns' products
        for j in range(i + 1, N):
            C[i, j] = np.sum(A[:, i] * B[:, j]) / 3.0
            C[j, i] = C[i, j]
    return np.sum(C * C * C)


def two_products(C: float64[N, N], A: float64[N, K], B: float64[N, K], alpha: float) -> float:
    for i in range(N):                  # syr2k's: a sum of two products, a triangle
        for k in range(K):
            C[i, :i + 1] += A[:i + 1, k] * alpha * B[i, k] + B[:i + 1, k] * alpha * A[i, k]
    return np.sum(C * C)


def stepped(A: float64[N, K], B: float64[K, N], C: float64[N, N]) -> float:
    for t in range(3):                  # A changes every step: its product is taken anew
        for i in range(N):
            for j in range(i + 1):
                s = 0.0
                for k in range(K):
                    s += A[i, k] * B[k, j]
                C[i, j] = np.sin(s)
        for i in range(N):
            for k in range(K):
                A[i, k] = 0.5 * A[i, k] + 0.1 * C[i, i]
    return np.sum(C * C) + np.sum(A)


def in_place_rows(A: float64[N, K], W: float64[K, K]) -> float:
    for i in range(N):                  # row i's later sums read its new elements
        for j in range(K):
            s = 0.0
            for k in range(K):
                s += A[i, k] * W[k, j]
            A[i, j] = s
    return np.sum(A * A)


def band(C: float64[N, N], A: float64[N, K], B: float64[K, N]) -> float:
    for i in range(N - 2):              # three columns a row: a whole product wastes work
        for j in range(i, i + 3):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]
    return np.sum(C * C)


def reads_other_element(C: float64[N, N], A: float64[N, K], B: float64[K, N]) -> float:
    for i in range(N):
        for j in range(N):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j] * C[j, i]
    return np.sum(C * C)


def scales_by_first_row(C: float64[N, M], A: float64[N, K], B: float64[K, M]) -> float:
    for i in range(N):                  # row 0 of C changes under later rows' scaling
        for j in range(M):
            C[i, j] *= C[0, j]
        for k in range(K):
            for j in range(M):
                C[i, j] += A[i, k] * B[k, j]
    return np.sum(C * C)


def writes_operand(C: float64[N, M], A: float64[N, K], B: float64[K, M]) -> float:
    for i in range(N):
        for k in range(K):
            for j in range(M):
                C[i, j] += A[i, k] * B[k, j]
            A[i, k] = 2.0 * A[i, k]
    return np.sum(C * C) + np.sum(A)


def partial_range(C: float64[N, M], A: float64[N, K], B: float64[K, M]) -> float:
    for i in range(1, N):
        for j in range(M):
            for k in range(K):
                C[i, j] += A[i, k] * B[k, j]
    return np.sum(C * C)


def weighted(C: float64[N, M], A: float64[N, K], B: float64[K, M], w: float64[K]) -> float:
    for i in range(N):                  # a factor that moves with k: not a matrix product
        for j in range(M):
            for k in range(K):
                C[i, j] += w[k] * A[i, k] * B[k, j]
    return np.sum(C * C)


def _args(k, rng, n=5):
    shapes = {"C": (n, n + 1), "A": (n, n + 2), "B": (n + 2, n + 1), "w": (n + 2,)}
    if k.__name__ == "transposed":
        shapes.update(A=(n + 2, n), B=(n + 1, n + 2))
    if k.__name__ in ("triangular", "reads_other_element", "band", "stepped"):
        shapes.update(C=(n, n), B=(n + 2, n))
    if k.__name__ in ("column_products", "two_products"):
        shapes.update(C=(n, n), A=(n + 2, n), B=(n + 2, n))
    if k.__name__ == "two_products":
        shapes.update(A=(n, n + 2), B=(n, n + 2))
    shapes.update(X=(n, n + 2), W=(n + 2, n + 1), b=(n + 1,), H=(n, n + 1))
    if k.__name__ == "in_place_rows":
        shapes.update(W=(n + 2, n + 2))
    return tuple(rng.standard_normal(shapes[name]) if name in shapes else 1.3
                 for name in arg_names(k))


LOOPS = [reads_other_element, writes_operand, weighted, in_place_rows, band]
PRODUCTS = {gemm: 1, k2mm: 2, k3mm: 3, transposed: 1, row_prepared: 1, triangular: 1,
            partial_range: 1, scales_by_first_row: 1, dense: 1, column_products: 1,
            two_products: 2, doitgen: 1, stepped: 1}
CASES = {gemm: make_gemm, k2mm: make_k2mm, k3mm: make_k3mm, doitgen: make_doitgen}


def _kernel_and_args(func):
    """A fresh kernel (none compiled under other options) and its arguments."""
    k = kernel(getattr(func, "__wrapped__", func))
    rng = rng_for(k.__name__)
    return k, (CASES[func](rng) if func in CASES else _args(k, rng))


def _sdfg(k, args):
    k(*copy_args(args))
    return k.specializations[0].sdfg


def _products_left(sdfg):
    """Tasklets in loops reading elements of two matrices besides the one they write."""
    def matrices(t):
        outputs = {m for m, _ in t.outputs}
        return [m for _, m in t.inputs if len(m.subset) >= 2 and m not in outputs]
    return [t for t, context, _ in tasklets(sdfg.body) if context and len(matrices(t)) >= 2]


@pytest.fixture
def blas_linked(monkeypatch):
    pytest.importorskip("scipy_openblas64")
    monkeypatch.setattr(options, "blas", True)


@pytest.mark.parametrize("func", list(PRODUCTS), ids=lambda f: f.__name__)
def test_products_become_matmuls(func, blas_linked):
    k, args = _kernel_and_args(func)
    sdfg = _sdfg(k, args)
    assert sum(isinstance(n, MatMul) for n, _ in walk(sdfg.body)) == PRODUCTS[func]
    assert not _products_left(sdfg)
    assert "[matmul" in k.explain()


@pytest.mark.parametrize("func", LOOPS, ids=lambda f: f.__name__)
def test_other_nests_stay_loops(func, blas_linked):
    k, args = _kernel_and_args(func)
    sdfg = _sdfg(k, args)
    assert not any(isinstance(n, MatMul) for n, _ in walk(sdfg.body))
    assert _products_left(sdfg)


def _check_values_and_gradient(k, args):
    want, want_args = run_reference(k, args)
    got_args = copy_args(args)
    assert_close_scalar(float(k(*got_args)), want, 1e-11, what="return value")
    for name, g, w in zip(arg_names(k), got_args, want_args):
        if isinstance(g, np.ndarray):
            assert_arrays_close(g, w, 1e-11, what=f"array {name!r}")
    names = arg_names(k)
    grads = grad(k, wrt=tuple(names))(*copy_args(args))
    rng = rng_for(k.__name__, "direction")
    directions = {n: random_direction(rng, a) for n, a in zip(names, args)}
    index_of = {n: i for i, n in enumerate(names)}
    phi = lambda a: run_reference(k, a)[0]      # noqa: E731
    want = fd_directional(phi, args, index_of, directions)
    got = sum(inner(g, directions[n]) for n, g in zip(names, grads))
    assert_close_scalar(got, want, 1e-7, fd_atol(phi(args)), what="directional derivative")
    tangent = jvp(k, copy_args(args), directions)[1]["return"]
    assert_close_scalar(tangent, got, 1e-10, what="tangent")


@pytest.mark.parametrize("blas", [True, False], ids=["blas", "loops"])
@pytest.mark.parametrize("func", list(PRODUCTS) + LOOPS, ids=lambda f: f.__name__)
def test_values_and_gradients(func, blas, monkeypatch):
    if blas:
        pytest.importorskip("scipy_openblas64")
    monkeypatch.setattr(options, "blas", blas)
    k, args = _kernel_and_args(func)
    _check_values_and_gradient(k, args)
    assert any(isinstance(n, MatMul) for n, _ in walk(_sdfg(k, args).body)) == (
        blas and func in PRODUCTS)
