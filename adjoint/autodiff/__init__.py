"""Reverse and forward mode on the SDFG."""
from .forward import linearize, tangent_name
from .reverse import Adjoint, adjoint_name, differentiate

__all__ = ["Adjoint", "adjoint_name", "differentiate", "linearize", "tangent_name"]
