"""Every task's figures at tiny sizes, checked as a reader would look at them: a title and
labelled axes on every panel, a label (units) on every colour bar, a legend naming every
line, and images whose colour scale shows all of their data (nothing clipped, more than
one colour). Skipped without matplotlib (pip install -e ".[plot]")."""
import numpy as np
import pytest

from simcore.tasks import run_task
from test_framework import tiny

matplotlib = pytest.importorskip("matplotlib")


@pytest.fixture
def figures(monkeypatch):
    """{file name: problems found} for every figure saved while the test runs."""
    from matplotlib.figure import Figure
    seen, save = {}, Figure.savefig

    def checked(fig, fname, *args, **kwargs):
        name = str(fname).split("/")[-1].lstrip(".").split(".png")[0] + ".png"
        seen[name] = problems(fig)
        return save(fig, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", checked)
    return seen


def problems(fig) -> list:
    out = []
    for ax in fig.axes:
        if hasattr(ax, "_colorbar"):
            if not ax.get_ylabel() and not ax.get_xlabel():
                out.append("a colour bar without a label")
            continue
        where = ax.get_title() or "?"
        for what, text in (("title", ax.get_title()), ("x label", ax.get_xlabel()),
                           ("y label", ax.get_ylabel())):
            if not text.strip():
                out.append(f"panel {where!r}: no {what}")
        out += _legend_problems(ax, where)
        for image in [*ax.images, *ax.collections]:
            out += _colour_problems(image, where)
    return out


def _legend_problems(ax, where):
    lines = ax.get_lines()
    if len(lines) < 2:
        return []
    legend = ax.get_legend()
    if legend is None:
        return [f"panel {where!r}: {len(lines)} lines, no legend"]
    named = {t.get_text() for t in legend.get_texts()}
    out = [f"panel {where!r}: a line not in the legend ({x.get_label()!r})"
           for x in lines if x.get_label() not in named]
    points = [set(zip(np.asarray(x.get_xdata(), float), np.asarray(x.get_ydata(), float)))
              for x in lines]
    for i in range(len(lines)):
        for j in range(i):
            if len(points[i] & points[j]) > 0.5 * min(len(points[i]), len(points[j])) > 0.5:
                out.append(f"panel {where!r}: {lines[j].get_label()!r} and "
                           f"{lines[i].get_label()!r} coincide (one hides the other)")
    return out


def _colour_problems(image, where):
    data = np.ma.masked_invalid(np.asarray(image.get_array(), dtype=float))
    if data.size == 0 or not hasattr(image, "norm"):
        return []
    norm, out = image.norm, []
    if data.min() < norm.vmin - 1e-12 * abs(norm.vmin) or \
            data.max() > norm.vmax + 1e-12 * abs(norm.vmax):
        out.append(f"panel {where!r}: colour scale {norm.vmin:g}..{norm.vmax:g} clips its "
                   f"data {data.min():g}..{data.max():g}")
    colours = np.unique(np.round(image.cmap(norm(data.compressed())), 3), axis=0)
    if len(colours) < 2:
        out.append(f"panel {where!r}: a single colour")
    return out


CASES = {
    "seidel-calibrate": (["cost.png", "w.png"], ("seidel", "calibrate")),
    "heat-calibrate": (["cost.png", "kappa.png"], ("heat", "calibrate", "task.max_iter=10")),
    "heat-assimilate": (["rmse.png", "analysis.png"], ("heat", "assimilate",
                                                       "task.stations=6")),
    "lorenz96-assimilate": (["rmse.png", "hovmoller.png"], ("lorenz96", "assimilate",
                                                            "task.cycles=3")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_figure_is_readable(tmp_path, figures, case):
    names, (model, task, *extra) = CASES[case]
    summary = run_task(tiny(model, task, *extra, f"checkpoint_dir={tmp_path}/ck"),
                       tmp_path / "out")
    assert sorted(figures) == sorted(names)
    assert all(name in summary["outputs"] for name in names)
    for name in names:
        assert (tmp_path / "out" / name).is_file()
        assert figures[name] == [], f"{name}: {figures[name]}"


def test_the_checks_catch_what_the_issue_saw():
    """A panel scaled by another's data (saturated), an unlabelled axis, a line missing
    from the legend, a constant panel: each is reported."""
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2)
    truth, analysis = np.linspace(0, 1, 16).reshape(4, 4), np.linspace(-1, 2, 16).reshape(4, 4)
    a.imshow(truth, vmin=truth.min(), vmax=truth.max())
    a.set_title("truth"), a.set_xlabel("x"), a.set_ylabel("y")
    b.imshow(analysis, vmin=truth.min(), vmax=truth.max())
    b.set_title("analysis"), b.set_xlabel("x")
    found = problems(fig)
    assert "panel 'analysis': no y label" in found
    assert any(p.startswith("panel 'analysis': colour scale 0..1 clips") for p in found)
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 2, 3], label="background")
    ax.plot([1, 2, 3], [2, 3, 4], label="analysis at the window end")
    ax.plot([0, 1], [5, 6])
    ax.imshow(np.ones((3, 3)))
    ax.set_title("t"), ax.set_xlabel("x"), ax.set_ylabel("y"), ax.legend()
    found = problems(fig)
    assert any("a line not in the legend" in p for p in found)
    assert "panel 't': 'background' and 'analysis at the window end' coincide (one hides " \
           "the other)" in found
    assert "panel 't': a single colour" in found
    plt.close(fig)
