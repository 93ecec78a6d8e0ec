"""Posterior uncertainty of calibrated parameters (simcore/posterior.py): the Gauss-Newton
Hessian against central differences of the adjoint gradient (where the residuals vanish,
the Gauss-Newton Hessian is the Hessian), its symmetry, Lanczos against the dense
inverse, and what calibrate writes."""
import json

import numpy as np
import pytest
import xarray as xr

import simcore
from simcore.posterior import Posterior
from simcore.tasks import run_task
from simcore.twin import Observations, Twin
from test_framework import tiny


def noise_free(name):
    cfg = tiny(name, "calibrate", "model.obs.noise=false")
    model = simcore.get_model(name, cfg.model)
    return model, Twin(model, Observations.from_config(cfg.model.obs))


@pytest.mark.parametrize("name", ["lorenz96", "seidel"])
def test_gauss_newton_hessian_is_the_hessian_where_the_residuals_vanish(name):
    model, twin = noise_free(name)
    post = Posterior(twin, model.truth())
    rng = np.random.default_rng(0)
    x = rng.standard_normal(post.size)
    grad = lambda p: post.pack(twin.cost_and_grad(post.unpack(p))[2])     # noqa: E731
    p0, h = post.pack(model.truth()), 1e-5
    fd = (grad(p0 + h * x) - grad(p0 - h * x)) / (2 * h)
    Ax = post.data_hessian(x) + post.prior_hessian() @ x
    np.testing.assert_allclose(Ax, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
    y = rng.standard_normal(post.size)
    lhs, rhs = y @ post.data_hessian(x), x @ post.data_hessian(y)
    assert abs(lhs - rhs) <= 1e-12 * abs(lhs)


def test_lanczos_converges_to_the_dense_inverse_from_above():
    model, twin = noise_free("heat")                      # 120 diffusivities, with smoothness
    post = Posterior(twin, model.truth())
    exact = post.std(exact=10 ** 6)
    few = post.std(exact=0, rank=10)
    many = post.std(exact=0, rank=80)
    assert np.all(few >= exact * (1 - 1e-12)) and np.max(few / exact - 1) > 1e-4
    np.testing.assert_allclose(many, exact, rtol=1e-10)


def test_calibrate_reports_the_posterior_std(tmp_path):
    s = run_task(tiny("lorenz96", "calibrate", f"checkpoint_dir={tmp_path}/ck"), tmp_path)
    std = s["posterior_std"]["F"]
    assert 0 < std < 1.0 and s["posterior_method"] == "dense"
    assert json.loads((tmp_path / "summary.json").read_text())["posterior_std"]["F"] == std
    with xr.open_dataset(tmp_path / "calibration.nc") as ds:
        assert float(ds.F_posterior_std) == std and ds.F_posterior_std.attrs["units"] == "1"
    none = run_task(tiny("lorenz96", "calibrate", f"checkpoint_dir={tmp_path}/ck",
                         "task.posterior_rank=0"), tmp_path / "none")
    assert "posterior_std" not in none
