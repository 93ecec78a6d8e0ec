"""The hybrid Lorenz-96 model with a neural closure (models/lorenz96_hybrid.py) and
task=train_closure (simcore/closure.py, simcore/tasks/train_closure.py): the kernels
against plain Python and the one-scale model, their gradients against central
differences, Adam, online training lowering the rollout loss, the scores, the task's
files and its config checks."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import xarray as xr

from adjoint import value_and_grad
from kernel_testing import arg_names, fd_gradient
from simcore.closure import (Adam, Data, evaluate, hellinger, rollout_batch, statistics,
                             train_online)
from simcore.config import compose
from simcore.errors import ConfigError
from simcore.models import lorenz96
from simcore.models.lorenz96_2scale import Lorenz96TwoScale
from simcore.models.lorenz96_hybrid import (WEIGHTS, closure_loss, hybrid_run, init_weights,
                                            no_closure, rollout_loss)
from simcore.tasks import run_task
from simcore.validate import validate
from test_framework import tiny

SCALES = (3.5, 5.0, -4.0, 3.0)                   # xm, xs, um, us


def weights(hidden=4, seed=0):
    w = init_weights(hidden, np.random.default_rng(seed))
    w["b1"] += 0.1
    w["b3"] += 0.2                                # biases off zero, so their gradient is tested
    return w


def net(w, scales=SCALES):
    return (*(w[n] for n in WEIGHTS), *scales)


def states(shape, seed=1):
    return 3.5 + 5.0 * np.random.default_rng(seed).standard_normal(shape)


def test_kernels_match_plain_python():
    w, X0, Xt = weights(), states((3, 6)), states((3, 4, 6), 2)
    args = (X0, Xt, *net(w), 20.0, 0.005)
    np.testing.assert_allclose(rollout_loss(*args), rollout_loss.py_func(*args), rtol=1e-13)
    U = states((5, 6), 3)
    args = (X0[:1].repeat(5, axis=0), U, *net(w))
    np.testing.assert_allclose(closure_loss(*args), closure_loss.py_func(*args), rtol=1e-13)
    X, want, out, ref = X0[0].copy(), X0[0].copy(), np.empty((4, 6)), np.empty((4, 6))
    hybrid_run(X, out, *net(w), 20.0, 0.005, 3)
    hybrid_run.py_func(want, ref, *net(w), 20.0, 0.005, 3)
    np.testing.assert_allclose(out, ref, rtol=1e-13)
    np.testing.assert_array_equal(X, out[-1])


def test_without_closure_the_hybrid_is_the_one_scale_model():
    x0 = states(8)
    X, out = x0.copy(), np.empty((5, 8))
    hybrid_run(X, out, *net(no_closure(16), (3.5, 5.0, 0.0, 0.0)), 20.0, 0.005, 4)
    for t in range(5):
        np.testing.assert_allclose(out[t], lorenz96.rk4(x0, 20.0, 0.005, 4 * (t + 1)),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("loss", ["rollout", "closure"])
def test_gradients_to_the_weights_match_central_differences(loss):
    w, X0 = weights(3), states((2, 5))
    if loss == "rollout":
        k, args = rollout_loss, (X0, states((2, 3, 5), 2), *net(w), 20.0, 0.01)
    else:
        k, args = closure_loss, (X0, states((2, 5), 2), *net(w))
    value, grads = value_and_grad(k, WEIGHTS)(*args)
    np.testing.assert_allclose(value, k.py_func(*args), rtol=1e-13)
    index_of = {n: i for i, n in enumerate(arg_names(k))}
    for name, g in zip(WEIGHTS, grads):
        want = fd_gradient(lambda a: k.py_func(*a), args, index_of, name)
        np.testing.assert_allclose(g, want, rtol=1e-7, atol=1e-9 * np.abs(want).max(),
                                   err_msg=name)


def test_adam_minimises_a_quadratic():
    target = {"a": np.array([1.0, -2.0]), "b": np.array([3.0])}
    params = {"a": np.zeros(2), "b": np.zeros(1)}
    opt = Adam(params, lr=0.1)
    for _ in range(500):
        opt.step(params, {n: 2.0 * (params[n] - target[n]) for n in params})
    for n in params:
        np.testing.assert_allclose(params[n], target[n], atol=1e-3)


@pytest.fixture(scope="module")
def data():
    model = Lorenz96TwoScale(Lorenz96TwoScale.Config(K=6, J=4, spinup=500))
    return Data.from_truth(model, 2.0, 1.0, 5)


CFG = SimpleNamespace(online_iters=60, batch=8, rollout=5, lr=1e-2, forecasts=4,
                      forecast_time=0.3, vpt_threshold=0.5, acf_time=0.2, bins=10)


def test_data_splits_the_truth_at_the_hybrid_step(data):
    assert data.dt == 0.005 and data.X_train.shape == (401, 6) and data.X_test.shape == (201, 6)
    np.testing.assert_array_equal(data.X_train[-1], data.X_test[0])   # contiguous
    assert data.scales[1] > 0 and data.scales[2] < 0 and data.scales[3] > 0


def test_online_training_lowers_the_rollout_loss(data):
    w = init_weights(8, np.random.default_rng(0))
    X0, Xt = rollout_batch(data, 5, 32, np.random.default_rng(9))      # a fixed check batch
    before = rollout_loss(X0, Xt, *data.args(w), data.F, data.dt)
    losses, seconds = train_online(data, w, CFG, np.random.default_rng(1))
    after = rollout_loss(X0, Xt, *data.args(w), data.F, data.dt)
    assert len(losses) == 60 and np.all(seconds > 0)
    assert after < 0.3 * before, (before, after)
    # and the trained closure forecasts better than no closure
    none, online = (evaluate(data, v, m, CFG) for m, v in
                    (("none", no_closure(8)), ("online", w)))
    assert online["rmse"][-1] < none["rmse"][-1]


def test_scores_of_the_truth_itself(data):
    s = statistics(data.X_test, CFG, data)
    assert s["acf"][0] == pytest.approx(1.0) and len(s["acf"]) == 41
    assert np.sum(s["hist"]) * (s["bins"][1] - s["bins"][0]) == pytest.approx(1.0)
    assert hellinger(s["hist"], s["hist"], s["bins"][1] - s["bins"][0]) == pytest.approx(0.0,
                                                                                       abs=1e-7)
    blown = statistics(np.full((10, 6), np.inf), CFG, data)
    assert np.isnan(blown["mean"]) and np.all(np.isnan(blown["acf"]))


def test_the_task_writes_weights_scores_and_plots(tmp_path):
    summary = run_task(tiny("lorenz96_2scale", "train_closure"), tmp_path)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert set(on_disk["scores"]) == {"none", "offline", "online"}
    for s in on_disk["scores"].values():
        assert set(s["rmse"]) == {"0.05", "0.1"} and s["vpt_mean"] > 0
    assert summary["timing"]["online_step_s"] > 0 and summary["timing"]["rollout_forward_s"] > 0
    with xr.open_dataset(tmp_path / "closure.nc") as ds:
        assert list(ds.mode.values) == ["none", "offline", "online"]
        assert ds.rmse.dims == ("mode", "lead_time") and ds.online_W1.shape == (4, 3)
        assert ds.offline_loss.size == 3 and ds.attrs["Conventions"] == "CF-1.8"
        np.testing.assert_array_equal(ds.none_W2.values, 0.0)
    for name in summary["outputs"]:
        assert (tmp_path / name).is_file()


def test_online_can_start_from_the_offline_fit(tmp_path):
    summary = run_task(tiny("lorenz96_2scale", "train_closure", "task.mode=online",
                            "task.online_init=offline", "task.plot=false"), tmp_path)
    assert set(summary["scores"]) == {"none", "online"}
    assert summary["outputs"] == ["closure.nc", "summary.json"]
    with xr.open_dataset(tmp_path / "closure.nc") as ds:
        assert ds.offline_loss.size == 3 and "offline_W1" not in ds     # trained, not scored


@pytest.mark.parametrize("overrides, line", [
    (["task.mode=hybrid"], "task.mode=hybrid: must be one of none, offline, online, all"),
    (["task.leads=[0.5,3.0]"],
     "task.leads=[0.5,3.0]: must be a list of numbers above 0 and at most forecast_time = 2.0"),
    (["task.rollout=4000"], "task.rollout=4000: must be below the training segment's 4000 "
                            "hybrid steps (hybrid step task.substeps * model.dt = 0.005); "
                            "raise task.train_time"),
    (["task.forecast_time=20"], "task.forecast_time=20.0: must span 1 to 3999 hybrid steps "
                                "of the held-out segment (hybrid step task.substeps * "
                                "model.dt = 0.005); it spans 4000"),
    (["task.lr=0"], "task.lr=0.0: must be above 0"),
    (["model=lorenz96"], "task=train_closure: runs on model=lorenz96_2scale, not "
                         "model=lorenz96"),
])
def test_bad_config_values_are_one_line_each(overrides, line):
    with pytest.raises(ConfigError) as err:
        validate(compose(["model=lorenz96_2scale", "task=train_closure", *overrides]))
    assert str(err.value).splitlines()[0] == line
