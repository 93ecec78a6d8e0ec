"""The option ``vector_math``: exp, expm1 and tanh as the engine's own C
(codegen/helpers.py: VECTOR_MATH) instead of the C library's.

Forward: within 1, 2 and 3 ulps of glibc (what NumPy's scalar math calls) over the
whole range, small magnitudes and subnormals included; inf, nan, signed zeros,
overflow and underflow as glibc has them; the same bits whatever the loop (a vector
body or its scalar remainder). Gradient: against central differences of the compiled
forward itself (the function implemented) and of NumPy's. Off by default: the C
library's functions, bitwise Python's. And with or without the option, loops that
select values (masks, ``np.where``) vectorise on AVX2 too (the default flags).
"""
import ctypes
import ctypes.util
import re
import subprocess

import numpy as np
import pytest

from adjoint import float64, grad, kernel, symbol
from adjoint.options import options
from float_testing import SPECIAL, TINY, mismatches, quiet
from kernel_testing import fd_atol

N = symbol("N")
LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
ULPS = {"exp": 1, "expm1": 2, "tanh": 3}
RANGE = {"exp": (-750.0, 712.0), "expm1": (-70.0, 712.0), "tanh": (-25.0, 25.0)}


@kernel
def functions(x: float64[N], e: float64[N], em: float64[N], t: float64[N]):
    e[:] = np.exp(x)
    em[:] = np.expm1(x)
    t[:] = np.tanh(x)


@kernel
def loss(x: float64[N]) -> float:
    return np.sum(np.tanh(x) * np.exp(0.5 * x) + np.expm1(-x * x))


@pytest.fixture
def vector_math(monkeypatch):
    monkeypatch.setattr(options, "vector_math", True)


def libm(name, x):
    f = getattr(LIBM, name)
    f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
    return np.array([f(float(v)) for v in x])


def points(name, n=20000):
    """Uniform over the function's range, and |x| from 1e-300 to 10 on a log scale
    (signs alternating), and the special values and thresholds."""
    rng = np.random.default_rng(7)
    lo, hi = RANGE[name]
    small = 10.0 ** rng.uniform(-300, 1, n) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    edges = [709.782712893384, 709.7827128933841, -708.3964185322641, -745.1332191019411,
             -745.1332191019412, -744.44, -37.5, 37.5, 19.06, 22.0, 0.5493, -0.5493]
    return np.concatenate([rng.uniform(lo, hi, n), small, edges, SPECIAL,
                           np.nextafter(np.array(SPECIAL), np.inf)])


def run(x):
    out = [np.zeros_like(x) for _ in range(3)]
    functions(x, *out)
    return dict(zip(("exp", "expm1", "tanh"), out))


@pytest.mark.parametrize("name", ["exp", "expm1", "tanh"])
def test_within_a_few_ulps_of_the_c_library_everywhere(vector_math, name):
    x = points(name)
    got = run(x)[name]
    want = libm(name, x)
    bad = mismatches(got, want, ULPS[name])
    assert not bad, [(x[k], got[k], want[k]) for k in bad[:5]]
    exact = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, TINY, -TINY])   # signs of zeros too
    assert not mismatches(run(exact)[name], libm(name, exact))


def test_every_element_gets_the_same_bits_in_any_loop(vector_math):
    """A vector body and the scalar remainder after it compute the same operations."""
    x = points("tanh", 2000)
    whole = run(x)
    for k in (0, 1, 7, 1001):
        one = run(x[k:k + 1])
        assert all(one[f].view(np.int64)[0] == whole[f].view(np.int64)[k] for f in one)


def test_the_cuda_path_computes_the_same_bits(vector_math, monkeypatch):
    """The same C in CUDA (emulated on the CPU; on the GPU under ``--device=cuda``)."""
    x = points("tanh", 500)
    device, emulated = options.device, options.cuda_emulation
    monkeypatch.setattr(options, "device", "cpu")
    cpu = run(x)
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", emulated or device == "cpu")
    cuda = run(x)
    assert not any(mismatches(cuda[f], cpu[f]) for f in cpu)      # bitwise, NaN payloads aside


@pytest.mark.c_source
def test_the_generated_c_calls_the_engines_functions_only_with_the_option(monkeypatch):
    x = np.linspace(-3.0, 3.0, 9)
    for on in (False, True):
        monkeypatch.setattr(options, "vector_math", on)
        source = functions.specialize((x, *[np.zeros(9)] * 3)).forward.source
        calls = {f: f"sc_{f}(" in source for f in ("exp", "expm1", "tanh")}
        assert all(calls.values()) if on else not any(calls.values()), calls
    want = run(x)                               # off: bitwise NumPy's (glibc) loops
    assert not mismatches(want["tanh"], libm("tanh", x))


def _vectorised_loops(source, tmp_path):
    """Lines of the loops GCC vectorises in ``source`` built for AVX2 without AVX-512
    (haswell: AVX-512's masks vectorised the helpers' branches where AVX2 could not)."""
    path = tmp_path / "vector_math.c"
    path.write_text(source)
    flags = [f for f in options.cflags if not f.startswith("-march=")]
    done = subprocess.run([options.compiler, *flags, "-march=haswell", "-fPIC", "-c",
                           "-fopt-info-vec-optimized", str(path), "-o", str(tmp_path / "o.o")],
                          capture_output=True, text=True)
    version = subprocess.run([options.compiler, "--version"], capture_output=True, text=True)
    if done.returncode != 0 or "Free Software Foundation" not in version.stdout:
        pytest.skip("needs GCC's -fopt-info")
    return {int(m) for m in re.findall(r":(\d+):\d+: optimized: loop vectorized", done.stderr)}


@pytest.mark.c_source
def test_loops_over_the_functions_vectorise_without_avx512(vector_math, tmp_path):
    x = np.linspace(-3.0, 3.0, 64)
    spec = functions.specialize((x, *[np.zeros(64)] * 3))
    g = grad(loss, "x")
    g(x)
    for source in (spec.forward.source,
                   *[b.source for s in loss.specializations for b in s._backward.values()]):
        lines = source.splitlines()
        vectorised = _vectorised_loops(source, tmp_path)
        calls = [k for k, line in enumerate(lines, 1)
                 if re.search(r"[=*(] *sc_(exp|expm1|tanh)\(c_", line)]
        assert calls
        for k in calls:     # GCC places the innermost loop around it on a line up to it
            loop = max(j for j in range(1, k) if "for (" in lines[j - 1])
            assert vectorised & set(range(loop, k + 1)), (lines[k - 1].strip(), loop)


M = symbol("M")


@kernel
def binned_means(data: float64[N], radius: float64[N], res: float64[M]):
    rmax = radius.max()
    for i in range(M):
        r1 = rmax * i / M
        r2 = rmax * (i + 1) / M
        mask = np.logical_and(r1 <= radius, radius < r2)
        res[i] = data[mask].mean()


@pytest.mark.c_source
def test_a_masked_mean_vectorises_without_avx512(tmp_path):
    """NPBench's azimint_naive: the loop over the points computes two sums under a mask
    of two comparisons (``&&``: a branch). Under GCC's default -ftrapping-math it stayed
    scalar on AVX2, 20x slower than NumPy; the engine's flags have -fno-trapping-math."""
    rng = np.random.default_rng(5)
    data, radius = rng.random(4000), rng.random(4000)
    res = np.zeros(10)
    binned_means(data, radius, res)
    want = np.zeros(10)
    binned_means.py_func(data, radius, want)
    np.testing.assert_allclose(res, want, rtol=1e-13)
    source = binned_means.specialize((data, radius, res)).forward.source
    lines = source.splitlines()
    vectorised = _vectorised_loops(source, tmp_path)
    masks = [k for k, line in enumerate(lines, 1) if "c_in0 <= c_in1" in line]
    assert masks
    for k in masks:
        loop = max(j for j in range(1, k) if "for (" in lines[j - 1])
        # GCC names a loop it vectorised by its body's first line (the pragma's line, also
        # reported, is the simd clone's whatever became of the loop)
        assert vectorised & set(range(loop + 1, k + 1)), (lines[k - 1].strip(), loop)


def _fd(f, x, d, h=1e-4):
    g = lambda s: f(x + s * h * d)     # noqa: E731
    return (8.0 * (g(1.0) - g(-1.0)) - (g(2.0) - g(-2.0))) / (12.0 * h)


def test_the_gradient_is_the_derivative_of_the_function_implemented(vector_math):
    rng = np.random.default_rng(3)
    x = rng.uniform(-3.0, 3.0, 64)
    g = grad(loss, "x")(x)
    for _ in range(3):
        d = rng.standard_normal(64)
        got = float(g @ d)
        for f in (loss, lambda v: quiet(loss.py_func, v)):        # compiled, NumPy
            want = _fd(f, x, d)
            assert abs(got - want) <= 1e-8 * abs(want) + fd_atol(f(x)), (got, want)
