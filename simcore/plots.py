"""What every figure shares: axis labels with units, and rows of 2-D fields on one colour
scale that shows each panel's data (the scale spans all of them, so none saturates),
with their difference on a symmetric scale of its own.
"""
import numpy as np

from .io import save_figure


def label(long_name: str, units: str) -> str:
    """``x distance [m]``; dimensionless quantities (CF units "1" or "") go without."""
    return f"{long_name} [{units}]" if units not in ("", "1") else long_name


def dim_label(dim) -> str:
    return label(dim.long_name or dim.name, dim.units)


def fields(plt, path, panels, dims, quantity, difference=None, title=""):
    """A row of images, ``panels`` = [(title, 2-D array)], over ``dims`` (the model's Dim
    of the rows, then of the columns), on one colour bar labelled ``quantity``; then
    ``difference`` = (title, array) on a symmetric diverging scale. A constant panel is
    not drawn: its value goes into the figure's title (a flat image tells nothing)."""
    shown = [(t, a) for t, a in panels if np.ptp(a) > 0]
    notes = [f"{t}: {float(np.ravel(a)[0]):.4g} everywhere" for t, a in panels
             if np.ptp(a) == 0]
    n = len(shown) + (difference is not None)
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n + 1.6, 3.6), squeeze=False,
                             layout="constrained")
    axes = list(axes[0])
    lo = min(float(np.min(a)) for _, a in shown) if shown else 0.0
    hi = max(float(np.max(a)) for _, a in shown) if shown else 1.0
    image = None
    for ax, (t, a) in zip(axes, shown):
        image = _image(ax, a, dims, t, vmin=lo, vmax=hi)
    if image is not None:
        fig.colorbar(image, ax=axes[:len(shown)], label=quantity)
    if difference is not None:
        t, d = difference
        m = float(np.max(np.abs(d))) or 1e-300
        im = _image(axes[-1], d, dims, t, vmin=-m, vmax=m, cmap="RdBu_r")
        fig.colorbar(im, ax=axes[-1], label=quantity)
    fig.suptitle("; ".join(filter(None, [title, *notes])))
    save_figure(fig, path)
    plt.close(fig)


def _image(ax, a, dims, title, **kw):
    rows, cols = dims
    extent = _extent(cols) + _extent(rows)
    aspect = "equal" if rows.units == cols.units else "auto"     # true shapes where they can be
    im = ax.imshow(a, origin="lower", extent=extent, aspect=aspect, interpolation="nearest",
                   **kw)
    ax.set_title(title)
    ax.set_xlabel(dim_label(cols))
    ax.set_ylabel(dim_label(rows))
    return im


def _extent(dim):
    """Pixel edges around the coordinate values."""
    x = dim.values()
    half = 0.5 * dim.spacing
    return [float(x[0] - half), float(x[-1] + half)]
