"""Observation files and state files (simcore/obsfile.py): the round trip, runs from files
equal to the twin runs that wrote them, interpolation off the grid, and one clear error
per kind of bad file (naming the file and the field)."""
import json

import numpy as np
import pytest
import xarray as xr

import simcore
from simcore.covariance import flatten
from simcore.errors import DataFileError
from simcore.obsfile import ObservationSet, read_states, write_states
from simcore.observation import ObservationOperator
from simcore.tasks import run_task
from simcore.twin import Observations, Twin
from test_framework import tiny


def model_of(name, *extra):
    cfg = tiny(name, "assimilate", *extra)
    return simcore.get_model(name, cfg.model)


def synthetic(model, H, times=(2, 4, 6), seed=0):
    rng = np.random.default_rng(seed)
    frames = [rng.standard_normal(H.matrix.shape[1]) for _ in times]
    return ObservationSet.synthetic(model, H, np.array(times), frames, 0.3, rng)


def test_round_trip_keeps_every_record_and_operator(tmp_path):
    model = model_of("heat")
    H = ObservationOperator.stations(model, 7, np.random.default_rng(1))
    data = synthetic(model, H)
    data.extra["id"] = np.tile(np.arange(100, 107), 3)
    data.write(tmp_path / "obs.nc", {"title": "test"})
    back = ObservationSet.read(tmp_path / "obs.nc", model)
    np.testing.assert_array_equal(back.steps, data.steps)
    np.testing.assert_array_equal(back.variable, data.variable)
    np.testing.assert_array_equal(back.value, data.value)
    np.testing.assert_array_equal(back.error_std, data.error_std)
    np.testing.assert_array_equal(back.extra["id"], data.extra["id"])
    assert list(back.extra["type"]) == ["stations"] * 21
    for d in ("y", "x"):
        np.testing.assert_allclose(back.positions[d], data.positions[d], rtol=0, atol=1e-12)
    for t in back.times():
        a, b = back.at(t), data.at(t)
        np.testing.assert_allclose(a.H.matrix.toarray(), b.H.matrix.toarray(), atol=1e-12)
        np.testing.assert_array_equal(a.y, b.y)
    with xr.open_dataset(tmp_path / "obs.nc") as ds:
        assert ds.attrs["featureType"] == "point" and ds.attrs["Conventions"] == "CF-1.8"
        assert ds.attrs["model"] == "heat" and ds.attrs["title"] == "test"
        assert ds.value.attrs["units"] == "K" and ds.x.attrs["units"] == "m"
        assert ds.time.attrs["units"] == "s"
        assert set(ds.value.encoding["coordinates"].split()) == {"time", "y", "x"}


def test_grid_observations_read_back_as_the_same_selection(tmp_path):
    model = model_of("lorenz96")
    H = ObservationOperator.grid(model, 2)
    synthetic(model, H).write(tmp_path / "obs.nc", {})
    back = ObservationSet.read(tmp_path / "obs.nc", model)
    assert (back.at(4).H.matrix != H.matrix).nnz == 0          # exact: weights 1 at points


def test_observations_off_the_grid_are_interpolated(tmp_path):
    """Sites 2.5 and 39.5 (between 39 and 0 on the ring) and a grid index column."""
    model = model_of("lorenz96")
    x = np.arange(40.0) ** 2
    ds = xr.Dataset({"variable": ("obs", np.array(["x", "x", "x"], dtype=object)),
                     "value": ("obs", [1.0, 2.0, 3.0], {"units": "1"}),
                     "error_std": ("obs", [0.5, 0.5, 2.0], {"units": "1"}),
                     "time": ("obs", [0.05, 0.05, 0.1], {"units": "1"}),
                     "site_index": ("obs", [2.5, 39.5, 7.0], {"units": "1"})})
    ds.to_netcdf(tmp_path / "obs.nc")
    data = ObservationSet.read(tmp_path / "obs.nc", model)
    np.testing.assert_array_equal(data.times(), [1, 2])
    np.testing.assert_allclose(data.at(1).H(x), [(4 + 9) / 2, (39 ** 2 + 0) / 2])
    np.testing.assert_allclose(data.at(2).H(x), [49.0])
    np.testing.assert_array_equal(data.at(2).sigma, [2.0])


def test_assimilate_from_the_files_a_twin_wrote_is_the_twin_run(tmp_path):
    common = [f"checkpoint_dir={tmp_path}/ck", "task.shift=1", "task.window=3",
              "task.burn_in_time=0"]
    twin = run_task(tiny("lorenz96", "assimilate", *common, "task.cycles=5"), tmp_path / "a")
    files = [f"obs.file={tmp_path}/a/observations.nc", f"truth.file={tmp_path}/a/truth.nc",
             f"background.file={tmp_path}/a/background.nc"]
    again = run_task(tiny("lorenz96", "assimilate", *common, "task.cycles=null", *files),
                     tmp_path / "b")
    for key in ("rmse_f", "rmse_a", "rmse_s", "iterations", "chi2_per_obs", "cycles"):
        assert again[key] == twin[key], key
    assert again["observation_operator"] == "file" and again["noise"] is None
    assert not (tmp_path / "b" / "observations.nc").exists()      # a file run writes none
    # without a truth: the same analyses, no RMSE
    blind = run_task(tiny("lorenz96", "assimilate", *common, "task.cycles=null", *files[::2]),
                     tmp_path / "c")
    assert blind["rmse_a"] is None and blind["iterations"] == twin["iterations"]
    on_disk = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert on_disk["rmse_f"] is None and on_disk["climatology_std"] is None


def test_calibrate_from_the_files_a_twin_wrote_is_the_twin_run(tmp_path):
    twin = run_task(tiny("lorenz96", "calibrate", f"checkpoint_dir={tmp_path}/ck"),
                    tmp_path / "a")
    again = run_task(tiny("lorenz96", "calibrate", f"checkpoint_dir={tmp_path}/ck",
                          f"obs.file={tmp_path}/a/observations.nc"), tmp_path / "b")
    assert again["params_final"] == twin["params_final"]
    assert again["cost_final"] == twin["cost_final"] and again["n_obs"] == twin["n_obs"]
    times, states = read_states(simcore.get_model("lorenz96", tiny("lorenz96",
                                                                   "calibrate").model),
                                tmp_path / "a" / "truth.nc")
    assert times[0] == 0.0 and states.shape == (len(times), 40)


def test_twin_reads_a_file_with_other_times_and_errors(tmp_path):
    """Observations at steps 3 and 5 only, errors per observation: J by hand."""
    model = model_of("lorenz96")
    obs = Observations.from_config(tiny("lorenz96", "calibrate").model.obs)
    H = ObservationOperator.grid(model, 5)
    state = model.initial_state()
    from simcore.chain import advance
    frames = []
    for steps in (3, 2):
        advance(model, state, model.truth(), steps)
        frames.append(flatten(model, state))
    data = ObservationSet.synthetic(model, H, np.array([3, 5]), frames, 0.5)
    data.value = data.value + 0.25
    data.error_std = np.linspace(0.5, 1.0, len(data))
    data.write(tmp_path / "obs.nc", {})
    twin = Twin(model, obs, data=ObservationSet.read(tmp_path / "obs.nc", model))
    J_obs = twin.cost(model.truth())[1]["obs"]
    assert J_obs == pytest.approx(0.5 * np.sum((0.25 / data.error_std) ** 2), rel=1e-12)


# ---- bad files: one clear error each, naming the file and the field ---------------------------
def good_file(tmp_path, model):
    data = synthetic(model, ObservationOperator.grid(model, 10))
    data.write(tmp_path / "good.nc", {})
    return xr.load_dataset(tmp_path / "good.nc")


def bad(tmp_path, change):
    model = model_of("lorenz96")
    ds = good_file(tmp_path, model)
    ds = change(ds)
    path = tmp_path / "bad.nc"
    ds.to_netcdf(path)
    return path, model


def units(name, value):
    def change(ds):
        ds[name].attrs["units"] = value
        return ds
    return change


def setting(name, index, value):
    def change(ds):
        column = ds[name].values.copy()
        column[index] = value
        ds[name] = (ds[name].dims, column, ds[name].attrs)
        return ds
    return change


@pytest.mark.parametrize("change, message", [
    (lambda ds: ds.drop_vars("error_std"), r"bad.nc: no variable 'error_std'"),
    (lambda ds: ds.drop_vars("site"), r"bad.nc: no variable 'site' \(or 'site_index'\)"),
    (units("value", "K"), r"bad.nc: value: units 'K', the model's are '1'"),
    (units("time", "days"), r"bad.nc: time: units 'days', the model's are '1'"),
    (setting("value", 5, np.nan), r"bad.nc: value: 1 NaN or infinite values \(first at "
                                  r"record 5\)"),
    (setting("time", 0, -0.1), r"bad.nc: time: -0.1 \(record 0\) is outside the run"),
    (setting("time", 2, 0.0), r"bad.nc: time: 0 \(record 2\) is outside the run"),
    (setting("time", 1, 0.125), r"bad.nc: time: 0.125 \(record 1\) is not a whole number "
                                r"of model steps"),
    (setting("error_std", 3, 0.0), r"bad.nc: error_std: must be above 0, record 3"),
    (setting("variable", 0, "u"), r"bad.nc: variable: 'u' is not a state variable of "
                                  r"lorenz96 \(x\)"),
])
def test_bad_observation_files_are_refused_naming_file_and_field(tmp_path, change, message):
    path, model = bad(tmp_path, change)
    with pytest.raises(DataFileError, match=message):
        ObservationSet.read(path, model)


def test_positions_off_a_non_periodic_grid_are_refused(tmp_path):
    model = model_of("heat")
    data = synthetic(model, ObservationOperator.grid(model, 3))
    data.positions["x"][4] = 99.0
    data.write(tmp_path / "obs.nc", {})
    with pytest.raises(DataFileError, match=r"obs.nc: x: record 4 lies outside the grid"):
        ObservationSet.read(tmp_path / "obs.nc", model)


def test_missing_and_unreadable_files(tmp_path):
    model = model_of("lorenz96")
    with pytest.raises(DataFileError, match=r"nothing.nc: no such file"):
        ObservationSet.read(tmp_path / "nothing.nc", model)
    (tmp_path / "text.nc").write_text("not netCDF")
    with pytest.raises(DataFileError, match=r"text.nc: not a readable netCDF file"):
        ObservationSet.read(tmp_path / "text.nc", model)


def test_times_after_calibrates_run_are_refused(tmp_path):
    model = model_of("lorenz96")           # tiny: 8 steps
    obs = Observations.from_config(tiny("lorenz96", "calibrate").model.obs)
    data = synthetic(model, ObservationOperator.grid(model, 10), times=(4, 12))
    data.write(tmp_path / "obs.nc", {})
    with pytest.raises(DataFileError, match=r"obs.nc: time: 0.6 is outside the run "
                                            r"\(model.steps=8 steps, to t=0.4\)"):
        Twin(model, obs, data=ObservationSet.read(tmp_path / "obs.nc", model))


def test_assimilate_refuses_more_cycles_than_the_file_has_and_a_truth_without_a_time(
        tmp_path):
    model = model_of("lorenz96")
    synthetic(model, ObservationOperator.grid(model, 10), times=(4, 8, 12)).write(
        tmp_path / "obs.nc", {})
    common = [f"checkpoint_dir={tmp_path}/ck", f"obs.file={tmp_path}/obs.nc", "task.shift=1"]
    with pytest.raises(DataFileError, match=r"obs.nc: time: 3 observation times; "
                                            r"task.cycles=4 with task.shift=1 needs at least 4"):
        run_task(tiny("lorenz96", "assimilate", *common, "task.cycles=4"), tmp_path / "a")
    x = flatten(model, model.initial_state())
    write_states(model, tmp_path / "truth.nc", [x, x, x], [0.0, 0.2, 0.6], {})
    with pytest.raises(DataFileError, match=r"truth.nc: time: no state at t=0.4"):
        run_task(tiny("lorenz96", "assimilate", *common, "task.cycles=null",
                      f"truth.file={tmp_path}/truth.nc"), tmp_path / "b")


def test_bad_state_files(tmp_path):
    model = model_of("lorenz96")
    x = flatten(model, model.initial_state())
    write_states(model, tmp_path / "s.nc", [x], [0.0], {})
    ds = xr.load_dataset(tmp_path / "s.nc")
    ds["x"].attrs["units"] = "m"
    ds.to_netcdf(tmp_path / "units.nc")
    with pytest.raises(DataFileError, match=r"units.nc: x: units 'm', the model's are '1'"):
        read_states(model, tmp_path / "units.nc")
    ds = xr.load_dataset(tmp_path / "s.nc").rename({"x": "y"})
    ds.to_netcdf(tmp_path / "name.nc")
    with pytest.raises(DataFileError, match=r"name.nc: no variable 'x'"):
        read_states(model, tmp_path / "name.nc")
    ds = xr.load_dataset(tmp_path / "s.nc")
    ds["x"][0, 3] = np.nan
    ds.to_netcdf(tmp_path / "nan.nc")
    with pytest.raises(DataFileError, match=r"nan.nc: x: NaN or infinite values"):
        read_states(model, tmp_path / "nan.nc")


def test_the_sample_files_in_data_read_and_run(tmp_path):
    """data/README.md's examples: the files read, and a short run uses their first times."""
    import pathlib
    data = pathlib.Path(__file__).resolve().parents[2] / "data"
    model = simcore.get_model("lorenz96")
    obs = ObservationSet.read(data / "lorenz96_observations.nc", model)
    assert len(obs) == 8000 and len(obs.times()) == 200 and obs.times()[0] == 4
    times, states = read_states(model, data / "lorenz96_truth.nc")
    assert states.shape == (201, 40) and times[-1] == pytest.approx(40.0)
    assert len(ObservationSet.read(data / "lorenz96_calibrate_observations.nc", model)) == 200
    s = run_task(tiny("lorenz96", "assimilate", f"checkpoint_dir={tmp_path}/ck",
                      "model.spinup=2000", "task.cycles=3", "task.shift=1",
                      f"obs.file={data}/lorenz96_observations.nc",
                      f"truth.file={data}/lorenz96_truth.nc",
                      f"background.file={data}/lorenz96_background.nc"), tmp_path / "out")
    assert s["observation_times"] == 3 and s["rmse_a"] < 1.0
