"""Load a compiled kernel with cffi (ABI mode) and call its entry points."""
import threading

import cffi
import numpy as np

ffi = cffi.FFI()
ffi.cdef("""
int64_t sc_forward(const int64_t *, void *const *, double *, int64_t, int64_t);
int64_t sc_record(const int64_t *, void *const *, double *, int64_t, int64_t);
int64_t sc_reverse(const int64_t *, void *const *, double *, int64_t, int64_t);
int64_t sc_tangent(const int64_t *, void *const *, double *, int64_t, int64_t);
int sc_check(const int64_t *, int64_t *);
""")
_loaded = {}
_lock = threading.Lock()


class CompiledModule:
    """A loaded shared library with the engine's uniform entry points."""

    def __init__(self, path):
        self.path = path
        self.lib = ffi.dlopen(str(path))
        self._checked = {}

    def check(self, syms: np.ndarray):
        """(status, tape length) for these sizes; evaluated once per distinct sizes."""
        key = syms.tobytes()
        if key not in self._checked:
            count = ffi.new("int64_t *")
            status = self.lib.sc_check(_ptr("int64_t *", syms), count)
            self._checked[key] = (status, count[0])
        return self._checked[key]

    def call(self, entry, syms, buffers, tape=None, tape_position=0):
        """Run an entry point; returns the tape position it ends at (-1: tape too short)."""
        data = ffi.new("void *[]", max(len(buffers), 1))
        for k, b in enumerate(buffers):
            data[k] = ffi.cast("void *", b.ctypes.data)
        tape_ptr = _ptr("double *", tape) if tape is not None and tape.size else ffi.NULL
        capacity = 0 if tape is None else tape.size
        return getattr(self.lib, "sc_" + entry)(_ptr("int64_t *", syms), data, tape_ptr,
                                                tape_position, capacity)


def _ptr(ctype, array):
    return ffi.cast(ctype, array.ctypes.data)


def load(path) -> CompiledModule:
    with _lock:
        if path not in _loaded:
            _loaded[path] = CompiledModule(path)
        return _loaded[path]
