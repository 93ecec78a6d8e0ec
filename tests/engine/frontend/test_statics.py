"""Values known when compiling (frontend/statics.py) and the tridiagonal solve
(library/tridiagonal.py), in the style of Veros' TKE routines: None defaults tested with
`is not None`, slices and tuples of them in names, generators over known sequences,
`list(A.shape)` changed in place, `A.shape == B.shape`, `lapack.dgtsv(...)[3]`."""
import numpy as np
import pytest
from scipy.linalg import lapack

from adjoint import KernelSyntaxError, LinAlgError, kernel, options
from kernel_testing import check_vjp_and_jvp, copy_args, rng_for


def padded(arr):
    shape = list(arr.shape)
    shape[2] += 2
    out = np.zeros(shape, arr.dtype)
    out[:, :, 1:-1] = arr
    return out


def shifted_difference(q, u):
    """Upwind-like differences along the last axis through slices held in names."""
    q, u = (padded(a) for a in (q, u))
    lo, mid, hi = ((slice(1, -1), slice(None), slice(1 + n, -2 + n or None))
                   for n in range(0, 3))
    return u[mid] * (q[hi] - q[lo]) + np.abs(u[lo]) * q[mid]


def relaxed(a, b, extra=None, scale=None):
    out = a * b
    if extra is not None:
        out = out + extra
    if scale is None:
        return out
    return out * scale


def both_relaxations(a, b):
    return relaxed(a, b) + relaxed(a, b, extra=a)


def sliced_by_axis(var, axis):
    if axis == 0:
        s, sp1 = ((slice(1 + n, -1 + n or None), slice(None)) for n in range(2))
    else:
        s, sp1 = ((slice(None), slice(1 + n, -1 + n or None)) for n in range(2))
    return var[sp1] - var[s]


def along_rows(var):
    return sliced_by_axis(var, 0)


def along_columns(var):
    return sliced_by_axis(var, 1)


def implicit_columns(a, b, c, d):
    """Columns of tridiagonal systems solved as one, as Veros' solve_tridiag does."""
    assert a.shape == b.shape and a.shape == c.shape and a.shape == d.shape
    a[..., 0] = c[..., -1] = 0
    return lapack.dgtsv(a.flatten()[1:], b.flatten(), c.flatten()[:-1],
                        d.flatten())[3].reshape(a.shape)


def tridiagonal_energy(dl, d, du, b):
    x = lapack.dgtsv(dl, d, du, b)[3]
    return np.sum(x * x * d)


def columns(rng, shape=(3, 2, 5)):
    return (rng.uniform(0, 1, shape), rng.uniform(3, 4, shape), rng.uniform(0, 1, shape),
            rng.standard_normal(shape))


def system(rng, n=7, pivoting=False):
    """A tridiagonal system; with ``pivoting`` sub-diagonal entries above the diagonal's,
    so that elimination swaps rows."""
    dl, du = rng.uniform(0.5, 1.5, n - 1), rng.uniform(0.5, 1.5, n - 1)
    d = rng.uniform(2.5, 3.5, n) if not pivoting else rng.uniform(0.1, 0.3, n)
    return dl, d, du, rng.standard_normal(n)


CONSTRUCTS = [
    (shifted_difference, lambda r: (r.standard_normal((3, 4, 5)), r.standard_normal((3, 4, 5)))),
    (both_relaxations, lambda r: (r.standard_normal((4, 3)), r.standard_normal((4, 3)))),
    (along_rows, lambda r: (r.standard_normal((5, 4)),)),
    (along_columns, lambda r: (r.standard_normal((5, 4)),)),
    (implicit_columns, columns),
]


@pytest.mark.parametrize("func,inputs", CONSTRUCTS, ids=lambda f: getattr(f, "__name__", ""))
def test_forward_matches_numpy(func, inputs):
    args = inputs(rng_for(func.__name__))
    mine, theirs = copy_args(args), copy_args(args)
    got, want = kernel(func)(*mine), func(*theirs)
    tol = 1e-12 if func is implicit_columns else 0.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    for a, b in zip(mine, theirs):              # a and c written as the original writes them
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("func,inputs", CONSTRUCTS, ids=lambda f: getattr(f, "__name__", ""))
def test_vjp_and_jvp_match_finite_differences(func, inputs):
    rng = rng_for(func.__name__, 1)
    check_vjp_and_jvp(kernel(func), func, inputs(rng), rng)


@pytest.fixture(params=[True, False], ids=["lapack", "loops"])
def library(request, monkeypatch):
    if request.param:
        pytest.importorskip("scipy_openblas64")
    monkeypatch.setattr(options, "blas", request.param)
    return request.param


@pytest.mark.parametrize("pivoting", [False, True], ids=["dominant", "pivoting"])
def test_tridiagonal_solve(library, pivoting):
    """Forward against SciPy's dgtsv, vjp and jvp against central differences, with LAPACK
    and with the loops (which swap rows as dgtsv does)."""
    rng = rng_for(f"tridiagonal/{pivoting}")
    args = system(rng, pivoting=pivoting)
    k = kernel(tridiagonal_energy)
    assert k(*copy_args(args)) == pytest.approx(tridiagonal_energy(*copy_args(args)),
                                                rel=1e-12)
    check_vjp_and_jvp(k, tridiagonal_energy, args, rng)


def test_zero_pivot_names_the_line(library):
    dl, d, du, b = system(rng_for("singular"), n=4)
    d[:], dl[:], du[:] = 0.0, 0.0, 1.0          # a zero column: singular
    line = tridiagonal_energy.__code__.co_firstlineno + 1
    with pytest.raises(LinAlgError, match=rf":{line}: scipy.linalg.lapack.dgtsv: the matrix "
                                          "is singular"):
        kernel(tridiagonal_energy)(dl, d, du, b)
    assert lapack.dgtsv(dl, d, du, b)[4] > 0        # SciPy's info says so too


def test_sizes_are_checked():
    dl, d, du, b = system(rng_for("sizes"), n=5)
    with pytest.raises(Exception, match="dl and d"):
        kernel(tridiagonal_energy)(np.ones(3), d, du, b)


def other_element(dl, d, du, b):
    return lapack.dgtsv(dl, d, du, b)[4]


def whole_tuple(dl, d, du, b):
    return lapack.dgtsv(dl, d, du, b)


def mutated_tuple(a):
    shape = a.shape
    shape[0] += 1
    return np.zeros(shape)


def static_under_data(a):
    s = slice(0, 2)
    if a[0] > 0:
        s = slice(1, 3)
    return a[s]


def static_after_data_branch(a):
    if a[0] > 0:
        s = slice(1, 3)
    return a[s]


def windows(a, out):
    """A slice bound in a loop from its variable: one per iteration, as Python's."""
    for i in range(a.shape[0] - 1):
        w = slice(i, i + 2)
        out[i] = np.sum(a[w] * a[w])


def test_slices_bound_in_a_loop():
    rng = rng_for("windows")
    args = (rng.standard_normal(6), np.zeros(5))
    mine, theirs = copy_args(args), copy_args(args)
    kernel(windows)(*mine)
    windows(*theirs)
    np.testing.assert_array_equal(mine[1], theirs[1])
    check_vjp_and_jvp(kernel(windows), windows, args, rng)


def identity_of_arrays(a, b):
    if a is b:
        return a
    return b


def mixed_unpacking(a):
    s, t = slice(0, 2), a + 1.0
    return a[s] + t[s]


@pytest.mark.parametrize("func,message", [
    (other_element, r"dgtsv returns \(du2, d, du, x, info\); only x"),
    (whole_tuple, r"returns a tuple; take the element"),
    (mutated_tuple, r"'shape' is a tuple, which does not support item assignment"),
    (static_under_data, r"cannot change under an `if` on data"),
    (static_after_data_branch, r"'s' is not defined before this use"),
    (identity_of_arrays, r"`is` and `is not` compare with None only"),
    (mixed_unpacking, r"unpacks values known when compiling .* with others"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_refused_with_the_line(func, message):
    rng = rng_for(func.__name__)
    args = system(rng, n=5) if func in (other_element, whole_tuple) else \
        (rng.standard_normal(5),) + ((rng.standard_normal(5),) if func is identity_of_arrays
                                     else ())
    with pytest.raises(KernelSyntaxError, match=message) as err:
        kernel(func)(*args)
    assert f"{__file__}:" in str(err.value)


def test_defaults_of_the_kernel_itself():
    """A kernel called without `extra` and `scale`: their None defaults decide the ifs."""
    rng = rng_for("defaults")
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    np.testing.assert_array_equal(kernel(relaxed)(a, b), relaxed(a, b))
    np.testing.assert_array_equal(kernel(relaxed)(a, b, a.copy()), relaxed(a, b, a))
    check_vjp_and_jvp(kernel(relaxed), relaxed, (a, b), rng)


def repeated_solves(dl, d, du, b, steps: int):
    """The solve in a loop whose right-hand side it overwrites: what the reverse sweep
    reads of each step is recorded."""
    for _ in range(steps):
        b[:] = lapack.dgtsv(dl, d, du, b)[3] * d
    return np.sum(b * b)


def test_solves_in_a_loop(library):
    rng = rng_for("repeated")
    args = system(rng) + (3,)
    k = kernel(repeated_solves)
    assert k(*copy_args(args)) == pytest.approx(repeated_solves(*copy_args(args)), rel=1e-12)
    check_vjp_and_jvp(k, repeated_solves, args, rng)


def test_cuda_emulated(monkeypatch):
    """device='cuda' (emulated): the node runs as its loops in a kernel of one thread."""
    monkeypatch.setattr(options, "device", "cuda")
    monkeypatch.setattr(options, "cuda_emulation", True)
    rng = rng_for("cuda")
    args = system(rng, pivoting=True)
    assert kernel(tridiagonal_energy)(*copy_args(args)) == pytest.approx(
        tridiagonal_energy(*args), rel=1e-12)
    check_vjp_and_jvp(kernel(tridiagonal_energy), tridiagonal_energy, args, rng)


def test_node_text():
    text = kernel(tridiagonal_energy).explain(*system(rng_for("text")))
    assert "= dgtsv(dl, d, du, b)    [tridiagonal" in text
