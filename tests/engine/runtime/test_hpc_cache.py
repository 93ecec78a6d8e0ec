"""The compile cache under HPC load: 16 processes ask for the same new kernel at once.

Each child imports the engine, waits at a file barrier until all 16 are ready, then
compiles (or loads) the forward and the gradient of a kernel no cache has seen, and
checks both against the kernel run as plain Python and central differences. The
engine logs every compile ("compiled in"); across all 16 processes each module must be
compiled exactly once, every process must get correct results, and the cache folder
the engine creates must be private (0700) and hold no temporary files afterwards.
"""
import errno
import os
import re
import stat
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from adjoint.errors import CompileError

PROCESSES = 16

CHILD = textwrap.dedent('''
    import logging, os, sys, time
    import numpy as np
    from adjoint import float64, grad, kernel, symbol

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(message)s")
    logging.getLogger("adjoint.runtime").setLevel(logging.INFO)
    N = symbol("N")

    @kernel
    def fresh(A: float64[N], c: float, T: int) -> float:
        for t in range(T):
            for i in range(1, N - 1):
                A[i] = A[i] + c * (A[i - 1] - 2.0 * A[i] + A[i + 1]) + SALT
        return np.sum(A * A)

    barrier, me, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    open(os.path.join(barrier, f"ready-{me}"), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(barrier)) < count:
        if time.time() > deadline:
            sys.exit("barrier timed out")
        time.sleep(0.002)
    A = np.random.default_rng(3).random(12)
    ref = A.copy()
    want = float(fresh.py_func(ref, 0.1, 4))
    got = fresh(A.copy(), 0.1, 4)
    assert abs(got - want) <= 1e-12 * abs(want), (got, want)
    g = grad(fresh, wrt="c")(A, 0.1, 4)
    f = lambda c: float(fresh.py_func(A.copy(), c, 4))
    fd = (f(0.1 + 1e-6) - f(0.1 - 1e-6)) / 2e-6
    assert abs(g - fd) <= 1e-6 * abs(fd), (g, fd)
    print("OK", me)
''')


def test_16_processes_on_an_empty_cache_compile_once(tmp_path, repo_root):
    cache = tmp_path / "shared" / "cache"            # does not exist: the engine makes it
    script = tmp_path / "child.py"
    salt = f"{1e-9 * (uuid.uuid4().int % 1000 + 1)!r}"
    script.write_text(CHILD.replace("SALT", salt))
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "SIMCORE_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(repo_root), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(script), str(barrier), str(k),
                               str(PROCESSES)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(PROCESSES)]
    start, results = time.time(), []
    try:
        for p in procs:
            out, err = p.communicate(timeout=max(1.0, 240 - (time.time() - start)))
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for k, (rc, out, err) in enumerate(results):
        assert rc == 0 and f"OK {k}" in out, f"process {k} failed (rc={rc}):\n{out}\n{err}"

    compiled = [m.group(1) for _, _, err in results
                for m in re.finditer(r"compiled in [0-9.]+ s \((\w+)\.so\)", err)]
    modules = sorted(p.stem for p in cache.glob("*.so"))
    assert len(modules) == 2, modules                     # forward and gradient modules
    assert sorted(compiled) == modules, f"compiles per module: {compiled}"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    leftovers = [p.name for p in cache.iterdir() if p.name.startswith(("tmp", "."))]
    assert not leftovers, leftovers


# ---- the cache's safety nets, in process -------------------------------------------------
C_SOURCE = "int sc_answer(void) { return %d; }\n"


def _fresh(monkeypatch, folder):
    from adjoint import options
    from adjoint.runtime import build
    monkeypatch.setattr(options, "cache_dir", str(folder))
    build._note_once.cache_clear()
    return build


def test_a_cache_folder_others_can_write_to_is_not_trusted(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)                       # e.g. a group scratch folder
    build = _fresh(monkeypatch, shared)
    path = build.build_module(C_SOURCE % 1, "answer")
    private = shared / f"{build._user()}-{os.getuid()}"
    assert path.parent == private and stat.S_IMODE(private.stat().st_mode) == 0o700
    private.chmod(0o777)                      # tampered with: refuse rather than load
    with pytest.raises(CompileError, match="writable by other users"):
        build.build_module(C_SOURCE % 2, "answer")


def test_file_systems_without_flock_still_get_whole_modules(tmp_path, monkeypatch):
    build = _fresh(monkeypatch, tmp_path / "cache")

    def no_locks(*args):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(build.fcntl, "flock", no_locks)
    path = build.build_module(C_SOURCE % 3, "answer")
    assert path.is_file() and build.build_module(C_SOURCE % 3, "answer") == path


def test_a_node_without_a_compiler_loads_what_the_cache_holds(tmp_path, monkeypatch):
    build = _fresh(monkeypatch, tmp_path / "cache")
    path = build.build_module(C_SOURCE % 4, "answer")          # a node with a compiler

    def missing(compiler):
        raise CompileError(f"C compiler {compiler!r} not usable")
    monkeypatch.setattr(build, "_run_version", missing)        # a node without one
    assert build.build_module(C_SOURCE % 4, "answer") == path
    monkeypatch.setattr(build.subprocess, "Popen", _no_such_program)
    with pytest.raises(CompileError, match="task=compile"):
        build.build_module(C_SOURCE % 5, "answer")             # not cached: cannot build


def _no_such_program(*args, **kwargs):
    raise FileNotFoundError(2, "No such file or directory", "cc")
