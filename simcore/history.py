"""What a minimiser reports per iteration: one row of named numbers each time.

Calibrate's L-BFGS-B and 4D-Var's minimisers fill one; the columns are named as the
output files name them (calibration.nc, diagnostics.nc).
"""
import numpy as np


class History:
    """A table growing by one row per :meth:`add`; ``history[column]`` is an array."""

    def __init__(self, *columns):
        self.columns = {c: [] for c in columns}

    def add(self, **row):
        if set(row) != set(self.columns):
            raise ValueError(f"a history row needs exactly the columns {list(self.columns)}, "
                             f"got {sorted(row)}")
        for column, value in row.items():
            self.columns[column].append(float(value))

    def __getitem__(self, column) -> np.ndarray:
        return np.array(self.columns[column])

    def __len__(self):
        return len(next(iter(self.columns.values()), []))
