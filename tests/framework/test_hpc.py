"""Batch runs: checkpoints, resuming a killed calibration, Slurm ids in run directories,
task=compile filling the cache for nodes without a compiler, and a multirun through the
submitit launcher (skipped when hydra-submitit-launcher is not installed)."""
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr
from omegaconf import OmegaConf

from simcore.checkpoint import (Checkpoint, CheckpointError, fingerprint, read,
                                resume_requested)
from simcore.config import slurm_suffix
from simcore.tasks import run_task
from test_framework import tiny



def _have(module) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:                 # no hydra_plugins namespace at all
        return False


HAVE_SUBMITIT = _have("hydra_plugins.hydra_submitit_launcher")


def _env(repo_root, **extra):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(repo_root), os.environ.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"}
    env.pop("SLURM_RESTART_COUNT", None)
    return {**env, **extra}


# ---- the checkpoint API -------------------------------------------------------------------
def test_checkpoint_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(7)
    rng.random(5)
    ckpt = Checkpoint(tmp_path / "c", resume=True, key="abc")
    assert ckpt.load() is None                              # nothing saved: start over
    x = rng.standard_normal((3, 4))
    ckpt.save(4, {"x": x, "k": np.arange(3)}, {"history": [0.1 + 0.2, 1e-300]}, {"noise": rng})
    saved = ckpt.load()
    assert saved.step == 4 and np.array_equal(saved.arrays["x"], x)
    assert saved.arrays["k"].dtype == np.int64
    assert saved.meta == {"history": [0.1 + 0.2, 1e-300]}
    other = saved.restore_rng(np.random.default_rng(0), "noise")
    assert np.array_equal(other.random(4), rng.random(4))   # the stream continues
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["state.npz"]   # no temporaries
    assert Checkpoint(tmp_path / "c", resume=False).load() is None        # resume=false
    ckpt.finish()
    assert not (tmp_path / "c").exists()


def test_checkpoint_refuses_what_it_cannot_use(tmp_path):
    ckpt = Checkpoint(tmp_path / "c", resume=True)
    ckpt.save(0, {"x": np.zeros(2)})
    with pytest.raises(CheckpointError, match="dtype object"):
        ckpt.save(1, {"x": np.array([{}], dtype=object)})
    assert read(ckpt.path).step == 0                        # the old state is intact
    ckpt.path.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="resume=false"):
        ckpt.load()


def test_a_requeued_slurm_job_resumes_without_being_told(monkeypatch):
    cfg = tiny("seidel", "calibrate")
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert not resume_requested(cfg)
    assert resume_requested(tiny("seidel", "calibrate", "resume=true"))
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")          # set by Slurm on a requeue
    assert resume_requested(cfg)


def test_fingerprint_ignores_only_what_cannot_change_results():
    base = fingerprint(tiny("seidel", "calibrate"))
    assert fingerprint(tiny("seidel", "calibrate", "resume=true", "task.plot=false",
                            "task.log_every=5", "engine.cache_dir=/x")) == base
    assert fingerprint(tiny("seidel", "calibrate", "seed=1")) != base
    assert fingerprint(tiny("seidel", "calibrate", "model.obs.sigma=0.02")) != base


# ---- run directories -----------------------------------------------------------------------
def test_run_directories_carry_slurm_job_and_array_ids():
    assert slurm_suffix({}) == ""
    assert slurm_suffix({"SLURM_JOB_ID": "812"}) == "_j812"
    assert slurm_suffix({"SLURM_JOB_ID": "815", "SLURM_ARRAY_JOB_ID": "812",
                         "SLURM_ARRAY_TASK_ID": "3"}) == "_j812_3"
    assert slurm_suffix({"SLURM_JOB_ID": "9", "SLURM_NTASKS": "4",
                         "SLURM_PROCID": "2"}) == "_j9.2"
    from hydra import compose, initialize_config_dir
    from simcore.config import CONFIG_DIR, register_configs
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", ["model=seidel"], return_hydra_config=True)
    hydra = OmegaConf.to_container(cfg.hydra)
    assert hydra["run"]["dir"].endswith("_${run_id:}${slurm_suffix:}")
    assert hydra["sweep"]["subdir"].endswith("${slurm_suffix:}")
    assert "${hydra.job.num}" in hydra["sweep"]["subdir"]


@pytest.mark.skipif(not HAVE_SUBMITIT, reason="hydra-submitit-launcher not installed")
def test_slurm_launcher_config_composes():
    from hydra import compose, initialize_config_dir
    from simcore.config import CONFIG_DIR, register_configs
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", ["hydra/launcher=slurm", "hydra.launcher.partition=gpu"],
                      return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "gpu"
    for key in ("timeout_min", "cpus_per_task", "mem_gb", "gpus_per_node", "array_parallelism",
                "setup", "max_num_timeout"):
        assert key in launcher, key


# ---- resuming a killed calibration --------------------------------------------------------
def _checkpoint_step(root):
    for path in root.glob("*/state.npz"):
        try:
            return read(path).step
        except CheckpointError:
            return -1
    return -1


def test_calibration_killed_and_resumed_ends_like_an_uninterrupted_run(tmp_path, repo_root):
    """SIGKILL mid-run, resume=true: the same final parameters, iterations and history."""
    overrides = ["model=seidel", "task=calibrate", "task.plot=false", "engine.threads=1"]
    cmd = [sys.executable, str(repo_root / "run.py"), *overrides]
    env, ck = _env(repo_root), tmp_path / "ck"
    reference = subprocess.Popen(cmd + [f"checkpoint_dir={tmp_path}/ck-ref",
                                        f"hydra.run.dir={tmp_path}/ref"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    cmd.append(f"checkpoint_dir={ck}")
    killed = subprocess.Popen(cmd + [f"hydra.run.dir={tmp_path}/killed"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while _checkpoint_step(ck) < 5 and killed.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    step = _checkpoint_step(ck)
    assert killed.returncode == -signal.SIGKILL and step >= 5, \
        f"the run was not killed mid-way (rc={killed.returncode}, checkpoint step {step})"
    assert not (tmp_path / "killed" / "summary.json").exists()

    done = subprocess.run(cmd + ["resume=true", f"hydra.run.dir={tmp_path}/resumed"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out, _ = reference.communicate(timeout=300)
    assert reference.returncode == 0, out
    ref = json.loads((tmp_path / "ref" / "summary.json").read_text())
    got = json.loads((tmp_path / "resumed" / "summary.json").read_text())
    assert got["resumed_from_iteration"] >= step
    assert ref["resumed_from_iteration"] is None
    assert got["params_final"] == ref["params_final"]
    for key in ("iterations", "evaluations", "cost_final", "grad_norm_final", "message"):
        assert got[key] == ref[key], key
    with xr.open_dataset(tmp_path / "ref" / "calibration.nc") as a, \
            xr.open_dataset(tmp_path / "resumed" / "calibration.nc") as b:
        for name in ("cost", "grad_norm", "evaluations", "w"):
            assert np.array_equal(a[name].values, b[name].values), name
    assert not list(ck.glob("*/state.npz")), "a finished run leaves no checkpoint"


# ---- task=compile: jobs on nodes without a compiler only load ------------------------------
def test_compiled_cache_serves_a_node_without_a_compiler(tmp_path, repo_root):
    cache = tmp_path / "cache"
    base = [sys.executable, str(repo_root / "run.py"), "model=heat", *tiny_overrides("heat"),
            f"engine.cache_dir={cache}"]
    done = subprocess.run(base + ["task=compile", f"hydra.run.dir={tmp_path}/c"],
                          env=_env(repo_root), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    kinds = [m["kind"] for m in summary["modules"]]
    assert kinds == ["forward", "vjp", "jvp:parameters+state", "jvp:state"]
    assert all(m["compiled"] for m in summary["modules"])
    assert summary["cache_dir"] == str(cache)
    assert sorted(p.name for p in cache.glob("*.so")) == \
        sorted(m["module"] for m in summary["modules"]), summary["modules"]

    env = _env(repo_root, PATH="/nonexistent", PYTHONHASHSEED="12345")   # no cc on PATH
    done = subprocess.run(base + ["task=gradcheck", f"hydra.run.dir={tmp_path}/g"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "g" / "run.log").read_text()
    assert "compiled in" not in log and "gradcheck: PASSED" in log
    assert len(list(cache.glob("*.so"))) == 4


def test_compile_fills_the_configured_cache_even_after_other_runs(tmp_path):
    """In one process: the model's kernel was built into another cache before."""
    run_task(tiny("heat", "forward"), tmp_path / "f")
    cache = tmp_path / "cache"
    summary = run_task(tiny("heat", "compile", f"engine.cache_dir={cache}",
                            "task.tasks=[calibrate]"), tmp_path / "c")
    assert [m["kind"] for m in summary["modules"]] == ["forward", "vjp"]
    assert sorted(p.name for p in cache.glob("*.so")) == \
        sorted(m["module"] for m in summary["modules"])


def tiny_overrides(model):
    from test_framework import TINY
    return TINY[model]


# ---- a multirun through the submitit launcher ----------------------------------------------
@pytest.mark.skipif(not HAVE_SUBMITIT, reason="hydra-submitit-launcher not installed")
def test_multirun_of_four_calibrations_through_the_local_launcher(tmp_path, repo_root):
    sweep = tmp_path / "sweep"
    cmd = [sys.executable, str(repo_root / "run.py"), "-m", "hydra/launcher=local",
           "model=seidel", "task=calibrate", "seed=0,1,2,3", *tiny_overrides("seidel"),
           "task.plot=false", f"checkpoint_dir={tmp_path}/ck", f"hydra.sweep.dir={sweep}"]
    done = subprocess.run(cmd, env=_env(repo_root), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = sorted(p.parent for p in sweep.glob("*/summary.json"))
    assert len(runs) == 4 and len({p.name for p in runs}) == 4, runs
    seeds = sorted(json.loads((p / "summary.json").read_text())["seed"] for p in runs)
    assert seeds == [0, 1, 2, 3]
    assert all((p / "calibration.nc").is_file() and (p / ".hydra").is_dir() for p in runs)

    sys.path.insert(0, str(repo_root / "experiments"))
    try:
        from gather_sweep import gather
    finally:
        sys.path.pop(0)
    ds = gather(sweep)
    assert ds.sizes["run"] == 4 and sorted(ds["seed"].values.tolist()) == [0, 1, 2, 3]
    assert np.all(ds["relative_error"].values < ds["relative_error_initial"].values)
