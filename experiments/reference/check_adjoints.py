"""Check the hand-written C forward and adjoints against the plain-Python kernel
and central finite differences (N=8, T=3, random non-symmetric weights), for both
builds: "python" order must match the plain Python bit for bit.

    python -m experiments.reference.check_adjoints
"""
import numpy as np

from experiments.reference import loader
from experiments.reference.plain import plain_seidel2d


def central_fd(f, x, h=1e-6):
    g = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[k] += h
        xm[k] -= h
        g[k] = (f(xp) - f(xm)) / (2 * h)
    return g


def check(order, py, A0, w, T, fd_A, fd_w):
    A_py, A_c = A0.copy(), A0.copy()
    py(A_py, w, T)
    loader.fwd(A_c, w, T, order=order)
    if order == "python":
        assert np.array_equal(A_py, A_c), "python-order C must be bit-identical to plain Python"
    assert np.allclose(A_py, A_c, rtol=1e-13, atol=1e-13)

    A = A0.copy()
    gA = loader.grad_A(A, w, T, order=order)
    assert np.array_equal(A, A_c), "grad_A must leave the final state in A"
    gA_rev = loader.grad_A(A0.copy(), w, T, run_forward=False, order=order)
    A = A0.copy()
    gw, gA_w = loader.grad_w(A, w, T, order=order)
    assert np.array_equal(A, A0), "grad_w must restore A"

    for name, got, ref in [("dA (grad_A)", gA, fd_A), ("dA (reverse only)", gA_rev, fd_A),
                           ("dA (grad_w)", gA_w, fd_A), ("dw (grad_w)", gw, fd_w)]:
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        print(f"{order:6s} {name:18s} max rel err vs central FD: {err:.2e}")
        assert err < 1e-8, (order, name)


def main(n=8, T=3, seed=0):
    rng = np.random.default_rng(seed)
    A0, w = rng.standard_normal((n, n)), rng.uniform(0.0, 0.3, (3, 3))
    py = plain_seidel2d()
    fd_A = central_fd(lambda A: py(A.copy(), w, T), A0)
    fd_w = central_fd(lambda ww: py(A0.copy(), ww, T), w)
    for order in loader.VARIANTS:
        check(order, py, A0, w, T, fd_A, fd_w)
    print("hand-written C forward/adjoints OK")


if __name__ == "__main__":
    main()
