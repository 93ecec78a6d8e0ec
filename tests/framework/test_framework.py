"""Configuration: every model x task composes, schemas catch misspellings, names resolve.

``TINY`` holds each registered model's overrides for a run of well under a second (its
``Model.tiny``); the task and model tests import it from here, so every test over
``MODELS`` covers a new model without an edit here.
"""
import copy
import os
import subprocess
import sys
import warnings
from dataclasses import asdict

import pytest
from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

import simcore
from simcore.config import CONFIG_DIR, RUN_ID, compose
from simcore.errors import ConfigError, UnknownModelError
from simcore.schema import TASK_SCHEMAS, runs_on

MODELS = simcore.known_models()
TINY = {name: [f"model.{k}={v}" for k, v in simcore.model_class(name).tiny.items()]
        for name in MODELS}
TINY_TASK = {"assimilate": ["task.cycles=2", "task.burn_in_time=0"],    # per task, for every model
             "train_closure": ["task.train_time=0.5", "task.test_time=0.5", "task.hidden=4",
                               "task.offline_iters=3", "task.online_iters=3", "task.batch=4",
                               "task.rollout=3", "task.forecasts=3", "task.forecast_time=0.1",
                               "task.leads=[0.05,0.1]", "task.acf_time=0.1", "task.bins=10"]}
TASKS = sorted(TASK_SCHEMAS)
RUNS = [(m, t) for t in TASKS for m in MODELS if runs_on(t, m)]   # every model a task runs on


def tiny(model, task, *extra):
    return compose([f"model={model}", f"task={task}", *TINY[model],
                    *TINY_TASK.get(task, []), *extra])


@pytest.mark.parametrize("model", MODELS)
def test_every_model_declares_tiny_settings(model):
    """The tests run every task on every model with them: a model must say how to be small."""
    assert TINY[model], f"model {model!r} declares no `tiny` config values"


@pytest.mark.parametrize("model, task", RUNS)
def test_every_model_and_task_compose(model, task):
    cfg = tiny(model, task)
    assert cfg.model.name == model and cfg.task.name == task
    assert cfg.device.name == "cpu" and cfg.seed == 0
    assert set(cfg.engine) == {"memory_budget", "threads", "cache_dir", "cflags", "compiler",
                               "reassociate", "vector_math"}
    m = simcore.get_model(model, cfg.model)                  # the config builds the model
    assert m.steps == cfg.model.steps


@pytest.mark.parametrize("model", MODELS)
def test_a_model_without_yaml_is_its_config_dataclass(model):
    """No configs/model/<name>.yaml restates a dataclass: ``model=<name>`` is its defaults."""
    assert not os.path.exists(os.path.join(CONFIG_DIR, "model", f"{model}.yaml"))
    cfg = compose([f"model={model}"])
    assert OmegaConf.to_container(cfg.model) == asdict(simcore.model_class(model).Config())
    assert OmegaConf.get_type(cfg.model) is simcore.model_class(model).Config


@pytest.fixture
def fresh_model_group(monkeypatch):
    """Hydra's ConfigStore without the model defaults stored so far (as in a new
    process), restored after the test."""
    store = ConfigStore.instance()
    monkeypatch.setattr(store, "repo", copy.deepcopy(store.repo))
    store.repo.pop("model", None)


def test_a_model_yaml_sets_only_what_differs(tmp_path, fresh_model_group):
    """configs/model/<name>.yaml extends the schema: its values, the dataclass's others;
    checked like the defaults, and without Hydra's deprecated schema matching."""
    configs = tmp_path / "configs"
    (configs / "model").mkdir(parents=True)
    for item in os.listdir(CONFIG_DIR):
        os.symlink(os.path.join(CONFIG_DIR, item), configs / item)
    (configs / "model" / "lorenz96.yaml").write_text(
        "defaults:\n  - /schema/model/lorenz96@_here_\n  - _self_\n\nn: 36\n"
        "obs: {every_m: 2}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = compose(["model=lorenz96"], config_dir=str(configs))
    expected = asdict(simcore.model_class("lorenz96").Config())
    expected["n"], expected["obs"]["every_m"] = 36, 2
    assert OmegaConf.to_container(cfg.model) == expected
    with pytest.raises(ConfigCompositionException) as err:
        compose(["model=lorenz96", "model.nn=3"], config_dir=str(configs))
    assert "Key 'nn' not in 'Lorenz96Config'" in str(err.value.__cause__)


@pytest.mark.parametrize("task", TASKS)
def test_task_yaml_defaults_equal_the_schema_defaults(task):
    cfg = compose([f"task={task}"])
    assert OmegaConf.to_container(cfg.task) == asdict(TASK_SCHEMAS[task]())


@pytest.mark.parametrize("override, where", [("model.nn=3", "SeidelConfig"),
                                             ("task.maxiter=3", "CalibrateConfig"),
                                             ("model.obs.sigmaa=1", "ObsConfig"),
                                             ("engine.thread=2", "EngineConfig"),
                                             ("sed=3", "Config")])
def test_misspelt_key_fails_at_once(override, where):
    with pytest.raises(ConfigCompositionException) as err:
        compose(["model=seidel", "task=calibrate", override])
    key = override.split("=")[0].split(".")[-1]
    assert f"Key '{key}' not in '{where}'" in str(err.value.__cause__ or err.value)


def test_wrong_type_fails_at_once():
    with pytest.raises(ConfigCompositionException) as err:
        compose(["model=seidel", "model.n=big"])
    assert "model.n" in str(err.value.__cause__ or err.value)


def test_forced_unknown_key_fails_before_running(tmp_path):
    """``+model.nn=3`` gets past Hydra's struct mode; run_task still refuses it."""
    from simcore.tasks import run_task
    cfg = compose(["model=seidel", "+model.nn=3", "+model.obs.sigmaa=1"])
    with pytest.raises(ConfigError) as err:
        run_task(cfg, tmp_path)
    assert sorted(str(err.value).splitlines()) == [
        "model.nn: no such key in model; did you mean model.n?",
        "model.obs.sigmaa: no such key in model.obs; did you mean model.obs.sigma?"]
    assert not list(tmp_path.iterdir())


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(UnknownModelError) as err:
        simcore.get_model("seidell")
    assert str(err.value) == f"unknown model 'seidell'; known models: {', '.join(MODELS)}"
    with pytest.raises(MissingConfigException) as err:
        compose(["model=seidell"])
    options = str(err.value).split("Available options in 'model':\n")[1]
    assert options.split("Config search path")[0] == "".join(f"\t{m}\n" for m in MODELS)


def test_unknown_task_name_is_refused(tmp_path):
    from simcore.tasks import run_task
    cfg = tiny("seidel", "forward")
    cfg.task.name = "no_such_task"
    with pytest.raises(ConfigError, match="unknown task 'no_such_task'; known tasks: "
                                          ".*calibrate, compile, forward, gradcheck"):
        run_task(cfg, tmp_path)


def test_run_dir_has_a_per_process_suffix():
    """Two jobs started in the same second differ by pid and a random suffix."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from simcore.config import CONFIG_DIR, register_configs
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = hydra_compose("config", ["model=heat", "task=gradcheck"],
                            return_hydra_config=True)
    assert cfg.hydra.job.chdir is False
    pattern = OmegaConf.to_container(cfg.hydra.run)["dir"]       # unresolved
    assert "${run_id:}" in pattern and "${now:%H-%M-%S}" in pattern
    pid, suffix = RUN_ID.split("-")
    assert pid == str(os.getpid()) and len(suffix) == 4
    assert OmegaConf.create({"d": "${run_id:}"}).d == RUN_ID


def test_run_py_end_to_end(tmp_path, repo_root):
    """run.py in a fresh process: writes into its own run dir, never into the cwd."""
    cmd = [sys.executable, str(repo_root / "run.py"), "model=seidel", "task=gradcheck",
           *TINY["seidel"], f"hydra.run.dir={tmp_path}/run"]
    work = tmp_path / "cwd"
    work.mkdir()
    done = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(repo_root)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gradcheck: PASSED" in done.stdout + done.stderr
    assert (tmp_path / "run" / "summary.json").is_file()
    assert (tmp_path / "run" / ".hydra" / "config.yaml").is_file()
    assert not list(work.iterdir())


def test_run_py_exits_non_zero_when_a_check_fails(tmp_path, monkeypatch, repo_root):
    import simcore.tasks
    sys.path.insert(0, str(repo_root))
    import run
    monkeypatch.setattr(simcore.tasks, "run_task", lambda cfg, outdir, *a: {"passed": False})
    monkeypatch.setattr(sys, "argv", ["run.py", "task=gradcheck",
                                      f"hydra.run.dir={tmp_path}/run"])
    with pytest.raises(SystemExit) as exit_:
        run.main()
    assert exit_.value.code == 1
    log = (tmp_path / "run" / "run.log").read_text().splitlines()
    assert log[-1].endswith("[simcore][ERROR] - failed: gradcheck: its check FAILED "
                            "(summary.json)")


def test_the_install_puts_only_adjoint_and_simcore_at_the_top(repo_root):
    """pyproject's package list and package data, as setuptools reads them: models/ and
    configs/ install inside simcore (through the links simcore/models, simcore/configs),
    nothing named ``models`` lands in site-packages, and every config file goes along."""
    import glob
    tomllib = pytest.importorskip("tomllib")
    setuptools = pytest.importorskip("setuptools")
    tool = tomllib.loads((repo_root / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = setuptools.find_packages(str(repo_root), include=tool["packages"]["find"]["include"])
    assert {p.split(".")[0] for p in found} == {"adjoint", "simcore"}
    assert "simcore.models" in found and "simcore.tasks" in found
    assert "adjoint.corpus" in found        # the benchmark kernels ship with the engine
    data = {os.path.relpath(f, repo_root / "simcore")
            for pattern in tool["package-data"]["simcore"]
            for f in glob.glob(str(repo_root / "simcore" / pattern), recursive=True)}
    configs = {os.path.relpath(f, repo_root)
               for f in glob.glob(str(repo_root / "configs" / "**" / "*"), recursive=True)
               if os.path.isfile(f)}
    assert configs and data == configs
    assert simcore.model_class("seidel").__module__ == "simcore.models.seidel"
    assert CONFIG_DIR == os.path.join(os.path.dirname(simcore.__file__), "configs")
