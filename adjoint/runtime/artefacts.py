"""Pipeline artefacts kept on disk beside the compiled modules, so that a process
that finds a kernel already built skips parsing, differentiation and code generation.

An artefact (a frozen dataclass with a ``module`` field) is pickled without its loaded
module, under a key covering everything it was derived from plus the engine version
and the target (``options.Target``); the shared library is loaded again by its name
in the same folder. Files are written atomically into the per-user cache directory and
sealed as the libraries are (runtime/build.py): an entry that does not match its
record, does not unpickle to the expected type, or names a damaged library is rebuilt.
"""
import dataclasses
import functools
import hashlib
import logging
import pickle
from pathlib import Path

import sympy as sp

from .blas import blas
from .build import ENGINE_VERSION, MISSING, cache_dir, damage, host, read_sealed, write_sealed
from .cuda import LIBRARY_SUFFIX, load_cuda
from .module import load

log = logging.getLogger("adjoint.runtime")


@functools.lru_cache(maxsize=None)
def _engine_code():
    """A digest of the engine's own source: artefacts of an edited engine are not reused."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()


def digest(target, *parts):
    """The key of an artefact derived from ``parts`` for ``target``."""
    h = hashlib.sha256()
    # host(): with -march=native flags, the library of another CPU is another module
    for part in parts + (ENGINE_VERSION, _engine_code(), target, blas(), host(target.cflags)):
        h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def cached(key, kind, compute):
    """``compute()``'s artefact (of the type ``kind``), from disk when a sound entry for
    ``key`` exists."""
    path = cache_dir() / f"{key}.artefact"
    artefact = _load(path, kind)
    if artefact is not None:
        return artefact
    artefact = compute()
    data = pickle.dumps((dataclasses.replace(artefact, module=None),
                         Path(artefact.module.path).name, artefact.module.counts))
    write_sealed(path, data)
    return artefact


def variants(key):
    """The decisions (tuples of conditions on sizes, ``SDFG.decisions``) of the artefacts
    built from what ``key`` covers: which one a call's sizes select is known before
    lowering (``pipeline.lower_forward``)."""
    data, why = read_sealed(cache_dir() / f"{key}.variants")
    if why is not None:
        return []
    try:
        found = pickle.loads(data)
    except Exception:               # whatever it is, the lowering runs again
        return []
    return found if isinstance(found, list) else []


def add_variant(key, decisions):
    """Record ``decisions`` among ``key``'s variants (a variant lost to a concurrent
    writer is lowered again)."""
    found = variants(key)
    if decisions not in found:
        write_sealed(cache_dir() / f"{key}.variants", pickle.dumps(found + [decisions]))


def _load(path, kind):
    """The artefact at ``path`` with its module loaded, or None (missing or damaged)."""
    data, why = read_sealed(path)
    if why == MISSING:
        return None
    if why is None:
        try:
            with sp.evaluate(False):    # stored canonical: rebuilding need not re-simplify
                artefact, name, counts = pickle.loads(data)
        except Exception as exc:        # whatever it is, the entry is rebuilt
            why = f"cannot be unpickled ({type(exc).__name__}: {exc})"
        else:
            why = _mismatch(artefact, name, counts, kind, path.parent)
    if why is not None:
        log.warning("cached artefact %s %s; building it again", path, why)
        return None
    log.debug("artefact %s loaded from cache", path.name)
    loader = load_cuda if name.endswith(LIBRARY_SUFFIX) else load
    return dataclasses.replace(artefact, module=loader(path.parent / name, counts))


def _mismatch(artefact, name, counts, kind, folder):
    """Why an unpickled entry cannot be used, or None."""
    if type(artefact) is not kind or not isinstance(counts, int) or \
            not isinstance(name, str) or Path(name).name != name:   # a file in the folder
        return f"holds a {type(artefact).__name__}, not a {kind.__name__}"
    library = damage(folder / name)
    return None if library is None else f"names the module {name}, which {library}"
