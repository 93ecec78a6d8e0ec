"""Load a compiled kernel with cffi (ABI mode) and call its entry points."""
import _thread
import os
import signal
import threading

try:        # signal.getsignal without its enum conversion: 3 us, a small entry point's time
    from _signal import getsignal as _handler
except ImportError:
    _handler = signal.getsignal

import cffi
import numpy as np
from _cffi_backend import from_buffer as _from_buffer    # ffi.from_buffer without its
                                                         # Python wrapper: a third of its time

from ..codegen.c import INTERRUPTED
from ..options import options

ffi = cffi.FFI()
ffi.cdef("""
int64_t sc_run(int64_t, const int64_t *, void *const *, double *, int64_t, int64_t, int);
int64_t sc_runs(int64_t, const int64_t *, const int64_t *, void *const *, double *,
                const int64_t *, const int64_t *, const int64_t *, int64_t *, int);
int sc_check(const int64_t *, int64_t *);
void sc_set_threads(int);
void sc_fill(void *, const void *, int64_t);
""")
_loaded = {}
_lock = threading.Lock()
CHARS, INT64S, DOUBLES = (ffi.typeof(t) for t in ("char[]", "int64_t[]", "double[]"))


class CompiledModule:
    """A loaded shared library with the engine's uniform entry points."""
    device = "cpu"

    def __init__(self, path, counts=0):
        self.path, self.counts = path, counts
        self.lib = ffi.dlopen(str(path))
        # looked up once: each lookup in the library cost a third of a small entry's call
        self._run, self._runs = self.lib.sc_run, self.lib.sc_runs
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
        data = buffers.data if type(buffers) is BufferTable else BufferTable(buffers).data
        # typed pointers, no casts: each cast cost about as much as a small entry's run
        tape_ptr = _from_buffer(DOUBLES, tape, False) if tape is not None and tape.size \
            else ffi.NULL
        capacity = 0 if tape is None else tape.size
        self._threads()
        return interrupted(self._run(entry, _from_buffer(INT64S, syms, False), data,
                                     tape_ptr, tape_position, capacity, watch_interrupts()))

    def runs(self, batch, buffers, tape, positions):
        """Run the entry points of ``batch`` (a :class:`Batch`) in order in one C call, as
        :meth:`call` runs each, entry k on ``tape``'s part ``batch.offsets[k]`` from
        position ``positions[k]`` (an int64 array; or where entry ``batch.chained[k]``
        ended), where its end goes. Returns how many ended well; the next one's status
        (if any: -1, its tape too short; a library call's failure) stopped the rest and
        is in ``positions``. Ctrl-C stops them: KeyboardInterrupt."""
        tape_ptr = _from_buffer(DOUBLES, tape, False) if tape.size else ffi.NULL
        self._threads()
        done = self._runs(batch.size, batch.which_ptr, batch.syms_ptr, buffers.data, tape_ptr,
                          batch.offsets_ptr, batch.caps_ptr, batch.chained_ptr,
                          _from_buffer(INT64S, positions, False), watch_interrupts())
        if done < batch.size:
            interrupted(positions[done])
        return done

    def fill_zero(self, array):
        """``array[...] = 0`` (contiguous) on the engine's threads."""
        self._threads()
        self.lib.sc_fill(_from_buffer(CHARS, array, False), ffi.NULL, array.nbytes)

    def copyto(self, dst, src):
        """``np.copyto(dst, src)`` for contiguous arrays of one dtype and size, on the
        engine's threads."""
        self._threads()
        self.lib.sc_fill(_from_buffer(CHARS, dst, False), _from_buffer(CHARS, src, False),
                         dst.nbytes)

    def _threads(self):
        if self.threads != options.threads:
            self.lib.sc_set_threads(options.threads or default_threads())
            self.threads = options.threads


class Batch:
    """Entry points that :meth:`CompiledModule.runs` runs in one call: their numbers,
    symbols (a row each), parts of one tape (offsets and capacities, in doubles), and
    per entry the earlier one whose end it starts from (``chained``, -1: none); the
    pointers to them made once."""

    def __init__(self, which, syms, offsets, capacities, chained=None):
        self.size = len(which)
        self.which = np.array(which, np.int64)
        self.syms = np.array(syms, np.int64)
        self.offsets, self.caps = np.array(offsets, np.int64), np.array(capacities, np.int64)
        self.chained = np.array([-1] * self.size if chained is None else chained, np.int64)
        self.length = int((self.offsets + self.caps).max(initial=0))     # of the tape
        self.which_ptr, self.syms_ptr, self.offsets_ptr, self.caps_ptr, self.chained_ptr = (
            _from_buffer(INT64S, a, False) for a in (self.which, self.syms, self.offsets,
                                                      self.caps, self.chained))


class BufferTable:
    """The ``void *`` table of buffers that an entry point takes. A sweep's buffers stay
    put from one entry to the next, so it builds theirs once: one ``from_buffer`` per
    buffer and call took a third of a small kernel's gradient call."""

    def __init__(self, buffers):
        self.buffers = list(buffers)        # alive as long as the pointers are
        # from_buffer is the cheap way to a pointer (ndarray.ctypes builds an object)
        self.data = ffi.new("void *[]", [_from_buffer(CHARS, b, False) for b in self.buffers]
                            or 1)

    def point(self, k, array):
        """Entry ``k`` to ``array``, which the caller keeps alive while the table is used."""
        self.data[k] = _from_buffer(CHARS, array, False)


def default_threads():
    """The team OpenMP starts with, which ``threads=0`` restores after another count:
    OMP_NUM_THREADS's first number, else the CPUs this process may run on."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else len(os.sched_getaffinity(0))


def watch_interrupts():
    """Whether an entry point may take SIGINT for the time it runs (see codegen.c's
    INTERRUPTS): on Python's main thread, while Python's handler is the one that raises
    KeyboardInterrupt; elsewhere SIGINT keeps what the program chose for it."""
    return int(_thread.get_ident() == _main[0]
               and _handler(signal.SIGINT) is signal.default_int_handler)


# The main thread's ident (each entry point asks): after a fork, the forking thread's.
_main = [threading.main_thread().ident]
os.register_at_fork(after_in_child=lambda: _main.__setitem__(0, threading.main_thread().ident))


def interrupted(status):
    """An entry point's status, or the KeyboardInterrupt that stopped it (its buffers
    hold a partial result; nothing else changed)."""
    if status == INTERRUPTED:
        raise KeyboardInterrupt
    return status


def _ptr(ctype, array):
    return ffi.cast(ctype, ffi.from_buffer(array))


def load(path, counts=0) -> CompiledModule:
    """The C module at ``path`` (a CUDA module: runtime/cuda.py's ``load_cuda``)."""
    with _lock:
        if path not in _loaded:
            _loaded[path] = CompiledModule(path, counts)
        return _loaded[path]
