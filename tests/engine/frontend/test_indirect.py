"""Indirect indexing with integer arrays: gathers, scatter-adds, CSR loops."""
import numpy as np
import pytest
import scipy.sparse as sps

from adjoint import (BoundsError, KernelSyntaxError, bool_, float64, grad, int64, jvp, kernel,
                     symbol, vjp)

N, M, NNZ = symbol("N"), symbol("M"), symbol("NNZ")


@kernel
def spmv(rowptr: int64[M], col: int64[NNZ], val: float64[NNZ], x: float64[N],
         y: float64[N]) -> float:
    for i in range(N):
        s = 0.0
        for k in range(rowptr[i], rowptr[i + 1]):
            s += val[k] * x[col[k]]
        y[i] = np.tanh(s)
    return np.sum(y * y)


@kernel
def scatter_add(idx: int64[M], v: float64[M], B: float64[N]) -> float:
    for i in range(M):
        B[idx[i]] += v[i] * v[i]
    return np.sum(B * B)


@kernel
def gather_unannotated(idx, x, out):
    for i in range(idx.shape[0]):
        out[i] = x[idx[i] + 1] * x[idx[i]]
    return np.sum(out)


def _csr(n=9, seed=1):
    A = sps.random(n, n, density=0.35, random_state=seed, format="csr")
    return A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data.copy()


def _copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _fd(k, args, index, d, h=1e-5):
    """Central difference along d, perturbing only the floating arguments."""
    def f(step):
        a = _copies(args)
        for n, dn in d.items():
            a[index[n]] = a[index[n]] + step * dn
        return k.py_func(*a)
    return (f(h) - f(-h)) / (2 * h)


def _check(k, args, wrt):
    names = list(k.__wrapped__.__code__.co_varnames[:len(args)])
    index = {n: i for i, n in enumerate(names)}
    ref = k.py_func(*_copies(args))
    assert k(*_copies(args)) == pytest.approx(ref, rel=1e-13)
    grads = grad(k, wrt=wrt)(*args)
    rng = np.random.default_rng(3)
    d = {n: rng.standard_normal(args[index[n]].shape) for n in wrt}
    want = _fd(k, args, index, d)
    got = sum(float(np.sum(g * d[n])) for n, g in zip(wrt, grads))
    assert got == pytest.approx(want, rel=1e-7)
    _, dots = jvp(k, args, d)
    assert dots["return"] == pytest.approx(got, rel=1e-10)


def test_csr_matrix_vector_product():
    rowptr, col, val = _csr()
    x = np.random.default_rng(0).standard_normal(9)
    y = np.zeros(9)
    _check(spmv, (rowptr, col, val, x, y), ("val", "x"))
    A = sps.csr_matrix((val, col, rowptr), shape=(9, 9))
    y = np.zeros(9)
    spmv(rowptr, col, val, x, y)
    np.testing.assert_allclose(y, np.tanh(A @ x), rtol=1e-14)


def test_scatter_add_with_repeated_indices():
    idx = np.array([0, 3, 3, 1, 6, 3], dtype=np.int64)
    rng = np.random.default_rng(1)
    _check(scatter_add, (idx, rng.standard_normal(6), rng.standard_normal(7)), ("v", "B"))


def test_gather_from_unannotated_integer_arrays():
    idx = np.array([4, 0, 2, 2], dtype=np.int64)
    rng = np.random.default_rng(2)
    _check(gather_unannotated, (idx, rng.standard_normal(6), np.zeros(4)), ("x", "out"))


def test_index_arrays_get_no_cotangent():
    rowptr, col, val = _csr()
    _, pullback = vjp(spmv, rowptr, col, val, np.ones(9), np.zeros(9))
    assert set(pullback({"return": 1.0})) == {"val", "x", "y"}


def test_out_of_range_index_values_raise_before_running():
    rng = np.random.default_rng(4)
    B = rng.standard_normal(7)
    with pytest.raises(BoundsError, match=r"B\[idx\[i\]\]: index idx\[i\] can reach the size N"):
        scatter_add(np.array([0, 9, 1], dtype=np.int64), np.ones(3), B)
    with pytest.raises(BoundsError, match="can be negative"):
        scatter_add(np.array([0, -1, 1], dtype=np.int64), np.ones(3), B)
    with pytest.raises(BoundsError, match=r"rowptr\[i \+ 1\]"):
        spmv(np.array([0, 1, 2]), np.array([0, 1]), np.ones(2), np.ones(3), np.zeros(3))


def test_an_index_array_the_kernel_writes_is_rejected():
    def bad(idx: int64[N], x: float64[N]) -> float:
        for i in range(N):
            idx[i] = 0
        return x[idx[1]]
    with pytest.raises(KernelSyntaxError, match="read-only") as info:
        kernel(bad)(np.zeros(3, dtype=np.int64), np.ones(3))
    assert "'idx' is written by the kernel and indexes an array" in str(info.value)


def gather_through_locals(idx, x):
    """Real code binds an index array's element to a name first (``j = idx[i]``)."""
    t = 0.0
    for i in range(idx.shape[0]):
        j = idx[i]
        k = idx[i] + 1
        t += j * x[j] * x[k]
        for m in range(j):
            t += x[m]
    return t


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16])
def test_an_index_array_element_bound_to_a_name_is_an_integer(dtype):
    idx = np.array([0, 2, 4, 2], dtype=dtype)
    x = np.random.default_rng(5).standard_normal(6)
    k = kernel(gather_through_locals)
    assert k(idx, x) == gather_through_locals(idx, x)          # bitwise: the same sums
    _check(k, (idx, x), ("x",))
    with pytest.raises(BoundsError, match=r"x\[idx\[i\] \+ 1\]: index idx\[i\] \+ 1 can reach"):
        k(np.array([0, 5], dtype=dtype), x)


def after_the_loop(idx, x):
    for i in range(idx.shape[0]):
        j = idx[i]
    return x[j]  # ERR


def test_a_loop_variables_alias_after_its_loop_is_refused_naming_the_use():
    import inspect
    with pytest.raises(KernelSyntaxError, match="'j' is computed from the loop variable 'i', "
                                                "and used after its loop") as info:
        kernel(after_the_loop)(np.array([1]), np.ones(3))
    lines, first = inspect.getsourcelines(after_the_loop)
    assert f":{first + 3}:" in str(info.value)


OBSERVED = np.array([1, 4, 4, 0], dtype=np.int32)      # a module-level index array


def gathers(x, A, B, idx):
    """Whole integer arrays as indices, as NumPy places one advanced index: in place
    (``A[:, idx]``), or first when an integer stands apart from it (``B[0, :, idx]``)."""
    y = x[idx]
    y[0] = 5.0                                      # a copy: x is not changed
    return np.sum(y * x[idx]) + np.sum(np.tanh(A[:, idx]) * A[1, idx]) + \
        np.sum(B[0, :, idx] * np.arange(B.shape[1])) + np.sum(x[OBSERVED] ** 3)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_whole_index_arrays_gather(dtype):
    rng = np.random.default_rng(7)
    idx = np.array([0, 3, 3, 5, 1], dtype=dtype)            # repeated: adjoints add up
    args = (rng.standard_normal(6), rng.standard_normal((2, 6)), rng.standard_normal((2, 3, 6)),
            idx)
    k = kernel(gathers)
    assert k(*_copies(args)) == gathers(*_copies(args))     # bitwise
    _check(k, args, ("x", "A", "B"))
    with pytest.raises(BoundsError, match="can reach"):
        k(*args[:3], np.array([0, 6], dtype=dtype))


def scatters(x, idx, v):
    x[idx] += v  # ERR
    return np.sum(x)


@pytest.mark.parametrize("func, args, message", [
    (scatters, (np.ones(6), np.array([0, 2, 2]), np.ones(3)),
     "to write through one, loop over its elements")])
def test_what_whole_index_arrays_do_not_do_is_refused_naming_the_line(func, args, message):
    import inspect
    with pytest.raises(KernelSyntaxError, match=message) as info:
        kernel(func)(*args)
    lines, first = inspect.getsourcelines(func)
    assert f":{first + 1}:" in str(info.value)


@kernel
def masked_update(mask: bool_[N], x: float64[N], p: float) -> float:
    s = 0.0
    for i in range(N):
        if mask[i]:
            x[i] = x[i] * x[i] * p
        s += x[i] * mask[i]
    return s + np.sum(np.where(mask, x, 2.0 * x))


def test_boolean_masks_as_inputs():
    rng = np.random.default_rng(5)
    mask = rng.random(8) > 0.5
    _check(masked_update, (mask, rng.standard_normal(8), 0.7), ("x",))
    _, pullback = vjp(masked_update, mask, np.ones(8), 0.7)
    assert set(pullback({"return": 1.0})) == {"x", "p"}


def csr_rows(A_row, A_col, A_val, x):
    """CSR rows as slices bounded by elements of an integer array, in whole-array NumPy."""
    y = np.empty(A_row.size - 1)
    for i in range(A_row.size - 1):
        cols = A_col[A_row[i]:A_row[i + 1]]
        y[i] = A_val[A_row[i]:A_row[i + 1]] @ np.sin(x[cols])
        y[i] += np.sum(A_val[A_row[i]:A_row[i + 1]] ** 2)
    return y


def test_slices_bounded_by_index_array_elements():
    from kernel_testing import check_vjp_and_jvp
    row, col, val = _csr()
    row[4] = row[3]                                 # an empty row
    col, val = col[:row[-1]], val[:row[-1]]
    x = np.random.default_rng(3).random(9)
    k = kernel(csr_rows)
    np.testing.assert_allclose(k(row, col, val, x), csr_rows(row, col, val, x), rtol=1e-14)

    def rows(A_val, x):                 # the index arrays from outside: float arguments only
        return csr_rows(row, col, A_val, x)
    check_vjp_and_jvp(kernel(rows), rows, (val, x), np.random.default_rng(4), rel=1e-6)


def test_slice_bounds_out_of_range_raise_naming_the_line():
    row, col, val = _csr()
    x = np.random.default_rng(3).random(9)
    k = kernel(csr_rows)
    for r, c in ((np.concatenate([row[:-1], [row[-1] + 1]]), col),   # past A_val's end
                 (row, np.where(col == col[0], 9, col))):            # past x's end
        with pytest.raises(BoundsError, match=r"test_indirect.py:\d+: .*can reach the size"):
            k(r, c, val, x)
