"""The report's figures (`figures`) as SVG and PNG files drawn with matplotlib: `report --figures DIR`.

matplotlib is the optional extra `lexpilot-batch[plots]`; without it `save_figures` stops with an
error that names the extra. Chinese labels (the cause classes) need a CJK font: the first of
`CJK_FONTS` that matplotlib knows of is used, then any installed font whose name says CJK (a font
installed after matplotlib built its font cache is found by scanning the system's font files);
without one, the files are still written and `save_figures` says which font to install
(`INSTALL_HINT`). matplotlib's own warnings and log lines (a missing glyph, an unknown font
family) are not printed at the user: what they would say is that one warning. SVG files keep their
text as text (the viewer's fonts draw it); PNG files are drawn at 150 dpi.
"""

from __future__ import annotations

import io
import logging
import re
import warnings as py_warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lexpilot_batch.errors import LexpilotError
from lexpilot_batch.report.formats.figures import Bars, Figure, Heatmap, Panel, Stacked, figures
from lexpilot_batch.report.formats.svg import NEGATIVE, PALETTE, POSITIVE
from lexpilot_batch.util.fileio import write_atomic

CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Microsoft YaHei",
    "SimHei",
    "PingFang SC",
    "Heiti SC",
    "Arial Unicode MS",
    # Same glyphs for Chinese text, other regional defaults: as Debian's fonts-noto-cjk names them.
    "Noto Sans CJK JP",
    "Noto Sans CJK TC",
    "Noto Sans CJK KR",
    "Noto Serif CJK SC",
    "Droid Sans Fallback",
    "AR PL UMing CN",
)
CJK_NAME = re.compile(r"CJK|Han Sans|Han Serif|WenQuanYi|YaHei|SimHei|SimSun|PingFang|Heiti|Hiragino|Fallback", re.I)
INSTALL_HINT = (
    "install the font Noto Sans CJK SC (Debian/Ubuntu: apt install fonts-noto-cjk; Fedora: dnf install "
    "google-noto-sans-cjk-fonts; macOS and Windows ship PingFang SC and Microsoft YaHei, which are found)"
)


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise LexpilotError(
            "--figures needs matplotlib, the optional extra 'plots': pip install 'lexpilot-batch[plots]' "
            "(the HTML report draws its figures without it: --format html)."
        ) from None
    return plt


def _cjk_font() -> str | None:
    """The CJK font to draw with: a known name first, then any known font whose name says CJK, then
    the same among the system's font files that matplotlib's cache predates (added to it)."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    found = _pick({f.name for f in manager.ttflist})
    if found is not None:
        return found
    cached = {f.fname for f in manager.ttflist}
    for path in font_manager.findSystemFonts():
        if path in cached or not CJK_NAME.search(Path(path).name.replace("-", " ")):
            continue
        try:
            manager.addfont(path)
        except (OSError, RuntimeError, ValueError):
            continue  # unreadable font file: not ours to mend
    return _pick({f.name for f in manager.ttflist})


def _pick(known: set[str]) -> str | None:
    named = next((name for name in CJK_FONTS if name in known), None)
    return named or next((name for name in sorted(known) if CJK_NAME.search(name)), None)


@contextmanager
def _quiet() -> Iterator[None]:
    """matplotlib's warnings (a glyph missing from the font) and its log lines (findfont) kept from
    the user's terminal; `save_figures` says what matters once."""
    logger = logging.getLogger("matplotlib")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with py_warnings.catch_warnings():
            py_warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _bars(ax: Any, figure: Bars) -> None:
    n = max(len(figure.series), 1)
    width = 0.8 / n
    for si, series in enumerate(figure.series):
        xs = [ci - 0.4 + width * (si + 0.5) for ci in range(len(figure.categories))]
        values = [0.0 if v is None else v for v in series.values]
        ax.bar(xs, values, width * 0.92, label=series.label, color=PALETTE[si % len(PALETTE)])
        for x, v, lo, hi in zip(xs, series.values, series.low, series.high, strict=True):
            if v is None:
                ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=7, color="#888")
            elif lo is not None and hi is not None:
                ax.errorbar(x, v, yerr=[[v - lo], [hi - v]], fmt="none", ecolor="#222", capsize=3, lw=1)
    ax.set_xticks(range(len(figure.categories)))
    ax.set_xticklabels(figure.categories, fontsize=8)
    ax.set_ylabel(figure.ylabel)
    ax.axhline(0, color="#888", lw=0.8)
    ax.grid(axis="y", color="#ddd")
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, frameon=False)
    ax.set_title(figure.title, fontsize=10)


def _scale(panel: Panel) -> tuple[Any, Any]:
    """The colour map and norm of a panel, as `svg` shades it: white to blue over the metric's
    range, or vermillion through white (at `middle`) to blue."""
    from matplotlib.colors import LinearSegmentedColormap, Normalize, TwoSlopeNorm

    blue, vermillion = ("#{:02x}{:02x}{:02x}".format(*rgb) for rgb in (POSITIVE, NEGATIVE))
    if panel.middle is None:
        return LinearSegmentedColormap.from_list("lexpilot", ["#ffffff", blue]), Normalize(panel.low, panel.high)
    cmap = LinearSegmentedColormap.from_list("lexpilot-diverging", [vermillion, "#ffffff", blue])
    return cmap, TwoSlopeNorm(panel.middle, panel.low, panel.high)


def _draw(plt: Any, figure: Figure) -> Any:
    if isinstance(figure, Bars):
        fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(figure.categories) + 1), 3.6), layout="constrained")
        _bars(ax, figure)
        return fig
    if isinstance(figure, Heatmap):
        panels = max(len(figure.panels), 1)
        width = max(2.2, 0.7 * len(figure.columns) + 1.2)
        fig, axes = plt.subplots(
            1,
            panels,
            figsize=(width * panels + 1, 0.35 * len(figure.rows) + 2.2),
            squeeze=False,
            sharey=True,
            layout="constrained",
        )
        for ax, panel in zip(axes[0], figure.panels, strict=False):
            grid = [[float("nan") if v is None else v for v in row] for row in panel.values]
            cmap, norm = _scale(panel)
            image = ax.imshow(grid, cmap=cmap, norm=norm, aspect="auto")
            ax.set_xticks(range(len(figure.columns)))
            ax.set_xticklabels(figure.columns, rotation=35, ha="right", fontsize=8)
            ax.set_yticks(range(len(figure.rows)))
            ax.set_yticklabels(figure.rows, fontsize=8)
            ax.set_title(panel.title, fontsize=9)
            for ri, row in enumerate(panel.values):
                for ci, v in enumerate(row):
                    text = "–" if v is None else f"{v:.2f}"
                    color = "white" if v is not None and abs(panel.position(v)) > 0.6 else "#222"
                    ax.text(ci, ri, text, ha="center", va="center", fontsize=7, color=color)
            fig.colorbar(image, ax=ax, shrink=0.8)
        fig.suptitle(figure.title, fontsize=10)
        return fig
    assert isinstance(figure, Stacked)
    columns = 2 if figure.side is not None and figure.rows else 1
    fig, axes = plt.subplots(
        1, columns, figsize=(5.5 * columns + 1, 0.45 * max(len(figure.rows), 3) + 2.2), squeeze=False
    )
    # Room below the axes for the legend of the stop reasons (no layout engine places a figure legend).
    fig.subplots_adjust(left=0.12, right=0.97, top=0.88, bottom=0.3, wspace=0.3)
    ax = axes[0][0]
    if figure.rows:
        left = [0.0] * len(figure.rows)
        for si, segment in enumerate(figure.segments):
            shares = [row[si] or 0.0 for row in figure.shares]
            bars = ax.barh(figure.rows, shares, left=left, color=PALETTE[si % len(PALETTE)], label=segment)
            ax.bar_label(bars, [f"{v:.0%}" if v >= 0.06 else "" for v in shares], label_type="center", color="white")
            left = [a + b for a, b in zip(left, shares, strict=True)]
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=8)
        fig.legend(fontsize=8, frameon=False, loc="lower center", ncol=len(figure.segments))
        ax.set_title(figure.title, fontsize=10)
        if figure.side is not None:
            _bars(axes[0][1], figure.side)
    elif figure.side is not None:
        _bars(ax, figure.side)
    return fig


def save_figures(report: dict, out_dir: Path) -> tuple[list[Path], list[str]]:
    """Write each figure of `report` as `<name>.svg` and `<name>.png` under `out_dir`; returns the
    files written and any warnings (a missing CJK font)."""
    plt = _pyplot()
    warnings = []
    with _quiet():
        font = _cjk_font()
    # A fixed salt: the ids inside an SVG file are otherwise random, and a report drawn twice differed.
    style: dict[str, Any] = {"svg.fonttype": "none", "svg.hashsalt": "lexpilot-batch", "font.size": 9}
    if font is not None:
        style["font.sans-serif"] = [font, "DejaVu Sans"]
    elif any(not label.isascii() for label in _labels(report)):
        warnings.append(
            f"no CJK font found for matplotlib: Chinese labels show as boxes in the PNG files; {INSTALL_HINT}. "
            "The SVG files keep them as text."
        )
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LexpilotError(f"cannot create --figures folder {out_dir} ({exc.strerror or exc})") from None
    drawn: dict[Path, bytes] = {}  # every figure is drawn before any file is written
    with plt.rc_context(style), _quiet():
        for figure in figures(report):
            fig = _draw(plt, figure)
            for suffix in ("svg", "png"):
                buffer = io.BytesIO()
                fig.savefig(buffer, format=suffix, dpi=150, metadata={"Date": None} if suffix == "svg" else None)
                drawn[out_dir / f"{figure.name}.{suffix}"] = buffer.getvalue()
            plt.close(fig)
    taken = [path for path in drawn if path.is_dir()]
    if taken:
        raise LexpilotError(
            f"cannot write {taken[0]}: a folder of that name is in the way; move it or choose another --figures folder"
        )
    for path, data in drawn.items():
        try:
            write_atomic(path, data)
        except OSError as exc:
            raise LexpilotError(f"cannot write {path} ({exc.strerror or exc})") from None
    return list(drawn), warnings


def _labels(report: dict) -> list[str]:
    return [g["model"] for g in report["groups"]] + [c for g in report["groups"] for c in g["cases"]["by_class"]]
