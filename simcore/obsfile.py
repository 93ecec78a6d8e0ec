"""Observations as data: the observation file, and the state files (truth, background).

The observation file is CF-1.8 netCDF, a discrete sampling geometry of
``featureType = "point"``: one record per observation along the dimension ``obs``.

    time(obs)         model time of the observation, in the model's time units; after
                      the initial time 0 and a whole number of model steps
    <dim>(obs)        its coordinate along each dimension of its variable, in that
                      dimension's units (lorenz96: ``site``; heat: ``y``, ``x``), off the
                      grid allowed (multilinear interpolation, around periodic axes) --
      or <dim>_index(obs)   the (fractional) grid index along the dimension instead
    variable(obs)     the observed state variable's name (string)
    value(obs)        the observed value, in the variable's units
    error_std(obs)    its error standard deviation, same units (R is diagonal)
    id(obs), type(obs)    optional: station id, kind of observation; carried along
    global attributes: Conventions, featureType, title, source, history, model, and
                      the provenance simcore puts on its outputs (command_line, config,
                      git_commit)

A state file (``truth.nc``, ``background.nc``) is what ``simcore.state`` writes: the
model's state variables over (``time``, <dims>) with a ``time`` coordinate.

Twin runs write all three; ``obs.file``, ``truth.file`` and ``background.file`` read
them (or a user's own). What cannot be used -- a missing variable, other units, NaNs,
times outside the run or between model steps, positions off the grid -- is a
:class:`~simcore.errors.DataFileError` naming the file and the field.
"""
from pathlib import Path

import numpy as np
import xarray as xr

from .covariance import flatten, unflatten
from .errors import DataFileError
from .io import write_netcdf
from .observation import ObservationOperator, coordinates
from .state import state_dataset

REQUIRED = ("time", "variable", "value", "error_std")
OPTIONAL = ("id", "type")


class Observed:
    """The observations of one time: H (over the flat state), values y, error stds."""

    def __init__(self, H: ObservationOperator, y, sigma):
        self.H, self.y = H, np.asarray(y, dtype=np.float64)
        self.sigma = np.asarray(sigma, dtype=np.float64)


class ObservationSet:
    """Observations as records (one per observation), grouped by model step.

    ``steps``: model steps after the initial time; ``variable``: state variable names;
    ``positions``: {dim: fractional grid index} (NaN where a variable lacks the dim);
    ``value``, ``error_std``; ``extra``: the optional id/type columns."""

    def __init__(self, model, steps, variable, positions, value, error_std, extra=None,
                 source="synthetic", attrs=None):
        self.model, self.source = model, str(source)
        self.steps = np.asarray(steps, dtype=np.int64)
        self.variable = np.asarray(variable, dtype=str)
        self.positions = {d: np.asarray(p, dtype=np.float64) for d, p in positions.items()}
        self.value = np.asarray(value, dtype=np.float64)
        self.error_std = np.asarray(error_std, dtype=np.float64)
        self.extra = dict(extra or {})
        self.attrs = dict(attrs or {})
        self._observed = {}

    def __len__(self):
        return len(self.value)

    def times(self) -> np.ndarray:
        """The distinct observation steps, sorted."""
        return np.unique(self.steps)

    def at(self, step) -> Observed:
        """The observations at ``step`` (one operator for them, built once)."""
        step = int(step)
        if step not in self._observed:
            rows = np.flatnonzero(self.steps == step)
            H = ObservationOperator.at_points(
                self.model, self.variable[rows], {d: p[rows] for d, p in self.positions.items()})
            self._observed[step] = Observed(H, self.value[rows], self.error_std[rows])
        return self._observed[step]

    @classmethod
    def synthetic(cls, model, H, steps, frames, sigma, rng=None):
        """``H`` of each flat truth state of ``frames`` at ``steps``, plus N(0, sigma^2)
        noise drawn time by time from ``rng`` (None: noise-free)."""
        values, observed = [], {}
        for step, x in zip(steps, frames):
            y = H(x)
            if rng is not None:
                y = y + sigma * rng.standard_normal(H.size)
            values.append(y)
        k = len(values)
        out = cls(model, np.repeat(steps, H.size), np.tile(H.variable, k),
                  {d: np.tile(p, k) for d, p in H.positions.items()}, np.concatenate(values),
                  np.full(k * H.size, float(sigma)),
                  extra={"type": np.full(k * H.size, H.kind)})
        for step, y in zip(steps, values):     # the operator is H itself, not rebuilt
            observed[int(step)] = Observed(H, y, np.full(H.size, float(sigma)))
        out._observed = observed
        return out

    # ---- the file -------------------------------------------------------------------------
    def dataset(self) -> xr.Dataset:
        model = self.model
        t = model.time()
        units = _value_units(model, self.variable)
        data = {
            "variable": (("obs",), self.variable.astype(object),
                         {"long_name": "observed state variable"}),
            "value": (("obs",), self.value,
                      {"units": units, "long_name": "observed value"}),
            "error_std": (("obs",), self.error_std,
                          {"units": units, "long_name": "observation error standard "
                                                        "deviation"}),
        }
        for name, column in self.extra.items():
            data[name] = (("obs",), np.asarray(column).astype(object)
                          if np.asarray(column).dtype.kind in "US" else np.asarray(column),
                          {"long_name": {"id": "station id",
                                         "type": "kind of observation"}[name]})
        coords = {"time": ("obs", self.steps * float(t.dt),
                           {"units": t.units, "standard_name": "time", "axis": "T",
                            "long_name": "observation time (model time after the initial "
                                         "time)"})}
        for d, c in coordinates(model, self.positions).items():
            dim = model.dim(d)
            attrs = {"units": dim.units, "long_name": f"{dim.long_name or d} of the "
                                                      "observation"}
            if dim.axis:
                attrs["axis"] = dim.axis
            coords[d] = ("obs", c, attrs)
        ds = xr.Dataset(data, coords=coords)
        ds["obs"] = ("obs", np.arange(len(self)), {"units": "1",
                                                   "long_name": "observation record"})
        return ds

    def write(self, path, attrs: dict):
        attrs = {"Conventions": "CF-1.8", **attrs, "featureType": "point",
                 "model": self.model.name, **self.attrs}
        ds = self.dataset()
        # compressed; strings as characters (variable-length strings do not compress):
        # 40 observations at 200 times take 80 kB instead of 720 kB
        encoding = {k: {"zlib": True, "complevel": 4,
                        **({"dtype": "S1"} if ds[k].dtype.kind in "OUS" else {})}
                    for k in ds.variables}
        return write_netcdf(ds, path, attrs, encoding)

    @classmethod
    def read(cls, path, model) -> "ObservationSet":
        """The observation file ``path`` for ``model``, every field checked."""
        ds = _open(path)
        with ds:
            for name in REQUIRED:
                if name not in ds.variables:
                    raise DataFileError(f"{path}: no variable {name!r}; an observation file "
                                        f"has {', '.join(REQUIRED)} and coordinates per "
                                        "dimension (docs/framework.md, 'Observation files')")
            variable = np.asarray(ds["variable"].values).astype(str)
            names = [v.name for v in model.variables()]
            unknown = sorted(str(v) for v in set(variable) - set(names))
            if unknown:
                raise DataFileError(f"{path}: variable: {', '.join(map(repr, unknown))} is "
                                    f"not a state variable of {model.name} "
                                    f"({', '.join(names)})")
            units = _value_units(model, variable, path)
            value = _numbers(ds, path, "value", units)
            error_std = _numbers(ds, path, "error_std", units)
            if np.any(error_std <= 0):
                raise DataFileError(f"{path}: error_std: must be above 0, record "
                                    f"{int(np.flatnonzero(error_std <= 0)[0])} has "
                                    f"{error_std[error_std <= 0][0]:g}")
            steps = _steps(ds, path, model)
            positions = _positions(ds, path, model, variable)
            extra = {n: ds[n].values for n in OPTIONAL if n in ds.variables}
            attrs = {"source_file": str(path)}
        return cls(model, steps, variable, positions, value, error_std, extra, path, attrs)


def _open(path) -> xr.Dataset:
    if not Path(path).is_file():
        raise DataFileError(f"{path}: no such file")
    try:
        return xr.open_dataset(path, decode_times=False)
    except Exception as exc:                     # noqa: BLE001 (netCDF4's many kinds)
        raise DataFileError(f"{path}: not a readable netCDF file ({exc})") from None


def _value_units(model, variables, path="observations") -> str:
    units = {v.units for v in model.variables() if v.name in set(variables)}
    if len(units) > 1:
        raise DataFileError(f"{path}: variable: observations of variables with different "
                            f"units ({', '.join(sorted(units))}) go into one file each")
    return units.pop() if units else "1"


def _numbers(ds, path, name, units) -> np.ndarray:
    """A float column with the given units and no NaN."""
    got = ds[name].attrs.get("units")
    if got != units:
        raise DataFileError(f"{path}: {name}: units {got!r}, the model's are {units!r}")
    values = np.asarray(ds[name].values, dtype=np.float64)
    if values.ndim != 1:
        raise DataFileError(f"{path}: {name}: must be 1-D over obs, has dims {ds[name].dims}")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise DataFileError(f"{path}: {name}: {bad.size} NaN or infinite values (first at "
                            f"record {int(bad[0])})")
    return values


def _steps(ds, path, model) -> np.ndarray:
    t = model.time()
    time = _numbers(ds, path, "time", t.units)
    steps = np.rint(time / t.dt)
    off = np.flatnonzero(np.abs(time / t.dt - steps) > 1e-6 * np.maximum(1.0, np.abs(steps)))
    if off.size:
        raise DataFileError(f"{path}: time: {time[off[0]]:g} (record {int(off[0])}) is not "
                            f"a whole number of model steps (dt = {t.dt:g} {t.units})")
    before = np.flatnonzero(steps <= 0)
    if before.size:
        raise DataFileError(f"{path}: time: {time[before[0]]:g} (record {int(before[0])}) "
                            "is outside the run: observations come after the initial time 0")
    return steps.astype(np.int64)


def _positions(ds, path, model, variable) -> dict:
    """{dim: fractional grid index} from <dim> (coordinates) or <dim>_index."""
    periodic, out = set(model.periodic()), {}
    for v in model.variables():
        rows = variable == v.name
        if not rows.any():
            continue
        for d in v.dims:
            dim = model.dim(d)
            if d in ds.variables:
                index = (_numbers(ds, path, d, dim.units) - dim.start) / dim.spacing
            elif f"{d}_index" in ds.variables:
                index = _numbers(ds, path, f"{d}_index", "1")
            else:
                raise DataFileError(f"{path}: no variable {d!r} (or {d + '_index'!r}): "
                                    f"where along {d} the observations of {v.name} are")
            snapped = np.rint(index)            # grid points exactly, not 1e-16 beside
            index = np.where(np.abs(index - snapped) < 1e-9, snapped, index)
            hi = dim.size if d in periodic else dim.size - 1
            outside = np.flatnonzero(rows & ((index < 0) | (index > hi)))
            if outside.size and d not in periodic:
                r = int(outside[0])
                raise DataFileError(f"{path}: {d}: record {r} lies outside the grid (grid "
                                    f"index {index[r]:g}, the grid has 0 ... {hi})")
            out.setdefault(d, np.full(len(variable), np.nan))
            out[d][rows] = np.mod(index[rows], dim.size) if d in periodic else index[rows]
    return out


# ---- state files (truth, background) ---------------------------------------------------------
def write_states(model, path, states, times, attrs: dict):
    """Flat states (one per row) at model ``times`` as a state file."""
    parts = [unflatten(model, x) for x in states]
    stacked = {v.name: np.stack([p[v.name] for p in parts]) for v in model.variables()}
    return write_netcdf(state_dataset(model, stacked, time=np.asarray(times)), path, attrs)


def read_states(model, path):
    """(model times, flat states (times, n)) of the state file ``path``, checked."""
    ds = _open(path)
    with ds:
        if "time" not in ds.variables:
            raise DataFileError(f"{path}: no variable 'time' (a state file has the model's "
                                "state variables over (time, <dims>))")
        times = _numbers(ds, path, "time", model.time().units)
        states = {}
        for v in model.variables():
            if v.name not in ds.variables:
                raise DataFileError(f"{path}: no variable {v.name!r} ({v.long_name})")
            want = ("time", *v.dims)
            if tuple(ds[v.name].dims) != want or \
                    tuple(ds[v.name].shape[1:]) != model.shape(v.dims):
                sizes = dict(zip(want, (len(times), *model.shape(v.dims))))
                raise DataFileError(f"{path}: {v.name}: dims {dict(ds[v.name].sizes)}, the "
                                    f"model's are {sizes}")
            if ds[v.name].attrs.get("units") != v.units:
                raise DataFileError(f"{path}: {v.name}: units "
                                    f"{ds[v.name].attrs.get('units')!r}, the model's are "
                                    f"{v.units!r}")
            values = np.asarray(ds[v.name].values, dtype=np.float64)
            if not np.all(np.isfinite(values)):
                raise DataFileError(f"{path}: {v.name}: NaN or infinite values")
            states[v.name] = values
    flat = np.stack([flatten(model, {k: a[i] for k, a in states.items()})
                     for i in range(len(times))])
    return times, flat


def states_at(path, times, states, wanted, dt):
    """The rows of ``states`` at model times ``wanted`` (to rounding); a DataFileError
    naming the first missing time."""
    index = {int(round(t / dt)): i for i, t in enumerate(times)}
    rows = []
    for t in wanted:
        i = index.get(int(round(t / dt)))
        if i is None:
            raise DataFileError(f"{path}: time: no state at t={t:g}, which the run needs")
        rows.append(states[i])
    return np.stack(rows)
