"""`report --figures DIR`: the three figures as SVG and PNG with matplotlib (the `plots` extra), and a
clear error naming the extra without it."""

from __future__ import annotations

import builtins

import pytest

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report import build_report
from lexpilot_batch.report.formats.figures import figures
from lexpilot_batch.report.formats.plots import save_figures
from tests.helpers.report_runs import CONTRACT, FAMILY, dcg, ljp, run, two_runs

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


def test_figures_drawn_twice_are_the_same_bytes(tmp_path):
    built = report()
    first = {p.name: p.read_bytes() for p in save_figures(built, tmp_path / "one")[0]}
    second = {p.name: p.read_bytes() for p in save_figures(built, tmp_path / "two")[0]}
    assert first == second  # the SVG files' ids too (matplotlib's are random without a salt)


def test_a_report_with_no_finished_case_draws_no_empty_heatmap(tmp_path):
    """A `--partial` report of a workspace only prepared: groups, but no case of any class."""
    built = build_report([run("run1", {"dcg": dcg()})])
    written, _ = save_figures(built, tmp_path / "figs")
    assert "classes" not in [f.name for f in figures(built)]
    names = {p.name for p in written}
    assert {"metrics.png", "metrics.svg"} <= names and not any(n.startswith("classes") for n in names)


def test_a_folder_in_the_way_of_one_figure_stops_before_any_file_is_written(tmp_path):
    (tmp_path / "figs" / "classes.svg").mkdir(parents=True)
    with pytest.raises(LexpilotError, match="classes.svg: a folder of that name is in the way"):
        save_figures(report(), tmp_path / "figs")
    assert [p.name for p in (tmp_path / "figs").iterdir()] == ["classes.svg"]


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


def negative_kappa_report() -> dict:
    """One model whose Gold LJP verdicts in class FAMILY are the reverse of gold: QWK -1 there."""
    records = ljp(
        (FAMILY, [("支持", "驳回"), ("驳回", "支持")]),
        (CONTRACT, [("支持", "支持"), ("驳回", "驳回"), ("部分支持", "部分支持")]),
    )
    return build_report([run("run1", {"ljp_gold": records})])


def test_the_heatmap_colours_each_metric_over_its_range_a_negative_kappa_is_not_white():
    """A QWK of -1 (agreement worse than chance) was drawn like 0 (white) on a 0-1 scale; the
    panel now spans -1 to 1, vermillion below chance, white at 0, blue above."""
    from lexpilot_batch.report.formats.svg import heatmap

    (panel,) = [f for f in figures(negative_kappa_report()) if f.name == "classes"][0].panels  # type: ignore[union-attr]
    assert (panel.low, panel.middle, panel.high) == (-1.0, 0.0, 1.0)
    values = {row: values[0] for row, values in zip(sorted([CONTRACT, FAMILY]), panel.values, strict=True)}
    assert values[FAMILY] == pytest.approx(-1.0) and values[CONTRACT] == pytest.approx(1.0)
    assert panel.position(-1.0) == -1.0 and panel.position(0.0) == 0.0 and panel.position(0.5) == 0.5
    svg = heatmap([f for f in figures(negative_kappa_report()) if f.name == "classes"][0])  # type: ignore[arg-type]
    assert 'fill="#d55e00"' in svg  # -1: full vermillion, not the white of 0
    assert 'fill="#0072b2"' in svg  # +1: full blue


def test_without_a_cjk_font_the_warning_names_the_font_to_install_and_matplotlib_stays_quiet(
    tmp_path, monkeypatch, capfd
):
    """matplotlib's glyph warnings ("Glyph ... missing from font(s) DejaVu Sans") and findfont log
    lines were printed at the user; now only our one warning, which says what to install."""
    import warnings

    from matplotlib import font_manager

    from lexpilot_batch.report.formats import plots

    monkeypatch.setattr(
        font_manager.fontManager,
        "ttflist",
        [f for f in font_manager.fontManager.ttflist if not plots.CJK_NAME.search(f.name)],
    )
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, said = save_figures(report(), tmp_path)
    assert [w for w in caught if "matplotlib" in (w.filename or "") or "Glyph" in str(w.message)] == []
    out, err = capfd.readouterr()
    assert "Glyph" not in out + err and "findfont" not in out + err
    (warning,) = said
    assert "Noto Sans CJK SC" in warning and "fonts-noto-cjk" in warning


def test_an_installed_cjk_font_is_found_by_any_of_its_names(monkeypatch):
    """Debian's fonts-noto-cjk registers "Noto Sans CJK JP" (the SC glyphs are in the same file);
    the old list of names did not know it and warned although Chinese would have drawn. The fonts
    are this test's own, never the machine's: a machine whose font cache lists "Noto Sans CJK SC"
    (which the lookup rightly prefers) made it fail for a reason unrelated to any change."""
    from matplotlib import font_manager

    from lexpilot_batch.report.formats import plots

    latin = font_manager.FontEntry(fname="/nonexistent/DejaVuSans.ttf", name="DejaVu Sans")
    fake = font_manager.FontEntry(fname="/nonexistent/NotoSansCJK-Regular.ttc", name="Noto Sans CJK JP")
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [latin, fake])
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [])
    assert plots._cjk_font() == "Noto Sans CJK JP"
    # With SC beside it, SC first (the list's order), wherever the machine stands.
    sc = font_manager.FontEntry(fname="/nonexistent/NotoSansCJKsc-Regular.otf", name="Noto Sans CJK SC")
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [latin, fake, sc])
    assert plots._cjk_font() == "Noto Sans CJK SC"
    other = font_manager.FontEntry(fname="/nonexistent/SourceHanSansCN-Regular.otf", name="Source Han Sans CN")
    monkeypatch.setattr(font_manager.fontManager, "ttflist", [other])
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *a, **k: [])
    assert plots._cjk_font() == "Source Han Sans CN"


def test_the_heatmap_has_a_colour_scale_per_panel_and_every_model_name_whole_inside_the_figure():
    """Issue 48 point 6: the HTML heatmap had no colour scale, and long model names ran off its edge."""
    import re

    from lexpilot_batch.report.formats.figures import Heatmap, Panel
    from lexpilot_batch.report.formats.svg import SCALE_STEPS, heatmap
    from lexpilot_batch.util.text import display_width

    names = ["openai/gpt-4o-mini-2024-07-18", "anthropic/claude-3-5-haiku-20241022"]
    figure = Heatmap(
        "classes",
        "By class",
        [FAMILY, CONTRACT],
        names,
        [Panel("Macro-F1", [[0.5, 0.7], [0.2, None]]), Panel("QWK", [[0.5, -0.7], [0.2, 1.0]], -1.0, 1.0, 0.0)],
    )
    svg = heatmap(figure)
    width = float(re.search(r'<svg [^>]*width="([\d.]+)"', svg).group(1))  # type: ignore[union-attr]
    columns = re.findall(
        r'<text x="([\d.]+)" y="[\d.]+" font-size="11" text-anchor="start" class="column"[^>]*>([^<]+)<', svg
    )
    assert sorted({name for _, name in columns}) == sorted(names)  # whole, never cut
    for x, name in columns:  # rotated by 35 degrees: its end is x + length * cos(35) to the right
        assert float(x) + display_width(name) * 6.6 * 11 / 12 * 0.819 <= width
    swatches = re.findall(r'<rect class="scale"[^>]*fill="(#[0-9a-f]{6})"', svg)
    assert len(swatches) == 2 * SCALE_STEPS
    macro, qwk = swatches[:SCALE_STEPS], swatches[SCALE_STEPS:]
    assert macro[0] == "#ffffff" and macro[-1] == "#0072b2"  # 0 white to 1 blue
    assert qwk[0] == "#d55e00" and qwk[SCALE_STEPS // 2] == "#ffffff" and qwk[-1] == "#0072b2"
    assert re.search(r">-1</text>.*>0</text>.*>1</text>", svg)  # the QWK scale's ends and middle named
