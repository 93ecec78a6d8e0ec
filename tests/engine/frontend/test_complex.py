"""Complex values (frontend/complexes.py): complex128 and complex64 arguments,
temporaries and results, literals, arithmetic mixed with real values, the complex
functions and reductions, against the kernel run as NumPy.

Tolerances: the engine computes a complex operation on its real parts (a quotient over
c² + d², |z| as hypot, powers and sqrt in polar form) where NumPy has its own algorithms
(Smith's division, csqrt), so results agree within rtol 1e-12 (atol 1e-14) in complex128
and rtol 1e-5 in complex64, not bitwise.
"""
import numpy as np
import pytest

from adjoint import KernelSyntaxError, complex64, complex128, float64, kernel, symbol
from kernel_testing import copy_args

N = symbol("N")
RNG = np.random.default_rng(20)


def crandom(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def check(k, *args, rtol=1e-12):
    """The kernel's results and final arguments against its py_func's."""
    want_args = copy_args(args)
    want = k.py_func(*want_args)
    got_args = copy_args(args)
    got = k(*got_args)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if w is None:
            assert g is None
            continue
        if isinstance(w, np.ndarray):       # numbers come back as Python's
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * 1e-2)
    for g, w in zip(got_args, want_args):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol * 1e-2)
    return got


# ---- loops over elements ---------------------------------------------------------------------
@kernel
def elementwise_loop(z: complex128[N], w: complex128[N], x: float64[N]):
    out = np.zeros(N, dtype=np.complex128)
    for i in range(N):
        a = z[i] * w[i] - x[i] / z[i] + 2j
        b = (a ** 2 + z[i] ** 3) / (w[i] + 0.5) + z[i] ** -1
        out[i] = b + complex(x[i], 2.0 * x[i]) - 1j * a.conjugate() * x[i]
    return out


@kernel
def powers(z: complex128[N]):
    out = np.zeros((4, N), dtype=np.complex128)
    for i in range(N):
        out[0, i] = z[i] ** 0.5
        out[1, i] = z[i] ** 2.5
        out[2, i] = z[i] ** (1 + 1j)
        out[3, i] = 2.0 ** z[i]
    return out


@kernel
def in_place(z: complex128[N], w: complex128[N]):
    for i in range(N):
        z[i] = z[i] * w[i]          # both parts read both parts
    w *= 1j                         # a map: the same, per point


@kernel
def complex_scalar(z: complex128[N]):
    s = 0j
    for i in range(N):
        s = s * 0.5 + z[i] * z[i].real
    return s


@kernel
def dft(x):                         # a Fourier transform written as loops
    n = x.shape[0]
    out = np.zeros(n, dtype=np.complex128)
    for k in range(n):
        for j in range(n):
            out[k] += x[j] * np.exp(-2j * np.pi * k * j / n)
    return out


def test_loops():
    x = crandom(8)
    np.testing.assert_allclose(dft(x), np.fft.fft(x), rtol=1e-12, atol=1e-13)
    z, w, x = crandom(6), crandom(6), RNG.standard_normal(6)
    check(elementwise_loop, z, w, x)
    check(powers, z)
    check(in_place, z, w)
    got = check(complex_scalar, z)
    assert isinstance(got, complex)


# ---- whole arrays -----------------------------------------------------------------------------
@kernel
def array_functions(z, x):
    y = np.exp(1j * x) * z + np.conj(z) / (1.0 + np.abs(z) ** 2)
    u = np.log(z) + np.sqrt(z) - np.sin(z) * np.cos(z)
    parts = z.real * np.imag(z) + np.real(z) - z.imag + np.angle(z)
    return y + u, parts, np.abs(z) ** 2, z.conj()


@kernel
def reductions(z, a):
    return np.sum(z), np.prod(z / np.abs(z)), np.mean(z * a), z.sum(), np.sum(z * z, axis=0)


@kernel
def created(x):
    c = np.zeros(x.shape, dtype=np.complex128)
    c[:] = x
    c += 1j * x
    d = x.astype(np.complex128) * 1j + np.ones(x.shape, dtype=complex)
    return c, d, np.zeros(x.shape, dtype=np.complex128) + x


@kernel
def products(a, b, v):
    return a @ b, np.dot(a, v), v @ v, a.T @ b, np.vdot(a, b), np.vdot(v, v).real


def test_whole_arrays():
    z, x = crandom(5), RNG.uniform(0.5, 1.5, 5)
    check(array_functions, z, x)
    check(reductions, crandom(3, 4), RNG.standard_normal((3, 4)))
    check(created, x)
    check(products, crandom(3, 3), crandom(3, 3), crandom(3))


@kernel
def single(z, w):
    return z * w + 1j * np.abs(z), np.sum(z)


def test_complex64():
    z, w = crandom(8, dtype=np.complex64), crandom(8, dtype=np.complex64)
    got = check(single, z, w, rtol=1e-5)
    assert got[0].dtype == np.complex64


@kernel
def equal(z, w):
    return np.where(z == w, 1.0, 0.0), np.where(z != w, z, w)


def test_equality():
    z = crandom(4)
    w = z.copy()
    w[1] += 1e-3j
    check(equal, z, w)


# ---- what is refused ------------------------------------------------------------------------
@kernel
def ordered(z):
    return np.where(z > 0.0, z, 0.0)


@kernel
def dropped_imaginary(z, x):
    x[:] = z


@kernel
def real_view_store(z):
    z.real[:] = 1.0


@kernel
def maximum(z):
    return np.maximum(z, 1.0)


@pytest.mark.parametrize("k, message", [
    (ordered, "complex values have no order"),
    (dropped_imaginary, "complex value is stored into the real array 'x'"),
    (maximum, "complex values have no order"),
    (real_view_store, r"read-only in kernels.*`z\[:\] = v \+ 1j \* z\[:\].imag`"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_refused(k, message):
    with pytest.raises(KernelSyntaxError, match=message) as info:
        k(crandom(3), np.zeros(3)) if k is dropped_imaginary else k(crandom(3))
    assert "test_complex.py" in str(info.value)


@kernel
def scaled(z, w: complex, x):
    return z * w + x * w.imag, abs(w)


def test_complex_numbers_as_arguments():
    z, x = crandom(3), RNG.standard_normal(3)
    check(scaled, z, 0.5 - 2j, x)
    check(scaled, z, 1.5, x)                # a real number for a complex parameter
    check(scaled_unannotated, z, np.complex128(1j), x)


@kernel
def scaled_unannotated(z, w, x):
    return z * w + x * w.imag, abs(w)


@kernel
def solved(a, y):
    return np.linalg.solve(a, y), np.linalg.inv(a) @ y[:, 0]


@kernel
def cholesky_of_complex(a):
    return np.linalg.cholesky(a)


def test_linear_systems():
    a = crandom(4, 4) + 4.0 * np.eye(4)
    check(solved, a, crandom(4, 2))
    with pytest.raises(KernelSyntaxError, match="np.linalg.cholesky of complex matrices"):
        cholesky_of_complex(a)
