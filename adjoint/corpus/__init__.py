"""The benchmark and test corpus: kernels written the way scientists write NumPy, each
beside its NumPy original and its JAX ports, shipped with the engine (as ``numpy.testing``
ships with NumPy) so that tests and experiments import it as a package.

- ``loops``, ``arrays``, ``more``: the kernels, each with a factory drawing small random
  inputs and a :class:`~adjoint.corpus.loops.CorpusCase` (``CASES``, ``CASES_BY_NAME``).
  A kernel's NumPy version is the kernel itself, run as Python (``k.py_func``);
- ``jax_ports``: the JAX versions of the same kernels, by name (imports JAX; not
  imported here);
- ``sizes``: the benchmark's sizes of every kernel (``TABLE``, ``BENCHES``);
- ``planning``: the store/recompute planner's inputs (a Burgers kernel, random problems).

Kernel source text is kept byte-identical when moved: compiled artefacts and recorded
benchmarks are keyed by it. Importing this package compiles nothing.
"""
import zlib

import numpy as np

from adjoint.corpus import arrays, loops, more

CASES = loops.CASES + arrays.CASES + more.CASES


def seed_for(name, salt=0):
    """A stable per-name seed (``hash()`` is randomised per process)."""
    return zlib.crc32(f"{name}/{salt}".encode())


def rng_for(name, salt=0):
    return np.random.default_rng(seed_for(name, salt))


def copy_args(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
