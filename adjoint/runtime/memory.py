"""Where a differentiated call keeps its buffers: NumPy arrays for the C modules,
GPU arrays (runtime/cuda.py) for the CUDA ones, behind the few operations the sweep
needs. On the GPU every argument is copied in once and results come out once."""
import numpy as np


class HostMemory:
    """NumPy buffers; arguments the call does not write are used as they are."""
    copies_arguments = False

    def copy(self, array):
        return array.copy()

    def zeros(self, size, dtype):
        return np.zeros(size, dtype)

    def empty(self, size):
        return np.empty(size)

    def copyto(self, dst, src):
        np.copyto(dst, src)

    def value(self, array):
        """The contents as a NumPy array (the buffer itself)."""
        return array

    def copy_out(self, array):
        """A NumPy copy of the contents."""
        return array.copy()


class DeviceMemory(HostMemory):
    """GPU buffers (DeviceArrays) of one CUDA module; every argument is copied in."""
    copies_arguments = True

    def __init__(self, module):
        self.module = module

    def copy(self, array):
        return self.module.array(array) if isinstance(array, np.ndarray) else array.copy()

    def zeros(self, size, dtype):
        return self.module.zeros((size,), dtype)

    def empty(self, size):
        return self.module.empty((size,))

    def copyto(self, dst, src):
        dst.copy_from(src)

    def value(self, array):
        return array.get()

    def copy_out(self, array):
        return array.get()


def memory_for(module):
    return DeviceMemory(module) if getattr(module, "device", "cpu") == "cuda" else HostMemory()
