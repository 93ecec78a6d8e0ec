"""The benchmark corpus as tests and experiments import it (``adjoint.corpus``): one
case per kernel name, each with its benchmark sizes and its JAX port beside it, and the
package importable without JAX."""
import subprocess
import sys

import pytest

import adjoint.corpus
from adjoint.corpus import sizes

NAMES = [case.name for case in adjoint.corpus.CASES]


def test_every_kernel_once_with_its_sizes():
    assert len(NAMES) == len(set(NAMES)) >= 70
    assert set(sizes.BENCHES) == set(NAMES)
    assert all(b.kind in ("loops", "mixed", "vectorised") for b in sizes.TABLE)


def test_every_kernel_has_a_jax_port():
    jax_ports = pytest.importorskip("adjoint.corpus.jax_ports")
    assert set(jax_ports.PORTS) == set(NAMES)
    literal = {b.name for b in sizes.TABLE if b.kind in ("loops", "mixed")}
    assert set(jax_ports.LITERAL) <= literal


def test_the_package_imports_without_jax(repo_root):
    """Only ``jax_ports`` needs JAX: importing the kernels, sizes and planner inputs
    does not load it."""
    code = ("import sys; import adjoint.corpus, adjoint.corpus.sizes, adjoint.corpus.planning;"
            " assert 'jax' not in sys.modules, 'jax imported'")
    subprocess.run([sys.executable, "-c", code], cwd=repo_root, check=True)
