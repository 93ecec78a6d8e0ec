"""Python source (ast) -> SDFG, with errors that name the source line."""
from .source import declared_types, fingerprint, read_source, type_of_value
from .statements import RESULT, parse

__all__ = ["declared_types", "fingerprint", "parse", "read_source", "type_of_value", "RESULT"]
