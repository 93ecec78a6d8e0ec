"""Python source (ast) -> SDFG, with errors that name the source line."""
from . import statements
from .extents import largest_extents
from .source import declared_types, fingerprint, read_source, type_of_value
from .statements import RESULT
# the library nodes register their np.linalg hooks into array_calls.NUMPY_LINALG
from .. import library  # noqa: F401


def parse(src, name, types):
    """The kernel's SDFG for the given argument types; temporaries whose sizes depend on
    loop variables get their largest size (``extents``)."""
    return largest_extents(statements.parse(src, name, types))


__all__ = ["declared_types", "fingerprint", "parse", "read_source", "type_of_value", "RESULT"]
