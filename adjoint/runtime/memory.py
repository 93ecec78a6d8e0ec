"""Where a differentiated call keeps its buffers: NumPy arrays for the C modules,
GPU arrays (runtime/cuda.py) for the CUDA ones, behind the few operations the sweep
needs. On the GPU every argument is copied in once and results come out once.

One memory object serves one differentiated call (one ``Sweep``). On the CPU it takes
its buffers from the specialisation's :class:`BufferPool` where one of the right size
and dtype is idle (re-zeroed or overwritten, never read as it is), keeps the buffers the
call releases on the way as *spares* for the call's later needs, and a finished call
gives what it still holds back to the pool for the next call. A buffer handed to the
user (a gradient) is the user's for as long as any array refers to it; once none does,
it goes back to the pool too: fresh memory costs a page fault per page on first touch
(hdiff-limiter's gradient at 1000 x 1000: 1 ms for each 8 MB adjoint it returned, a
tenth of the call). Buffers under ``SMALL`` bytes are not pooled (NumPy serves them
faster than a look-up); a differentiated call whose buffers total under ``FRAMED`` bytes
(a forward call: whose transients are each under ``SMALL``) keeps them in one
:class:`Frame`, with their pointer table, which the next call at its sizes takes whole."""
import collections
import math
import threading

import numpy as np

FLOAT64 = np.dtype(np.float64)
SMALL = 4096
# A sweep whose buffers total fewer bytes takes them as one Frame: below this, the fill of
# the whole block costs less than taking each buffer from the pool (2mm's gradient at
# n = 40, a dozen 12.8 KB buffers: 110 -> 65 us, most of it the sweep's Python).
FRAMED = 1 << 19
THREADED = 1 << 18      # codegen's SC_PARALLEL_BYTES: smaller fills and copies are one
                        # thread's in C too, and NumPy's call is the cheaper one


def _key(size, dtype):
    return int(size), dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)


def _flat(array):
    return array.reshape(-1)


class BufferPool:
    """Idle host buffers of one specialisation, by (number of elements, dtype), that a
    finished differentiated call gave back for the next call to take.

    Retained memory is bounded: :meth:`give` replaces the idle buffers with the ones it
    is given, so a pool holds at most the buffers of the last call that finished (for
    heat-3d at N=100 w.r.t. ``A``: the copies of ``A`` and ``B`` and the adjoint of
    ``B``, 24 MB), and nothing that a call in progress took, plus as many of the buffers
    handed out as that call handed out, once the user dropped them (the adjoint of
    ``A``). These idle bytes are on no call's ledger: between calls they are memory the
    specialisation keeps, like its compiled modules; :meth:`clear` frees them. Taking and
    giving hold a lock, so concurrent calls never get the same buffer; buffers come back
    from the garbage collector, perhaps inside a call holding the lock, so they come
    back into a queue of their own (appending to a deque needs no lock)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle = {}
        self._returned = collections.deque(maxlen=0)

    def take(self, key):
        """An idle flat buffer for ``key`` = (number of elements, dtype), contents
        undefined, now the caller's alone; or None."""
        with self._lock:
            while self._returned:
                b = self._returned.popleft()
                self._idle.setdefault(_key(b.size, b.dtype), []).append(b)
            free = self._idle.get(key)
            return free.pop() if free else None

    def give(self, buffers, handed=0):
        """Make ``buffers`` (which nothing else may use any more) the idle ones; what was
        idle before is dropped. Of the buffers handed out, up to ``handed`` come back
        when dropped (see :meth:`handed_out`), counting those back already (a vjp's
        gradients, dropped before its pullback)."""
        if not (buffers or handed or self._idle or self._returned.maxlen):
            return                      # small calls: nothing to keep, nothing to drop
        idle = {}
        for b in buffers:
            if b.nbytes >= SMALL:
                idle.setdefault(_key(b.size, b.dtype), []).append(_flat(b))
        with self._lock:
            self._idle = idle
            self._returned = collections.deque(self._returned, maxlen=handed)

    def handed_out(self, buffer):
        """``buffer`` as an array for the user: it (and every view of it) keeps the
        buffer alive; when the last goes, the buffer comes back to this pool."""
        return np.asarray(_Handed(buffer, self))

    def recycle(self, buffer):
        """A buffer handed out that no array refers to any more (no lock: see above)."""
        self._returned.append(buffer)

    def clear(self):
        with self._lock:
            self._idle = {}
            self._returned = collections.deque(maxlen=0)

    def buffers(self):
        """The idle buffers (a list; for tests and diagnostics)."""
        with self._lock:
            return [b for free in self._idle.values() for b in free] + list(self._returned)

    @property
    def nbytes(self):
        """Bytes held idle."""
        return sum(b.nbytes for b in self.buffers())


class Frame:
    """Every buffer one small call makes (argument copies, transients, adjoints, under
    FRAMED bytes together) as views of one block, with the pointer table of the call's
    entry points; made once per sizes and reused by the calls at those sizes, one at a time
    (:func:`idle`): a call zeroes the block with one fill, copies its arguments in, and
    points the table at the arrays it uses as they are. (Making the buffers and the table
    anew was most of a tiny kernel's gradient call.)

    ``slots``: per container of the table, (name, shape, dtype), or (name, None, None)
    for an array the call brings (an argument used in place, a returned array);
    ``copies``: the names whose views take a copy of their argument; ``adjoints``: the
    names of adjoints. ``buffers``: per slot its view, or None."""

    def __init__(self, module, slots, copies=(), adjoints=()):
        sizes = [0 if shape is None else -(-math.prod(shape) * dtype.itemsize // 8) * 8
                 for _, shape, dtype in slots]
        self.block = np.zeros(sum(sizes), np.uint8)
        views, offset = {}, 0
        for (name, shape, dtype), size in zip(slots, sizes):
            if shape is not None:
                count = math.prod(shape)
                views[name] = self.block[offset:offset + count * dtype.itemsize] \
                    .view(dtype).reshape(shape)
                offset += size
        self.buffers = [views.get(name) for name, _, _ in slots]
        placeholder = np.empty(1)               # until the call points the entry
        self.table = module.table([placeholder if b is None else b for b in self.buffers])
        self.in_place = [(k, name) for k, (name, shape, _) in enumerate(slots) if shape is None]
        self.copies = [(name, views[name]) for name in copies]
        self.adjoints = {name: views[name] for name in adjoints}
        self.primal = {name: v for name, v in views.items() if name not in self.adjoints}
        self.nbytes = sum(v.nbytes for v in views.values())


def idle(frames, *layout):
    """An idle frame taken from the list ``frames`` (the caller gives it back with
    ``frames.append``), or a new ``Frame(*layout)``: list.pop is atomic, so concurrent
    calls never share one."""
    try:
        return frames.pop()
    except IndexError:
        return Frame(*layout)


class _Handed:
    """The owner of a buffer handed to the user: NumPy arrays made from it, and their
    views, refer to it; when the last is gone, the buffer goes back to ``pool``."""

    def __init__(self, buffer, pool):
        self.buffer, self.pool = buffer, pool
        self.__array_interface__ = buffer.__array_interface__

    def __del__(self):
        self.pool.recycle(self.buffer)


class HostMemory:
    """NumPy buffers; arguments the call does not write are used as they are.

    With a ``pool``, new buffers of at least ``SMALL`` bytes come from the call's spares,
    then from the pool, and only then from NumPy. ``allocations`` and ``allocated_bytes``
    count the buffers of that size that came from NumPy (the tests' measure of reuse).
    With a compiled ``module``, buffers of THREADED bytes or more are zeroed and copied by
    it, on the engine's threads."""
    copies_arguments = False
    slices = True               # parts of a buffer can be written (``buffer[part] = 0``)

    def __init__(self, pool=None, module=None):
        self.pool, self.module = pool, module
        self.spares = {}
        self.spare_bytes = 0
        self.allocations = self.allocated_bytes = 0
        self.handed = 0

    # ---- new buffers ---------------------------------------------------------------------
    def _reuse(self, size, dtype):
        """A flat buffer with undefined contents from the spares or the pool, or None."""
        if self.pool is None:
            return None
        key = _key(size, dtype)
        if key[0] * key[1].itemsize < SMALL:
            return None
        free = self.spares.get(key)
        if free:
            buffer = free.pop()
            self.spare_bytes -= buffer.nbytes
            return buffer
        return self.pool.take(key)

    def _fresh(self, array):
        if array.nbytes >= SMALL:
            self.allocations += 1
            self.allocated_bytes += array.nbytes
        return array

    def copy(self, array):
        if array.nbytes < SMALL:
            return array.copy()
        buffer = self._reuse(array.size, array.dtype)
        if buffer is None:
            buffer = self._fresh(np.empty(array.size, array.dtype))
        buffer = buffer.reshape(array.shape)
        self.copyto(buffer, array)
        return buffer

    def zeros(self, size, dtype):
        """Zeros of a np.dtype, written here also into fresh memory: ``np.zeros`` maps
        the shared zero page, and the generated code's first ``+=`` reads it, then faults
        again to write, a copy-on-write whose TLB flush interrupts every other thread of
        the process (heat-3d's gradient at N=80: the first sweep over the adjoint of ``A``
        took 3 ms on one thread and 9 on two, 0.5 and 0.25 with the zeros written here)."""
        if size * dtype.itemsize < SMALL:
            return np.zeros(size, dtype)
        buffer = self._reuse(size, dtype)
        if buffer is None:
            buffer = self._fresh(np.empty(size, dtype))
        self.clear(buffer)
        return buffer

    def clear(self, buffer):
        """``buffer[...] = 0``, on the module's threads when large."""
        if self.module is not None and buffer.nbytes >= THREADED:
            self.module.fill_zero(buffer)
        else:
            buffer.fill(0)

    def empty(self, size):
        if size * 8 < SMALL:
            return np.empty(size)
        buffer = self._reuse(size, FLOAT64)
        return self._fresh(np.empty(size)) if buffer is None else buffer

    # ---- buffers going away --------------------------------------------------------------
    def release(self, array):
        """The call no longer needs ``array``: keep it as a spare for the call's next
        buffer of its size (:meth:`trim` bounds the spares)."""
        if self.pool is None or array.nbytes < SMALL:
            return
        self.spares.setdefault(_key(array.size, array.dtype), []).append(_flat(array))
        self.spare_bytes += array.nbytes

    def trim(self, limit):
        """Drop spares, largest first, until they hold at most ``limit`` bytes."""
        while self.spare_bytes > max(limit, 0):
            key = max((k for k, v in self.spares.items() if v),
                      key=lambda k: self.spares[k][-1].nbytes)
            self.spare_bytes -= self.spares[key].pop().nbytes

    def close(self, buffers):
        """The call is over: ``buffers`` (its own, nobody else's) and the spares become
        the pool's idle buffers."""
        if self.pool is not None:
            spares = [b for free in self.spares.values() for b in free] if self.spares else []
            self.pool.give(list(buffers) + spares, self.handed)
        self.spares, self.spare_bytes = {}, 0

    # ---- contents ------------------------------------------------------------------------
    def copyto(self, dst, src):
        if self.module is not None and dst.nbytes >= THREADED and src.dtype == dst.dtype and \
                src.shape == dst.shape and src.flags.c_contiguous and dst.flags.c_contiguous:
            self.module.copyto(dst, src)
        else:
            np.copyto(dst, src)

    def value(self, array):
        """The contents as a NumPy array (the buffer itself)."""
        return array

    def copy_out(self, array):
        """A NumPy copy of the contents."""
        return array.copy()

    def hand_out(self, array):
        """The contents as a NumPy array the user may keep, for a buffer the call will not
        use again: on the CPU the buffer itself, back to the pool once the user drops it."""
        if self.pool is None or array.nbytes < SMALL:
            return array
        self.handed += 1
        return self.pool.handed_out(_flat(array))


class DeviceMemory(HostMemory):
    """GPU buffers (DeviceArrays) of one CUDA module; every argument is copied in. Not
    pooled: each call allocates (and frees) its own."""
    copies_arguments = True
    slices = False

    def __init__(self, module):
        super().__init__(None)
        self.module = module

    def copy(self, array):
        return self.module.array(array) if isinstance(array, np.ndarray) else array.copy()

    def zeros(self, size, dtype):
        return self.module.zeros((size,), dtype)

    def clear(self, buffer):
        buffer[...] = 0

    def empty(self, size):
        return self.module.empty((size,))

    def copyto(self, dst, src):
        dst.copy_from(src)

    def value(self, array):
        return array.get()

    def copy_out(self, array):
        return array.get()

    def hand_out(self, array):
        return array.get()


def on_device(module):
    """Whether ``module`` runs on the GPU (its buffers are device arrays)."""
    return getattr(module, "device", "cpu") == "cuda"


def memory_for(module, pool=None):
    """The memory of one call of ``module``; host buffers come from ``pool`` if given."""
    if on_device(module):
        return DeviceMemory(module)
    return HostMemory(pool, module)
