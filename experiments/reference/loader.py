"""Build ``seidel2d.c`` with the system C compiler and call it through cffi (ABI mode).

    from experiments.reference.loader import fwd, grad_A, grad_w

Two builds of the same source: ``order="fast"`` (default; the loop-carried term summed
last, gcc's default FMA contraction) is the speed reference; ``order="python"``
(-DPYTHON_ORDER -ffp-contract=off) is bit-identical to the plain-Python kernel.
"""
import pathlib
import subprocess
import tempfile

import cffi
import numpy as np

SOURCE = pathlib.Path(__file__).with_name("seidel2d.c")
CFLAGS = ["-O3", "-march=native", "-shared", "-fPIC"]
VARIANTS = {"fast": [], "python": ["-DPYTHON_ORDER", "-ffp-contract=off"]}

ffi = cffi.FFI()
ffi.cdef("""
void seidel_fwd(int64_t n, int64_t tsteps, double *A, const double *w);
void seidel_grad_A(int64_t n, int64_t tsteps, double *A, const double *w, double *Ab);
void seidel_grad_w(int64_t n, int64_t tsteps, double *A, const double *w,
                   double *Ab, double *wb, double *tape);
""")


def _build(flags):
    out = pathlib.Path(tempfile.mkdtemp(prefix="seidel2d_ref_")) / "libseidel2d.so"
    subprocess.run(["gcc", *CFLAGS, *flags, str(SOURCE), "-o", str(out)], check=True)
    return ffi.dlopen(str(out))


libs = {order: _build(flags) for order, flags in VARIANTS.items()}


def _ptr(x):
    return ffi.NULL if x is None else ffi.cast("double *", ffi.from_buffer(x))


def _check(A, w):
    n = A.shape[0]
    assert A.shape == (n, n) and w.shape == (3, 3), (A.shape, w.shape)
    assert A.dtype == w.dtype == np.float64 and A.flags.c_contiguous and w.flags.c_contiguous
    return n


def fwd(A, w, tsteps, order="fast"):
    """Forward in place on A; returns sum(A) like the kernel."""
    n = _check(A, w)
    libs[order].seidel_fwd(n, tsteps, _ptr(A), _ptr(w))
    return float(A.sum())


def grad_A(A, w, tsteps, run_forward=True, order="fast"):
    """d sum(A_final)/d A_initial.  With run_forward, A is updated in place
    (forward + reverse, what value_and_grad costs); otherwise only the reverse sweep runs."""
    n = _check(A, w)
    Ab = np.empty_like(A)
    libs[order].seidel_grad_A(n, tsteps, _ptr(A) if run_forward else ffi.NULL, _ptr(w), _ptr(Ab))
    return Ab


def tape_size(n, tsteps):
    return max(tsteps - 1, 0) * (n - 2) ** 2


def grad_w(A, w, tsteps, tape=None, order="fast"):
    """(d sum(A_final)/d w, d sum(A_final)/d A_initial).  A is restored on return.
    Pass a preallocated tape (``tape_size(n, tsteps)`` doubles) to keep allocation out of timings."""
    n = _check(A, w)
    Ab, wb = np.empty_like(A), np.empty_like(w)
    if tape is None:
        tape = np.empty(tape_size(n, tsteps))
    assert tape.size >= tape_size(n, tsteps)
    libs[order].seidel_grad_w(n, tsteps, _ptr(A), _ptr(w), _ptr(Ab), _ptr(wb), _ptr(tape))
    return wb, Ab
