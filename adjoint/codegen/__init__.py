"""SDFG -> C99 source."""
from .c import COUNTS, Layout, generate_module, translation_units

__all__ = ["COUNTS", "Layout", "generate_module", "translation_units"]
