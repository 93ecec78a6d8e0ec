"""Integers as Python has them: every index, loop bound, trip count, size and integer
value the compiled kernel computes in int64 is exact, or the call raises BoundsError
naming the line (checked once per call, before the kernel runs); constant slices clamp
and `and`/`or` short-circuit as in Python."""
import inspect
import itertools

import numpy as np
import pytest

from adjoint import BoundsError, float64, grad, int64, kernel, symbol, uint64
from adjoint.analysis.bounds import Fits, index_checks

N, M = symbol("N"), symbol("M")
BIG = 2 ** 62


def line_of(k, text):
    """The file line of the first source line of kernel ``k`` containing ``text``."""
    lines, first = inspect.getsourcelines(k.__wrapped__)
    return first + next(n for n, line in enumerate(lines) if text in line)


def raises_at(k, text, *args, match="overflows int64"):
    with pytest.raises(BoundsError, match=match) as err:
        k(*args)
    assert f":{line_of(k, text)}:" in str(err.value), str(err.value)


# ---------------------------------------------------------------- indices and values

@kernel
def square_index(A: float64[N], j: int) -> float:
    return A[j * j]


@kernel
def product_mod(A: float64[N], i: int, j: int) -> float:
    return A[(i * j) % N]


@kernel
def quotients(A: float64[N], B: float64[N], a: int, d: int) -> float:
    for k in range(N):
        B[k] = float((a + k) // d) + 0.5 * float((a - k) % d) + A[((a - 2 * k) // d) % N]
    return float(a // d) + float(a % d)


@kernel
def quotient(A: float64[N], a: int, d: int) -> float:
    return float(a // d) + A[0]


@kernel
def guarded_square(A: float64[N], j: int) -> float:
    s = 0.0
    if j < 3:
        s += A[j * j]
    return s


def test_overflowing_indices_raise_where_python_computes_exactly():
    A = np.arange(5.0)
    assert square_index(A, 2) == square_index.py_func(A, 2)
    raises_at(square_index, "A[j * j]", A, 2 ** 32)           # int64: A[0]
    assert product_mod(A, -3, 7) == product_mod.py_func(A, -3, 7)
    raises_at(product_mod, "(i * j) % N", A, 3, BIG)          # int64: A[1], Python A[2]
    for j in (2, 2 ** 32):                  # j * j is not computed when j >= 3
        assert guarded_square(A, j) == guarded_square.py_func(A, j)


def test_floor_division_and_remainder_follow_python():
    A, B, B_ref = np.arange(1.0, 8.0), np.zeros(7), np.zeros(7)
    for a, d in itertools.product((-9, -5, -1, 0, 4, 11), (-4, -3, -1, 1, 2, 5)):
        got, want = quotients(A, B, a, d), quotients.py_func(A, B_ref, a, d)
        assert got == want and np.array_equal(B, B_ref), (a, d)


def test_quotient_at_the_int64_minimum_raises():
    # -2**63 // -1 traps in C (SIGFPE); Python's 2**63 is beyond int64
    raises_at(quotients, "B[k] = float(", np.ones(3), np.zeros(3), -2 ** 63, -1)
    raises_at(quotient, "a // d", np.ones(1), -2 ** 63, -1)
    assert quotient(np.ones(1), -2 ** 63, 1) == quotient.py_func(np.ones(1), -2 ** 63, 1)


@kernel
def sums_and_products(A: float64[N], j: int, k: int) -> float:
    return A[(j * k) % N] + A[(j + k) % N] + A[(j - k) % N] + A[(-j) % N]


def test_checked_arithmetic_is_exact_at_the_edges():
    A, lo, hi = np.arange(7.0), -2 ** 63, 2 ** 63 - 1
    pairs = [(2 ** 31, 2 ** 32), (2 ** 31, 2 ** 32 - 1), (-2 ** 31, 2 ** 32), (-1, lo),
             (lo, 1), (3, -3074457345618258602), (3, -3074457345618258603), (hi, 1),
             (hi, -1), (lo, -1), (lo, 0), (-5, hi), (hi, hi), (lo, lo), (0, lo), (-7, 3)]
    for j, k in pairs:
        exact = (j * k, j + k, j - k, -j)
        if all(lo <= v <= hi for v in exact):
            assert sums_and_products(A, j, k) == sums_and_products.py_func(A, j, k), (j, k)
        else:
            with pytest.raises(BoundsError, match="overflows int64"):
                sums_and_products(A, j, k)


# ------------------------------------------------------------ loops, branches, sizes

@kernel
def squared_trips(A: float64[N], T: int) -> float:
    s = 0.0
    for t in range(T * T):
        s += A[t % N]
    return s


@kernel
def window(A: float64[N], T: int, S: int) -> float:
    s = 0.0
    for i in range(N):
        for j in range(T + i, T + i + S):
            s += A[(j - T) % N]
    return s


@kernel
def scaled_branch(A: float64[N], T: int):
    for i in range(N):
        if i * T < N:
            A[i] += 1.0


@kernel
def allocated(A: float64[N], T: int) -> float:
    B = np.zeros(T)
    C = np.ones((T, T))
    return np.sum(B) + np.sum(C) + A[0]


def test_trip_counts_that_overflow_raise():
    A = np.arange(3.0)
    assert squared_trips(A, 3) == squared_trips.py_func(A, 3)
    raises_at(squared_trips, "range(T * T)", A, 2 ** 32)      # int64: no iteration


def test_loop_bounds_are_checked_once_at_their_extremes():
    A = np.arange(4.0)
    assert window(A, 5, 3) == window.py_func(A, 5, 3)
    assert window(A, -7, 2) == window.py_func(A, -7, 2)
    raises_at(window, "range(T + i, T + i + S)", A, 2 ** 63 - 4, 2)
    spec = window.specialize((A, 5, 3))
    ranges = [c for c in index_checks(spec.sdfg) if c.message.startswith("range(")]
    assert ranges and all(c.context == () and isinstance(c.condition, Fits) for c in ranges)


def test_integer_branch_conditions_that_overflow_raise():
    A, want = np.zeros(6), np.zeros(6)
    scaled_branch(A, 2)
    scaled_branch.py_func(want, 2)
    assert np.array_equal(A, want)
    raises_at(scaled_branch, "if i * T < N", np.zeros(6), BIG)   # int64: i*T wraps below N


def test_array_sizes_are_not_negative_nor_beyond_int64():
    A = np.ones(2)
    assert allocated(A, 3) == allocated.py_func(A, 3)
    with pytest.raises(ValueError):              # NumPy: negative dimensions
        allocated.py_func(A, -1)
    raises_at(allocated, "np.zeros(T)", A, -1, match="the size T is negative")
    # 2**62 elements, 2**65 bytes: checked before anything is allocated (NumPy's own
    # error would otherwise come first), in the forward and in a gradient
    raises_at(allocated, "np.ones((T, T))", A, 2 ** 31, match="size in bytes")
    with pytest.raises(BoundsError, match="size in bytes"):
        grad(allocated, wrt="A")(A, 2 ** 31)


# ----------------------------------------------------------------- indirect indices

@kernel
def scatter_twice(z: float64[N], col: int64[M], v: float64[M]):
    for k in range(M):
        z[2 * col[k]] += v[k]


@kernel
def gather_four(A: float64[N], idx: int64[M]) -> float:
    s = 0.0
    for m in range(M):
        s += A[4 * idx[m]]
    return s


def test_indirect_indices_are_checked_without_wrapping():
    base = np.zeros(30)
    z = base[10:20]
    raises_at(scatter_twice, "z[2 * col[k]]", z, np.array([0, 6, 2 ** 63 - 1]), np.ones(3))
    assert not base.any()                   # wrapped, it wrote base[8] and base[22]
    raises_at(scatter_twice, "z[2 * col[k]]", z, np.array([0, 5]), np.ones(2),
              match="can reach the size")
    col, v, want = np.array([0, 4, 2, 4]), np.arange(1.0, 5.0), np.zeros(10)
    scatter_twice(z, col, v)
    scatter_twice.py_func(want, col, v)
    assert np.array_equal(z, want) and not base[:10].any() and not base[20:].any()
    A = np.arange(12.0)
    assert gather_four(A, np.array([0, 2, 1])) == gather_four.py_func(A, np.array([0, 2, 1]))
    raises_at(gather_four, "A[4 * idx[m]]", A, np.array([0, 2 ** 38, 2 ** 62 + 1]))  # segfaulted


# ------------------------------------------------------------------- constant slices

@kernel
def clamped(x: float64[N]) -> float:
    return (np.sum(x[5:100]) + 10.0 * np.sum(x[-3:]) + 100.0 * np.sum(x[:2])
            + 1e3 * np.sum(x[7::-2]) + 1e4 * np.sum(x[:-7:-1]) + 1e5 * np.sum(x[-100:3]))


@kernel
def clamped_stores(x: float64[N], y: float64[N]):
    y[:3] = x[-3:]
    y[8:100] = 2.0 * x[8:]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, 10, 12])
def test_constant_slice_bounds_clamp_as_python(n):
    x = np.arange(1.0, n + 1)
    assert clamped(x) == clamped.py_func(x)
    y, want = np.zeros(n), np.zeros(n)
    clamped_stores(x, y)
    clamped_stores.py_func(x, want)
    assert np.array_equal(y, want)


# ------------------------------------------------------------------- short circuits

@kernel
def guarded(A: float64[N], i: int, j: int) -> float:
    s = 0.0
    if i < N and A[i] > 0.5:
        s += A[i] * A[i]
    if not (i >= N or A[i] <= 0.5) and j >= 0:
        s += 10.0 * A[i]
    if A[0] > 0.2 and (j < N and A[j] > 0.3 or i < 0):
        s += 100.0 * A[0]
    elif i < N and (A[i] < 0.9 and j < N and A[j] < 0.9):
        s += 1000.0 * A[i] * A[j]
    return s


@kernel
def rising(A: float64[N], k: int) -> float:
    s = 0.0
    for i in range(N):
        if i + k < N and A[i + k] > A[i]:
            s += A[i] * A[i + k]
    return s


def test_and_or_read_only_what_python_reads():
    A = np.array([0.1, 0.6, 0.95, 0.4])
    for i, j in itertools.product(range(7), range(7)):
        assert guarded(A, i, j) == guarded.py_func(A, i, j), (i, j)
    B = np.array([0.3, 0.7, 0.2, 0.8])
    for i, j in ((1, 3), (3, 1), (0, 9)):
        g = grad(guarded, wrt="A")(B, i, j)
        for k in range(4):
            e = np.eye(4)[k] * 1e-6
            fd = (guarded.py_func(B + e, i, j) - guarded.py_func(B - e, i, j)) / 2e-6
            assert g[k] == pytest.approx(fd, rel=1e-6, abs=1e-8), (i, j, k)
    C = np.array([0.5, 0.9, 0.2, 0.7, 0.8, 0.1])
    for k in (1, 2, 7):
        assert rising(C, k) == rising.py_func(C, k)
        g, e = grad(rising, wrt="A")(C, k), np.eye(6) * 1e-6
        fd = [(rising.py_func(C + d, k) - rising.py_func(C - d, k)) / 2e-6 for d in e]
        assert np.allclose(g, fd, rtol=1e-6, atol=1e-8), k


# ---------------------------------------------------------------- integer data the kernel writes
# Integer arrays are computed in their own dtype and written back to the caller's array;
# every result is compared bitwise with the kernel run as NumPy (integer arithmetic is
# exact, and wraps around at the width as NumPy's arrays do).
from adjoint import KernelSyntaxError, int32, options, vjp  # noqa: E402
from kernel_testing import copy_args, fd_directional, rng_for  # noqa: E402


def same_as_numpy(k, *args):
    got, want = copy_args(args), copy_args(args)
    r1, r2 = k(*got), k.py_func(*want)
    for g, w in zip(got, want):
        if isinstance(g, np.ndarray):
            assert g.dtype == w.dtype and np.array_equal(g, w), (k.__name__, g, w)
    return r1, r2, got


@kernel
def shortest_paths(path):
    """Floyd-Warshall on an int32 matrix, as NumPy code writes it."""
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))


def test_floyd_warshall_like_update():
    rng = rng_for("fw")
    path = rng.integers(0, 100, (12, 12)).astype(np.int32)
    path[rng.random((12, 12)) < 0.4] = 999
    same_as_numpy(shortest_paths, path)


def test_int32_wraps_around_as_numpy():
    path = np.array([[0, 2 ** 30 + 5], [2 ** 30 + 7, 2 ** 31 - 1]], dtype=np.int32)
    with np.errstate(over="ignore"):
        _, _, (got,) = same_as_numpy(shortest_paths, path)
    assert got.min() < 0                        # 2**30 + 2**30 wrapped below zero


@kernel
def arithmetic(a, b, out):
    out[:] = a * b + a - (b << 3) + (a // 3) * (a % (b | 1)) - a // (b | 1)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int16, np.uint8])
def test_wrapping_arithmetic_of_each_width(dtype):
    rng = rng_for("arith", np.dtype(dtype).name)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, 64, endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, 64, endpoint=True).astype(dtype)
    with np.errstate(all="ignore"):
        same_as_numpy(arithmetic, a, b, np.zeros(64, dtype))


@kernel
def bit_ops(a, s, out):
    for i in range(a.shape[0]):
        out[i] = (~a[i] & 0xF0) | (a[i] >> s[i]) ^ (a[i] << 2)


def test_bit_operations_on_uint8_as_numpy():
    a = np.arange(0, 256, 7, dtype=np.uint8)
    s = (np.arange(a.size) % 10).astype(np.uint8)          # counts beyond the width give 0
    same_as_numpy(bit_ops, a, s, np.zeros(a.size, np.uint8))


@kernel
def crc_like(data, out):
    """A CRC-16 over bytes: bit tests, shifts and xors of the running value."""
    out[0] = 0xFFFF
    for b in data:
        for s in range(8):
            if (out[0] & 1) ^ ((b >> s) & 1):
                out[0] = (out[0] >> 1) ^ 0x8408
            else:
                out[0] = out[0] >> 1
    out[0] = ~out[0] & 0xFFFF
    out[0] = (out[0] << 8) | ((out[0] >> 8) & 0xFF)
    return out[0] & 0xFFFF


def test_crc_like_loop_over_uint8_data():
    data = rng_for("crc").integers(0, 256, 300).astype(np.uint8)
    r1, r2, _ = same_as_numpy(crc_like, data, np.zeros(1, np.int64))
    assert r1 == r2


@kernel
def crc8(data, poly=0x07):
    """CRC-8, most significant bit first: the running value a local that becomes a
    NumPy uint8 at its first xor with a byte, as in NumPy."""
    crc = 0
    for b in data:
        crc ^= b
        for s in range(8):
            if crc & 0x80:
                crc = (crc << 1) ^ poly
            else:
                crc <<= 1
    return crc


@kernel
def parity_words(data, out):
    """A Python-int local (int64 here) accumulating shifted bytes, folded by xor."""
    for i in range(data.shape[0] // 4):
        word = 0
        for k in range(4):
            word = (word << 8) | int(data[4 * i + k])       # a Python int throughout
        word ^= word >> 16
        word ^= word >> 8
        out[i] = word & 0xFF


@kernel
def int_quotients(x, out, idx):
    s = 0
    t = 0
    for i in range(x.shape[0]):
        s = s + 7
        t = t + 2
    out[0] = s / t                                  # true division of two int locals
    out[1] = idx[1] / idx[2] + x[0] / t
    return s / t


def test_true_division_of_integers_is_a_float_one():
    idx = np.array([0, 7, 2])
    r1, r2, _ = same_as_numpy(int_quotients, np.ones(3), np.zeros(2), idx)
    assert r1 == r2 == 3.5


def test_integer_locals_take_numpys_types():
    data = rng_for("crc8").integers(0, 256, 200).astype(np.uint8)
    r1, r2, _ = same_as_numpy(crc8, data)
    assert r1 == r2 and isinstance(r1, int)
    assert "transient uint8 crc" in crc8.explain(data)
    same_as_numpy(parity_words, data, np.zeros(50, np.int32))
    assert "transient int64 word" in parity_words.explain(data, np.zeros(50, np.int32))


@kernel
def pairing(seq, table):
    """A Nussinov-like int32 dynamic programme with max()."""
    n = seq.shape[0]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < n:
                table[i, j] = max(table[i, j], table[i + 1, j])
                pair = 1 if seq[i] + seq[j] == 3 else 0
                table[i, j] = max(table[i, j], table[i + 1, j - 1] + pair)
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])


def test_nussinov_like_int32_table():
    seq = rng_for("nussinov").integers(0, 4, 40).astype(np.int32)
    _, _, (_, table) = same_as_numpy(pairing, seq, np.zeros((40, 40), np.int32))
    assert table.max() > 0


@kernel
def counted(x, counts, out):
    """Integers computed by the kernel inside a float kernel that is differentiated."""
    for i in range(x.shape[0]):
        counts[i] = (counts[i] * 3 + i) % 7
        out[i] = x[i] * counts[i] + x[i] * x[i] / (counts[i] + 1)
    return np.sum(out * out)


def test_a_float_kernel_using_integers_differentiates():
    rng = rng_for("counted")
    x, counts = rng.random(9), rng.integers(0, 50, 9).astype(np.int32)
    same_as_numpy(counted, x, counts, np.zeros(9))
    outs, pullback = vjp(counted, x.copy(), counts.copy(), np.zeros(9))
    back = pullback({"return": 1.0, "out": np.zeros(9)})
    assert set(back) == {"x", "out"}                 # integers have no cotangent
    d = rng.standard_normal(9)

    def loss(args):
        xs, c, o = copy_args(args)
        return counted.py_func(xs, c, o)
    want = fd_directional(loss, (x, counts, np.zeros(9)), {"x": 0}, {"x": d})
    assert abs(float(back["x"] @ d) - want) <= 1e-7 * abs(want)


def test_integer_dtypes_of_the_values():
    text = crc_like.explain(np.zeros(3, np.uint8), np.zeros(1, np.int64))
    assert "transient uint8 b" in text                # the element of a uint8 array
    text = shortest_paths.explain(np.zeros((2, 2), np.int32))
    assert "as_int32" in text


def test_integer_temporaries_and_sums():
    @kernel
    def histogram_like(idx, out):
        h = np.zeros(out.shape, dtype=np.int32)
        for i in range(idx.shape[0]):
            h[idx[i]] = h[idx[i]] + 1
        out[:] = h * 2 - 1
        return np.sum(h)

    idx = rng_for("hist").integers(0, 5, 40).astype(np.int64)
    r1, r2, _ = same_as_numpy(histogram_like, idx, np.zeros(5, np.int32))
    assert r1 == r2 == 40


@kernel
def shifted_back(a):
    a[:] = a >> -1


@kernel
def negative_unsigned(a):
    a[:] = a % -5                                   # NumPy: OverflowError


@kernel
def float_bits(x: float64[N], out: float64[N]):
    for i in range(N):
        out[i] = x[i] & 1


def test_bad_integer_operations_name_the_line():
    with pytest.raises(KernelSyntaxError, match="negative count") as info:
        shifted_back(np.zeros(3, np.int32))
    assert f":{line_of(shifted_back, '>> -1')}:" in str(info.value)
    with pytest.raises(KernelSyntaxError, match="bit operations need integers") as info:
        float_bits(np.ones(3), np.ones(3))
    assert f":{line_of(float_bits, '& 1')}:" in str(info.value)
    with pytest.raises(KernelSyntaxError, match="-5 is out of the range of uint8"):
        negative_unsigned(np.zeros(3, np.uint8))


def test_a_written_integer_argument_of_another_dtype_is_refused():
    from adjoint import ArgumentError

    @kernel
    def bump(a: int32[N]):
        a[:] = a + 1

    a = np.zeros(3, np.int32)
    bump(a)
    assert a.tolist() == [1, 1, 1]
    with pytest.raises(ArgumentError, match="'a' has dtype int64"):
        bump(np.zeros(3, np.int64))


def test_emulated_cuda_integers(monkeypatch):
    path = rng_for("fw-cuda").integers(0, 50, (9, 9)).astype(np.int32)
    data = rng_for("crc-cuda").integers(0, 256, 40).astype(np.uint8)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    same_as_numpy(shortest_paths, path)
    r1, r2, _ = same_as_numpy(crc_like, data, np.zeros(1, np.int64))
    assert r1 == r2


def test_a_written_integer_argument_keeps_its_dtype_on_every_call():
    """The call cache (runtime/arguments.Binding) decides as bind does: a written array of
    another integer dtype is refused on the second call of its signature too, never
    passed as a copy that would not be written back."""
    from adjoint import ArgumentError

    @kernel
    def bump(a: int32[N]):
        a[:] = a + 1

    for _ in range(2):
        with pytest.raises(ArgumentError, match="'a' has dtype int64"):
            bump(np.zeros(3, np.int64))


def test_uint64_index_ranges_on_cached_calls():
    """A uint64 index array's value range is clipped to int64 on every call of its
    signature (the cached Binding recomputes it), so an index beyond every size still
    fails its bounds check instead of wrapping around."""
    from adjoint import BoundsError

    @kernel
    def pick(x: float64[N], idx: uint64[M]) -> float:
        s = 0.0
        for i in range(M):
            s += x[idx[i]]
        return s

    x = np.arange(4.0)
    assert pick(x, np.array([1, 3], np.uint64)) == 4.0
    for _ in range(2):
        with pytest.raises(BoundsError):
            pick(x, np.array([2 ** 63 + 1], np.uint64))
