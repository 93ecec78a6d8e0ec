"""Reverse mode on the SDFG."""
from .reverse import Adjoint, adjoint_name, differentiate

__all__ = ["Adjoint", "adjoint_name", "differentiate"]
