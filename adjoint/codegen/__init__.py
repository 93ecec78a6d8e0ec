"""SDFG -> C99 source."""
from .c import Layout, generate_module

__all__ = ["Layout", "generate_module"]
