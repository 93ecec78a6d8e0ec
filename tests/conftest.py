"""Test-session setup for the engine tests.

* The repository root and this folder go on ``sys.path`` (so ``import adjoint``,
  ``import models`` and ``import corpus`` work without an install).
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
for p in (str(TESTS), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

_CACHE_DIR = tempfile.mkdtemp(prefix="simcore-test-cache-")
os.environ["SIMCORE_CACHE_DIR"] = _CACHE_DIR


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def cache_dir():
    """The session's compile cache folder (what ``SIMCORE_CACHE_DIR`` points at)."""
    return Path(_CACHE_DIR)


@pytest.fixture(scope="session")
def repo_root():
    return ROOT
