"""Linear observation operators H for data assimilation: a sparse matrix over the flat state.

Two kinds, both exact linear maps (so H^T is the matrix transpose):

- ``grid``: every ``every_k``-th grid point of each observed variable, starting at
  ``every_k // 2`` along every axis (the points ``simcore.twin.Observations`` selects);
- ``stations``: ``count`` stations at seeded random positions (fractional grid indices),
  each seeing every observed variable by multilinear interpolation from the 2^d
  surrounding grid points (wrapping around on periodic axes).

Each observation knows its variable and its coordinates, which go into ``obs.nc``.
"""
import itertools

import numpy as np
import scipy.sparse as sparse

from .covariance import flatten


class ObservationOperator:
    """y = H x for flat states x; ``variable`` and ``coords`` describe each observation."""

    def __init__(self, matrix, variable, coords: dict, kind: str):
        self.matrix = sparse.csr_matrix(matrix)
        self.transpose = self.matrix.T.tocsr()
        self.variable = np.asarray(variable)          # observed variable of each row
        self.coords = coords                          # dim -> coordinate of each row
        self.kind = kind
        self.size = self.matrix.shape[0]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.matrix @ x

    def adjoint(self, w: np.ndarray) -> np.ndarray:
        return self.transpose @ w

    # ---- constructors ----------------------------------------------------------------
    @classmethod
    def grid(cls, model, every_k: int):
        """Every ``every_k``-th point (from ``every_k // 2``) of every observed variable."""
        k = int(every_k)
        rows, variable, where = [], [], []
        for offset, v in _offsets(model):
            shape = model.shape(v.dims)
            picks = [np.arange(k // 2, n, k) for n in shape]
            for point in itertools.product(*picks):
                rows.append(offset + int(np.ravel_multi_index(point, shape)))
                variable.append(v.name)
                where.append({d: float(model.dim(d).values()[i])
                              for d, i in zip(v.dims, point)})
        p, n = len(rows), _size(model)
        matrix = sparse.csr_matrix((np.ones(p), (np.arange(p), rows)), shape=(p, n))
        return cls(matrix, variable, _columns(where), "grid")

    @classmethod
    def stations(cls, model, count: int, rng):
        """``count`` stations at random positions; multilinear interpolation."""
        periodic = set(model.periodic())
        data, rows, cols, variable, where = [], [], [], [], []
        positions = {}
        for offset, v in _offsets(model):
            shape = model.shape(v.dims)
            for d, n in zip(v.dims, shape):
                if d not in positions:
                    hi = n if d in periodic else n - 1
                    positions[d] = rng.uniform(0.0, hi, size=int(count))
            for s in range(int(count)):
                row = len(variable)
                for corner, weight in _corners([positions[d][s] for d in v.dims], shape,
                                               [d in periodic for d in v.dims]):
                    data.append(weight)
                    rows.append(row)
                    cols.append(offset + int(np.ravel_multi_index(corner, shape)))
                variable.append(v.name)
                where.append({d: model.dim(d).start + model.dim(d).spacing * positions[d][s]
                              for d in v.dims})
        p, n = len(variable), _size(model)
        matrix = sparse.csr_matrix((data, (rows, cols)), shape=(p, n))
        return cls(matrix, variable, _columns(where), "stations")


def _offsets(model):
    """(offset in the flat state, variable) for every observed variable."""
    offset = 0
    for v in model.variables():
        if v.observed:
            yield offset, v
        offset += int(np.prod(model.shape(v.dims), dtype=np.int64))


def _size(model) -> int:
    return flatten(model, {v.name: np.zeros(model.shape(v.dims))
                           for v in model.variables()}).size


def _corners(position, shape, periodic):
    """The grid points around a fractional ``position`` and their multilinear weights."""
    per_axis = []
    for x, n, wrap in zip(position, shape, periodic):
        lo = int(np.floor(x))
        f = x - lo
        if not wrap:
            lo = min(lo, n - 2) if n > 1 else 0
            f = x - lo
        hi = (lo + 1) % n if wrap else min(lo + 1, n - 1)
        per_axis.append([(lo % n, 1.0 - f), (hi, f)])
    for combo in itertools.product(*per_axis):
        weight = float(np.prod([w for _, w in combo]))
        if weight != 0.0:
            yield tuple(i for i, _ in combo), weight


def _columns(where):
    """{dim: coordinate of every observation}, NaN where an observation's variable lacks
    the dim, from one {dim: coordinate} per observation."""
    dims = list(dict.fromkeys(d for w in where for d in w))
    return {d: np.array([w.get(d, np.nan) for w in where], dtype=np.float64) for d in dims}
