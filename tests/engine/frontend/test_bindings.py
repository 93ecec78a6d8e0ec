"""Assignment to names binds them as Python does (adjoint/frontend/bindings.py).

``x = expr`` gives the name a new array and leaves the old one (an argument, a view of
it, another name for it) alone; ``b = a`` makes b another name for a's array. Each
kernel here is unannotated real-code style; forward results (the return value and
every array argument afterwards) against the function run as plain Python, gradients
and tangents against central differences. What the engine cannot follow is refused
with a KernelSyntaxError naming the line, never answered differently.
"""
import numpy as np
import pytest

from adjoint import KernelSyntaxError, kernel
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for


# ---- straight-line code: the name moves ------------------------------------------------
def alias_sees_writes(a, out):
    b = np.zeros(a.shape[0])
    b = a                       # was: b a copy of a (out got the old a[0])
    a[0] = 7.0
    out[:] = b * 2.0


def alias_written(a, out):
    b = a
    b[1] = 4.0                  # writes a
    out[:] = a


def argument_rebound(P, Q):
    P = P / 10.0                # a new local array: the caller's P stays
    Q[:] = P * 3.0
    return np.sum(P)


def new_shape(x, w1, w2):       # NPBench mlp: x = relu(x @ w2 + b2)
    x = np.maximum(x @ w1, 0.0)
    x = np.maximum(x @ w2, 0.0)
    return np.sum(x * x)


def view_keeps_old(a):
    x = a * 2.0
    v = x[1:]                   # NumPy keeps v on the old x
    x = x + 1.0
    return np.sum(v * v) + np.sum(x)


def to_number(x):
    B = x * 2.0
    B = np.sum(B * B)
    return B + x[0]


def normalise(x):
    x = x / np.sum(x)           # the callee's x: the caller's array stays
    return x


def callee_rebinds(A):
    t = A * 2.0
    y = normalise(t)
    return np.sum(t * t) + np.sum(y * y)


# ---- loops and branches: carried names --------------------------------------------------
def steps(u, T):                # rebinding an argument in a loop
    for t in range(T):
        u = u + 0.1 * u * u
    return u


def bc_after_step(u, T):
    for t in range(T):
        u = u * 0.5 + 1.0
        u[0] = 0.0
    return np.sum(u * u)


def new_then_alias(u, T):
    for t in range(T):
        unew = u * 0.5 + u * u
        u = unew                # an alias until the end of the body, then u's own copy
        u[0] = 3.0              # writes unew too
    return np.sum(u * u)


def old_kept(u, T):
    s = 0.0
    for t in range(T):
        old = u
        u = u * 2.0 - u * u     # old keeps the previous values (a snapshot)
        s += np.sum(old * u)
    return s + np.sum(u)


def swap_names(u, v, T):
    for t in range(T):
        u, v = v, u + v * v
    return np.sum(u) - np.sum(v * v)


def while_halves(u):
    while np.sum(u) > 1.0:
        u = u * 0.5
    return np.sum(u * u)


def branches(a, c):
    if c > 0.5:
        y = a[1:]               # a view here, a new array there: one container after
    else:
        y = a[1:] * 3.0
    z = a * 1.0
    if c < 0.5:
        z = z * z
    return np.sum(y * y) + np.sum(z)


def prev_in_loop(u, T):
    prev = u
    for t in range(T):
        prev = u
        u = u * 2.0 + u * u
    return np.sum(prev * prev) + np.sum(u)


def _vec(n):
    return lambda rng: rng.random(n) * 0.5 + 0.25


CASES = [
    (alias_sees_writes, lambda r: (r.random(4), np.zeros(4))),
    (alias_written, lambda r: (r.random(4), np.zeros(4))),
    (argument_rebound, lambda r: (r.random(5), np.zeros(5))),
    (new_shape, lambda r: (r.random((3, 4)), r.random((4, 5)), r.random((5, 2)))),
    (view_keeps_old, lambda r: (r.random(5),)),
    (to_number, lambda r: (r.random(3),)),
    (callee_rebinds, lambda r: (r.random(5) + 0.5,)),
    (steps, lambda r: (_vec(5)(r), 3)),
    (bc_after_step, lambda r: (_vec(5)(r), 3)),
    (new_then_alias, lambda r: (_vec(5)(r), 3)),
    (old_kept, lambda r: (_vec(5)(r), 3)),
    (swap_names, lambda r: (_vec(4)(r), _vec(4)(r), 3)),
    (while_halves, lambda r: (_vec(6)(r) * 3.0,)),
    (branches, lambda r: (_vec(5)(r), 0.7)),
    (branches, lambda r: (_vec(5)(r), 0.2)),
    (prev_in_loop, lambda r: (_vec(5)(r), 3)),
]
IDS = [f"{f.__name__}{k}" for k, (f, _) in enumerate(CASES)]
KERNELS = {}


def _kernel(f):
    return KERNELS.setdefault(f, kernel(f))


def _outputs(run, args):
    work = copy_args(args)
    ret = run(*work)
    return [a for a in work if isinstance(a, np.ndarray)] + ([] if ret is None else
                                                             [np.asarray(ret)])


@pytest.mark.parametrize("f, make", CASES, ids=IDS)
def test_forward_as_python(f, make):
    args = make(rng_for(f.__name__))
    got, want = _outputs(_kernel(f), args), _outputs(f, args)
    for g, w in zip(got, want):
        assert g.shape == w.shape and np.allclose(g, w, rtol=1e-13, atol=0), (g, w)


GRADIENTS = [(f, make) for f, make in CASES if f not in (alias_sees_writes, alias_written)]


@pytest.mark.parametrize("f, make", GRADIENTS,
                         ids=[i for i, c in zip(IDS, CASES) if c in GRADIENTS])
def test_gradient_and_tangent_match_finite_differences(f, make):
    rng = rng_for(f.__name__, salt="grad")
    check_vjp_and_jvp(_kernel(f), f, make(rng), rng)


# ---- refused: Python's answer depends on an aliasing the copies cannot follow -----------
def written_before_rebinding(u, T):
    for t in range(T):
        u[0] = 0.0              # iteration 1 writes the caller's array
        u = u * 2.0
    return np.sum(u)


def ping_pong_argument(u, T):
    un = np.empty_like(u)
    for t in range(T):
        un[1:-1] = 0.5 * (u[:-2] + u[2:])
        u, un = un, u           # un names the caller's array every other iteration
    return np.sum(u)


def alias_read_after_loop(u, T):
    unew = u * 1.0
    for t in range(T):
        unew = u * 0.5
        u = unew
    u[0] = 9.0
    return np.sum(unew)         # Python sees the write through unew


def alias_in_branch(a, c):
    b = a * 2.0
    if c > 0.5:
        b = a
    a[0] = 5.0
    return np.sum(b)


REFUSED = [(written_before_rebinding, "before that this line writes", 2),
           (ping_pong_argument, "another name for the array 'u'", 4),
           (alias_read_after_loop, "read after the other was changed", 6),
           (alias_in_branch, "read after the other was changed", 5)]


@pytest.mark.parametrize("f, message, offset", REFUSED, ids=[r[0].__name__ for r in REFUSED])
def test_unfollowable_aliasing_is_refused_naming_the_line(f, message, offset):
    args = (np.linspace(0.5, 1.5, 5), 3) if f is not alias_in_branch else \
        (np.linspace(0.5, 1.5, 5), 0.7)
    with pytest.raises(KernelSyntaxError, match=message) as info:
        kernel(f)(*args)
    line = f.__code__.co_firstlineno + offset
    assert f"test_bindings.py:{line}:" in str(info.value), str(info.value)


def sibling_loops(d, out):       # NPBench vadv: a view in one loop, a new array in the next
    for k in range(1):
        col = d[:, k]
        out[:, k] = col * 2.0
    for k in range(1, d.shape[1]):
        col = d[:, k] - out[:, k - 1]
        out[:, k] = col * 0.5


def test_a_name_of_an_ended_loop_is_free_in_the_next():
    d = np.arange(12.0).reshape(3, 4)
    got, want = np.zeros((3, 4)), np.zeros((3, 4))
    kernel(sibling_loops)(d.copy(), got)
    sibling_loops(d.copy(), want)
    assert np.array_equal(got, want)


def bound_in_both_branches(n, m, a, zs):    # NPBench contour_integral's X
    total = np.zeros(a.shape)
    for z in zs:
        if n == m:
            x = a * 2.0
        else:
            x = a * 3.0
        if z < 1.0:                 # the name bound after the first ``if`` is rebound here
            x = -x
        total += x
    return total


def test_a_name_bound_in_an_ended_if_is_carried_into_the_next():
    a, zs = np.arange(6.0).reshape(2, 3), np.array([0.5, 1.5, 0.7])
    for n in (2, 3):
        np.testing.assert_array_equal(kernel(bound_in_both_branches)(n, 2, a, zs),
                                      bound_in_both_branches(n, 2, a, zs))
