"""Gauss-Seidel smoothing (PolyBench seidel-2d) with a 3x3 weight stencil.

With all weights 1/9 this is exactly PolyBench's ``seidel-2d``.  The sweep
updates ``A`` in place, so every point already sees its updated north and
west neighbours: the classic kernel on which functional AD copies whole arrays.
"""
import numpy as np

from adjoint import float64, kernel, symbol

N = symbol("N")


@kernel
def seidel2d(A: float64[N, N], w: float64[3, 3], TSTEPS: int) -> float:
    for t in range(TSTEPS - 1):
        for i in range(1, N - 1):
            for j in range(1, N - 1):
                A[i, j] = (w[0, 0] * A[i - 1, j - 1] + w[0, 1] * A[i - 1, j]
                           + w[0, 2] * A[i - 1, j + 1] + w[1, 0] * A[i, j - 1]
                           + w[1, 1] * A[i, j] + w[1, 2] * A[i, j + 1]
                           + w[2, 0] * A[i + 1, j - 1] + w[2, 1] * A[i + 1, j]
                           + w[2, 2] * A[i + 1, j + 1])
    return np.sum(A)


def polybench_weights():
    """The weights that make :func:`seidel2d` PolyBench's seidel-2d."""
    return np.full((3, 3), 1.0 / 9.0)


def polybench_init(n):
    """PolyBench's initial array: A[i, j] = (i * (j + 2) + 2) / n."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return (i * (j + 2) + 2.0) / n
