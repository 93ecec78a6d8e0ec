"""Linear observation operators H for data assimilation: a sparse matrix over the flat state.

Two kinds, both exact linear maps (so H^T is the matrix transpose):

- ``grid``: every ``every_k``-th grid point of each observed variable, starting at
  ``every_k // 2`` along every axis (the points ``simcore.twin.Observations`` selects);
- ``stations``: ``count`` stations at seeded random positions (fractional grid indices),
  each seeing every observed variable by multilinear interpolation from the 2^d
  surrounding grid points (wrapping around on periodic axes).

A third constructor, ``at_points``, takes each observation's variable and fractional
grid position (what an observation file gives, simcore.obsfile); the other two go
through the same interpolation or select grid points exactly. Each observation knows its
variable, grid position and coordinates, which go into ``observations.nc``.
"""
import itertools

import numpy as np
import scipy.sparse as sparse

from .covariance import layout, state_size


class ObservationOperator:
    """y = H x for flat states x; ``variable``, ``positions`` (fractional grid indices)
    and ``coords`` (coordinates in the dims' units) describe each observation."""

    def __init__(self, matrix, variable, positions: dict, coords: dict, kind: str):
        self.matrix = sparse.csr_matrix(matrix)
        self.transpose = self.matrix.T.tocsr()
        self.variable = np.asarray(variable)          # observed variable of each row
        self.positions = positions                    # dim -> grid index of each row
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
                where.append(dict(zip(v.dims, map(float, point))))
        p, n = len(rows), state_size(model)
        matrix = sparse.csr_matrix((np.ones(p), (np.arange(p), rows)), shape=(p, n))
        positions = _columns(where)
        return cls(matrix, variable, positions, coordinates(model, positions), "grid")

    @classmethod
    def stations(cls, model, count: int, rng):
        """``count`` stations at random positions; multilinear interpolation."""
        periodic = set(model.periodic())
        variable, where, drawn = [], [], {}
        for _, v in _offsets(model):
            for d, n in zip(v.dims, model.shape(v.dims)):
                if d not in drawn:
                    drawn[d] = rng.uniform(0.0, n if d in periodic else n - 1, size=int(count))
            for s in range(int(count)):
                variable.append(v.name)
                where.append({d: float(drawn[d][s]) for d in v.dims})
        return cls.at_points(model, variable, _columns(where), "stations")

    @classmethod
    def at_points(cls, model, variable, positions: dict, kind="points"):
        """One observation of state variable ``variable[i]`` at the fractional grid
        indices ``positions[dim][i]`` (NaN for dims the variable lacks) for each i, by
        multilinear interpolation from the 2^d surrounding grid points, wrapping around
        periodic axes; a whole index is that grid point (weight 1)."""
        periodic, where = set(model.periodic()), _offsets(model, every=True)
        data, rows, cols = [], [], []
        for row, name in enumerate(variable):
            offset, v = where[name]
            shape = model.shape(v.dims)
            for corner, weight in _corners([positions[d][row] for d in v.dims], shape,
                                           [d in periodic for d in v.dims]):
                data.append(weight)
                rows.append(row)
                cols.append(offset + int(np.ravel_multi_index(corner, shape)))
        matrix = sparse.csr_matrix((data, (rows, cols)), shape=(len(variable), state_size(model)))
        return cls(matrix, variable, positions, coordinates(model, positions), kind)


def coordinates(model, positions: dict) -> dict:
    """Fractional grid indices -> coordinates in each dim's units."""
    return {d: model.dim(d).start + model.dim(d).spacing * np.asarray(p, dtype=np.float64)
            for d, p in positions.items()}


def _offsets(model, every=False):
    """[(offset in the flat state, variable)] of every observed variable; with
    ``every``, {name: (offset, variable)} of all state variables."""
    offsets = {name: offset for name, offset, _ in layout(model)}
    if every:
        return {v.name: (offsets[v.name], v) for v in model.variables()}
    return [(offsets[v.name], v) for v in model.variables() if v.observed]


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
    """{dim: value (grid position or coordinate) of every observation}, NaN where an
    observation's variable lacks the dim, from one {dim: value} per observation."""
    dims = list(dict.fromkeys(d for w in where for d in w))
    return {d: np.array([w.get(d, np.nan) for w in where], dtype=np.float64) for d in dims}
