"""Build generated C through the system compiler, cache it, load it with cffi, call it."""
from .build import build_module
from .module import CompiledModule, load

__all__ = ["build_module", "CompiledModule", "load"]
