"""A trivial kernel that bench.py compiles first, so that one-time set-up (imports, the
compiler's identity, BLAS discovery) is not charged to the first benchmarked kernel. Its
temporary has a size computed from N (``N - 1``): evaluating one imports the parts of
sympy that it loads on first use (about 20 ms, once per process)."""
import numpy as np

from adjoint import float64, kernel, symbol

N = symbol("N")


@kernel
def tiny(x: float64[N]) -> float:
    d = np.zeros(N - 1)
    for i in range(1, N):
        x[i] += 0.5 * x[i - 1]
        d[i - 1] = x[i] - x[i - 1]
    return np.sum(x * x) + np.sum(d * d)
