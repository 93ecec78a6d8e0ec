"""Models and the pieces calibrate is built from, checked against independent references:
central finite differences of the cost, the kernels run as plain Python, NumPy algebra."""
import numpy as np
import pytest

import simcore
from simcore import Dim, Model, Observations, Parameter, Twin, Variable
from simcore.control import Control
from simcore.errors import ConfigError, ModelError
from simcore.prior import prior_cost
from simcore.state import arrays, state_dataset
from test_framework import MODELS, tiny


def tiny_model(name, *extra):
    cfg = tiny(name, "gradcheck", *extra)
    return simcore.get_model(name, cfg.model), Observations.from_config(cfg.model.obs)


def perturbed(model, scale=0.05, seed=0):
    rng = np.random.default_rng(seed)
    return {k: v * (1 + scale * rng.standard_normal(v.shape)) for k, v in model.truth().items()}


@pytest.mark.parametrize("name", MODELS)
def test_declarations_carry_cf_attributes(name):
    model, _ = tiny_model(name)
    for d in model.dims():
        assert d.attrs()["units"] and d.attrs()["long_name"]
    for item in [*model.variables(), *model.parameters()]:
        assert item.attrs()["units"] and item.attrs()["long_name"]
    assert {d.attrs().get("axis") for d in model.dims()} >= {"X"}
    for p in model.parameters():
        assert p.value.shape == model.shape(p.dims)


@pytest.mark.parametrize("name", MODELS)
def test_cost_gradient_matches_central_differences(name):
    """dJ/dp and dJ/dx0 from the chained adjoint against (J(x+hd) - J(x-hd)) / 2h."""
    model, obs = tiny_model(name, "model.obs.noise=true")
    twin = Twin(model, obs, background=perturbed(model, seed=1))
    params = perturbed(model)
    _, _, gp, gx = twin.cost_and_grad(params)
    rng = np.random.default_rng(2)
    for point, grad, cost in [(params, gp, lambda x: twin.cost(x)[0]),
                              (twin.x0, gx, lambda x: twin.cost(params, x)[0])]:
        d = {k: rng.standard_normal(v.shape) for k, v in point.items()}
        h = 1e-6 * max(np.sqrt(np.mean(v * v)) for v in point.values())
        fd = (cost({k: point[k] + h * d[k] for k in point})
              - cost({k: point[k] - h * d[k] for k in point})) / (2 * h)
        adj = sum(float(np.sum(grad[k] * d[k])) for k in point)
        assert adj == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_cost_is_zero_at_the_truth_without_noise(name):
    model, obs = tiny_model(name, "model.obs.noise=false")
    twin = Twin(model, obs)
    J, parts, gp, _ = twin.cost_and_grad(model.truth())
    assert J == 0.0 and parts == {"obs": 0.0, "prior": 0.0}
    assert all(np.all(g == 0) for g in gp.values())


def test_observations_every_k_th_point_every_m_th_step():
    model, _ = tiny_model("seidel", "model.n=9", "model.steps=6")
    twin = Twin(model, Observations(every_k=3, every_m=2, sigma=0.1, noise=False))
    np.testing.assert_array_equal(twin.times, [2, 4, 6])
    state = {"A": twin.x0["A"].copy()}
    model.kernel.py_func(*model.kernel_args(state, model.truth(), 4))   # reference: 4 steps
    np.testing.assert_allclose(twin.y[1], state["A"][1::3, 1::3].ravel(), rtol=1e-13)
    assert twin.n_obs == 3 * 3 * 3


def test_too_few_steps_for_one_observation():
    model, _ = tiny_model("seidel")
    with pytest.raises(ConfigError, match="no observation time"):
        Twin(model, Observations(every_k=2, every_m=model.steps + 1))


def test_state_dataset_wraps_the_kernel_arrays_without_copies():
    model, _ = tiny_model("heat")
    x0 = model.initial_state()
    ds = state_dataset(model, x0)
    views = arrays(ds, ["u"])
    assert views["u"] is x0["u"]
    before = ds.u.values.copy()
    simcore.advance(model, views, model.truth(), 3)             # in place, through the view
    assert not np.array_equal(ds.u.values, before)
    assert ds.u.attrs["units"] == "K" and ds.x.attrs["axis"] == "X"


def test_heat_refuses_an_unstable_time_step():
    cfg = tiny("heat", "forward", "model.dt=0.5")
    with pytest.raises(ConfigError, match="unstable"):
        simcore.get_model("heat", cfg.model)


def test_prior_gradient_matches_central_differences():
    p = Parameter("k", ("y", "x"), np.ones((4, 5)), "1", "k", prior_std=0.3,
                  background=0.9, smoothness_std=0.05)
    rng = np.random.default_rng(0)
    x = {"k": 1 + 0.1 * rng.standard_normal((4, 5))}
    _, g = prior_cost([p], x, {"k": p.background})
    d = rng.standard_normal((4, 5))
    J = lambda v: prior_cost([p], {"k": v}, {"k": p.background})[0]     # noqa: E731
    fd = (J(x["k"] + 1e-6 * d) - J(x["k"] - 1e-6 * d)) / 2e-6
    assert float(np.sum(g["k"] * d)) == pytest.approx(fd, rel=1e-7)


def test_control_vector_round_trip_and_bounds():
    ps = [Parameter("a", ("i",), np.array([1.0, 2.0]), "1", "a", bounds=(0.0, 3.0),
                    prior_std=0.5),
          Parameter("b", (), np.array(4.0), "1", "b")]
    c = Control(ps, {"a": np.array([1.5, 1.5]), "b": np.array(4.0)})
    v = np.array([0.2, -0.4, 1.0])
    p = c.unpack(v)
    np.testing.assert_allclose(p["a"], [1.6, 1.3])
    assert p["b"].shape == () and float(p["b"]) == 5.0
    np.testing.assert_allclose(c.pack(p), v)
    assert c.bounds() == [(-3.0, 3.0), (-3.0, 3.0), (None, None)]
    np.testing.assert_allclose(c.gradient({"a": np.array([1.0, 2.0]), "b": np.array(3.0)}),
                               [0.5, 1.0, 3.0])


def test_a_model_must_name_its_arrays_like_the_kernel_arguments():
    from simcore.models.seidel import Seidel

    class Misnamed(Seidel):
        name = "misnamed"

        def variables(self):
            return [Variable("B", ("y", "x"), units="1", long_name="b")]

    with pytest.raises(ModelError, match="'B' is not an argument of kernel seidel2d"):
        Misnamed()


def test_a_parameter_with_the_wrong_shape_is_refused():
    from simcore.models.seidel import Seidel

    class Wrong(Seidel):
        name = "wrong"

        def dims(self):
            return [*super().dims()[:2], Dim("di", 2), Dim("dj", 3)]

    with pytest.raises(ModelError, match="shape"):
        Wrong()


def test_two_models_cannot_share_a_name():
    from simcore.models.seidel import Seidel

    class Other(Model):
        name = "seidel"

    with pytest.raises(ModelError, match="two models named 'seidel'"):
        simcore.register(Other)
    assert simcore.model_class("seidel") is Seidel


def test_a_model_file_imported_under_two_names_is_refused():
    """``models.seidel`` next to ``simcore.models.seidel`` would register a second class
    with its own kernels; the tasks would run the one, a caller inspect the other."""
    from simcore.models.seidel import Seidel
    twin = type(Seidel.__name__, (Seidel,), {"__module__": "models.seidel",
                                              "__qualname__": Seidel.__qualname__})
    with pytest.raises(ModelError, match="imported under two names"):
        simcore.register(twin)
    assert simcore.model_class("seidel") is Seidel


# ---- a model declared here, with a scalar parameter, run without any YAML -------------------
from dataclasses import dataclass  # noqa: E402

from adjoint import float64, kernel, symbol  # noqa: E402
from simcore.model import field_of  # noqa: E402
from simcore.schema import ObsConfig  # noqa: E402

N = symbol("N")


@kernel
def rod_steps(u: float64[N], work: float64[N], D: float, nsteps: int) -> float:
    for t in range(nsteps):
        for i in range(1, N - 1):
            work[i] = u[i] + D * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        for i in range(1, N - 1):
            u[i] = work[i]
    return np.sum(u)


@dataclass
class RodConfig:
    name: str = "rod"
    n: int = 30
    steps: int = 40
    D: float = 0.2
    obs: ObsConfig = field_of(ObsConfig(every_k=3, every_m=10, sigma=0.01, noise=False))


class Rod(Model):
    name, Config, kernel = "rod", RodConfig, rod_steps

    def dims(self):
        return [Dim("x", self.cfg.n, units="m", long_name="position", axis="X")]

    def variables(self):
        return [Variable("u", ("x",), units="K", long_name="temperature")]

    def parameters(self):
        return [Parameter("D", (), self.cfg.D, units="1", long_name="diffusion number",
                          bounds=(0.0, 0.5), prior_std=None)]        # no prior term

    def initial_state(self):
        x = np.linspace(0.0, 1.0, self.cfg.n)
        return {"u": np.sin(np.pi * x) + 0.3 * np.sin(5 * np.pi * x)}

    def kernel_args(self, state, params, nsteps):
        return (state["u"], np.zeros_like(state["u"]), float(params["D"]), nsteps)


@pytest.mark.parametrize("task", ["forward", "calibrate", "gradcheck"])
def test_a_model_with_a_scalar_parameter_runs_every_task(tmp_path, monkeypatch, task):
    """The README's recipe end to end, with a structured config built in Python."""
    import xarray as xr
    from omegaconf import OmegaConf
    from simcore import registry
    from simcore.schema import TASK_SCHEMAS, Config
    from simcore.tasks import run_task
    monkeypatch.setitem(registry._MODELS, "rod", Rod)
    cfg = OmegaConf.structured(Config(model=RodConfig(), task=TASK_SCHEMAS[task]()))
    summary = run_task(cfg, tmp_path)
    if task == "calibrate":
        assert summary["relative_error"] < 1e-6 and summary["params_final"]["D"] > 0
        with xr.open_dataset(tmp_path / "calibration.nc") as ds:
            assert ds.D.dims == ("iteration",) and ds.D.attrs["units"] == "1"
    assert summary.get("passed", True)
