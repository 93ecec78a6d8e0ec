"""Compile C into a shared library, cached by content and safe under concurrent jobs.

Key = sha256(source, compiler identity, flags, host CPU, engine version). The
library is compiled under a temporary name and ``os.replace``d into place while
holding an exclusive lock on the key, so many processes asking for the same
kernel compile it once and all load a complete file.
"""
import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

from ..errors import CompileError
from ..options import options

ENGINE_VERSION = "0.1.0"
log = logging.getLogger("adjoint.runtime")


def cache_dir() -> Path:
    path = Path(options.cache_dir or os.environ.get("SIMCORE_CACHE_DIR") or
                Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "simcore")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=None)
def _compiler_identity(compiler):
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise CompileError(f"C compiler {compiler!r} not usable ({exc}); install gcc or set CC "
                           "/ engine.compiler") from None
    return out.stdout.splitlines()[0] if out.stdout else compiler


@functools.lru_cache(maxsize=None)
def _host():
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                model += line
    return platform.machine() + hashlib.sha256(model.encode()).hexdigest()[:16]


def module_key(source, compiler, flags):
    h = hashlib.sha256()
    for part in (source, _compiler_identity(compiler), " ".join(flags), _host(), ENGINE_VERSION):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def build_module(source: str, name: str = "kernel") -> Path:
    """Path of the shared library for ``source``, compiling it if not cached."""
    compiler, flags = options.compiler, tuple(options.cflags)
    key = module_key(source, compiler, flags)
    directory = cache_dir()
    target = directory / f"{key}.so"
    if target.exists():
        log.debug("%s: loaded from cache %s", name, target)
        return target
    with _locked(directory / f"{key}.lock"):
        if target.exists():
            return target
        _compile(source, compiler, flags, directory, key, target, name)
    return target


@contextlib.contextmanager
def _locked(path):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(source, compiler, flags, directory, key, target, name):
    start = time.perf_counter()
    c_file = directory / f"{key}.c"
    _write_atomic(c_file, source)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=directory)
    os.close(fd)
    cmd = [compiler, *flags, "-shared", "-fPIC", str(c_file), "-o", tmp, "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise CompileError(f"compiling {name} failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}\n"
                           f"the generated source is {c_file}")
    os.chmod(tmp, 0o755)
    os.replace(tmp, target)
    log.info("%s: compiled in %.2f s (%s)", name, time.perf_counter() - start, target.name)


def _write_atomic(path, text):
    fd, tmp = tempfile.mkstemp(suffix=path.suffix, dir=path.parent)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
