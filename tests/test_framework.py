"""Configuration: every model x task composes, schemas catch misspellings, names resolve.

``TINY`` holds the overrides that make each model run in well under a second; the task
and model tests import it from here.
"""
import os
import subprocess
import sys
from dataclasses import asdict

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

import simcore
from simcore.config import RUN_ID, compose
from simcore.errors import ConfigError, UnknownModelError
from simcore.schema import TASK_SCHEMAS

TINY = {
    "seidel": ["model.n=8", "model.steps=4"],
    "heat": ["model.ny=10", "model.nx=12", "model.steps=24", "model.obs.every_m=6",
             "model.obs.every_k=2"],
    "lorenz96": ["model.steps=8", "model.spinup=200"],
}
TINY_TASK = {"assimilate": ["task.cycles=2", "task.burn_in=0"]}    # per task, for every model
MODELS = sorted(TINY)
TASKS = sorted(TASK_SCHEMAS)


def tiny(model, task, *extra):
    return compose([f"model={model}", f"task={task}", *TINY[model],
                    *TINY_TASK.get(task, []), *extra])


def test_every_model_has_tiny_overrides():
    assert simcore.known_models() == MODELS


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("task", TASKS)
def test_every_model_and_task_compose(model, task):
    cfg = tiny(model, task)
    assert cfg.model.name == model and cfg.task.name == task
    assert cfg.device.name == "cpu" and cfg.seed == 0
    assert set(cfg.engine) == {"memory_budget", "threads", "cache_dir", "cflags", "compiler",
                               "reassociate"}
    m = simcore.get_model(model, cfg.model)                  # the config builds the model
    assert m.steps == cfg.model.steps


@pytest.mark.parametrize("model", MODELS)
def test_yaml_defaults_equal_the_schema_defaults(model):
    """configs/model/<name>.yaml restates the Config dataclass: they must not drift."""
    cfg = compose([f"model={model}"])
    schema = simcore.model_class(model).Config()
    assert OmegaConf.to_container(cfg.model) == asdict(schema)


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
    cfg = compose(["model=seidel", "+model.nn=3", "+model.obs.foo=1"])
    with pytest.raises(ConfigError, match=r"\['model.nn', 'model.obs.foo'\]"):
        run_task(cfg, tmp_path)
    assert not list(tmp_path.iterdir())


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(UnknownModelError) as err:
        simcore.get_model("seidell")
    assert str(err.value) == "unknown model 'seidell'; known models: heat, lorenz96, seidel"
    with pytest.raises(MissingConfigException) as err:
        compose(["model=seidell"])
    message = str(err.value)
    assert "\theat\n\tlorenz96\n\tseidel\n" in message and "seidel_schema" not in message


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
    monkeypatch.setattr(simcore.tasks, "run_task", lambda cfg, outdir: {"passed": False})
    monkeypatch.setattr(sys, "argv", ["run.py", "task=gradcheck",
                                      f"hydra.run.dir={tmp_path}/run"])
    with pytest.raises(SystemExit) as exit_:
        run.main()
    assert exit_.value.code == 1
