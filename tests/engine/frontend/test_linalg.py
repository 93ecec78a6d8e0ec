"""np.linalg.cholesky, np.linalg.solve and np.linalg.inv as library nodes (adjoint/library/):
forward against NumPy, gradients and tangents against central differences (matrix rules,
no element-by-element expansion), LAPACK and the loops without it, failures naming the
line."""
from dataclasses import dataclass

import numpy as np
import pytest

from adjoint import (KernelSyntaxError, LinAlgError, float64, grad, kernel, options,
                     symbol)
from adjoint.library import Cholesky, Solve
from adjoint.library import base as library_base
from adjoint.sdfg.nodes import LibraryNode, walk
from kernel_testing import (arg_names, assert_arrays_close, check_vjp_and_jvp, copy_args,
                            fd_gradient, rng_for)

N, K = symbol("N"), symbol("K")


@kernel
def factor_norms(A: float64[N, N]) -> float:
    L = np.linalg.cholesky(A)
    return np.sum(L * L * L) + np.sum(np.sin(L))


@kernel
def factor_in_place(A: float64[N, N]) -> float:
    A[:] = np.linalg.cholesky(A) + 0.5 * np.triu(A, 1)    # the factor over A, as LAPACK does
    return np.sum(A * A)


@kernel
def factor_of_gram(M: float64[N, K], s: float) -> float:
    A = M @ M.T + s * np.eye(N)         # symmetric perturbations only
    L = np.linalg.cholesky(A)
    logdet = 0.0
    for i in range(N):
        logdet += 2.0 * np.log(L[i, i])
    return np.sum(L[:, 0] * L[:, 0]) + logdet


@kernel
def solve_vector(A: float64[N, N], b: float64[N]) -> float:
    x = np.linalg.solve(A, b)
    return np.sum(x * x * x)


@kernel
def solve_matrix(A: float64[N, N], B: float64[N, K]) -> float:
    X = np.linalg.solve(A, B)
    return np.sum(np.sin(X))


@kernel
def inverse(A: float64[N, N]) -> float:
    Y = np.linalg.inv(A.T)              # a transposed operand: copied first
    return np.sum(Y * Y) + Y[0, 1]


@kernel
def steps(A: float64[N, N], b: float64[N], T: int) -> float:
    s = 0.0
    for t in range(T):                  # a node per iteration, its output overwritten
        L = np.linalg.cholesky(A)
        b[:] = np.linalg.solve(L, b) + 0.1 * b
        s += np.sum(L * b)
    return s


@kernel
def whitened(A: float64[N, N], X: float64[N, K]) -> float:
    L = np.linalg.cholesky(A)           # cholesky, then triangular solves with it
    W = np.linalg.solve(L, X)
    return np.sum(W * W) + np.sum(np.linalg.solve(L.T, W))


@kernel
def covariance(X: float64[N, K]) -> float:
    C = np.cov(X)                       # rows are variables, as NumPy's default
    return np.sum(C * C)


@kernel
def covariance_factor(X: float64[N, K]) -> float:
    C = np.cov(X, rowvar=False)         # columns as variables, then its factor
    L = np.linalg.cholesky(C + 0.5 * np.eye(K))
    return np.sum(L) + np.cov(X[0], ddof=0)


@kernel
def unannotated(A, b):                  # specialised on the call: A's sizes two symbols
    A[:] = np.linalg.cholesky(A) + np.triu(A, 1)
    return np.sum(np.linalg.solve(A, b) * b)


def spd(rng, n):
    m = rng.standard_normal((n, n))
    return m @ m.T + n * np.eye(n)


def args_of(k, rng, n=5):
    return {
        "factor_norms": lambda: (spd(rng, n),),
        "factor_in_place": lambda: (spd(rng, n),),
        "factor_of_gram": lambda: (rng.standard_normal((n, 3)), float(n)),
        "solve_vector": lambda: (rng.standard_normal((n, n)) + 3 * np.eye(n),
                                 rng.standard_normal(n)),
        "solve_matrix": lambda: (rng.standard_normal((n, n)) + 3 * np.eye(n),
                                 rng.standard_normal((n, 3))),
        "inverse": lambda: (rng.standard_normal((n, n)) + 3 * np.eye(n),),
        "steps": lambda: (spd(rng, n), rng.standard_normal(n), 3),
        "whitened": lambda: (spd(rng, n), rng.standard_normal((n, 2))),
        "covariance": lambda: (rng.standard_normal((3, n + 2)),),
        "covariance_factor": lambda: (rng.standard_normal((n + 1, 3)),),
        "unannotated": lambda: (spd(rng, n), rng.standard_normal((n, 2))),
    }[k.__name__]()


KERNELS = [factor_norms, factor_in_place, factor_of_gram, solve_vector, solve_matrix, inverse,
           steps, whitened, covariance, covariance_factor, unannotated]


@pytest.fixture
def library(request, monkeypatch):
    if request.param:
        pytest.importorskip("scipy_openblas64")
    monkeypatch.setattr(options, "blas", request.param)
    return request.param


def floating(k, args):
    return [n for n, a in zip(arg_names(k), args) if isinstance(a, (np.ndarray, float))]


@pytest.mark.parametrize("library", [True, False], ids=["lapack", "loops"], indirect=True)
@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.__name__)
def test_forward_matches_numpy(k, library):
    args = args_of(k, rng_for(k.__name__))
    mine, theirs = copy_args(args), copy_args(args)
    got, want = k(*mine), k.py_func(*theirs)
    assert got == pytest.approx(want, rel=1e-12)
    for a, b in zip(mine, theirs):                  # written arguments too
        if isinstance(a, np.ndarray):
            assert_arrays_close(a, b, 1e-12)


@pytest.mark.parametrize("library", [True, False], ids=["lapack", "loops"], indirect=True)
@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.__name__)
def test_gradient_matches_finite_differences(k, library):
    """Every coordinate: cholesky's reads only the lower triangle of A, as NumPy's."""
    args = args_of(k, rng_for(k.__name__, 1), n=4)
    names = arg_names(k)
    index_of = {n: i for i, n in enumerate(names)}
    wrt = tuple(floating(k, args))
    grads = grad(k, wrt=wrt)(*copy_args(args))

    def f(xs):
        return k.py_func(*copy_args(xs))
    for name, g in zip(wrt, grads):
        assert_arrays_close(g, fd_gradient(f, args, index_of, name), 1e-7, what=name)


@pytest.mark.parametrize("library", [True, False], ids=["lapack", "loops"], indirect=True)
@pytest.mark.parametrize("k", KERNELS, ids=lambda k: k.__name__)
def test_vjp_and_jvp(k, library):
    """Random cotangents on the return value and the written arguments; the tangent too."""
    rng = rng_for(k.__name__, 2)
    check_vjp_and_jvp(k, k.py_func, args_of(k, rng), rng)


def test_upper_triangle_is_not_read():
    """NumPy's cholesky reads the lower triangle: so does the kernel, and its gradient
    there is zero."""
    A = spd(rng_for("upper"), 4)
    B = A.copy()
    B[0, 3] = B[1, 2] = 100.0
    assert factor_norms(B) == pytest.approx(factor_norms.py_func(A), rel=1e-12)
    g = grad(factor_norms, "A")(B)
    assert np.all(np.triu(g, 1) == 0.0) and np.any(np.tril(g, -1) != 0.0)


@pytest.mark.c_source
def test_library_calls_and_loops():
    """LAPACK and BLAS symbols where the library is linked, none without it."""
    pytest.importorskip("scipy_openblas64")
    args = args_of(whitened, rng_for("calls"))
    saved = options.blas
    try:
        sources = {}
        for on in (True, False):
            options.blas = on
            k = kernel(whitened.__wrapped__)
            k(*copy_args(args))
            spec = k.specializations[0]
            sources[on] = (spec.forward.source + spec.backward(frozenset({"A", "X"}),
                                                               frozenset({"__return"})).source)
    finally:
        options.blas = saved
    assert "scipy_dpotrf_64_(" in sources[True] and "scipy_LAPACKE_dgetrf64_(" in sources[True]
    assert "scipy_cblas_dtrsm64_(" in sources[True]      # the factor's adjoint
    assert "scipy_" not in sources[False] and "sqrt(" in sources[False]


@pytest.mark.parametrize("library", [True, False], ids=["lapack", "loops"], indirect=True)
def test_not_positive_definite_names_the_line(library):
    A = spd(rng_for("bad"), 4)
    A[2, 2] = -1.0
    line = factor_norms.__wrapped__.__code__.co_firstlineno + 2
    with pytest.raises(LinAlgError, match=rf"test_linalg.py:{line}: np.linalg.cholesky: the "
                                          "matrix is not positive definite"):
        factor_norms(A)
    with pytest.raises(np.linalg.LinAlgError):      # as NumPy's, in a gradient too
        grad(factor_norms, "A")(A)
    nan = spd(rng_for("nan"), 4)
    nan[3, 3] = np.nan                  # NumPy's factor holds the nan, raising nothing
    assert np.isnan(factor_norms(nan)) and np.isnan(factor_norms.py_func(nan))


@pytest.mark.parametrize("library", [True, False], ids=["lapack", "loops"], indirect=True)
def test_singular_names_the_line(library):
    A = rng_for("singular").standard_normal((4, 4))
    A[3] = A[1]
    line = solve_vector.__wrapped__.__code__.co_firstlineno + 2
    with pytest.raises(LinAlgError, match=rf":{line}: np.linalg.solve: the matrix is singular"):
        solve_vector(A, np.ones(4))
    with pytest.raises(LinAlgError, match="singular"):
        inverse(np.zeros((3, 3)))
    assert solve_vector(A + np.eye(4), np.ones(4)) == pytest.approx(
        solve_vector.py_func(A + np.eye(4), np.ones(4)), rel=1e-12)     # the next call runs


def test_cuda_emulated(monkeypatch):
    """device='cuda' (emulated): the nodes run as their loops in a kernel of one thread;
    failures come back from the device."""
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    for k in (whitened, solve_matrix):
        rng = rng_for(k.__name__, 3)
        args = args_of(k, rng)
        assert kernel(k.__wrapped__)(*copy_args(args)) == pytest.approx(k.py_func(*args), rel=1e-12)
        check_vjp_and_jvp(kernel(k.__wrapped__), k.py_func, args, rng)
    A = spd(rng_for("bad"), 4)
    A[2, 2] = -1.0
    with pytest.raises(LinAlgError, match="not positive definite"):
        kernel(factor_norms.__wrapped__)(A)


def test_nodes_and_text():
    A = spd(rng_for("text"), 3)
    text = whitened.explain(A, np.ones((3, 2)))
    assert "= cholesky(A)    [cholesky N]" in text and "[solve N x K]" in text
    spec = whitened.specializations[0]
    kinds = [type(n) for n, _ in walk(spec.sdfg.body) if isinstance(n, (Cholesky, Solve))]
    assert kinds == [Cholesky, Solve, Solve]


def test_factor_recorded_only_where_overwritten():
    """The adjoint reads L as the node left it: at the top level nothing is recorded;
    in a loop that factors again each step, L is (and the gradient is right: above)."""
    A = spd(rng_for("record"), 4)
    grad(factor_norms, "A")(A)
    assert "recorded: nothing" in factor_norms.explain(A)
    grad(steps, "A")(A, np.ones(4), 2)
    recorded = steps.explain(A, np.ones(4), 2).split("recorded: ")[1].split("\n")[0]
    assert "__cholesky" in recorded


def test_covariance_is_array_code():
    """np.cov: means, one MatMul and a scaling; no library node of its own."""
    X = rng_for("cov").standard_normal((3, 5))
    assert covariance(X) == pytest.approx(covariance.py_func(X), rel=1e-12)
    spec = covariance.specializations[0]
    assert [n.kind for n, _ in walk(spec.sdfg.body) if isinstance(n, LibraryNode)] == ["matmul"]


def test_validation_asks_the_protocol():
    """validate() checks a library node's operands, what it writes and its own rules."""
    from adjoint.frontend import parse, read_source
    from adjoint.sdfg import State, validate
    from adjoint.sdfg.nodes import Sequence
    from adjoint.sdfg.validate import InvalidSDFG
    sdfg = validate(parse(read_source(solve_vector.__wrapped__), "solve_vector",
                          dict(solve_vector._declared)))
    node = next(n for n, _ in walk(sdfg.body) if isinstance(n, Solve))

    def check(**changes):
        from dataclasses import replace
        validate(sdfg.replace(body=Sequence((State((replace(node, **changes),)),))))
    check()
    with pytest.raises(InvalidSDFG, match=f"solve at line {node.line} writes an operand"):
        check(out="b")
    with pytest.raises(InvalidSDFG, match=r"dims \(N, N\) do not cover b"):
        check(a="b")
    with pytest.raises(InvalidSDFG, match="the pivots .* are not N int64"):
        check(piv=node.lu)
    with pytest.raises(InvalidSDFG, match="no container nowhere"):
        check(piv="nowhere")


def test_errors_name_the_call():
    def vector(x: float64[N]) -> float:
        return np.sum(np.linalg.cholesky(x))
    with pytest.raises(KernelSyntaxError, match="cholesky takes a square matrix"):
        kernel(vector)(np.ones(3))

    def rectangular(A: float64[3, 4]) -> float:
        return np.sum(np.linalg.cholesky(A))
    with pytest.raises(KernelSyntaxError, match="do not match"):
        kernel(rectangular)(np.ones((3, 4)))

    def mismatched(A: float64[3, 3], b: float64[4]) -> float:
        return np.sum(np.linalg.solve(A, b))
    with pytest.raises(KernelSyntaxError, match="do not match"):
        kernel(mismatched)(np.eye(3), np.ones(4))

    def eigen(A: float64[3, 3]) -> float:
        return np.sum(np.linalg.eigvalsh(A))
    with pytest.raises(KernelSyntaxError, match=r"np.linalg.eigvalsh is not supported \("
                                                r"supported: np.linalg.cholesky"):
        kernel(eigen)(np.eye(3))

    def growing(A: float64[N, N]) -> float:
        s = 0.0
        for i in range(1, N):
            s += np.sum(np.linalg.cholesky(A[:i, :i]))
        return s
    with pytest.raises(KernelSyntaxError, match="sizes are known on entry"):
        kernel(growing)(np.eye(3))

    def two(x: float64[3], y: float64[3]) -> float:
        return np.sum(np.cov(x, y))
    with pytest.raises(KernelSyntaxError, match="np.cov of two arrays"):
        kernel(two)(np.ones(3), np.ones(3))


# ---- the protocol: a new kind is one class and one registry entry ------------------------------
@dataclass(frozen=True, eq=False)
class Transposed(LibraryNode):
    """``out (+)= a.T`` of a (rows, cols) matrix: what a new kind writes, nothing else."""
    out: str
    a: str
    dims: tuple
    accumulate: bool = False
    line: int = 0

    kind = "transpose"

    def accesses(self):
        return ((self.a, "read"), (self.out, "sum" if self.accumulate else "write"))

    def operands(self):
        return ((self.a, self.dims), (self.out, self.dims[::-1]))

    def text(self):
        return f"{self.out} = {self.a}.T    [transpose]"

    def work(self):
        return self.dims

    def reverse_reads(self, active):
        return ()

    def vjp(self, d):
        return (Transposed(d.of(self.a), d.of(self.out), self.dims[::-1], True, self.line),) \
            if d.has(self.a) else ()

    def jvp(self, d):
        return (Transposed(d.of(self.out), d.of(self.a), self.dims, line=self.line), self)

    def emit(self, gen):
        rows, cols = (gen.index.doprint(x) for x in self.dims)
        op = "+=" if self.accumulate else "="
        gen.emit(f"for (int64_t sc_i = 0; sc_i < {rows}; ++sc_i) for (int64_t sc_j = 0; "
                 f"sc_j < {cols}; ++sc_j) {gen.pointer(self.out)}[sc_j * {rows} + sc_i] {op} "
                 f"{gen.pointer(self.a)}[sc_i * {cols} + sc_j];")


def _transposed_call(b, node, args):
    from adjoint.frontend.array_calls import _required
    from adjoint.frontend.array_stores import temporary
    from adjoint.sdfg import State
    value = b.expr(_required(b, node, args, "x"))
    a = library_base.whole_operand(b, node, value, "np.linalg.matrix_transpose")
    out = temporary(b, node, value.shape[::-1], "__transposed")
    b.ex.prelude.append(State((Transposed(out.name, a.name, tuple(value.shape),
                                          line=b.line(node)),)))
    return b.container(out)


def test_a_new_kind_is_one_class_and_a_registry_entry(monkeypatch):
    """Nothing but the node and its NUMPY_LINALG entry: forward, gradient and tangent."""
    from adjoint import library
    monkeypatch.setitem(library.NUMPY_LINALG, "matrix_transpose", (_transposed_call, ("x",)))

    def uses(A: float64[N, K], B: float64[N, K]) -> float:
        return np.sum(np.sin(np.linalg.matrix_transpose(A)) @ B)
    k = kernel(uses)
    rng = rng_for("transposed")
    args = (rng.standard_normal((4, 3)), rng.standard_normal((4, 3)))
    assert k(*copy_args(args)) == pytest.approx(k.py_func(*args), rel=1e-12)
    assert "[transpose]" in k.explain(*args)
    check_vjp_and_jvp(k, k.py_func, args, rng)
