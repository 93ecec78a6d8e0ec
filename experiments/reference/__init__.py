"""Hand-written references for the benchmarks (C through cffi, plain Python)."""
