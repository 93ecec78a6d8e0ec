"""The two-scale Lorenz-96 model (models/lorenz96_2scale.py): the compiled kernel against
the NumPy reference, the slow equation against the one-scale model when uncoupled, the
truth run and its subgrid tendency, and the attractor's statistics. (Every task runs on
it through tests/framework/test_framework.py and test_models.py with its ``tiny`` values.)"""
from dataclasses import replace

import numpy as np
import pytest

from simcore.models import lorenz96
from simcore.models.lorenz96_2scale import Lorenz96TwoScale, coupling, rk4


def model(**overrides):
    return Lorenz96TwoScale(replace(Lorenz96TwoScale.Config(), **overrides))


def test_kernel_matches_the_numpy_reference():
    m = model(spinup=500)
    state = m.initial_state()
    want = rk4(state["X"], state["Y"], 20.0, *m.coefficients(), m.cfg.dt, 40)
    m.advance(state, {"F": 20.0}, 40)
    np.testing.assert_allclose(state["X"], want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state["Y"], want[1], rtol=1e-12, atol=1e-12)


def test_uncoupled_slow_variables_are_the_one_scale_model():
    m = model(h=0.0, K=10, J=3, spinup=0)
    state = m.initial_state()
    x0 = state["X"].copy()
    m.advance(state, {"F": 20.0}, 100)
    want = lorenz96.rk4(x0, 20.0, m.cfg.dt, 100)
    np.testing.assert_allclose(state["X"], want, rtol=1e-12, atol=1e-12)


def test_the_fast_ring_runs_across_the_slow_variables():
    """Y_{J-1,k} is followed by Y_{0,k+1}: one ring of K*J, as the flattened reference."""
    m = model(K=4, J=3, spinup=0)
    Y = np.arange(12.0).reshape(4, 3) / 10.0
    state = {"X": np.zeros(4), "Y": Y.copy()}
    m.advance(state, {"F": 0.0}, 1)
    want = rk4(np.zeros(4), Y, 0.0, *m.coefficients(), m.cfg.dt, 1)[1]
    np.testing.assert_allclose(state["Y"], want, rtol=1e-13)


def test_truth_run_records_the_subgrid_tendency():
    m = model(spinup=200)
    run = m.truth_run(60, every=20)
    assert run["X"].shape == (4, 8) and run["Y"].shape == (4, 8, 32)
    np.testing.assert_allclose(run["time"], [0.0, 0.02, 0.04, 0.06])
    np.testing.assert_array_equal(run["X"][0], m.initial_state()["X"])
    for X, Y, U in zip(run["X"], run["Y"], run["coupling"]):
        np.testing.assert_allclose(U, coupling(Y, *m.coefficients()), rtol=1e-14)
    state = m.initial_state()                   # chunks of 20 steps = one run of 60
    m.advance(state, {"F": 20.0}, 60)
    np.testing.assert_array_equal(state["X"], run["X"][-1])
    with pytest.raises(ValueError, match="every=0"):
        m.truth_run(10, every=0)


def test_attractor_statistics():
    """F = 20, h = 1, b = c = 10: chaotic, bounded, the fast variables damping the slow
    ones (the subgrid tendency is negative on average)."""
    run = model(spinup=2000).truth_run(4000, every=10)
    X, U = run["X"], run["coupling"]
    assert np.all(np.isfinite(X)) and np.abs(X).max() < 40.0
    assert 2.0 < X.mean() < 6.0 and 3.0 < X.std() < 8.0
    assert U.mean() < -1.0
    assert np.std(run["Y"][-1]) > 0.01                 # the fast scale is alive
