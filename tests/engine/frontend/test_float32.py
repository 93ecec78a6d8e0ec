"""float32 arithmetic as NumPy 2 computes it (NEP 50): dtypes of array expressions,
temporaries and scalars, each float32 operation rounded to float32.

Forward results are compared with the kernel run as plain NumPy: bitwise for ``+ - * /``,
``sqrt``, comparisons and ``np.where`` (element by element, deterministic); within 2
float32 ulps for ``exp``/``sin``/``log`` (NumPy has its own vectorised float32 versions;
the engine rounds glibc's double result); within a float32 tolerance for sums (NumPy sums
float32 pairwise, the engine in a float32 accumulator in its own order). Gradients of
float32 kernels are float32 (adjoints in the primal's dtype, as JAX does): compared with
the gradient of the same kernel called with float64 copies, within 1e-4 relative, and
that one against central differences.
"""
import numpy as np
import pytest

from adjoint import float32, float64, grad, jvp, kernel, options, symbol, vjp
from adjoint.sdfg import arithmetic as fp
from kernel_testing import (as_float64, copy_args, fd_directional, inner, random_direction,
                            rng_for, run_reference)

N = symbol("N")


def ulps32(got, want):
    """Distance in float32 ulps, elementwise (as integers ordered like the values)."""
    def ordered(a):
        i = np.ascontiguousarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
        return np.where(i >= 0, i, -(i & 0x7FFFFFFF))
    return np.abs(ordered(got) - ordered(want))


def assert_bitwise(got, want, what=""):
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))).ravel())
    assert bad.size == 0, f"{what}: {bad.size} of {got.size} differ, first at {bad[:5]}: " \
                          f"{got.ravel()[bad[:5]]} != {want.ravel()[bad[:5]]}"


# ---- the dtype rules ------------------------------------------------------------------------
@kernel
def weak_scalars(x: float32[N], y: float32[N], out: float32[N], dt: float):
    out[:] = x * y + x * 0.1 - dt * y / 3.0        # Python numbers take float32


@kernel
def mixed(x: float32[N], z: float64[N], out: float64[N]):
    out[:] = x * 0.1 + z                            # float32 op float64: float64


@kernel
def strong_scalars(x: float32[N], z: float64[N], out: float64[N]):
    for i in range(N):
        s = x[i] * 0.1                              # a NumPy float32 scalar
        w = z[i] * 0.1                              # a float64 one
        out[i] = s * 3.0 + w
    out[0] = np.float32(z[0]) * 0.1 + z.astype(np.float32)[1]


@kernel
def widened(x: float32[N], out: float32[N]):
    w = x.astype(np.float64) * 0.1                  # float64 temporaries
    out[:] = w * w + x                              # stored: rounded once


@kernel
def comparisons(x: float32[N], out: float32[N]):
    out[:] = np.where(x > 0.1, x, 0.1) + (x == 0.3) * 2.0


@kernel
def created(x: float32[N], out: float32[N]):
    a = np.zeros(x.shape, dtype=np.float32)
    b = np.full(x.shape, 0.1, dtype="float32")
    c = np.empty_like(x)                            # float32, as x
    d = np.ones(x.shape)                            # float64
    a[:] = x / 7.0
    c[:] = np.sqrt(x) - b
    out[:] = a + c + d * 0.3


@kernel
def functions(x: float32[N], out: float32[N]):
    out[:] = np.exp(x) + np.sin(x) * np.log(x + 1.0)


CASES = [weak_scalars, mixed, strong_scalars, widened, comparisons, created]


def _args(k, n=2000):
    rng = rng_for(k.__name__)
    x = rng.random(n, dtype=np.float32) + np.float32(0.05)
    x[:4] = [0.1, 0.3, np.float32(0.1), 1.0]        # ties of the comparisons
    names = list(k._declared)
    out = {"x": x, "y": rng.random(n, dtype=np.float32), "z": rng.random(n),
           "dt": 0.37}
    args = []
    for name in names:
        if name == "out":
            t = k._declared[name]
            args.append(np.zeros(n, dtype=t.dtype))
        else:
            args.append(out[name])
    return tuple(args)


@pytest.mark.parametrize("k", CASES, ids=lambda k: k.__name__)
def test_forward_is_numpys_bitwise(k):
    args = _args(k)
    got = copy_args(args)
    k(*got)
    _, want = run_reference(k, args)
    assert_bitwise(got[-1] if k is not weak_scalars else got[2],
                   want[-1] if k is not weak_scalars else want[2], k.__name__)


def test_the_comparison_is_made_in_float32():
    x = np.array([0.1, 0.3, 0.2], dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    comparisons(x, out)
    assert out[0] == np.float32(0.1) and out[1] == np.float32(0.3) + 2.0


@kernel
def branch(x: float32[N], out: float32[N]):
    for i in range(N):
        if x[i] >= 0.1:                             # float32(0.1) >= float32(0.1)
            out[i] = x[i] - 0.1
        else:
            out[i] = 1.0


def test_a_decision_on_float32_data_compares_in_float32():
    x = np.array([0.1, 0.3, 0.05], dtype=np.float32)
    got, want = np.zeros(3, np.float32), np.zeros(3, np.float32)
    branch(x, got)
    branch.py_func(x, want)
    assert_bitwise(got, want, "branch")
    assert got[0] == 0.0


def test_float64_kernels_are_left_as_they_were():
    from adjoint.sdfg.nodes import tasklets
    from adjoint.corpus import loops as corpus
    for case in corpus.CASES[:8]:
        if case.float32:
            continue
        spec = case.kernel.specialize(case.make_args(rng_for(case.name)))
        for t, _, _ in tasklets(spec.sdfg.body):
            assert not any(e.has(fp.as_float32, fp.as_float64, fp.IntCast)
                           for _, e in t.outputs), case.name


def test_containers_take_the_dtypes_numpy_gives():
    text = created.explain(*_args(created, 4))
    assert "transient float32[N] a" in text and "transient float32[N] c" in text
    assert "transient float64[N] d" in text
    text = strong_scalars.explain(*_args(strong_scalars, 4))
    assert "transient float32 s" in text and "transient float64 w" in text


def test_library_functions_within_two_ulps():
    args = _args(functions)
    got = copy_args(args)
    functions(*got)
    _, want = run_reference(functions, args)
    assert got[1].dtype == np.float32 and int(ulps32(got[1], want[1]).max()) <= 2


@kernel
def dtype_arguments(x, out, out2):
    out[:] = np.cumsum(x, dtype=np.float32) + np.arange(x.shape[0], dtype=np.float32) * 0.1
    out2[:] = np.concatenate((x[:2], x[2:]), dtype="float32") * 0.3 + np.linspace(
        0.0, 1.0, x.shape[0], dtype=np.float32)


@kernel
def made_inline(x, out):
    out[:] = np.linspace(0.0, 1.0, x.shape[0]) * x + np.zeros(x.shape) + \
        np.full(x.shape, 0.1, dtype=np.float32) * x


def test_new_arrays_used_in_expressions_keep_their_dtype():
    x = rng_for("made_inline").random(50).astype(np.float32)
    got, want = np.zeros(50), np.zeros(50)
    made_inline(x, got)
    made_inline.py_func(x, want)                     # float64: linspace's dtype
    assert_bitwise(got, want, "made_inline")


def test_dtype_of_scans_joins_and_ranges():
    x = rng_for("dtype_arguments").random(50)          # float64, accumulated in float32
    got = (x, np.zeros(50, np.float32), np.zeros(50, np.float32))
    want = copy_args(got)
    dtype_arguments(*got)
    dtype_arguments.py_func(*want)
    assert_bitwise(got[1], want[1], "cumsum, arange")
    assert_bitwise(got[2], want[2], "concatenate, linspace")


@kernel
def sums(x: float32[N], w: float32[N]):
    return np.sum(x * w) + np.mean(x) * 2.0


def test_float32_sums_within_a_float32_tolerance():
    rng = rng_for("sums")
    x, w = rng.random(10000, dtype=np.float32), rng.random(10000, dtype=np.float32)
    got, want = sums(x, w), sums.py_func(x, w)
    assert isinstance(want, np.float32)
    assert abs(got - float(want)) <= 1e-5 * abs(float(want))   # ~ sqrt(n) eps32 summed


@kernel
def sums_in_a_loop(x, T: int):
    s = 0.0
    c = 0
    for t in range(T):
        s = s + np.sum(x * x)                       # threaded: per-thread float32 sums
        c = c + np.sum(x > 0.5)                     # and int64 ones
    return s + c * 1.0


def test_threaded_sums_keep_their_dtype():
    x = rng_for("sums_in_a_loop").random(300000).astype(np.float32)
    assert "transient float32 s" in sums_in_a_loop.explain(x, 3)
    got, want = sums_in_a_loop(x, 3), float(sums_in_a_loop.py_func(x, 3))
    assert abs(got - want) <= 1e-5 * abs(want)
    g = grad(sums_in_a_loop, "x")(x, 3)
    assert g.dtype == np.float32 and np.allclose(g, 6.0 * x, rtol=1e-6)


@kernel
def affine(A, B, c):
    return (A @ B + c) * 0.5


def test_matrix_products_of_float32_are_float32():
    rng = rng_for("affine")
    A, B = rng.random((5, 4), dtype=np.float32), rng.random((4, 3), dtype=np.float32)
    c = rng.random(3, dtype=np.float32)
    got, want = affine(A, B, c), affine.py_func(A, B, c)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)   # dgemm rounded vs NumPy's sgemm
    _gradient_agrees_with_float64(affine, (A, B, c), ("A", "B", "c"))


# ---- NumPy-style kernels ---------------------------------------------------------------------
@kernel
def conv_bias(x, w, bias):
    """A 2-D convolution with a bias over channels (NHWC style, one image)."""
    K = w.shape[0]
    H, W = x.shape[0] - K + 1, x.shape[1] - K + 1
    out = np.empty((H, W, w.shape[3]), dtype=x.dtype)
    for i in range(H):
        for j in range(W):
            out[i, j, :] = np.sum(x[i:i + K, j:j + K, :, np.newaxis] * w, axis=(0, 1, 2))
    return out + bias


def _conv_args(rng):
    return (rng.random((7, 6, 3), dtype=np.float32), rng.random((3, 3, 3, 4), dtype=np.float32),
            rng.random(4, dtype=np.float32))


@kernel
def gray_scott(U, V, Du: float, Dv: float, F: float, k: float, T: int):
    """Reaction-diffusion in the style of pythran's grayscott: float32 fields and
    temporaries, Python-float coefficients."""
    u = U.copy()
    v = np.empty_like(V)
    v[:] = V
    for t in range(T):
        lu = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1]
        lv = v[:-2, 1:-1] + v[2:, 1:-1] + v[1:-1, :-2] + v[1:-1, 2:] - 4.0 * v[1:-1, 1:-1]
        uvv = u[1:-1, 1:-1] * v[1:-1, 1:-1] * v[1:-1, 1:-1]
        u[1:-1, 1:-1] += Du * lu - uvv + F * (1.0 - u[1:-1, 1:-1])
        v[1:-1, 1:-1] += Dv * lv + uvv - (F + k) * v[1:-1, 1:-1]
    U[:] = u
    V[:] = v
    return np.sum(u * v)


def _gs_args(rng, n=24):
    U = (1.0 - 0.2 * rng.random((n, n))).astype(np.float32)
    V = (0.25 * rng.random((n, n))).astype(np.float32)
    return U, V, 0.16, 0.08, 0.035, 0.065, 5


def test_conv_bias_within_float32_sums():
    args = _conv_args(rng_for("conv"))
    got, want = conv_bias(*args), conv_bias.py_func(*args)
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=0)


def test_gray_scott_fields_bitwise():
    args = _gs_args(rng_for("gs"))
    got = copy_args(args)
    total = gray_scott(*got)
    want = copy_args(args)
    expected = gray_scott.py_func(*want)
    assert_bitwise(got[0], want[0], "U")
    assert_bitwise(got[1], want[1], "V")
    assert abs(total - float(expected)) <= 1e-5 * abs(float(expected))


def _gradient_agrees_with_float64(k, args, wrt, cot=None):
    """The float32 vjp against the float64 one of the same kernel (rtol 1e-4); the float64
    one against central differences."""
    rng = rng_for(k.__name__, "grad")
    outs, pullback = vjp(k, *copy_args(args))
    cot = cot or {n: random_direction(rng, v) for n, v in outs.items()}
    back32 = pullback(cot)
    args64 = as_float64(args)
    _, pullback64 = vjp(k, *copy_args(args64))
    back64 = pullback64(cot)
    for n in wrt:
        assert np.asarray(back32[n]).dtype in (np.float32, np.float64)
        if isinstance(back32[n], np.ndarray):
            assert back32[n].dtype == np.float32
        scale = np.max(np.abs(back64[n]))
        assert np.max(np.abs(np.asarray(back32[n], np.float64) - back64[n])) <= 1e-4 * scale, n
    names = list(k._declared)
    index_of = {n: i for i, n in enumerate(names)}
    d = {n: random_direction(rng, args64[index_of[n]]) for n in wrt}

    def loss(xs):
        work = copy_args(xs)
        values = dict(zip(names, work), **{"return": k.py_func(*work)})
        return sum(inner(c, values[n]) for n, c in cot.items())
    want = fd_directional(loss, args64, index_of, d)
    got = sum(inner(back64[n], d[n]) for n in wrt)
    assert abs(got - want) <= 1e-6 * abs(want) + 1e-9


def test_conv_bias_gradient():
    _gradient_agrees_with_float64(conv_bias, _conv_args(rng_for("conv", 1)), ("x", "w", "bias"))


def test_gray_scott_gradient_and_tangent():
    args = _gs_args(rng_for("gs", 1), 10)
    _gradient_agrees_with_float64(gray_scott, args, ("U", "V", "F"))
    d = {"U": np.ones_like(args[0]), "F": 1.0}
    _, t32 = jvp(gray_scott, copy_args(args), d)
    _, t64 = jvp(gray_scott, as_float64(args), {"U": np.ones((10, 10)), "F": 1.0})
    assert abs(t32["return"] - t64["return"]) <= 1e-4 * abs(t64["return"])


def test_grad_of_a_float32_loss():
    @kernel
    def energy(x: float32[N], c: float) -> float:
        y = x * c - 0.5
        return np.sum(y * y)

    x = rng_for("energy").random(50, dtype=np.float32)
    gx, gc = grad(energy, ("x", "c"))(x, 1.5)
    assert gx.dtype == np.float32
    want = 2.0 * (x.astype(np.float64) * 1.5 - 0.5) * 1.5
    np.testing.assert_allclose(gx, want, rtol=1e-5)
    assert gc == pytest.approx(float(np.sum(2.0 * (x * 1.5 - 0.5) * x)), rel=1e-5)


# ---- CUDA emulation: the same rounding in the generated CUDA -----------------------------------
def test_emulated_cuda_rounds_as_the_c_path(monkeypatch):
    args = _gs_args(rng_for("gs", 2), 12)
    cpu = copy_args(args)
    cpu_total = gray_scott(*cpu)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    emu = copy_args(args)
    total = gray_scott(*emu)
    assert_bitwise(emu[0], cpu[0], "U")
    assert_bitwise(emu[1], cpu[1], "V")
    assert abs(total - cpu_total) <= 1e-5 * abs(cpu_total)
    x = _args(weak_scalars)
    got = copy_args(x)
    weak_scalars(*got)
    _, want = run_reference(weak_scalars, x)
    assert_bitwise(got[2], want[2], "weak_scalars on the emulated device")
