"""Apply the ``engine`` and ``device`` config groups to the engine's options, per task run.

Every setting is set for the run and restored afterwards, so the jobs of one multirun
process each get their own (``engine.threads=2,1`` runs the second job on one thread).
"""
import dataclasses
import logging
import os
from contextlib import contextmanager

import numpy as np

import adjoint

log = logging.getLogger(__name__)

PASSED_ON = ("cache_dir", "cflags", "compiler", "memory_budget", "reassociate",  # unset: default
             "vector_math")
# State points below which one thread is faster: a parallel loop over a few thousand
# points costs more in OpenMP's fork and barrier than it saves (heat 128 x 128 on a busy
# 2-core node: 10x slower on 2 threads).
SMALL = 1 << 16


def settings(engine_cfg, device_cfg) -> dict:
    """The ``adjoint.configure`` changes the config asks for (unset values: engine default)."""
    changes = {"device": device_cfg.name}
    for key in PASSED_ON:
        value = engine_cfg[key]
        if value is None or value == "":
            continue
        if key == "cflags":
            value = tuple(value)
        elif key == "cache_dir":
            value = os.path.expanduser(str(value))
        changes[key] = value
    return changes


def available_cpus(cpus=None, environ=None) -> int:
    """The CPUs this process may use: its affinity mask, within a Slurm allocation
    (``SLURM_CPUS_PER_TASK``) and the launcher's ``cpus_per_task`` (``cpus``)."""
    env = os.environ if environ is None else environ
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    for limit in (env.get("SLURM_CPUS_PER_TASK"), cpus):
        try:
            n = min(n, int(limit)) if limit else n
        except ValueError:
            pass
    return max(n, 1)


def default_threads(model=None, cpus=None, load=None) -> int:
    """``engine.threads=0``: never slower than one thread. One for small models; else the
    available CPUs less those the 1-minute load average says other processes keep busy
    (OpenMP threads sharing a core with another process wait on each other at every
    barrier: heat 512 x 512 ran 3x slower on 2 threads than on 1 on a loaded node)."""
    if model is not None and _points(model) < SMALL:
        return 1
    n = available_cpus(cpus)
    if load is None:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return int(max(1, min(n, n + 1 - load)))


def _points(model) -> int:
    return sum(int(np.prod(model.shape(v.dims), dtype=np.int64)) for v in model.variables())


@contextmanager
def engine_options(engine_cfg, device_cfg, model=None, cpus=None):
    """Configure the engine for one task run; the previous options come back afterwards.

    A setting this engine build does not know yet is logged and skipped rather than
    failing the run."""
    saved = dataclasses.replace(adjoint.options)
    known = {f.name for f in dataclasses.fields(adjoint.options)}
    changes = settings(engine_cfg, device_cfg)
    changes["threads"] = int(engine_cfg.threads or 0) or default_threads(model, cpus)
    for key in sorted(set(changes) - known):
        log.warning("engine.%s=%s: this engine build has no such option; ignored", key,
                    changes.pop(key))
    try:
        adjoint.configure(**changes)
        yield adjoint.options
    finally:
        for f in dataclasses.fields(saved):
            setattr(adjoint.options, f.name, getattr(saved, f.name))


def describe() -> dict:
    """The engine options in effect (for summaries and provenance)."""
    return {f.name: getattr(adjoint.options, f.name) for f in dataclasses.fields(adjoint.options)}
