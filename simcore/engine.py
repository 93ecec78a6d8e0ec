"""Apply the ``engine`` and ``device`` config groups to the engine's options."""
import dataclasses
import logging
import os
from contextlib import contextmanager

import adjoint

log = logging.getLogger(__name__)

PASSED_ON = ("cache_dir", "cflags", "compiler", "memory_budget", "reassociate")  # unset: default


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


@contextmanager
def engine_options(engine_cfg, device_cfg):
    """Configure the engine for one task run; the previous options come back afterwards.

    ``threads`` sets OMP_NUM_THREADS; a setting this engine build does not know yet is
    logged and skipped rather than failing the run."""
    saved = dataclasses.replace(adjoint.options)
    known = {f.name for f in dataclasses.fields(adjoint.options)}
    changes = settings(engine_cfg, device_cfg)
    for key in sorted(set(changes) - known):
        log.warning("engine.%s=%s: this engine build has no such option; ignored", key,
                    changes.pop(key))
    threads = int(engine_cfg.threads or 0)
    saved_threads = os.environ.get("OMP_NUM_THREADS")
    try:
        adjoint.configure(**changes)
        if threads > 0:
            os.environ["OMP_NUM_THREADS"] = str(threads)
        yield adjoint.options
    finally:
        for f in dataclasses.fields(saved):
            setattr(adjoint.options, f.name, getattr(saved, f.name))
        if threads > 0:
            if saved_threads is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = saved_threads


def describe() -> dict:
    """The engine options in effect (for summaries and provenance)."""
    return {f.name: getattr(adjoint.options, f.name) for f in dataclasses.fields(adjoint.options)}
