"""Analyses over the SDFG: index bounds, activity, values the reverse sweep needs."""
