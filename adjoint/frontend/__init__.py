"""Python source (ast) -> SDFG, with errors that name the source line."""
from . import array_indexing, statements  # noqa: F401  (array_indexing: its tables)
from .extents import largest_extents
from .source import call_sizes, declared_types, fingerprint, holds, read_source, type_of_value
from .statements import RESULT
# the library nodes register their np.linalg hooks into array_calls.NUMPY_LINALG
from .. import library  # noqa: F401


def parse(src, name, types, sizes=None):
    """The kernel's SDFG for the given argument types (and the call's ``sizes``, by symbol
    name, where the types leave a shape open); temporaries whose sizes depend on loop
    variables get their largest size (``extents``)."""
    return largest_extents(statements.parse(src, name, types, sizes))


__all__ = ["call_sizes", "declared_types", "fingerprint", "holds", "parse", "read_source",
           "type_of_value", "RESULT"]
