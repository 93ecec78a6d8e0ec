"""The configuration schema: structured configs registered in Hydra's ConfigStore.

``configs/`` holds the values (YAML), these dataclasses the types: every YAML file of a
group extends its schema (``defaults: [/schema/<group>/<name>@_here_, _self_]``), so a
misspelt key, in a file or on the command line, fails at once with Hydra's "Key '...' not
in ..." message. Each model's schema is its ``Config`` dataclass (``schema/model/<name>``),
and so are its values: ``model=<name>`` is the dataclass's defaults (``model/<name>`` in
the ConfigStore), unless ``configs/model/<name>.yaml`` exists: that file extends the
schema and sets only the values that differ.
"""
import os
import secrets

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from .registry import known_models, model_class
from .schema import TASK_SCHEMAS, Config, DeviceConfig, EngineConfig


# One id per process: run directories differ even for jobs started in the same second.
RUN_ID = f"{os.getpid()}-{secrets.token_hex(2)}"


def slurm_suffix(environ=None) -> str:
    """``_j<job>`` inside a Slurm job, ``_j<array job>_<task>`` in an array task, else "".

    Read when a run directory is named (in the job's own process, also for jobs the
    submitit launcher starts), so every job and array task has its ids in its path.
    A multi-task step (``srun -n 4``) adds ``.<rank>``."""
    env = os.environ if environ is None else environ
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        tag = f"_j{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    elif env.get("SLURM_JOB_ID"):
        tag = f"_j{env['SLURM_JOB_ID']}"
    else:
        return ""
    if int(env.get("SLURM_NTASKS", "1") or 1) > 1 and env.get("SLURM_PROCID"):
        tag += f".{env['SLURM_PROCID']}"
    return tag


# simcore/configs/: the repository's configs/, linked into the package so that an
# installed simcore has them too (see docs/architecture.md, "Packaging").
CONFIG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")


def register_configs(config_dir=CONFIG_DIR):
    """Store every schema in Hydra's ConfigStore and the ``${run_id:}`` resolver; and each
    model's defaults as ``model/<name>``, unless ``config_dir`` has its YAML file."""
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    for name, schema in TASK_SCHEMAS.items():
        cs.store(group="schema/task", name=name, node=schema)
    cs.store(group="schema/device", name="cpu", node=DeviceConfig)
    cs.store(group="schema/device", name="cuda", node=DeviceConfig)
    cs.store(group="schema/engine", name="engine", node=EngineConfig)
    for name in known_models():
        cs.store(group="schema/model", name=name, node=model_class(name).Config)
        # A file and a stored config of one name would be merged by Hydra's deprecated
        # automatic schema matching: where the file exists, it alone is model/<name>.
        if not os.path.exists(os.path.join(config_dir, "model", f"{name}.yaml")):
            cs.store(group="model", name=name, node=model_class(name).Config)
    if not OmegaConf.has_resolver("run_id"):
        OmegaConf.register_new_resolver("run_id", lambda: RUN_ID)
    if not OmegaConf.has_resolver("slurm_suffix"):
        OmegaConf.register_new_resolver("slurm_suffix", lambda: slurm_suffix())


def compose(overrides=(), config_name="config", config_dir=CONFIG_DIR):
    """The resolved config for ``overrides`` (as run.py would see it), without running."""
    from hydra import compose as hydra_compose, initialize_config_dir
    register_configs(config_dir)
    with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
        return hydra_compose(config_name=config_name, overrides=list(overrides))
