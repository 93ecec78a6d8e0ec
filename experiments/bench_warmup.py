"""A trivial kernel that bench.py compiles first, so that one-time set-up (imports, the
compiler's identity, BLAS discovery) is not charged to the first benchmarked kernel."""
import numpy as np

from adjoint import float64, kernel, symbol

N = symbol("N")


@kernel
def tiny(x: float64[N]) -> float:
    for i in range(1, N):
        x[i] += 0.5 * x[i - 1]
    return np.sum(x * x)
