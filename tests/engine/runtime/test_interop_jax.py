"""Compiled kernels inside JAX (adjoint.interop.jax.to_jax): forward results against the
kernel run as plain Python and as the engine, derivatives with jax.test_util.check_grads
(central differences in float64) and against the engine's own vjp/jvp, under jit and vmap,
and the functional convention for the arrays a kernel writes."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

from adjoint import ArgumentError, float64, grad, int64, jvp, kernel, symbol, vjp  # noqa: E402
from adjoint.interop.jax import to_jax  # noqa: E402
from adjoint.corpus.loops import (jacobi1d, make_jacobi1d, make_roughness, make_wave1d, relax,  # noqa: E402
                    roughness, step_and_energy, wave1d)
from kernel_testing import copy_args, rng_for, run_reference  # noqa: E402

jax.config.update("jax_enable_x64", True)

N, M = symbol("N"), symbol("M")


@kernel
def gathered(x: float64[N], idx: int64[M], w: float64[M]) -> float:
    s = 0.0
    for m in range(M):
        s += w[m] * x[idx[m]] * x[idx[m]]
    return s


@kernel
def ramp(x: float64[N], n: int):
    y = np.zeros(n)
    for i in range(n):
        y[i] = x[i % N] * i
    return y


def jnp_args(args):
    return tuple(jnp.asarray(a) if isinstance(a, (np.ndarray, float)) else a for a in args)


def same(got, want):
    """Equal leaf by leaf, bit for bit."""
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


# ---- forward and the functional convention -----------------------------------------------
def test_forward_returns_the_loss_and_the_written_arrays():
    args = make_jacobi1d(rng_for("jax-jacobi1d"))
    saved = copy_args(args)
    loss, A, B = to_jax(jacobi1d)(*jnp_args(args))
    want_loss, (want_A, want_B, _) = run_reference(jacobi1d, args)
    np.testing.assert_array_equal(A, want_A)          # elementwise: Python's values
    np.testing.assert_array_equal(B, want_B)
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-13)
    assert float(loss) == jacobi1d(*copy_args(args))  # the engine's value exactly
    for a, s in zip(args, saved):
        np.testing.assert_array_equal(a, s)


def test_return_conventions():
    u = np.linspace(0.0, 1.0, 9) ** 2
    v, e = to_jax(step_and_energy)(jnp.asarray(u), 0.1)       # writes nothing: the tuple
    want_v, want_e = step_and_energy.py_func(u.copy(), 0.1)
    np.testing.assert_allclose(v, want_v, rtol=1e-15)
    np.testing.assert_allclose(e, want_e, rtol=1e-13)
    out = to_jax(relax)(jnp.asarray(u), 0.8, 3)               # returns nothing: (u,)
    assert isinstance(out, tuple) and len(out) == 1
    ref = u.copy()
    relax.py_func(ref, 0.8, 3)
    np.testing.assert_array_equal(out[0], ref)
    y = to_jax(ramp)(jnp.arange(3.0), 5)                      # an array, shape from n
    np.testing.assert_array_equal(y, [0.0, 1.0, 4.0, 0.0, 4.0])


# ---- derivatives: check_grads in float64 (central differences), both modes ---------------
CASES = {
    "jacobi1d": (jacobi1d, make_jacobi1d, (0, 1)),      # stencil, writes A and B, int T
    "wave1d": (wave1d, make_wave1d, (0, 1, 2, 3)),     # three written arrays, float c2
    "roughness": (roughness, make_roughness, (0, 1, 2)),   # a scalar loss, writes nothing
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_check_grads(name):
    k, make, diff = CASES[name]
    args = jnp_args(make(rng_for("jax-grads-" + name)))
    f = to_jax(k)

    def of_floats(*xs):
        full = list(args)
        for p, x in zip(diff, xs):
            full[p] = x
        return f(*full)

    check_grads(of_floats, [args[p] for p in diff], order=1, modes=("fwd", "rev"))


def test_check_grads_of_tuples_returned_and_written():
    u = jnp.asarray(np.sin(np.linspace(0.0, 2.0, 10)))
    check_grads(to_jax(step_and_energy), (u, 0.2), order=1, modes=("fwd", "rev"))
    f = to_jax(relax)
    check_grads(lambda u, w: f(u, w, 3), (u, 0.7), order=1, modes=("fwd", "rev"))


def test_gradients_are_the_engines():
    args = make_wave1d(rng_for("jax-wave-engine"))
    f = to_jax(wave1d)
    got = jax.grad(lambda *a: f(*a)[0], argnums=(0, 1, 2, 3))(*jnp_args(args))
    want = grad(wave1d, wrt=("up", "u", "un", "c2"))(*copy_args(args))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    direction = [np.ones_like(args[0]), np.zeros_like(args[1]), np.zeros_like(args[2]), 1.0]
    no_tangent = np.zeros((), jax.dtypes.float0)                  # for the int T
    _, dots = jax.jvp(f, jnp_args(args), tuple(jnp_args(direction)) + (no_tangent,))
    _, want_dots = jvp(wave1d, copy_args(args), dict(zip(("up", "u", "un", "c2"), direction)))
    np.testing.assert_allclose(dots[0], want_dots["return"], rtol=1e-13)
    for d, n in zip(dots[1:], ("up", "u", "un")):
        np.testing.assert_allclose(d, want_dots[n], rtol=1e-13, atol=1e-15)


def test_an_index_array_operand():
    x, idx, w = np.linspace(1.0, 2.0, 6), np.array([0, 5, 5, 2]), np.array([1.0, 2.0, 3.0, 0.5])
    f = to_jax(gathered)
    assert float(f(jnp.asarray(x), jnp.asarray(idx), jnp.asarray(w))) == gathered(x, idx, w)
    check_grads(lambda x, w: f(x, jnp.asarray(idx), w), (jnp.asarray(x), jnp.asarray(w)),
                order=1, modes=("fwd", "rev"))
    gx = jax.grad(f)(jnp.asarray(x), jnp.asarray(idx), jnp.asarray(w))
    np.testing.assert_allclose(gx, grad(gathered, wrt="x")(x, idx, w), rtol=1e-14)


# ---- jit, traced ints, vmap ------------------------------------------------------------------
def test_jit_with_a_traced_step_count():
    A, B, _ = make_jacobi1d(rng_for("jax-jit"))
    f = to_jax(jacobi1d)
    fj = jax.jit(f)                                   # T arrives as a traced integer
    for T in (1, 3):
        same(fj(jnp.asarray(A), jnp.asarray(B), T), f(jnp.asarray(A), jnp.asarray(B), T))
    static = jax.jit(f, static_argnums=2)
    same(static(jnp.asarray(A), jnp.asarray(B), 2), f(jnp.asarray(A), jnp.asarray(B), 2))
    g = jax.jit(jax.grad(lambda A, B, T: f(A, B, T)[0], argnums=(0, 1)))
    for T in (1, 3):
        want = grad(jacobi1d, wrt=("A", "B"))(A.copy(), B.copy(), T)
        for x, y in zip(g(jnp.asarray(A), jnp.asarray(B), T), want):
            np.testing.assert_allclose(x, y, rtol=1e-13)


def test_vmap_is_a_loop_over_the_batch():
    rng = rng_for("jax-vmap")
    As, B = rng.random((3, 12)), rng.random(12)
    f = to_jax(jacobi1d)
    loss = lambda A, B, T: f(A, B, T)[0]                          # noqa: E731
    batched = jax.vmap(f, in_axes=(0, None, None))(jnp.asarray(As), jnp.asarray(B), 2)
    for i in range(3):
        same([x[i] for x in batched], f(jnp.asarray(As[i]), jnp.asarray(B), 2))
    per_step = jax.vmap(loss, in_axes=(None, None, 0))(jnp.asarray(As[0]), jnp.asarray(B),
                                                       jnp.arange(1, 4))
    for T in (1, 2, 3):
        assert float(per_step[T - 1]) == float(loss(jnp.asarray(As[0]), jnp.asarray(B), T))
    want = np.stack([grad(jacobi1d, wrt="A")(a.copy(), B.copy(), 2) for a in As])
    vg = jax.vmap(jax.grad(loss), in_axes=(0, None, None))(jnp.asarray(As), jnp.asarray(B), 2)
    np.testing.assert_allclose(vg, want, rtol=1e-13)
    gv = jax.grad(lambda A: jax.vmap(loss, in_axes=(0, None, None))(A, jnp.asarray(B), 2).sum())
    np.testing.assert_allclose(gv(jnp.asarray(As)), want, rtol=1e-13)
    nested = jax.vmap(jax.vmap(loss, in_axes=(0, None, None)), in_axes=(0, None, None))
    np.testing.assert_allclose(nested(jnp.asarray(As.reshape(3, 1, 12)), jnp.asarray(B), 2)[:, 0],
                               [jacobi1d(a.copy(), B.copy(), 2) for a in As], rtol=1e-15)


def test_jit_vmap_grad_together():
    rng = rng_for("jax-jit-vmap")
    us, c = rng.standard_normal((4, 10)), 0.15
    f = to_jax(step_and_energy)
    g = jax.jit(jax.vmap(jax.grad(lambda u, c: f(u, c)[1], argnums=(0, 1)), in_axes=(0, None)))
    gu, gc = g(jnp.asarray(us), c)
    for i, u in enumerate(us):
        _, pullback = vjp(step_and_energy, u, c)
        back = pullback({"return": (np.zeros(10), 1.0)})
        np.testing.assert_allclose(gu[i], back["u"], rtol=1e-13)
        np.testing.assert_allclose(gc[i], back["c"], rtol=1e-13)


def test_vmap_over_a_float_and_forward_mode_of_a_batch():
    u = jnp.asarray(np.sin(np.linspace(0.0, 2.0, 10)))
    cs = jnp.asarray([0.1, 0.2, 0.3])
    f = to_jax(step_and_energy)
    energies = jax.vmap(lambda c: f(u, c)[1])(cs)
    for c, e in zip(cs, energies):
        assert float(e) == step_and_energy(np.asarray(u), float(c))[1]
    _, dots = jax.jvp(lambda c: jax.vmap(lambda ci: f(u, ci)[1])(c), (cs,), (jnp.ones(3),))
    for c, d in zip(cs, dots):
        _, want = jvp(step_and_energy, (np.asarray(u), float(c)), {"c": 1.0})
        np.testing.assert_allclose(d, want["return"][1], rtol=1e-13)


# ---- errors ----------------------------------------------------------------------------------
def test_errors_name_the_argument():
    f = to_jax(jacobi1d)
    A = np.ones(8, np.float32)
    with pytest.raises(ArgumentError, match="'A' has dtype float32"):
        f(jnp.asarray(A, jnp.float32), jnp.ones(8), 2)
    with pytest.raises(ArgumentError, match="argument 'B'.*got list"):
        f(jnp.ones(8), [1.0] * 8, 2)
    with pytest.raises(ArgumentError, match="shape depends on n"):
        jax.jit(to_jax(ramp))(jnp.arange(3.0), 5)
    g = to_jax(gathered)             # a value-dependent error: the engine's, inside the call
    with pytest.raises(jax.errors.JaxRuntimeError, match="BoundsError: .*idx"):
        g(jnp.ones(3), jnp.array([0, 7]), jnp.ones(2))
    h = to_jax(roughness)
    x, w, lam = jnp_args(make_roughness(rng_for("jax-hessian")))
    with pytest.raises(NotImplementedError, match="second derivatives"):
        jax.hessian(h)(x, w, lam)


@kernel
def phase(z, x):
    return np.sum(np.abs(z * np.exp(1j * x)) ** 2)


def test_complex_arrays_are_refused():
    with pytest.raises(ArgumentError, match="complex values are not passed"):
        to_jax(phase)(jnp.ones(3, jnp.complex128), jnp.ones(3))


def test_a_call_at_other_shapes_is_its_own():
    """What the wrapper decides once per call (its JaxCall: argument converters, result
    shapes, each mode's step) is per shapes and statics: calls at one shape, another and
    the first again, eager and jit-ed, are right each time in both modes."""
    f = to_jax(jacobi1d)
    for n, T in ((16, 3), (9, 3), (16, 2), (16, 3)):
        A, B, _ = make_jacobi1d(rng_for(f"jax-shapes-{n}"), n)
        want_loss, (want_A, want_B, _) = run_reference(jacobi1d, (A, B, T))
        for g in (f, jax.jit(f, static_argnums=2)):
            loss, A1, B1 = g(jnp.asarray(A), jnp.asarray(B), T)
            np.testing.assert_array_equal(np.asarray(A1), want_A)
            np.testing.assert_array_equal(np.asarray(B1), want_B)
            np.testing.assert_allclose(float(loss), want_loss, rtol=1e-14)   # a sum's rounding
        check_grads(lambda A, B: f(A, B, T), (jnp.asarray(A), jnp.asarray(B)), order=1,
                    modes=("fwd", "rev"))
