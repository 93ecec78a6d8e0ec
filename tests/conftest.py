"""Test-session setup for the engine tests.

* The repository root, this folder and every folder of tests go on ``sys.path``: so
  ``import adjoint`` and ``import simcore`` work without an install, the helpers here
  (``kernel_testing``, ``float_testing``, ``values_helpers``) import by name, and so do
  test modules whose kernels or tables others reuse (``test_records``, ``test_framework``,
  ``test_property``), whichever folder the test that imports them is in (README.md).
* The test files run on up to four workers (pytest-xdist, ``-n auto`` in pyproject.toml),
  one per core this process may use: the compiles dominate the suite. The workers share
  the session's cache folder (below).
* ``SIMCORE_CACHE_DIR`` points at a fresh temporary folder for the whole session, so
  tests never read or write the user's compile cache and always start cold.  It is set
  when this file is imported -- before any test module imports the engine -- because the
  engine may read the variable at import time; a session fixture would come too late.
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GROUPS = [TESTS / "engine" / layer for layer in ("frontend", "autodiff", "codegen", "runtime")] \
    + [TESTS / "framework"]
for p in [str(g) for g in GROUPS] + [str(TESTS), str(ROOT)]:
    if p not in sys.path:
        sys.path.insert(0, p)

# An xdist worker shares the folder of the session that started it (inherited through the
# environment): a kernel several files use compiles once, as in one process (artefacts are
# written atomically under a lock; tests/engine/runtime/test_cache_concurrency.py).
_WORKER = "PYTEST_XDIST_WORKER" in os.environ and "SIMCORE_TEST_CACHE_DIR" in os.environ
_CACHE_DIR = os.environ["SIMCORE_TEST_CACHE_DIR"] if _WORKER else \
    tempfile.mkdtemp(prefix="simcore-test-cache-")
os.environ["SIMCORE_CACHE_DIR"] = os.environ["SIMCORE_TEST_CACHE_DIR"] = _CACHE_DIR


def pytest_xdist_auto_num_workers(config):
    """Workers for ``-n auto``: the cores this process may use, at most four (a worker
    holds about 1 GB: NumPy, JAX, compiled modules)."""
    return min(len(os.sched_getaffinity(0)), 4)


def pytest_unconfigure(config):
    if not _WORKER:                 # the session that made it, after its workers
        shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def cache_dir():
    """The session's compile cache folder (what ``SIMCORE_CACHE_DIR`` points at)."""
    return Path(_CACHE_DIR)


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


# ---- the device the engine tests run on ----------------------------------------------------
# ``pytest --device=cuda`` runs the numeric tests on the GPU (adjoint.configure(device="cuda"));
# ``--device=cuda-emulated`` runs the generated CUDA on the CPU (no GPU needed). Tests that
# need a GPU whatever the option are marked ``gpu`` and skipped without one.
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", choices=("cpu", "cuda", "cuda-emulated"),
                     help="device the engine's kernels run on (default: cpu)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and nvcc (skipped without)")
    config.addinivalue_line("markers", "c_source: inspects the generated C (skipped when "
                            "--device is not cpu)")
    device = config.getoption("--device")
    if device != "cpu":
        import adjoint
        adjoint.configure(device="cuda", cuda_emulation=device == "cuda-emulated")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--device") == "cpu":
        return
    skip = pytest.mark.skip(reason="inspects the generated C; --device runs CUDA")
    for item in items:
        if "c_source" in item.keywords:
            item.add_marker(skip)
