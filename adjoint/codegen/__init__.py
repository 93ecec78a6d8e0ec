"""SDFG -> C99 source."""
from .c import COUNTS, Layout, generate_module

__all__ = ["COUNTS", "Layout", "generate_module"]
