"""Find the BLAS that generated matrix products link against.

The OpenBLAS built for Python packaging (``scipy-openblas64``) ships a shared library
with prefixed, 64-bit-integer cblas symbols; linking against it directly gives
tuned gemm without depending on a system BLAS. Without it, products are loops.
"""
import functools


@functools.lru_cache(maxsize=None)
def _openblas():
    try:
        import scipy_openblas64 as ob
    except ImportError:
        return None
    lib_dir, lib = ob.get_lib_dir(), ob.get_library()
    return "scipy_cblas_dgemm64_", (f"-L{lib_dir}", f"-l{lib}", f"-Wl,-rpath,{lib_dir}")


def blas():
    """(dgemm symbol, linker flags) of the installed BLAS, or None: products are then
    generated loops (the target's ``blas=False`` asks for them too, pipeline.py)."""
    return _openblas()
