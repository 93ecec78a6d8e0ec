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
from ..io import provenance
from ..validate import validate

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
    from .train_closure import train_closure
    return {"forward": forward, "calibrate": calibrate, "gradcheck": gradcheck,
            "compile": compile_kernels, "assimilate": assimilate, "train_closure": train_closure}


def run_task(cfg, outdir, argv=None, cpus=None) -> dict:
    """Run ``cfg.task.name`` on ``cfg.model`` writing into ``outdir``; returns the summary.
    Every value is checked first (simcore.validate): a ConfigError before anything runs.
    ``cpus``: what the launcher gives the job (engine.threads=0 uses at most these)."""
    model = validate(cfg)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    with engine_options(cfg.engine, cfg.device, model, cpus) as options:
        log.info("%s on model %s (%s), %d thread%s; outputs in %s", cfg.task.name, model.name,
                 model.description, options.threads, "s" if options.threads > 1 else "",
                 outdir)
        return tasks()[cfg.task.name](Run(cfg, outdir, argv, model))
