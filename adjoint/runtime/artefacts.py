"""Pipeline artefacts kept on disk beside the compiled modules, so that a process
that finds a kernel already built skips parsing, differentiation and code generation.

An artefact (a frozen dataclass with a ``module`` field) is pickled without its loaded
module, under a key covering everything it was derived from plus the engine version
and the build options; the shared library is loaded again from its path. Files are
written atomically into the per-user cache directory; a damaged or stale entry is
rebuilt.
"""
import dataclasses
import functools
import hashlib
import logging
import os
import pickle
import tempfile
from pathlib import Path

import sympy as sp

from ..options import options
from .blas import blas
from .build import ENGINE_VERSION, cache_dir
from .module import load

log = logging.getLogger("adjoint.runtime")


@functools.lru_cache(maxsize=None)
def _engine_code():
    """A digest of the engine's own source: artefacts of an edited engine are not reused."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def digest(*parts):
    h = hashlib.sha256()
    for part in parts + (ENGINE_VERSION, _engine_code(), options.compiler, tuple(options.cflags), blas()) + (
            (options.device, options.nvcc, tuple(options.cuda_flags), options.cuda_arch,
             options.cuda_emulation) if options.device != "cpu" else ()):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def cached(key, compute):
    """``compute()``'s artefact, from disk when an entry for ``key`` exists."""
    path = cache_dir() / f"{key}.artefact"
    try:
        with sp.evaluate(False):    # stored canonical: rebuilding need not re-simplify
            artefact, so, counts = pickle.loads(path.read_bytes())
        if so.exists():
            log.debug("artefact %s loaded from cache", key)
            return dataclasses.replace(artefact, module=load(so, counts))
    except (OSError, EOFError, pickle.PickleError, AttributeError, ImportError, ValueError):
        pass
    artefact = compute()
    data = pickle.dumps((dataclasses.replace(artefact, module=None), artefact.module.path,
                         artefact.module.counts))
    fd, tmp = tempfile.mkstemp(suffix=".artefact", dir=path.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)
    return artefact
