"""Find the BLAS/LAPACK that library nodes (matrix products, factorisations) call.

The OpenBLAS built for Python packaging (``scipy-openblas64``) ships a shared library
with prefixed, 64-bit-integer symbols -- cblas, LAPACKE and Fortran LAPACK alike
(``scipy_cblas_dgemm64_``, ``scipy_LAPACKE_dgetrf64_``, ``scipy_dpotrf_64_``); linking
against it directly gives tuned kernels without depending on a system BLAS. Without
it, library nodes are loops.
"""
import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Library:
    """A linked BLAS/LAPACK: its symbols' prefix and suffix, and the linker flags."""
    prefix: str
    suffix: str
    flags: tuple

    def symbol(self, name):
        """The exported name of a routine: ``cblas_dgemm``, ``LAPACKE_dgetrf``, and the
        Fortran ``dpotrf_`` (with its underscore)."""
        return f"{self.prefix}{name}{self.suffix}"

    def used(self, source):
        """Whether generated C calls into the library (and must link it)."""
        return re.search(rf"\b{re.escape(self.prefix)}\w+{re.escape(self.suffix)}",
                         source) is not None


@functools.lru_cache(maxsize=None)
def _openblas():
    try:
        import scipy_openblas64 as ob
    except ImportError:
        return None
    lib_dir, lib = ob.get_lib_dir(), ob.get_library()
    return Library("scipy_", "64_", (f"-L{lib_dir}", f"-l{lib}", f"-Wl,-rpath,{lib_dir}"))


def blas():
    """The linked Library of the installed BLAS/LAPACK, or None: library nodes are then
    generated loops (the target's ``blas=False`` asks for them too, pipeline.py)."""
    return _openblas()
