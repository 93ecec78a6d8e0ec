"""xarray Datasets <-> the kernels' NumPy arrays, without copies where possible.

Kernels want C-contiguous float64 arrays and update them in place. A Dataset built
here wraps the arrays it is given (no copy), and ``arrays`` hands back the Dataset's
own buffers when they already have the kernel's layout, so running a kernel on
``arrays(ds)`` updates ``ds``.
"""
import numpy as np
import xarray as xr


def kernel_array(data) -> np.ndarray:
    """``data`` as a C-contiguous float64 ndarray: the same buffer when it already is one
    (0-d stays 0-d, unlike ``np.ascontiguousarray``)."""
    return np.require(np.asarray(data, dtype=np.float64), requirements="C")


def coords(model, dims) -> dict:
    """CF-annotated coordinates for ``dims``."""
    out = {}
    for name in dims:
        d = model.dim(name)
        out[name] = xr.Variable((name,), d.values(), d.attrs())
    return out


def state_dataset(model, state: dict, time=None) -> xr.Dataset:
    """A Dataset of the model's state variables wrapping the arrays of ``state``.

    With ``time`` (a 1-D array), each array has a leading time axis of that length.
    """
    variables = model.variables()
    dims = [d for v in variables for d in v.dims]
    data_vars = {}
    for v in variables:
        vdims = (("time",) if time is not None else ()) + tuple(v.dims)
        data_vars[v.name] = xr.Variable(vdims, kernel_array(state[v.name]), v.attrs())
    ds = xr.Dataset(data_vars, coords=coords(model, dict.fromkeys(dims)))
    if time is not None:
        t = model.time()
        ds = ds.assign_coords(time=xr.Variable(("time",), np.asarray(time, dtype=np.float64),
                                               {"units": t.units, "long_name": t.long_name,
                                                "axis": "T"}))
    return ds


def parameter_dataset(model, params: dict, prefix="", suffix="", leading=None) -> xr.Dataset:
    """The parameters as data variables (renamed ``prefix + name + suffix``).

    ``leading`` = (dim name, coordinate values) adds a leading axis (e.g. iterations).
    """
    data_vars, dims = {}, []
    for p in model.parameters():
        vdims = ((leading[0],) if leading else ()) + tuple(p.dims)
        data_vars[prefix + p.name + suffix] = xr.Variable(vdims, kernel_array(params[p.name]),
                                                          p.attrs())
        dims += p.dims
    return xr.Dataset(data_vars, coords=coords(model, dict.fromkeys(dims)))


def arrays(ds: xr.Dataset, names) -> dict:
    """The Dataset's buffers for ``names`` (views, not copies, when float64 C-contiguous)."""
    return {n: kernel_array(ds[n].data) for n in names}


def copy_state(state: dict) -> dict:
    return {k: v.copy() for k, v in state.items()}
