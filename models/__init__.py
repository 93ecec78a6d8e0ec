"""Domain models, one module each."""
