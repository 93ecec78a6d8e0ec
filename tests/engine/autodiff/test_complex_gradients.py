"""Derivatives with respect to complex arguments, in JAX's convention
(docs/kernel-language.md): for a real loss L of z = x + iy, ``grad`` gives
dL/dx - i dL/dy; ``vjp`` of a complex output w with the cotangent c gives the gradient
of Re(sum(c * w)); ``jvp`` takes complex tangents dz and gives dw. Each is checked
against central differences of the kernel run as NumPy, along the real and the
imaginary directions separately (float64, rtol 1e-7).
"""
import numpy as np
import pytest

from adjoint import AdjointError, complex128, float64, grad, jvp, kernel, symbol, vjp
from kernel_testing import arg_names, copy_args

N = symbol("N")
RNG = np.random.default_rng(21)
H = 1e-5


def crandom(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def central(f, args, k, direction):
    """d/dt f(args with args[k] + t * direction) at t = 0."""
    plus, minus = list(copy_args(args)), list(copy_args(args))
    plus[k] = plus[k] + H * direction
    minus[k] = minus[k] - H * direction
    return (f(*plus) - f(*minus)) / (2 * H)


def fd_gradient(f, args, k):
    """JAX's gradient of the real f w.r.t. args[k]: df/dx - i df/dy per element (real
    arguments: df/dx)."""
    value = args[k]
    out = np.zeros(value.shape, dtype=value.dtype)
    for idx in np.ndindex(value.shape):
        e = np.zeros(value.shape)
        e[idx] = 1.0
        out[idx] = central(f, args, k, e)
        if np.iscomplexobj(value):
            out[idx] -= 1j * central(f, args, k, 1j * e)
    return out


def check_grad(k, args, wrt, rtol=1e-7):
    got = grad(k, wrt)(*copy_args(args))
    for name, g in zip(wrt, got):
        index = arg_names(k).index(name)
        want = fd_gradient(k.py_func, args, index)
        assert g.dtype == want.dtype, (name, g.dtype)
        np.testing.assert_allclose(g, want, rtol=rtol, atol=rtol * np.abs(want).max(),
                                   err_msg=name)


# ---- losses ---------------------------------------------------------------------------------
@kernel
def loop_loss(z: complex128[N], w: complex128[N], x: float64[N]):
    s = 0.0
    for i in range(N):
        a = z[i] * w[i] - x[i] / z[i] + 2j * x[i]
        b = (a ** 2 + z[i] ** 3) / (w[i] + 0.5) + z[i] ** 0.5
        s += abs(b) ** 2 + (b * a.conjugate()).real + np.angle(z[i])
    return s


@kernel
def array_loss(z, x):
    y = np.exp(1j * x) * z + np.conj(z) / (1.0 + np.abs(z) ** 2)
    u = np.log(z) + np.sqrt(z) - np.sin(z) * np.cos(z) + z ** 2.5
    return np.sum(np.abs(y + u) ** 2) + np.sum(z.real * np.imag(z)) + np.abs(np.prod(z))


@kernel
def matmul_loss(a, v):
    w = a @ v
    return np.sum(np.abs(w) ** 2) + np.real(np.dot(v, w))


@kernel
def in_place_loss(z, w):
    for i in range(z.shape[0]):
        z[i] = z[i] * w[i] + 1j          # both parts of z[i] read both
    w *= z
    return np.sum(np.abs(w) ** 2)


@kernel
def solve_loss(a, y):
    return np.sum(np.abs(np.linalg.solve(a, y)) ** 2)


def test_grad():
    z, w, x = crandom(4), crandom(4), RNG.uniform(0.5, 1.5, 4)
    check_grad(loop_loss, (z, w, x), ("z", "w", "x"))
    check_grad(array_loss, (z, x), ("z", "x"))
    check_grad(matmul_loss, (crandom(3, 3), crandom(3)), ("a", "v"))
    check_grad(in_place_loss, (z, w), ("z", "w"))
    check_grad(solve_loss, (crandom(3, 3) + 3.0 * np.eye(3), crandom(3)), ("a", "y"))


@kernel
def scalar_loss(z, w: complex):
    return np.sum(np.abs(np.exp(w * z)) ** 2) + (w * w).real


def test_grad_of_a_complex_number():
    z, w = crandom(3) * 0.5, 0.3 - 0.4j
    got = grad(scalar_loss, ("z", "w"))(z, w)
    want = [central(lambda z, w: scalar_loss.py_func(z, w), (z, w), 1, 1.0) -
            1j * central(lambda z, w: scalar_loss.py_func(z, w), (z, w), 1, 1j)]
    np.testing.assert_allclose(got[1], want[0], rtol=1e-7)
    np.testing.assert_allclose(got[0], fd_gradient(scalar_loss.py_func, (z, w), 0), rtol=1e-7)


@kernel
def single_loss(z):
    return np.sum(np.abs(z * z + 1j) ** 2)


def test_complex64_gradient_is_complex64():
    z = crandom(4).astype(np.complex64)
    got = grad(single_loss, "z")(z)
    assert got.dtype == np.complex64
    want = fd_gradient(single_loss.py_func, (z.astype(np.complex128),), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_abs_squared_is_jax_example():
    """JAX's own example: grad of x**2 + y**2 at 3 + 4j is 6 - 8j."""
    @kernel
    def f(z):
        return np.sum(np.real(z) ** 2 + np.imag(z) ** 2)
    np.testing.assert_allclose(grad(f, "z")(np.array([3.0 + 4.0j])), [6.0 - 8.0j])


# ---- complex outputs: vjp and jvp -----------------------------------------------------------
@kernel
def field(z, x):
    z *= np.exp(1j * x)
    return z * z / (1.0 + x), np.abs(z)


def test_vjp_and_jvp():
    z, x = crandom(5), RNG.uniform(0.5, 1.5, 5)
    outs, pullback = vjp(field, *copy_args((z, x)))
    cot = {"z": crandom(5), "return": (crandom(5), RNG.standard_normal(5))}

    def loss(z, x):         # Re(sum(c * w)) over every output
        work = [z.copy(), x.copy()]
        ret = field.py_func(*work)
        return sum(np.sum(np.real(c * v)) for c, v in
                   [(cot["z"], work[0]), (cot["return"][0], ret[0]), (cot["return"][1], ret[1])])
    back = pullback(cot)
    for k, name in enumerate(("z", "x")):
        np.testing.assert_allclose(back[name], fd_gradient(loss, (z, x), k), rtol=1e-7,
                                   atol=1e-9, err_msg=name)
    dz, dx = crandom(5), RNG.standard_normal(5)
    _, dots = jvp(field, copy_args((z, x)), {"z": dz, "x": dx})

    def shifted(t):
        work = [z + t * dz, x + t * dx]
        ret = field.py_func(*work)
        return work[0], ret[0], ret[1]
    want = [(p - m) / (2 * H) for p, m in zip(shifted(H), shifted(-H))]
    for got, w in zip((dots["z"], *dots["return"]), want):
        np.testing.assert_allclose(got, w, rtol=1e-7, atol=1e-9)


def test_grad_needs_a_real_loss():
    @kernel
    def complex_sum(z):
        return np.sum(z)
    with pytest.raises(AdjointError, match="returns a complex number"):
        grad(complex_sum, "z")(crandom(3))


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def f(z, x):
        y = jnp.exp(1j * x) * z + jnp.conj(z) / (1.0 + jnp.abs(z) ** 2)
        u = jnp.log(z) + jnp.sqrt(z) - jnp.sin(z) * jnp.cos(z) + z ** 2.5
        return jnp.sum(jnp.abs(y + u) ** 2) + jnp.sum(z.real * jnp.imag(z)) + \
            jnp.abs(jnp.prod(z))
    z, x = crandom(4), RNG.uniform(0.5, 1.5, 4)
    want = jax.grad(f, argnums=(0, 1))(z, x)
    got = grad(array_loss, ("z", "x"))(z, x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-9)
