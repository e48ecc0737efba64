"""`report --figures DIR`: the three figures as SVG and PNG with matplotlib (the `plots` extra), and a
clear error naming the extra without it."""

from __future__ import annotations

import builtins

import pytest
from test_report import CONTRACT, FAMILY, dcg, run, two_runs

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import build_report
from lexpilot_batch.report.figures import figures
from lexpilot_batch.report.plots import save_figures

pytest.importorskip("matplotlib", reason="matplotlib comes with the test extra (pip install -e '.[test]')")


def report():
    return build_report([*two_runs(), run("run1", {"dcg": dcg((FAMILY, True), (CONTRACT, False))}, model="model-b")])


def test_each_figure_is_written_as_svg_and_png(tmp_path):
    built = report()
    written, warnings = save_figures(built, tmp_path / "figs")
    names = [f.name for f in figures(built)]
    assert names == ["metrics", "classes", "interaction"]
    assert sorted(p.name for p in written) == sorted(f"{n}.{s}" for n in names for s in ("svg", "png"))
    for path in written:
        data = path.read_bytes()
        if path.suffix == ".png":
            assert data.startswith(b"\x89PNG") and len(data) > 2000
        else:
            text = data.decode("utf-8")
            assert "<svg" in text and "model-a" in text and "model-b" in text  # text kept as text
    assert FAMILY in (tmp_path / "figs" / "classes.svg").read_text(encoding="utf-8")
    assert all("CJK font" in w for w in warnings)


def test_without_matplotlib_the_error_names_the_extra(monkeypatch, tmp_path):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(LexpilotError, match=r"lexpilot-batch\[plots\]"):
        save_figures(report(), tmp_path)
    assert not any(tmp_path.iterdir())
