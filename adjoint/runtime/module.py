"""Load a compiled kernel with cffi (ABI mode) and call its entry points."""
import signal
import threading

try:        # signal.getsignal without its enum conversion: 3 us, a small entry point's time
    from _signal import getsignal as _handler
except ImportError:
    _handler = signal.getsignal

import cffi
import numpy as np

from ..codegen.c import INTERRUPTED
from ..options import options

ffi = cffi.FFI()
ffi.cdef("""
int64_t sc_run(int64_t, const int64_t *, void *const *, double *, int64_t, int64_t, int);
int sc_check(const int64_t *, int64_t *);
void sc_set_threads(int);
void sc_fill(void *, const void *, int64_t);
""")
_loaded = {}
_lock = threading.Lock()


class CompiledModule:
    """A loaded shared library with the engine's uniform entry points."""

    def __init__(self, path, counts=0):
        self.path, self.counts = path, counts
        self.lib = ffi.dlopen(str(path))
        self._checked, self.threads = {}, 0

    def check(self, syms: np.ndarray):
        """(status, counts) for these sizes, evaluated once per distinct sizes (the
        segment bounds at the end of ``syms`` do not matter)."""
        key = syms[:-2].tobytes()
        if key not in self._checked:
            counts = np.zeros(max(self.counts, 1), dtype=np.int64)
            status = self.lib.sc_check(_ptr("int64_t *", syms), _ptr("int64_t *", counts))
            self._checked[key] = (status, counts)
        return self._checked[key]

    def table(self, buffers):
        """Buffers for several calls: their pointer table, built once."""
        return BufferTable(buffers)

    def call(self, entry, syms, buffers, tape=None, tape_position=0):
        """Run entry point number ``entry`` on ``buffers`` (a list, or a table of
        them); returns the tape position it ends at (-1: the tape is too short).
        Ctrl-C stops it: KeyboardInterrupt."""
        data = buffers.data if isinstance(buffers, BufferTable) else BufferTable(buffers).data
        tape_ptr = _ptr("double *", tape) if tape is not None and tape.size else ffi.NULL
        capacity = 0 if tape is None else tape.size
        self._threads()
        return interrupted(self.lib.sc_run(entry, _ptr("int64_t *", syms), data, tape_ptr,
                                           tape_position, capacity, watch_interrupts()))

    def fill_zero(self, array):
        """``array[...] = 0`` (contiguous) on the engine's threads."""
        self._threads()
        self.lib.sc_fill(ffi.from_buffer(array), ffi.NULL, array.nbytes)

    def copyto(self, dst, src):
        """``np.copyto(dst, src)`` for contiguous arrays of one dtype and size, on the
        engine's threads."""
        self._threads()
        self.lib.sc_fill(ffi.from_buffer(dst), ffi.from_buffer(src), dst.nbytes)

    def _threads(self):
        if self.threads != options.threads:
            self.lib.sc_set_threads(options.threads)
            self.threads = options.threads


class BufferTable:
    """The ``void *`` table of buffers that an entry point takes. A sweep's buffers stay
    put from one entry to the next, so it builds theirs once: one ``from_buffer`` per
    buffer and call took a third of a small kernel's gradient call."""

    def __init__(self, buffers):
        self.buffers = list(buffers)        # alive as long as the pointers are
        # from_buffer is the cheap way to a pointer (ndarray.ctypes builds an object)
        self.data = ffi.new("void *[]", [ffi.from_buffer(b) for b in self.buffers] or 1)


def watch_interrupts():
    """Whether an entry point may take SIGINT for the time it runs (see codegen.c's
    INTERRUPTS): on Python's main thread, while Python's handler is the one that raises
    KeyboardInterrupt; elsewhere SIGINT keeps what the program chose for it."""
    return int(threading.current_thread() is threading.main_thread()
               and _handler(signal.SIGINT) is signal.default_int_handler)


def interrupted(status):
    """An entry point's status, or the KeyboardInterrupt that stopped it (its buffers
    hold a partial result; nothing else changed)."""
    if status == INTERRUPTED:
        raise KeyboardInterrupt
    return status


def _ptr(ctype, array):
    return ffi.cast(ctype, ffi.from_buffer(array))


def load(path, counts=0) -> CompiledModule:
    if str(path).endswith(".cuda.so"):                # device="cuda" (runtime/cuda.py)
        from .cuda import load_cuda
        return load_cuda(path, counts)
    with _lock:
        if path not in _loaded:
            _loaded[path] = CompiledModule(path, counts)
        return _loaded[path]
