"""Assignment forms: chained ``x = y = expr`` (tuples among the targets too), tuple assignment with Python's simultaneous
semantics (``a, b = b, a``, ``A[i], A[j] = A[j], A[i]``, array names), ``n, m = A.shape``.

Forward results against the kernels run as plain Python (bitwise: only + - * / here),
gradients against central differences in float64, tangents (jvp) likewise, and a
KernelSyntaxError naming the line for the forms that stay unsupported.
"""
import numpy as np
import pytest

from adjoint import BoundsError, KernelSyntaxError, float64, kernel, symbol
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for

N = symbol("N")
M = symbol("M")
K = symbol("K")


@kernel
def chained(A: float64[N], B: float64[N], x: float):
    a = b = np.zeros(N)            # one array, two names
    for i in range(N):
        b[i] = A[i] * x
    s = t = x * 2.0                # one value, evaluated once
    for i in range(N):
        A[i] = B[i] = a[i] * s + t     # subscripts, left to right
    return a


@kernel
def swaps(A: float64[N], B: float64[K, M], x: float):
    y = A[0]
    for i in range(N - 1):
        x, y = y * 0.5, x + A[i]                 # both sides read the old x, y
        A[i], A[i + 1] = A[i + 1], A[i] * x       # element swap
    n, m = B.shape                               # integer aliases
    I, J = B.shape[0], B.shape[1]
    B[n - 1, m - 1] = x * y + B[I - 1, J - 1]
    return A


@kernel
def ping_pong(A: float64[N], T: int):
    a = A.copy()
    b = np.zeros(N)
    for t in range(T):
        b[1:] = a[1:] * 0.5 + a[:-1] * 0.25
        b[0] = a[0]
        a, b = b, a                # names bound to arrays swap, in every iteration
    return a * 2.0 + b


@kernel
def views(A: float64[N]):
    a, b = A[1:], A[:-1]           # views: writes through them reach A
    a[0] = b[0] * 3.0
    return A * 1.0


@kernel
def chained_broadcast(A: float64[N], B: float64[N], x: float):
    A[:] = y = x * 3.0             # y is the number, not A[:]
    A[1:] = B[1:] = A[:-1] * y     # subscripts only: the value once, to both
    return A + B * y


def _pair(x):
    return x * 2.0, x + 1.0


def chained_tuples(A, B, x):
    a, b = c, d = A[0] * x, B[1, 0] + x      # evaluated once, to each tuple
    n, m = p, q = B.shape                     # integer aliases through both
    s, t = u, v = _pair(x)                    # a call's results
    A[0], A[1] = b, a = a, b                  # subscripts, then the names swapped
    top, bottom = y, z = B[:2]                # rows
    return a * c + b * d + n * m + p * q + s * t + u * v + A[n - 1] * B[0, q - 1] + \
        top * z + bottom * y


def lorenz63_rhs(x, sigma=10.0, rho=28.0, beta=8.0 / 3.0):      # DAPPER's style, unannotated
    x, y, z = x                    # an array's rows: numbers here (len(x) == 3 per call)
    return np.array([sigma * (y - x), rho * x - y - x * z, x * y - beta * z]) * 1.0


def rows(A, w):
    top, bottom = A                # rows of a matrix: views
    bottom[0] = top[1] * w
    return top * bottom


CASES = [
    (kernel(lorenz63_rhs), lambda rng: (rng.random(3) * 10.0,)),
    (kernel(rows), lambda rng: (rng.random((2, 4)), 0.5)),
    (chained, lambda rng: (rng.random(5), rng.random(5), 1.5)),
    (swaps, lambda rng: (rng.random(6), rng.random((3, 4)), 0.7)),
    (ping_pong, lambda rng: (rng.random(6), 3)),
    (ping_pong, lambda rng: (rng.random(6), 4)),
    (views, lambda rng: (rng.random(5),)),
    (chained_broadcast, lambda rng: (rng.random(5), rng.random(5), 0.6)),
    (kernel(chained_tuples), lambda rng: (rng.random(4), rng.random((3, 2)), 0.3)),
]
IDS = ["lorenz63_rhs", "rows", "chained", "swaps", "ping_pong_odd", "ping_pong_even", "views",
       "chained_broadcast", "chained_tuples"]


def _outputs(k, args):
    """Every array argument afterwards and the returned array, run as compiled or Python."""
    work = copy_args(args)
    ret = k(*work)
    return [a for a in work if isinstance(a, np.ndarray)] + [ret]


@pytest.mark.parametrize("k, make", CASES, ids=IDS)
def test_forward_is_bitwise_python(k, make):
    args = make(rng_for(k.__name__))
    got, want = _outputs(k, args), _outputs(k.py_func, args)
    for g, w in zip(got, want):
        assert np.array_equal(g, w), (g, w)


@pytest.mark.parametrize("k, make", CASES, ids=IDS)
def test_gradient_and_tangent_match_finite_differences(k, make):
    rng = rng_for(k.__name__, salt="grad")
    check_vjp_and_jvp(k, k.py_func, make(rng), rng)


# ---------------------------------------------------------------------- still refused

def _starred(A: float64[N]):
    a, *b = A[0], A[1], A[2]
    return a


def _nested(A: float64[N]):
    a, (b, c) = A[0], (A[1], A[2])
    return a + b + c


def _count(A: float64[N]):
    a, b = A[0], A[1], A[2]
    return a + b


def _rank(A: float64[N, M]):
    n, m, k = A.shape
    return A[0, 0] * 1.0


def _tuple_and_name(A: float64[N]):
    t = a, b = A[0], A[1]
    return a + b


def _lengths(A: float64[N]):
    a, b = c, d, e = A[0], A[1], A[2]
    return a + b


def _attribute(A: float64[N]):
    A.shape = B.shape = N
    return A


@pytest.mark.parametrize("func, message", [
    (_starred, "no nesting or starred targets"),
    (_tuple_and_name, "assigns tuples only"),
    (_lengths, "unpacks one value into tuples of different lengths"),
    (_attribute, "names, subscripts or tuples of them; not `A.shape`"),
    (_nested, "no nesting or starred targets"),
    (_count, "unpacks 3 values into 2 names"),
    (_rank, "unpacks 2 values into 3 names"),
], ids=["starred", "tuple_and_name", "lengths", "attribute", "nested", "count", "rank"])
def test_other_forms_are_refused_naming_the_line(func, message):
    shape = (3, 3) if "M" in str(func.__annotations__["A"]) else (3,)
    with pytest.raises(KernelSyntaxError, match=message) as info:
        kernel(func)(np.ones(shape))
    assert str(func.__code__.co_firstlineno + 1) in str(info.value)



def test_unpacking_rows_checks_the_count_per_call():
    with pytest.raises(BoundsError, match=r"a, b = A.*A.shape\[0\]=3"):
        kernel(_two_rows)(np.ones((3, 2)))


def _two_rows(A):
    a, b = A
    return np.sum(a * b)


def _rows_then_a_tuple(cpos, N):
    force = np.zeros((N, 2))
    for i in range(1, N):
        dx, dy = cpos[i] - cpos[i - 1]          # unpacked rows: subscripts the engine made
        force[i, 0] = dx * dy
    force[0] = force[-1] = 0, 0                 # a tuple stored into rows, as NumPy
    return force


def test_a_tuple_stored_into_rows_after_unpacked_rows():
    """The subscripts that unpacking rows builds carry the line (an error reaching one
    named no line: AttributeError 'Constant' object has no attribute 'lineno'); a tuple
    stored into rows (chained) is the array NumPy makes of it."""
    cpos = np.arange(8.0).reshape(4, 2) ** 2
    np.testing.assert_array_equal(kernel(_rows_then_a_tuple)(cpos, 4),
                                  _rows_then_a_tuple(cpos, 4))
