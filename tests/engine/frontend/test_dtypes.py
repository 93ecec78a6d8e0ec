"""dtypes in array creation: ``dtype=`` naming float64 in any spelling, ``np.eye``,
``.astype(np.float64)`` / ``np.float64(v)`` as float64 copies (forward bitwise against
``py_func``, gradients against central differences), and a KernelSyntaxError naming
the line for boolean temporaries (float32 ones: test_float32.py, integer ones: test_integers.py).
"""
import numpy as np
import pytest

from adjoint import KernelSyntaxError, jvp, kernel, vjp
from kernel_testing import (arg_names, assert_close_scalar, copy_args, fd_atol, fd_directional, inner,
                            random_direction, rng_for, run_reference)


@kernel
def spellings(u, w, out):
    v = np.empty(u.shape, dtype=u.dtype)            # adi, symm
    p = np.zeros((u.shape[0], u.shape[1]), np.float64)
    q = np.ones_like(u, dtype=float)
    r = np.full(u.shape, 2.0, "float64")
    s = np.zeros_like(u, np.double)
    t = np.array(u, dtype=w.dtype)
    v[:] = u * 2.0
    p[:] = q * r + s - t
    out[:] = v * p + np.float64(w[0]) * u.astype(np.float64) * u
    return np.sum(out * out)


@kernel
def eyes(u, w, out):
    e = np.eye(u.shape[0], u.shape[1], dtype=u.dtype)     # correlation
    e[:] = e * w[0]
    f = np.eye(u.shape[0], u.shape[1], k=1)
    g = np.eye(u.shape[0], M=u.shape[1], k=-2)
    out[:] = (e + f * 3.0 - g) * u
    return np.sum(out * out)


def make_args(name):
    rng = rng_for(name)
    return rng.random((4, 5)) + 0.5, rng.random(3) + 0.5, np.zeros((4, 5))


@pytest.mark.parametrize("k", [spellings, eyes], ids=lambda k: k.__name__)
def test_forward_bitwise(k):
    args = make_args(k.__name__)
    want, (_, _, want_out) = run_reference(k, args)
    got = copy_args(args)
    assert_close_scalar(k(*got), want, 1e-12, what=k.__name__)
    assert np.array_equal(got[2], want_out)


def test_astype_of_an_integer_array():
    @kernel
    def scaled(u, idx, out):
        out[:] = idx.astype(np.float64) * u + np.float64(idx[0])
        return np.sum(out)

    u, idx = np.linspace(0.5, 1.5, 4), np.array([3, -1, 7, 2])
    out, want = np.zeros(4), np.zeros(4)
    assert scaled(u, idx, out) == scaled.py_func(u, idx, want)
    assert np.array_equal(out, want)


def test_a_size_divided_by_an_integer_is_a_float():
    """``n / 2`` of integers is Python's true division: an integer array minus it is
    float64 (it was computed in int64 and truncated: a silent wrong answer)."""
    def centred(image, k):
        y = np.zeros(image.shape[0], dtype=np.int64)
        y[:] = k[0]
        return y - image.shape[0] / 2, k - image.shape[1] / 2

    image, k = np.zeros((3, 5)), np.array([1, 2])
    for got, want in zip(kernel(centred)(image, k), centred(image, k)):
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_eye_matches_numpy():
    @kernel
    def eye_out(a, b):
        a[:] = np.eye(a.shape[0], a.shape[1], k=1)
        b[:] = np.eye(b.shape[0], dtype=float)

    a, b = np.full((3, 5), 7.0), np.full((4, 4), 7.0)
    eye_out(a, b)
    assert np.array_equal(a, np.eye(3, 5, k=1)) and np.array_equal(b, np.eye(4))


@pytest.mark.parametrize("k", [spellings, eyes], ids=lambda k: k.__name__)
def test_gradients_reverse_and_forward(k):
    args = make_args(k.__name__)
    index_of = {n: i for i, n in enumerate(arg_names(k)[:2])}
    rng = rng_for(k.__name__, 1)
    d = {n: random_direction(rng, args[i]) for n, i in index_of.items()}
    want = fd_directional(lambda a: run_reference(k, a)[0], args, index_of, d)
    tol = 1e-7 * abs(want) + fd_atol(run_reference(k, args)[0])
    _, pullback = vjp(k, *copy_args(args))
    cot = pullback({"return": 1.0, "out": np.zeros((4, 5))})
    assert abs(sum(inner(cot[n], d[n]) for n in d) - want) <= tol
    _, tangents = jvp(k, copy_args(args), d)
    assert abs(tangents["return"] - want) <= tol


@kernel
def int_keyword(u):
    v = np.zeros(u.shape, dtype=np.int32)          # nussinov
    return np.sum(v)


@kernel
def int_builtin(u):
    v = np.ones_like(u, int)
    return np.sum(v)


@kernel
def int_like(u, i):
    v = np.zeros(u.shape, dtype=i.dtype)
    return np.sum(v)


@kernel
def eye_int(u):
    return np.sum(np.eye(3, dtype=bool))


@kernel
def unknown_dtype(u):
    v = np.zeros(u.shape, dtype=np.float16)
    return np.sum(v)


U = np.ones(3)
I64 = np.ones(3, dtype=np.int64)


@pytest.mark.parametrize("k, args", [(int_keyword, (U,)), (int_builtin, (U,)),
                                     (int_like, (U, I64)), (eye_int, (U,))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_integer_temporaries(k, args):
    assert k(*args) == k.py_func(*args)


@pytest.mark.parametrize("k, args, message", [
    (unknown_dtype, (U,), "float16 temporaries are not supported yet"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_other_dtypes_rejected(k, args, message):
    with pytest.raises(KernelSyntaxError, match=message) as info:
        k(*args)
    assert "test_dtypes.py" in str(info.value) and "np.float64" in str(info.value)


@kernel
def mask_like(u):
    m = u > 0.5
    v = np.zeros(u.shape, dtype=m.dtype)            # bool in NumPy: not float64
    return np.sum(v)


@kernel
def expression_like(u, i):
    v = np.zeros(u.shape, dtype=(i + 1).dtype)      # int64 in NumPy
    v[:] = i * 3
    return np.sum(v)


def test_dtype_of_an_expression():
    assert expression_like(U, I64) == expression_like.py_func(U, I64)


def test_dtype_of_a_mask_is_bool():
    assert mask_like(U) == mask_like.py_func(U)
