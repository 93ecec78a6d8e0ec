"""Tasks: plain functions ``task(run) -> summary`` writing their outputs into ``run.outdir``.

``run_task(cfg, outdir)`` is what ``run.py`` calls with Hydra's run directory; tests call
it with a temporary one. A task whose check fails returns a summary with
``"passed": False``; ``run.py`` then exits non-zero.
"""
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from ..engine import describe, engine_options
from ..errors import ConfigError
from ..io import provenance
from ..registry import get_model, model_class
from ..schema import TASK_SCHEMAS, Config, unknown_keys

log = logging.getLogger("simcore")


@dataclass
class Run:
    """Everything a task needs: the resolved config, its model, where to write."""
    cfg: object
    outdir: Path
    argv: list = None
    model: object = None
    started: float = field(default_factory=time.perf_counter)

    def attrs(self, title: str) -> dict:
        attrs = provenance(OmegaConf.to_yaml(self.cfg, resolve=True), self.argv, title)
        attrs.update(model=self.model.name, task=self.cfg.task.name)
        return attrs

    def path(self, name) -> Path:
        return self.outdir / name

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def header(self) -> dict:
        """The fields every summary.json starts with."""
        return {"model": self.model.name, "task": self.cfg.task.name,
                "seed": int(self.cfg.seed), "engine": describe()}


def tasks() -> dict:
    from .assimilate import assimilate
    from .calibrate import calibrate
    from .compile import compile_kernels
    from .forward import forward
    from .gradcheck import gradcheck
    return {"forward": forward, "calibrate": calibrate, "gradcheck": gradcheck,
            "compile": compile_kernels, "assimilate": assimilate}


def check_keys(cfg):
    """Every key of ``cfg`` is declared by its schema (``+key=value`` can add others)."""
    bad = unknown_keys({k: None for k in cfg if k not in ("model", "task")}, Config)
    for k in ("device", "engine"):
        bad += unknown_keys(cfg[k], type(getattr(Config(), k)), f"{k}.")
    bad += unknown_keys(cfg.model, model_class(cfg.model.name).Config, "model.")
    bad += unknown_keys(cfg.task, TASK_SCHEMAS[cfg.task.name], "task.")
    if bad:
        raise ConfigError(f"unknown config keys {sorted(bad)}: misspelt? `python run.py --cfg job` "
                          "shows every key")


def run_task(cfg, outdir, argv=None) -> dict:
    """Run ``cfg.task.name`` on ``cfg.model`` writing into ``outdir``; returns the summary."""
    known = tasks()
    name = cfg.task.name
    if name not in known:
        raise ConfigError(f"unknown task {name!r}; known tasks: {', '.join(sorted(known))}")
    check_keys(cfg)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    with engine_options(cfg.engine, cfg.device):
        model = get_model(cfg.model.name, cfg.model, seed=int(cfg.seed))
        log.info("%s on model %s (%s); outputs in %s", name, model.name, model.description,
                 outdir)
        return known[name](Run(cfg, outdir, argv, model))
