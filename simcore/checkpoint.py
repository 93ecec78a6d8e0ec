"""Resumable task state: one file per configuration, replaced atomically after each step.

A long task (calibrate's iterations, assimilate's cycles) saves what it needs to go on
after every step; a job killed at any point and started again with ``resume=true`` (or
requeued by Slurm, which sets ``SLURM_RESTART_COUNT``) loads it and continues::

    from simcore.checkpoint import open_checkpoint

    ckpt = open_checkpoint(run)                 # this run's checkpoint (not read yet)
    saved = ckpt.load()                         # None: start from the beginning
    if saved is not None:
        cycle = saved.step + 1                  # the step saved last was completed
        x = saved.arrays["x"]                   # float/int ndarrays, exactly as saved
        history = saved.meta["history"]         # JSON-able values, exactly as saved
        saved.restore_rng(rng, "noise")         # a np.random.Generator continues its stream
    for cycle in range(cycle, n_cycles):
        ...                                     # one cycle / iteration
        ckpt.save(cycle, arrays={"x": x}, meta={"history": history}, rngs={"noise": rng})
    ...                                         # write the outputs (simcore.io: atomic)
    ckpt.finish()                               # the run is complete: the file goes

Where: ``<checkpoint_dir>/<model>-<task>-<fingerprint>/state.npz`` (``checkpoint_dir``
defaults to ``checkpoints/`` beside ``outputs/``). The fingerprint hashes the resolved
configuration except what cannot change the results (``resume``, ``checkpoint_dir``,
``engine.cache_dir``, ``task.log_every``, ``task.plot``), so a restarted job finds its
state whatever its run directory, and different sweep points never share one. Two live
jobs of the *same* configuration write the same file; that is harmless, since a task
resumed from any of its checkpoints ends where the uninterrupted run ends.

Atomic: ``save`` writes a temporary file in the same folder, fsyncs it and
``os.replace``s it over ``state.npz``; a reader or a killed writer sees the old state or
the new one, never half of one. (The folder is not fsynced: a node crash may undo the
last rename, which leaves the previous, complete state: a little progress lost.) Arrays are stored losslessly (``.npz``, no pickle), the
meta data and RNG states as JSON.
"""
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from .errors import SimcoreError

log = logging.getLogger("simcore")

FORMAT = 1
FILE = "state.npz"
# Keys that cannot change a task's results: resuming across them is fine.
NEUTRAL = ("resume", "checkpoint_dir", "engine.cache_dir", "task.log_every", "task.plot",
           "task.checkpoint_every")


class CheckpointError(SimcoreError):
    """A checkpoint that cannot be used: written by another format, or unreadable.
    Delete the folder it names, or run with ``resume=false`` to start over."""


@dataclass
class Saved:
    """A loaded checkpoint: the last completed ``step``, its arrays, meta data, RNGs."""
    step: int
    arrays: dict
    meta: dict
    rngs: dict = field(default_factory=dict)
    path: Path = None

    def restore_rng(self, generator: np.random.Generator, name: str) -> np.random.Generator:
        """Set ``generator`` to the state saved under ``name`` (it continues that stream)."""
        if name not in self.rngs:
            raise CheckpointError(f"{self.path}: no RNG state {name!r} saved "
                                  f"(saved: {sorted(self.rngs)})")
        generator.bit_generator.state = self.rngs[name]
        return generator


def fingerprint(cfg) -> str:
    """sha256 (16 hex digits) of the resolved config without the ``NEUTRAL`` keys."""
    data = OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else dict(cfg)
    data.pop("hydra", None)
    for key in NEUTRAL:
        node, *rest = key.split(".")
        if rest and isinstance(data.get(node), dict):
            data[node] = {k: v for k, v in data[node].items() if k != rest[0]}
        elif not rest:
            data.pop(node, None)
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def resume_requested(cfg) -> bool:
    """``resume=true``, or a job Slurm has requeued (``SLURM_RESTART_COUNT`` > 0)."""
    if bool(cfg.get("resume", False)):
        return True
    try:
        return int(os.environ.get("SLURM_RESTART_COUNT", "0")) > 0
    except ValueError:
        return False


class Checkpoint:
    """The resumable state of one configuration's task, in ``folder/state.npz``."""

    def __init__(self, folder, resume: bool = False, key: str = ""):
        self.folder, self.resume, self.key = Path(folder), bool(resume), key
        self.path = self.folder / FILE

    def exists(self) -> bool:
        return self.path.exists()

    def load(self):
        """The saved state when resuming and one exists, else None (start over)."""
        if not self.path.exists():
            if self.resume:
                log.info("checkpoint: nothing saved in %s yet; starting from the beginning",
                         self.folder)
            return None
        if not self.resume:
            log.info("checkpoint: %s holds an unfinished run of this configuration; "
                     "starting over (resume=true would continue it)", self.folder)
            return None
        saved = read(self.path)
        if self.key and saved.meta.get("__key__", self.key) != self.key:
            raise CheckpointError(f"{self.path} belongs to another configuration "
                                  f"({saved.meta.get('__key__')}, not {self.key}); delete it")
        saved.meta.pop("__key__", None)
        log.info("checkpoint: resuming after step %d from %s", saved.step, self.path)
        return saved

    def save(self, step: int, arrays: dict = None, meta: dict = None, rngs: dict = None):
        """Replace the saved state by this one, atomically. ``arrays``: name -> ndarray;
        ``meta``: JSON-able values; ``rngs``: name -> np.random.Generator."""
        meta = dict(meta or {})
        if self.key:
            meta["__key__"] = self.key
        write(self.path, step, arrays or {}, meta, rngs or {})
        return self.path

    def finish(self):
        """The task completed and wrote its outputs: remove the checkpoint."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        for folder in (self.folder, self.folder.parent):     # only when empty
            try:
                folder.rmdir()
            except OSError:
                break


def open_checkpoint(run, name: str = None) -> Checkpoint:
    """The checkpoint of ``run`` (a ``simcore.tasks.Run``): folder from the config's
    fingerprint under ``run.cfg.checkpoint_dir``; loads only when resuming."""
    return checkpoint_for(run.cfg, name or f"{run.model.name}-{run.cfg.task.name}")


def checkpoint_for(cfg, label: str = None) -> Checkpoint:
    """The checkpoint of the configuration ``cfg`` (whether or not a run opened it)."""
    root = Path(os.path.expanduser(str(cfg.get("checkpoint_dir", "") or "checkpoints")))
    key = fingerprint(cfg)
    label = label or f"{cfg.model.name}-{cfg.task.name}"
    return Checkpoint(root / f"{label}-{key}", resume_requested(cfg), key)


def write(path, step: int, arrays: dict, meta: dict, rngs: dict):
    """``state.npz`` at ``path``: temporary file, fsync, ``os.replace``."""
    path = Path(path)
    header = {"format": FORMAT, "step": int(step), "meta": meta,
              "rngs": {k: g.bit_generator.state for k, g in rngs.items()}}
    payload = {f"a/{k}": np.asarray(v) for k, v in arrays.items()}
    for k, v in payload.items():
        if v.dtype == object:
            raise CheckpointError(f"checkpoint array {k[2:]!r} has dtype object; save "
                                  "numbers (ndarrays) in arrays and the rest in meta")
    payload["__header__"] = np.array(json.dumps(header, default=_json_default))
    for attempt in range(3):                # a finishing twin job may remove the folder
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            break
        except FileNotFoundError:
            if attempt == 2:
                raise
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read(path) -> Saved:
    """The ``Saved`` state in ``path``; ``CheckpointError`` when it cannot be used."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["__header__"]))
            arrays = {k[2:]: data[k] for k in data.files if k.startswith("a/")}
    except (OSError, ValueError, KeyError) as exc:
        raise CheckpointError(f"cannot read checkpoint {path} ({exc}); delete it or run "
                              "with resume=false") from None
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path} has checkpoint format {header.get('format')}, this "
                              f"simcore writes {FORMAT}; delete it or run with resume=false")
    return Saved(int(header["step"]), arrays, header["meta"], header.get("rngs", {}), path)


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"checkpoint meta value {x!r} is not JSON-able; put arrays in arrays=")
