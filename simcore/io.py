"""Outputs: netCDF with CF-1.8 attributes and provenance, JSON, plots; all atomic.

Every file is written to a temporary name in its final folder and moved into place
with ``os.replace``: a reader (or a crashed job) never sees half a file.
"""
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .version import __version__


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())          # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def command_line(argv=None) -> str:
    return " ".join(shlex.quote(a) for a in (sys.argv if argv is None else argv))


def git_commit():
    """The repository's commit (with ``+dirty``), or None outside a git checkout."""
    root = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        if rev.returncode:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=5).stdout.strip()
        return rev.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def provenance(config_yaml: str, argv=None, title="") -> dict:
    """Global attributes: CF conventions, versions, command line, resolved config."""
    import adjoint
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    cmd = command_line(argv)
    attrs = {"Conventions": "CF-1.8", "title": title,
             "source": f"simcore {__version__} (adjoint engine {adjoint.__version__})",
             "history": f"{now}: {cmd}", "simcore_version": __version__,
             "command_line": cmd, "config": config_yaml}
    commit = git_commit()
    if commit:
        attrs["git_commit"] = commit
    return attrs


def write_netcdf(ds, path, attrs: dict, encoding=None):
    """``ds`` with global ``attrs`` to ``path`` (netCDF4), atomically; ``encoding`` as
    xarray's (compression, on-disk types)."""
    ds = ds.copy(deep=False)
    ds.attrs.update(attrs)
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine="netcdf4", encoding=encoding)
    return Path(path)


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def write_json(data: dict, path):
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(_plain(data), indent=2) + "\n")
    return Path(path)


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def save_figure(fig, path):
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=Path(path).suffix.lstrip(".") or "png", dpi=100)
    return Path(path)
