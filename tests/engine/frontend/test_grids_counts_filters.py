"""Grids, counts, filters and computed index arrays (issue 20): ``np.mgrid``/``ogrid``/
``meshgrid``/``indices``, ``np.histogram``/``bincount``, ``scipy.ndimage``'s correlate and
convolve (every boundary mode), and integer arrays computed inside an index (``x[idx + 1]``,
``A[idx[:, 0], idx[:, 1]]``, a choice of an element).

Every kernel here is written for these tests. Forward results against the kernel run as
Python (``py_func``), gradients and tangents against central differences of it.
"""
import shutil
import subprocess

import numpy as np
import pytest
import scipy.ndimage as ndi
from scipy.ndimage import convolve1d

from adjoint import KernelSyntaxError, kernel
from adjoint.options import options
from kernel_testing import arg_names, copy_args, rng_for
from test_numpy_calls import check_forward, check_gradient_and_tangent


def grids(x, a: float):
    I, J = np.mgrid[0:4, 1:6:2]
    r, c = np.ogrid[0:4, 0:3]
    X, Y = np.meshgrid(x[:3], x[1:5])
    P, Q = np.meshgrid(x[:2], x[:3] * a, indexing="ij", sparse=True)
    K = np.indices((4, 3))
    t = np.mgrid[-1.0:1.0:5j] * a + np.mgrid[0.5:2.0:0.5][1]
    return I * a + J, r * x[:3] + c, X * Y, P - Q, K[0] * x[0] + K[1], t


def counts(x, w, k, m: int):
    h, edges = np.histogram(x, 5, weights=w)
    fixed = np.histogram(x, bins=4, range=(-1.0, 1.0))[0]
    given = np.histogram(x, np.linspace(-2.0, 2.0, 6), weights=w * w)[0]
    c = np.bincount(k, weights=w[:k.size], minlength=m)
    return h, edges, fixed * 1.0, given, c, np.bincount(k, minlength=m) * 1.0


def filters(x, w, A):
    out = convolve1d(x, w, mode="wrap") + ndi.correlate1d(x, [0.5, -1.0, 2.0], mode="reflect")
    out = out + ndi.correlate1d(x, w, mode="mirror") * ndi.convolve1d(x, [1.0, 2.0], mode="nearest")
    out = out + ndi.correlate1d(x, w[:2], mode="constant", cval=0.5, origin=-1)
    B = ndi.correlate(A, np.array([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]),
                      mode="wrap")
    C = ndi.convolve1d(A, w, axis=0, mode="reflect") + ndi.convolve(A, [[1.0, 2.0]],
                                                                     mode="mirror")
    return out, B, C


def gathers(x, A, idx, pairs, c: int):
    s = 0.0
    for i in range(idx.shape[0] - 1):
        j = idx[i + 1] if c > 0 else 0          # a choice of an element
        s += x[j] * x[i]
    n = x.shape[0]
    return (x[idx + 1] + x[idx - 1] * x[:idx.size] + x[(idx + 3) % n] + s,
            A[pairs[:, 0], pairs[:, 1]] * x[pairs[:, 1]], A[idx[:2, None], idx[None, 2:4]])


def _counts_args(rng):
    return (rng.standard_normal(12) * 0.8, rng.random(12), np.array([0, 3, 1, 3, 5]), 6)


CASES = [
    (kernel(grids), lambda rng: (rng.standard_normal(6), 0.7)),
    (kernel(counts), _counts_args),
    (kernel(filters), lambda rng: (rng.standard_normal(7), rng.standard_normal(3),
                                   rng.standard_normal((4, 5)))),
    (kernel(gathers), lambda rng: (rng.standard_normal(7), rng.standard_normal((6, 6)),
                                   np.array([1, 4, 2, 5]), np.array([[0, 1], [3, 2], [2, 2]]),
                                   1)),
]
IDS = ["grids", "counts", "filters", "gathers"]


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_forward_matches_numpy(case):
    k, make = CASES[case]
    check_forward(k, make(rng_for(IDS[case])), bitwise=False)


@pytest.mark.parametrize("case", range(len(CASES)), ids=IDS)
def test_gradients_and_tangents_match_finite_differences(case):
    """Counts have no derivative with respect to the data (piecewise constant), the
    weights' is the bins' test."""
    k, make = CASES[case]
    rng = rng_for(IDS[case], salt="grad")
    check_gradient_and_tangent(k, make(rng), rng)


def test_histogram_counts_are_numpys_on_bin_edges():
    """Values on the edges fall in the bin they open (the last bin closed), as NumPy's."""
    x = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.5, 1.0])
    k = kernel(lambda x: np.histogram(x, 4)[0] * 1.0)
    assert np.array_equal(k(x), np.histogram(x, 4)[0] * 1.0)
    assert np.array_equal(k(np.full(3, 2.0)), np.histogram(np.full(3, 2.0), 4)[0] * 1.0)


def equal_bins(x, y, w, n: int):
    counts, edges = np.histogram(x, n)
    return (counts * 1.0, edges, np.histogram(x, n, weights=w)[0],
            np.histogram(y, 6, range=(-0.5, 0.7), weights=w)[0],
            np.histogram(y, bins=3, range=(0.2, 0.2))[0] * 1.0)


def test_equal_bins_are_numpys_one_pass_over_the_values():
    """Equal bins: each value's bin computed (NumPy's formula and its correction at the
    edges), then one pass adding ones or weights in order; values on the edges (the last
    one in the last bin), outside the range and nan as NumPy bins them, counts and sums
    bit for bit; the bins, an index array the kernel writes, proven in bounds."""
    k = kernel(equal_bins)
    rng = rng_for("equal_bins")
    x = rng.standard_normal(3000) ** 3
    edges = np.histogram(x, 17)[1]
    x[:36] = np.concatenate([edges, edges[::-1]])           # every edge, the last too
    y = x.copy()
    y[36:46] = [-0.5, 0.7, 0.2, np.nextafter(0.7, 1.0), np.nextafter(-0.5, -1.0), np.nan,
                -np.inf, np.inf, np.nextafter(0.2, 0.0), 0.7]
    w = rng.random(3000)
    got, want = k(x, y, w, 17), equal_bins(x, y, w, 17)
    for g, e in zip(got, want):
        assert np.array_equal(g, e)
    text = k.explain(x, y, w, 17)
    checks = text[text.index("index checks"):]
    assert "__counts" in text and "__bins" in text and "__bins" not in checks


def test_emulated_cuda_matches_python(monkeypatch):
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    for case in (1, 2, 3):
        k, make = CASES[case]
        check_forward(k, make(rng_for(IDS[case], salt="cuda")), bitwise=False)


def test_an_index_outside_the_array_is_an_error_not_a_read():
    k = kernel(lambda x, idx: x[idx + 1])
    with pytest.raises(Exception, match="can reach the size|out of bounds"):
        k(np.ones(4), np.array([0, 3]))
    f = kernel(lambda x, k: np.bincount(k, weights=x, minlength=3))
    with pytest.raises(Exception, match="can reach the size|out of bounds"):
        f(np.ones(2), np.array([0, 3]))


def _sorted(x, y):
    return x[np.argsort(y)]


def _unknown_tuple(x):
    return np.unique(x, return_counts=True)[0]


def _histogram_alone(x):
    return np.histogram(x, 3) * 2.0


def _no_minlength(x, k):
    return np.bincount(k, weights=x)


def _float_grid(x, a: float):
    return np.mgrid[0.0:a:0.5] * x[0]


@pytest.mark.parametrize("func, message", [
    (_sorted, "sorting is not supported"),
    (_unknown_tuple, "`np.unique` gives no array the kernel knows here"),
    (_histogram_alone, "returns a tuple; take the element"),
    (_no_minlength, "give minlength="),
    (_float_grid, "with float bounds the length depends on their values"),
], ids=["argsort", "unknown_tuple", "histogram_alone", "no_minlength", "float_grid"])
def test_unsupported_forms_name_the_line(func, message):
    args = {"_sorted": (np.ones(3), np.ones(3)), "_no_minlength": (np.ones(2), np.array([0, 1])),
            "_float_grid": (np.ones(3), 2.0)}.get(func.__name__, (np.ones(4),))
    with pytest.raises(KernelSyntaxError, match=message) as info:
        kernel(func)(*copy_args(args))
    assert f":{func.__code__.co_firstlineno + 1}:" in str(info.value)


@pytest.mark.skipif(shutil.which(options.nvcc) is None, reason="no nvcc here")
def test_cuda_modules_compile_with_nvcc(tmp_path):
    """The forward, reverse and tangent CUDA modules of these kernels compile for sm_90
    (host code unoptimised; the kernels of test_scientific_styles compiled too when this
    was written, left out for time)."""
    from test_cuda import cuda_source, lowered, preamble
    parts = []
    for name, (k, make) in zip(IDS, CASES):
        args = make(rng_for(name))
        wrt = [n for n, a in zip(arg_names(k), args) if isinstance(a, (float, np.ndarray))
               and np.asarray(a).dtype.kind == "f"]
        for kind, layout, entries, checks, counted in lowered(k, args, wrt):
            parts.append(cuda_source(layout, entries, checks, counted,
                                     prefix=f"{name}_{kind}_"))
    path = tmp_path / "grids.cu"
    path.write_text(preamble(False) + "\n".join(parts))
    proc = subprocess.run([options.nvcc, "-O0", "-arch=sm_90", "-w", "-c", str(path), "-o",
                           str(path.with_suffix(".o"))], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
