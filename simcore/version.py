"""simcore's version, below every other module (the package and the files' provenance read it)."""
__version__ = "0.1.0"
