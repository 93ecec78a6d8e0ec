"""A module whose functions and arrays tests/engine/frontend/test_values.py reaches as attributes
(``values_helpers.decay(x)``, ``values_helpers.WEIGHTS``), as DAPPER's models reach
``mods.Lorenz96.dxdt``."""
import numpy as np

WEIGHTS = np.array([0.5, 1.5, 2.5, 3.5])
RATE = 0.75


def decay(x, reverse=False):
    if reverse:
        return -RATE * x[::-1]
    return -RATE * x * WEIGHTS
