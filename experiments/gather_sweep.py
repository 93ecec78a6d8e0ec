"""Gather the summary.json files of a sweep into one xarray Dataset (and a table).

    python experiments/gather_sweep.py multirun/2026-11-30/06-30-00_1234-ab12
    python experiments/gather_sweep.py 'outputs/2026-11-30/*calibrate*' --csv sweep.csv
    python experiments/gather_sweep.py SWEEP --netcdf sweep.nc --by seed model.obs.sigma

Every run directory below the given folders (or matching the glob) that holds a
summary.json is one entry of the ``run`` dimension. Coordinates: the run directory,
and every override that varies between runs (read from ``.hydra/overrides.yaml``: the
sweep parameters, e.g. ``seed``, ``model.obs.sigma``, ``engine.memory_budget``); data
variables: every scalar field of the summaries (``relative_error``, ``cost_final``,
``iterations``, ``wall_time_s``, ...; a field missing from a run is NaN there).
``--by`` names overrides to make dimensions instead (a full grid, e.g. seeds x noise
levels), for ``ds.mean("seed")`` and friends. Runs still going (no summary.json yet)
and killed ones are listed as missing, not guessed.
"""
import argparse
import glob
import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr
import yaml


def run_dirs(paths) -> list:
    """Run directories (holding summary.json) under or matching ``paths``, sorted."""
    found = set()
    for pattern in paths:
        for base in sorted(glob.glob(str(pattern))) or [pattern]:
            base = Path(base)
            if (base / "summary.json").is_file():
                found.add(base)
            found.update(p.parent for p in base.rglob("summary.json")
                         if ".submitit" not in p.parts)
    return sorted(found)


def overrides(run: Path) -> dict:
    """The run's command-line overrides (``key=value`` -> {key: value}), typed by YAML."""
    path = run / ".hydra" / "overrides.yaml"
    if not path.is_file():
        return {}
    out = {}
    for item in yaml.safe_load(path.read_text()) or []:
        key, _, value = str(item).lstrip("+~").partition("=")
        if key.startswith("hydra"):
            continue
        out[key] = yaml.safe_load(value) if value else value
    return out


def scalars(summary: dict, prefix="") -> dict:
    """Numeric, boolean and string fields, nested dicts flattened with '.' (lists skipped)."""
    out = {}
    for k, v in summary.items():
        if isinstance(v, dict):
            out.update(scalars(v, f"{prefix}{k}."))
        elif isinstance(v, (bool, int, float, str)) or v is None:
            out[prefix + k] = v
    return out


def gather(*paths, by=()) -> xr.Dataset:
    """One Dataset over ``run`` (or over the ``by`` overrides) for the runs under ``paths``."""
    runs = run_dirs(paths)
    if not runs:
        raise SystemExit(f"no summary.json under {', '.join(map(str, paths))}")
    rows = [(run, overrides(run), scalars(json.loads((run / "summary.json").read_text())))
            for run in runs]
    keys = sorted({k for _, o, _ in rows for k in o})
    varying = [k for k in keys if len({repr(o.get(k)) for _, o, _ in rows}) > 1]
    fields = sorted({k for _, _, s in rows for k in s} - set(varying))
    ds = xr.Dataset(coords={"run": ("run", [str(r) for r, _, _ in rows])})
    for k in varying:
        ds.coords[k] = ("run", _column([o.get(k) for _, o, _ in rows]))
    for k in fields:
        ds[k] = ("run", _column([s.get(k) for _, _, s in rows]))
    ds.attrs["runs"] = len(rows)
    ds.attrs["constant_overrides"] = " ".join(f"{k}={rows[0][1][k]}" for k in keys
                                              if k not in varying)
    if by:
        ds = ds.set_index(run=list(by)).unstack("run")
    return ds


def _column(values):
    """Bools stay bool and ints int where every run has the field; else float with NaN."""
    present = [v for v in values if v is not None]
    complete = len(present) == len(values)
    if present and all(isinstance(v, bool) for v in present):
        return np.array(values, dtype=bool) if complete else \
            np.array([np.nan if v is None else float(v) for v in values])
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                       for v in present):
        if complete and all(isinstance(v, int) for v in present):
            return np.array(values, dtype=np.int64)
        return np.array([np.nan if v is None else v for v in values], dtype=float)
    return np.array(["" if v is None else str(v) for v in values])


def table(ds, columns=None) -> str:
    """A plain-text table of the varying overrides and a few headline fields per run."""
    frame = ds.to_dataframe() if "run" in ds.dims else ds.to_dataframe().reset_index()
    wanted = columns or [c for c in ("relative_error", "relative_error_initial", "chi2_per_obs",
                                     "iterations", "converged", "passed", "wall_time_s")
                         if c in frame.columns]
    coords = [c for c in ds.coords if c != "run" and c in frame.columns]
    return frame[coords + wanted].to_string(index=False, float_format=lambda x: f"{x:.4g}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="sweep folders, run folders or globs")
    ap.add_argument("--by", nargs="*", default=(), help="overrides to use as dimensions")
    ap.add_argument("--netcdf", help="write the Dataset to this netCDF file")
    ap.add_argument("--csv", help="write the table of every field to this CSV file")
    ap.add_argument("--columns", nargs="*", help="fields to print (default: headline ones)")
    args = ap.parse_args(argv)
    ds = gather(*args.paths)
    print(f"{ds.attrs['runs']} runs; same in all: {ds.attrs['constant_overrides'] or '-'}")
    print(table(ds, args.columns))
    if args.csv:
        ds.to_dataframe().to_csv(args.csv)
    if args.by:
        ds = gather(*args.paths, by=args.by)
    if args.netcdf:
        ds.to_netcdf(args.netcdf)
    return ds


if __name__ == "__main__":
    main(sys.argv[1:])
