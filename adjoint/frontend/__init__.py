"""Python source (ast) -> SDFG, with errors that name the source line."""
from .source import declared_types, read_source, type_of_value
from .statements import RESULT, parse

__all__ = ["declared_types", "parse", "read_source", "type_of_value", "RESULT"]
