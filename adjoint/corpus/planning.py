"""Inputs of the store/recompute planner (``adjoint.autodiff.plan``): a 1-D Burgers kernel
whose gradient the memory tests and experiments/memory.py run under budgets, and random
candidate lists the ILP is checked against brute force on."""
import numpy as np

from adjoint import float64, kernel, symbol
from adjoint.autodiff.plan import Candidate

N = symbol("N")


@kernel
def burgers(u: float64[N], v: float64[N], nu: float, dt: float, T: int) -> float:
    for t in range(T):
        for i in range(1, N - 1):
            v[i] = u[i] - 0.5 * dt * u[i] * (u[i + 1] - u[i - 1]) \
                + nu * dt * (u[i + 1] - 2.0 * u[i] + u[i - 1])
        for i in range(1, N - 1):
            u[i] = v[i]
    return np.sum(u * u)


def random_problem(rng, n, loops):
    return [Candidate(f"c{i}", rng.randrange(0, 4000), rng.randrange(0, 800),
                      rng.uniform(1, 100),
                      trips=rng.choice([6, 17]) if loops and rng.random() < 0.4 else 0,
                      state_bytes=rng.randrange(8, 200), iteration_tape_bytes=rng.randrange(8, 300))
            for i in range(n)]
