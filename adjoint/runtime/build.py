"""Compile C into a shared library, cached by content and safe under concurrent jobs.

Key = sha256(source, compiler identity, flags, host CPU, engine version); the host CPU
counts only when a flag says ``native`` (``-march=native``), so portable flags let a
login node fill the cache for compute nodes of another CPU. The library is compiled
under a temporary name and ``os.replace``d into place while holding an exclusive lock
on the key, so many processes asking for the same kernel compile it once and all load
a complete file (where the file system has no ``flock``, each compiles its own copy
and the rename still keeps every load complete).

Shared file systems: the cache folder is created mode 0700; one that other users can
write to (or that another user owns) is not trusted with code that will be loaded:
the cache goes into a private ``<folder>/<user>-<uid>`` inside it instead. A node with
no compiler looks modules up with the compiler identity recorded by the node that
filled the cache (``task=compile``), and only fails when a module is missing.

Damage: every file the cache loads (libraries, runtime/artefacts.py's pickles) has a
record beside it, ``<name>.sum`` with its name, size and sha256, written before the file
is put in place; a file that does not match its record (truncated, swapped, overwritten,
or without one) is never loaded: it is rebuilt. A library is hashed once per process.
Temporary files are named ``<name>.tmp-<host>-<pid>-...``, so a build removes those that
a killed process left (its pid gone from this host, or an hour old).
"""
import contextlib
import errno
import fcntl
import functools
import hashlib
import logging
import os
import platform
import re
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompileError
from ..options import options

ENGINE_VERSION = "0.1.0"
log = logging.getLogger("adjoint.runtime")


def cache_dir() -> Path:
    path = Path(options.cache_dir or os.environ.get("SIMCORE_CACHE_DIR") or
                Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "simcore")
    path = path.expanduser()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if _trusted(path):
        return path
    private = path / f"{_user()}-{os.getuid()}"
    private.mkdir(mode=0o700, exist_ok=True)
    if not _trusted(private):
        raise CompileError(f"compile cache {private} is writable by other users or not "
                           f"yours; remove it, or set SIMCORE_CACHE_DIR / engine.cache_dir to "
                           "a folder only you can write to")
    _note_once(f"compile cache {path} is writable by other users; using {private}")
    return private


def _trusted(path) -> bool:
    """Owned by this user and writable by nobody else (other users could plant code)."""
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _user():
    import getpass
    try:
        return "".join(c for c in getpass.getuser() if c.isalnum() or c in "-_.") or "user"
    except (KeyError, OSError):
        return "user"


@functools.lru_cache(maxsize=None)
def _note_once(message):
    log.info(message)


def _compiler_identity(compiler, full=False):
    try:
        return _run_version(compiler, True) if full else _run_version(compiler)
    except CompileError:
        recorded = _recorded_identity(compiler)
        if recorded is None:
            raise
        _note_once(f"C compiler {compiler!r} not found here; looking kernels up as compiled "
                   f"by {recorded!r} (recorded in the cache)")
        return recorded


@functools.lru_cache(maxsize=None)
def _run_version(compiler, full=False):
    try:
        out = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise CompileError(f"C compiler {compiler!r} not usable ({exc}); install gcc or set CC "
                           "/ engine.compiler, or fill the cache with task=compile on a node "
                           "that has one") from None
    if full:        # nvcc's first line names no version
        return " ".join(out.stdout.split()) or compiler
    return out.stdout.splitlines()[0] if out.stdout else compiler


def _identity_file(compiler):
    return cache_dir() / f"compiler-{hashlib.sha256(compiler.encode()).hexdigest()[:12]}.txt"


def _recorded_identity(compiler):
    try:
        return _identity_file(compiler).read_text().strip() or None
    except OSError:
        return None


def _record_identity(compiler, identity):
    if _recorded_identity(compiler) != identity:
        _write_atomic(_identity_file(compiler), identity + "\n")


@functools.lru_cache(maxsize=None)
def _host():
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                model += line
    return platform.machine() + hashlib.sha256(model.encode()).hexdigest()[:16]


def host(flags):
    """The machine a library built with ``flags`` runs on: the CPU model and its flags
    when one says ``native`` (``-march=native``), else the architecture."""
    return _host() if any("native" in f for f in flags) else platform.machine()


def module_key(source, compiler, flags, full_version=False):
    h = hashlib.sha256()
    for part in (source, _compiler_identity(compiler, full_version), " ".join(flags),
                 host(flags), ENGINE_VERSION):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


@dataclass(frozen=True)
class Toolchain:
    """How a generated source becomes a shared library (the C compiler by default;
    runtime/cuda.py has nvcc's): the source's suffix, the flags for position-independent
    code, the library's suffix, and whether the whole ``--version`` text identifies the
    compiler."""
    compiler: str
    flags: tuple
    suffix: str = ".c"
    pic: tuple = ("-fPIC",)
    library: str = ".so"
    full_version: bool = False


def build_module(source: str, name: str = "kernel", libraries=(), toolchain=None,
                 parts=None) -> Path:
    """Path of the shared library for ``source``, compiling it if not cached;
    ``libraries``: extra linker flags; ``toolchain``: a Toolchain (default: C);
    ``parts``: (head, pieces), the same source as pieces that each compile after the
    head: with several CPUs, groups of them are compiled in parallel and linked."""
    tc = toolchain or Toolchain(options.compiler, tuple(options.cflags))
    compiler, flags = tc.compiler, tuple(tc.flags) + tuple(libraries)
    key = module_key(source, compiler, flags, tc.full_version)
    directory = cache_dir()
    target = directory / f"{key}{tc.library}"
    if damage(target) is None:
        log.debug("%s: loaded from cache %s", name, target)
        return target
    with _locked(directory / f"{key}.lock"):
        why = damage(target)
        if why is None:
            return target
        if target.exists():     # removed only under the lock: a writer may be placing it
            log.warning("%s: cached module %s %s; compiling it again", name, target, why)
            target.unlink()
        _remove_stale(directory)
        start = time.perf_counter()
        c_file = directory / f"{key}{tc.suffix}"
        _write_atomic(c_file, source)
        units = _units(parts, _cpus()) if parts else []
        if len(units) > 1:
            _compile_parallel(units, compiler, flags, c_file, target, name, tc)
        else:
            _compile(c_file, compiler, flags, target, name, tc)
        _record_identity(compiler, _compiler_identity(compiler, tc.full_version))
        log.info("%s: compiled in %.2f s (%s)", name, time.perf_counter() - start, target.name)
    return target


def _cpus():
    try:
        return len(os.sched_getaffinity(0))     # a batch job's share of the node
    except AttributeError:
        return os.cpu_count() or 1


def _units(parts, n):
    """At most ``n`` translation units of about equal length: the head, then a group of
    pieces (longest first, each to the shortest group so far)."""
    head, pieces = parts
    groups = [[] for _ in range(min(n, len(pieces)))]
    for piece in sorted(pieces, key=len, reverse=True):
        min(groups, key=lambda g: sum(map(len, g))).append(piece)
    return [head + "".join(g) for g in groups if g]


_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.EBADF)


@contextlib.contextmanager
def _locked(path, shared=False):
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            locked = True
        except OSError as exc:
            if exc.errno not in _NO_LOCKS:
                raise
            _note_once(f"no file locks on {path.parent} ({exc.strerror}); concurrent jobs "
                       "may each compile a module (the rename keeps every load complete)")
            locked = False
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(c_file, compiler, flags, target, name, tc):
    compile_flags, link_flags = _split(flags)
    with _temporary(target) as tmp:
        _run_compiler([compiler, *compile_flags, "-shared", *tc.pic, str(c_file), "-o", tmp,
                       *link_flags, "-lm"], compiler, name, c_file)


def _compile_parallel(units, compiler, flags, c_file, target, name, tc):
    """Compile each unit to an object, all at once, then link them into ``target``."""
    compile_flags, link_flags = _split(flags)
    stem = target.with_suffix("")
    own = _temporary_prefix(stem.name)      # the process's own files
    files = [stem.with_name(f"{own}{k}{tc.suffix}") for k in range(len(units))]
    objects = [stem.with_name(f"{own}{k}.o") for k in range(len(units))]
    for path, unit in zip(files, units):
        _write_atomic(path, unit)
    try:
        procs = [_start([compiler, *compile_flags, "-c", *tc.pic, str(f), "-o", str(o)],
                        compiler, name) for f, o in zip(files, objects)]
        outcomes = [(proc, proc.communicate()[1]) for proc in procs]
        for k, ((proc, stderr), path) in enumerate(zip(outcomes, files)):
            if proc.returncode != 0:        # kept, under a name of its own, for the message
                kept = f"{stem}.{k}{tc.suffix}"
                os.replace(path, kept)
                proc.args = [kept if a == str(path) else a for a in proc.args]
                _check(proc, stderr.replace(str(path), kept), name, kept)
        with _temporary(target) as tmp:
            _run_compiler([compiler, *compile_flags, "-shared", *tc.pic, *map(str, objects),
                           "-o", tmp, *link_flags, "-lm"], compiler, name, c_file)
    finally:
        for path in files + objects:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _split(flags):
    """(compiler flags, linker flags)."""
    link = tuple(f for f in flags if f.startswith(("-l", "-L", "-Wl")))
    return tuple(f for f in flags if f not in link), link


@contextlib.contextmanager
def _temporary(target):
    """A temporary path next to ``target`` that becomes it, sealed, when the block
    succeeds."""
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(target.name), suffix=target.suffix,
                               dir=target.parent)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        seal(target, Path(tmp).read_bytes())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _run_compiler(cmd, compiler, name, source):
    proc = _start(cmd, compiler, name)
    _check(proc, proc.communicate()[1], name, source)


def _start(cmd, compiler, name):
    try:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        raise CompileError(f"{name} is not in the compile cache {cache_dir()} and the C "
                           f"compiler {compiler!r} cannot run here ({exc}); fill the cache "
                           "with task=compile (same engine settings) where a compiler is") \
            from None


def _check(proc, stderr, name, source):
    if proc.returncode != 0:
        raise CompileError(f"compiling {name} failed ({' '.join(proc.args)}):\n"
                           f"{stderr[-4000:]}\nthe generated source is {source}")


def _write_atomic(path, content):
    """Write ``content`` (text or bytes) to ``path`` through a temporary next to it."""
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(path.name), dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as handle:
            handle.write(content)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


# ---- sealed files: what the cache loads is what was written ---------------------------------
MISSING = "is missing"
_sound = {}         # path -> (inode, size, mtime) of a file that matched its record here


def write_sealed(path, data: bytes):
    """Write ``data`` to ``path`` with its record, under the file's lock (readers wait:
    they never see a new record with an old file)."""
    with _locked(path.with_name(path.name + ".lock")):
        seal(path, data)
        _write_atomic(path, data)


def read_sealed(path):
    """(``path``'s content, None) if it is what its record describes, else (None, why
    not); read under the file's lock, shared."""
    with _locked(path.with_name(path.name + ".lock"), shared=True):
        try:
            data = path.read_bytes()
        except OSError:
            return None, MISSING
        why = damage(path, data)
        return (data, None) if why is None else (None, why)


def seal(path, data: bytes):
    """Record ``path``'s name, size and sha256 for ``data``, its content to be; call it
    before the file is put in place: a reader that sees the new record with an older
    file finds them different and rebuilds, one that sees an older record with the new
    file does too (never a file accepted that its record does not describe)."""
    _write_atomic(_record(path), f"{path.name} {len(data)} {_sha256(data)}\n")


def damage(path, data=None):
    """None when ``path`` (whose content is ``data``, if read already) is the file its
    record describes; else why not ("is missing", "has no record", ...). A file is
    hashed once per process while its inode, size and time stay the same."""
    try:
        st = os.stat(path)
    except OSError:
        return MISSING
    signature = (st.st_ino, st.st_size, st.st_mtime_ns)
    if data is None and _sound.get(path) == signature:
        return None
    try:
        name, size, digest = _record(path).read_text().split()
        size = int(size)
    except (OSError, ValueError):
        return "has no record of what was written"
    if name != path.name:
        return f"is recorded as {name}"
    if size != st.st_size or data is not None and size != len(data):
        return f"has {st.st_size} bytes, not the {size} written"
    try:
        actual = _sha256(path.read_bytes() if data is None else data)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if actual != digest:
        return "differs from what was written (sha256)"
    _sound[path] = signature
    return None


def _record(path):
    return path.with_name(path.name + ".sum")


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


# ---- temporaries: named after their process, so that a later build finds stale ones --------
_OWNER = re.compile(r"\.tmp-([A-Za-z0-9]*)-(\d+)-")
_STALE_AGE = 3600.0         # seconds: a temporary of another host this old is a leftover


def _temporary_prefix(name):
    """``<name>.tmp-<host>-<pid>-``: how this process's temporaries start."""
    return f"{name}.tmp-{_hostname()}-{os.getpid()}-"


@functools.lru_cache(maxsize=None)
def _hostname():
    return "".join(c for c in socket.gethostname() if c.isalnum())[:40]


def _remove_stale(directory):
    """Remove the temporaries that killed builds left in ``directory``: their process is
    gone from this host, or they are an hour old (other hosts, on a shared cache)."""
    for path in directory.iterdir():
        owner = _OWNER.search(path.name)
        if owner is None:
            continue
        pid = int(owner.group(2))
        with contextlib.suppress(OSError):          # removed meanwhile by another build
            dead = owner.group(1) == _hostname() and pid != os.getpid() and not _alive(pid)
            if dead or time.time() - path.stat().st_mtime > _STALE_AGE:
                path.unlink()
                log.debug("removed %s, left by a build that did not finish", path.name)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:         # another user's process
        return True
    return True
