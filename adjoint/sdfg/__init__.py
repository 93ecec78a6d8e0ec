"""The IR: a small Stateful Dataflow Multigraph (see docs/architecture.md)."""
from .nodes import (SDFG, Argument, Container, ConditionalRegion, LoopRegion, MapScope,
                    LibraryNode, Memlet, Pop, Push, Sequence, State, Tasklet)
from .text import to_text
from .validate import validate

__all__ = ["SDFG", "Argument", "Container", "ConditionalRegion", "LoopRegion", "MapScope", "LibraryNode",
           "Memlet", "Pop", "Push", "Sequence", "State", "Tasklet", "to_text", "validate"]
