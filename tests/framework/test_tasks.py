"""Tasks end to end at tiny sizes: what each writes, and that the results are right."""
import importlib.util
import json
import os

import numpy as np
import pytest
import xarray as xr

from simcore.tasks import run_task
from test_framework import MODELS, RUNS, tiny

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
PLOTS = ["cost.png"] if HAVE_MATPLOTLIB else []    # plots are an optional extra
OUTPUTS = {"forward": ["state.nc", "summary.json"],
           "calibrate": ["calibration.nc", "observations.nc", "truth.nc", "summary.json"]
           + PLOTS,
           "gradcheck": ["summary.json"], "compile": ["summary.json"],
           "assimilate": ["observations.nc", "truth.nc", "background.nc", "analysis.nc",
                          "diagnostics.nc", "summary.json"],
           "train_closure": ["closure.nc", "summary.json"]
           + (["rmse.png", "statistics.png", "loss.png"] if HAVE_MATPLOTLIB else [])}


def run(tmp_path, model, task, *extra):
    cfg = tiny(model, task, *extra)
    summary = run_task(cfg, tmp_path, argv=["run.py", f"model={model}", f"task={task}"])
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["model"] == model and on_disk["task"] == task
    return summary, on_disk


@pytest.mark.parametrize("model, task", RUNS)
def test_every_model_and_task_runs(tmp_path, model, task):
    summary, _ = run(tmp_path, model, task)
    for name in OUTPUTS[task]:
        assert (tmp_path / name).is_file(), name
    assert not list(tmp_path.glob(".*.tmp")), "a temporary file was left behind"
    assert summary.get("passed", True)


@pytest.mark.parametrize("model", MODELS)
def test_forward_state_nc_carries_cf_metadata_and_provenance(tmp_path, model):
    summary, _ = run(tmp_path, model, "forward", "task.output_every=2")
    with xr.open_dataset(tmp_path / "state.nc") as ds:
        assert ds.attrs["Conventions"] == "CF-1.8"
        assert ds.attrs["command_line"] == f"run.py model={model} task=forward"
        assert ds.attrs["simcore_version"] == "0.1.0"
        assert f"name: {model}" in ds.attrs["config"] and "output_every: 2" in ds.attrs["config"]
        for name in [*ds.data_vars, *ds.coords]:
            assert ds[name].attrs.get("units"), f"{name} has no units"
            assert ds[name].attrs.get("long_name"), f"{name} has no long_name"
        assert ds.time.attrs["axis"] == "T"
        assert "X" in {ds[c].attrs.get("axis") for c in ds.coords}
        steps = summary["output_steps"]
        assert steps[0] == 0 and steps[-1] == summary["steps"] and len(ds.time) == len(steps)


@pytest.mark.parametrize("model", MODELS)
def test_forward_matches_the_plain_python_kernel(tmp_path, model):
    """The final state in state.nc equals the kernel run as plain Python from the start."""
    import simcore
    cfg = tiny(model, "forward")
    run_task(cfg, tmp_path)
    m = simcore.get_model(model, cfg.model)
    state, params = m.initial_state(), m.truth()
    m.kernel.py_func(*m.kernel_args(state, params, m.steps))
    with xr.open_dataset(tmp_path / "state.nc") as ds:
        for v in m.variables():
            np.testing.assert_allclose(ds[v.name].isel(time=-1).values, state[v.name],
                                       rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(ds[v.name].isel(time=0).values,
                                          m.initial_state()[v.name])


def test_calibrate_seidel_noise_free_recovers_the_weights(tmp_path):
    summary, on_disk = run(tmp_path, "seidel", "calibrate")
    for key in ["params_true", "params_initial", "params_final", "relative_error",
                "cost_initial", "cost_final", "iterations", "evaluations", "converged",
                "wall_time_s"]:
        assert key in on_disk, key
    assert summary["relative_error_initial"] > 0.05
    assert summary["relative_error"] < 1e-4
    assert summary["converged"]
    np.testing.assert_allclose(on_disk["params_final"]["w"], on_disk["params_true"]["w"],
                               rtol=1e-3, atol=1e-6)
    assert summary["cost_final"] < 1e-6 * summary["cost_initial"]


def test_calibrate_writes_the_descent_per_iteration(tmp_path):
    summary, _ = run(tmp_path, "seidel", "calibrate")
    with xr.open_dataset(tmp_path / "calibration.nc") as ds:
        assert ds.attrs["Conventions"] == "CF-1.8"
        assert ds.sizes["iteration"] == len(ds.cost) >= 2
        assert ds.cost.attrs["units"] == "1" and ds.w.attrs["units"] == "1"
        assert ds.w.dims == ("iteration", "di", "dj")
        assert float(ds.cost[0]) == pytest.approx(summary["cost_initial"])
        assert float(ds.cost[-1]) == pytest.approx(summary["cost_final"])
        np.testing.assert_allclose(ds.w.isel(iteration=-1).values, summary["params_final"]["w"])
        np.testing.assert_allclose(ds.w_true.values, summary["params_true"]["w"])
        np.testing.assert_allclose(ds.w.isel(iteration=0).values, ds.w_first_guess.values)
        assert np.all(np.diff(ds.evaluations.values) >= 1)


def test_calibrate_seidel_noisy_cost_matches_the_number_of_observations(tmp_path):
    """With Gaussian noise of the assumed sigma, 2 J_obs at the minimum is ~ chi^2(m)."""
    summary, _ = run(tmp_path, "seidel", "calibrate", "model.obs.noise=true", "model.n=12",
                     "model.steps=6")
    m = summary["n_obs"]
    assert m == 6 * 6 * 6
    assert abs(summary["chi2"] - m) < 3 * np.sqrt(2 * m)


def test_calibrate_heat_improves_kappa_from_sparse_noisy_observations(tmp_path):
    summary, on_disk = run(tmp_path, "heat", "calibrate", "model.ny=16", "model.nx=16",
                           "model.steps=120", "model.obs.every_m=20", "model.obs.every_k=2")
    assert summary["n_params"] == 256 and summary["noise"]
    err = summary["relative_error_by_parameter"]["kappa"]
    assert err["final"] < 0.75 * err["initial"]         # 16 x 16 is small: 0.155 -> 0.093
    assert on_disk["params_final"]["kappa"]["shape"] == [16, 16]
    assert (tmp_path / "kappa.png").is_file() == HAVE_MATPLOTLIB
    with xr.open_dataset(tmp_path / "calibration.nc") as ds:
        assert ds.kappa.attrs["units"] == "m2 s-1"
        assert ds.kappa_true.dims == ("y", "x") and ds.y.attrs["units"] == "m"


def test_calibrate_without_plots(tmp_path):
    run(tmp_path, "seidel", "calibrate", "task.plot=false", "task.max_iter=3")
    assert not (tmp_path / "cost.png").exists()


@pytest.mark.parametrize("model", MODELS)
def test_gradcheck_passes_for_every_model(tmp_path, model):
    summary, on_disk = run(tmp_path, model, "gradcheck")
    assert on_disk["passed"] is True
    taylor = on_disk["checks"][:2]
    assert [c["wrt"] for c in on_disk["checks"]] == ["parameters", "initial_state",
                                                     "dot_product"]
    for check in taylor:
        assert len(check["eps"]) >= 6                        # at least 5 halvings
        assert abs(check["slope"] - 2.0) <= 0.1
    dot = on_disk["checks"][2]
    assert dot["passed"] and dot["mismatch"] < 1e-12 and dot["lhs"] != 0


def test_gradcheck_fails_for_a_wrong_gradient(tmp_path, monkeypatch):
    """A gradient off by 10 % leaves an O(eps) remainder: slope near 1, passed false."""
    from simcore.twin import Twin
    right = Twin.cost_and_grad

    def wrong(self, params, x0=None):
        J, parts, gp, gx = right(self, params, x0)
        return J, parts, {k: 1.1 * v for k, v in gp.items()}, gx

    monkeypatch.setattr(Twin, "cost_and_grad", wrong)
    summary, _ = run(tmp_path, "seidel", "gradcheck")
    params, state, dot = summary["checks"]
    assert not params["passed"] and abs(params["slope"] - 1.0) < 0.2
    assert state["passed"] and dot["passed"]
    assert summary["passed"] is False


def test_dot_product_test_catches_a_wrong_adjoint(tmp_path, monkeypatch):
    from simcore.twin import Twin
    right = Twin.adjoint

    def wrong(self, params, cotangents, x0=None):
        gp, gx = right(self, params, cotangents, x0)
        return gp, {k: v * 1.001 for k, v in gx.items()}

    monkeypatch.setattr(Twin, "adjoint", wrong)
    summary, _ = run(tmp_path, "heat", "gradcheck", "task.wrt=[initial_state]")
    taylor, dot = summary["checks"]
    assert taylor["passed"]                              # the cost's gradient is right
    assert not dot["passed"] and dot["mismatch"] > 1e-5
    assert summary["passed"] is False


def test_gradcheck_needs_five_halvings_and_something_to_check(tmp_path):
    from simcore.errors import ConfigError
    with pytest.raises(ConfigError, match="^task.halvings=4: must be at least 5$"):
        run(tmp_path, "seidel", "gradcheck", "task.halvings=4")
    with pytest.raises(ConfigError, match=r"^task.wrt=\[\]: must be a list of one or more "):
        run(tmp_path, "seidel", "gradcheck", "task.wrt=[]")


def test_engine_settings_apply_during_the_task_only(tmp_path, monkeypatch):
    import adjoint
    import simcore.tasks as tasks
    before = dict(vars(adjoint.options))
    seen = {}

    def spy(run):
        seen.update(vars(adjoint.options))
        return {"passed": True}

    monkeypatch.setattr(tasks, "tasks", lambda: {"forward": spy})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    run_task(tiny("seidel", "forward", "engine.cflags=['-O1','-std=c99']",
                  f"engine.cache_dir={tmp_path}/cache", "engine.threads=3",
                  "engine.memory_budget=1MiB"), tmp_path)
    assert seen["cflags"] == ("-O1", "-std=c99") and seen["cache_dir"] == f"{tmp_path}/cache"
    assert seen["threads"] == 3
    if "memory_budget" in before:                # the engine's planner takes a budget
        assert seen["memory_budget"] == "1MiB"
    assert dict(vars(adjoint.options)) == before
    assert "OMP_NUM_THREADS" not in os.environ
