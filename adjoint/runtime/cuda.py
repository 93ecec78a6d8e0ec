"""The CUDA runtime: build generated CUDA with nvcc, load it through cffi, and keep
arrays on the GPU between the calls of one differentiated call.

A CUDA module exports the C module's functions (``sc_run``, ``sc_check``) plus
``sc_error`` (the message of the last failure), ``sc_writes`` (which containers an
entry writes) and the device memory functions the :class:`DeviceArray` handles use
(``sc_malloc``, ``sc_free``, ``sc_memcpy``, ``sc_memset``). Device memory is plain
``cudaMalloc`` memory (no managed memory) that a :class:`DeviceArray` owns and frees;
copies between host and device happen only where the runtime asks for them:
:class:`CudaModule.call` with NumPy arrays copies them in and the written ones out
(one call of a kernel), :class:`Sweep` holds DeviceArrays for a whole differentiated
call (arguments in once, cotangents out once). Every status is checked: a failure
raises :class:`DeviceError` with CUDA's message.

With the target's ``cuda_emulation`` the same source is compiled as C++ for the CPU
(``codegen/cuda_preamble.py``): a test of the generated code without a GPU.
"""
import functools
import os
import shutil
import subprocess
import threading

import cffi
import numpy as np

from ..codegen.c import FAILED
from ..errors import CompileError, DeviceError
from .build import Toolchain, build_module
from .module import interrupted, watch_interrupts

ffi = cffi.FFI()
ffi.cdef("""
int64_t sc_run(int64_t, const int64_t *, void *const *, double *, int64_t, int64_t, int);
int sc_check(const int64_t *, int64_t *);
void sc_set_threads(int);
const char *sc_error(void);
int sc_writes(int64_t, int8_t *);
int sc_malloc(void **, int64_t);
int sc_free(void *);
int sc_memcpy(void *, const void *, int64_t, int);
int sc_memset(void *, int64_t);
""")
HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 1, 2, 3
LIBRARY_SUFFIX = ".cuda.so"
_loaded, _lock = {}, threading.RLock()


# ---- is there a GPU and a compiler? ----------------------------------------------------------
_driver = cffi.FFI()
_driver.cdef("""
int cuInit(unsigned int);
int cuDeviceGetCount(int *);
int cuDeviceGetAttribute(int *, int, int);
int cuDeviceGetName(char *, int, int);
""")
CC_MAJOR, CC_MINOR, MEMORY_CLOCK_KHZ, BUS_WIDTH_BITS, SM_COUNT = 75, 76, 36, 37, 16


@functools.lru_cache(maxsize=None)
def _gpu():
    """(name, (major, minor), memory clock in kHz, bus width in bits, SMs) of device 0,
    from the driver; raises DeviceError saying what is missing."""
    try:
        lib = _driver.dlopen("libcuda.so.1")
    except OSError:
        raise DeviceError("device='cuda': no NVIDIA driver here (libcuda.so.1 cannot be "
                          "loaded); run on a machine with a GPU, or use device='cpu'") from None
    count = _driver.new("int *")
    status = lib.cuInit(0)
    if status == 0:
        status = lib.cuDeviceGetCount(count)
    if status != 0 or count[0] == 0:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise DeviceError(f"device='cuda': no CUDA device is visible (driver status {status}"
                          + (f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "")
                          + "); run on a GPU node, or use device='cpu'")
    name = _driver.new("char[256]")
    lib.cuDeviceGetName(name, 256, 0)
    values = []
    for attribute in (CC_MAJOR, CC_MINOR, MEMORY_CLOCK_KHZ, BUS_WIDTH_BITS, SM_COUNT):
        v = _driver.new("int *")
        lib.cuDeviceGetAttribute(v, attribute, 0)
        values.append(v[0])
    return (_driver.string(name).decode(), (values[0], values[1]), values[2], values[3],
            values[4])


def device_info():
    """Device 0: name, compute capability, SMs and peak memory bandwidth (bytes/s, from
    the memory clock and bus width: two transfers per clock)."""
    name, cc, clock, width, sms = _gpu()
    return {"name": name, "compute_capability": cc, "sms": sms,
            "peak_bandwidth": 2.0 * clock * 1e3 * width / 8}


def _nvcc_path(nvcc):
    path = shutil.which(nvcc)
    if path is None:
        raise DeviceError(f"device='cuda' needs the CUDA compiler: {nvcc!r} is not on "
                          "PATH; install the CUDA toolkit, or set NVCC / engine option nvcc")
    return path


def require_cuda(target):
    """Raise DeviceError unless CUDA kernels for ``target`` can be built and run here."""
    nvcc, _, _, emulation = target.cuda
    if emulation:
        return
    _nvcc_path(nvcc)
    _gpu()


# ---- building ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _cuda_lib_dir(nvcc):
    """Where nvcc's libcudart is (its linker line), for the library's run path."""
    try:
        out = subprocess.run([nvcc, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull],
                             capture_output=True, text=True).stderr
    except OSError:
        return None
    for line in out.splitlines():
        if line.startswith("#$ LIBRARIES="):
            dirs = [p.strip('"')[2:] for p in line.split() if p.strip('"').startswith("-L")]
            dirs = [d for d in dirs if not d.rstrip("/").endswith("stubs")]
            return os.path.normpath(dirs[-1]) if dirs else None
    return None


def toolchain(target):
    """How generated CUDA is compiled for ``target``: nvcc for the GPU's architecture, or
    the system C++ compiler for the emulation."""
    nvcc, cuda_flags, cuda_arch, emulation = target.cuda
    if emulation:
        cxx = os.environ.get("CXX", "c++")
        return Toolchain(cxx, ("-O0", "-std=c++17", "-w"), ".cpp", ("-fPIC",),
                         library=LIBRARY_SUFFIX)
    nvcc = _nvcc_path(nvcc)
    arch = cuda_arch or "sm_{}{}".format(*_gpu()[1])
    flags = tuple(cuda_flags) + (f"-arch={arch}", "-cudart", "shared")
    lib_dir = _cuda_lib_dir(nvcc)
    if lib_dir:
        flags += ("-Xlinker", "-rpath", "-Xlinker", lib_dir)
    return Toolchain(nvcc, flags, ".cu", ("-Xcompiler", "-fPIC"), library=LIBRARY_SUFFIX,
                     full_version=True)


def build_cuda(layout, entries, checks, counted, name, target):
    """(CUDA source, loaded module) for the entry SDFGs, scheduled for the GPU
    (pipeline._build on device='cuda')."""
    from ..codegen import COUNTS
    from ..codegen.cuda import generate_cuda_module
    source = generate_cuda_module(layout, entries, checks, counted, emulate=target.cuda[3])
    try:
        path = build_module(source, name, toolchain=toolchain(target))
    except CompileError as exc:
        raise CompileError(f"{exc}\n(CUDA: set engine option cuda_arch if nvcc does not know "
                           "this GPU's architecture)") from None
    return source, load_cuda(path, COUNTS * len(counted))


def load_cuda(path, counts=0):
    with _lock:
        if path not in _loaded:
            _loaded[path] = CudaModule(path, counts)
        return _loaded[path]


def _ptr(ctype, array):
    return ffi.cast(ctype, array.ctypes.data)


# ---- device memory ----------------------------------------------------------------------------
class DeviceArray:
    """A buffer in GPU memory, owned (freed with the object); flat, with the dtype and
    shape of the host array it stands for."""

    def __init__(self, lib, shape, dtype):
        self.lib, self.shape, self.dtype = lib, tuple(shape), np.dtype(dtype)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.nbytes = self.size * self.dtype.itemsize
        out = ffi.new("void **")
        _check(lib, lib.sc_malloc(out, self.nbytes), "allocating "
               f"{self.nbytes / 2**20:.1f} MiB on the GPU")
        self.ptr = out[0]

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", None), None
        if ptr is not None:
            try:
                self.lib.sc_free(ptr)
            except Exception:       # interpreter shutdown: the driver frees everything
                pass

    @classmethod
    def zeros(cls, lib, shape, dtype):
        a = cls(lib, shape, dtype)
        _check(lib, lib.sc_memset(a.ptr, a.nbytes), "clearing GPU memory")
        return a

    @classmethod
    def from_host(cls, lib, array):
        array = np.ascontiguousarray(array)
        a = cls(lib, array.shape, array.dtype)
        a.upload(array)
        return a

    def upload(self, array):
        array = np.ascontiguousarray(array, dtype=self.dtype)
        if array.size != self.size:
            raise ValueError(f"copying {array.size} elements into a GPU array of {self.size}")
        _check(self.lib, self.lib.sc_memcpy(self.ptr, ffi.cast("void *", array.ctypes.data),
                                            self.nbytes, HOST_TO_DEVICE), "copying to the GPU")

    def get(self):
        """A new NumPy array with the contents."""
        out = np.empty(self.shape, self.dtype)
        _check(self.lib, self.lib.sc_memcpy(ffi.cast("void *", out.ctypes.data), self.ptr,
                                            self.nbytes, DEVICE_TO_HOST), "copying from the GPU")
        return out

    def download(self, out):
        """Copy the contents into the NumPy array ``out`` (same number of elements)."""
        if out.size != self.size or not out.flags.c_contiguous:
            raise ValueError("download needs a contiguous array of the same size")
        _check(self.lib, self.lib.sc_memcpy(ffi.cast("void *", out.ctypes.data), self.ptr,
                                            self.nbytes, DEVICE_TO_HOST), "copying from the GPU")

    def copy(self):
        a = DeviceArray(self.lib, self.shape, self.dtype)
        a.copy_from(self)
        return a

    def copy_from(self, other):
        if other.nbytes != self.nbytes:
            raise ValueError("copy between GPU arrays of different sizes")
        _check(self.lib, self.lib.sc_memcpy(self.ptr, other.ptr, self.nbytes, DEVICE_TO_DEVICE),
               "copying on the GPU")

    def __setitem__(self, key, value):
        """``a[...] = 0`` clears, ``a[...] = array`` uploads (the runtime's uses)."""
        if key is not Ellipsis:
            raise TypeError("DeviceArray supports only a[...] = value")
        if np.isscalar(value) and value == 0:
            _check(self.lib, self.lib.sc_memset(self.ptr, self.nbytes), "clearing GPU memory")
        else:
            self.upload(np.broadcast_to(np.asarray(value, self.dtype), (self.size,)))

    def __repr__(self):
        return f"<DeviceArray {self.dtype}{list(self.shape)}>"


def _check(lib, status, what):
    if status != 0:
        raise DeviceError(f"{what} failed: {ffi.string(lib.sc_error()).decode()}")


# ---- modules ----------------------------------------------------------------------------------
class CudaModule:
    """A loaded CUDA module with the engine's entry points (``CompiledModule``'s interface).

    Buffers passed to :meth:`call` are DeviceArrays (used in place) or NumPy arrays
    (copied to the GPU for this call; the ones the entry writes are copied back)."""
    device = "cuda"

    def __init__(self, path, counts=0):
        self.path, self.counts = path, counts
        try:
            self.lib = ffi.dlopen(str(path))
        except OSError as exc:
            raise DeviceError(f"cannot load the CUDA module {path}: {exc}") from None
        self._checked, self._written, self.threads = {}, {}, 0

    def check(self, syms):
        """(status, counts) for these sizes, once per distinct sizes (as the C module)."""
        key = syms[:-2].tobytes()
        if key not in self._checked:
            counts = np.zeros(max(self.counts, 1), dtype=np.int64)
            status = self.lib.sc_check(_ptr("int64_t *", syms), _ptr("int64_t *", counts))
            self._checked[key] = (status, counts)
        return self._checked[key]

    def writes(self, entry, n):
        """Indices of the containers entry point ``entry`` writes."""
        if entry not in self._written:
            flags = np.zeros(max(n, 1), dtype=np.int8)
            self.lib.sc_writes(entry, _ptr("int8_t *", flags))
            self._written[entry] = [k for k in range(n) if flags[k]]
        return self._written[entry]

    def array(self, array):
        """A DeviceArray holding ``array``."""
        return DeviceArray.from_host(self.lib, array)

    def zeros(self, shape, dtype):
        return DeviceArray.zeros(self.lib, shape, dtype)

    def empty(self, shape, dtype=np.float64):
        return DeviceArray(self.lib, shape, dtype)

    def table(self, buffers):
        """Buffers for several calls (the C module's pointer table; here the list)."""
        return list(buffers)

    def call(self, entry, syms, buffers, tape=None, tape_position=0):
        """Run entry point ``entry``; returns the tape position it ends at (-1: the tape
        is too short). Raises DeviceError when CUDA reports a failure, KeyboardInterrupt
        when Ctrl-C stopped a loop of the host code (kernels run to their end)."""
        uploaded = {k: self.array(b) for k, b in enumerate(buffers)
                    if not isinstance(b, DeviceArray)}
        device = [uploaded.get(k, b) for k, b in enumerate(buffers)]
        device_tape = tape if tape is None or isinstance(tape, DeviceArray) else self.array(tape)
        data = ffi.new("void *[]", max(len(device), 1))
        for k, b in enumerate(device):
            data[k] = b.ptr
        tape_ptr = ffi.cast("double *", device_tape.ptr) if device_tape is not None and \
            device_tape.size else ffi.NULL
        capacity = 0 if tape is None else tape.size
        with _lock:
            end = interrupted(self.lib.sc_run(entry, _ptr("int64_t *", syms), data, tape_ptr,
                                              tape_position, capacity, watch_interrupts()))
        if FAILED < end <= -2:          # FAILED and below: the caller raises LinAlgError
            why = ffi.string(self.lib.sc_error()).decode() if end == -3 else \
                f"no entry point {entry}"
            base = str(self.path)[:-len(LIBRARY_SUFFIX)]
            source = next((base + s for s in (".cu", ".cpp") if os.path.exists(base + s)),
                          base + ".cu")
            raise DeviceError(f"CUDA kernel failed: {why}; generated source: {source}")
        for k in self.writes(entry, len(buffers)):
            if k in uploaded:
                uploaded[k].download(buffers[k].reshape(-1))
        if device_tape is not tape and end >= 0:
            device_tape.download(tape)
        return end
