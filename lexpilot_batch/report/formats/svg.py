"""The report's figures (`figures`) as inline SVG, for the self-contained HTML report: no plotting
library, no fonts embedded (the browser's own draw the text, Chinese included), a `<title>`
tooltip on every bar and cell."""

from __future__ import annotations

from html import escape
from typing import Any

from lexpilot_batch.report.formats.figures import Bars, Figure, Heatmap, Stacked, Value
from lexpilot_batch.util.text import display_width

# Okabe-Ito: distinguishable with every common colour-vision deficiency.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
FONT = "system-ui,-apple-system,'Segoe UI','Noto Sans CJK SC','PingFang SC','Microsoft YaHei',sans-serif"
CHAR = 6.6  # px per display column at 12px


def _text(x: float, y: float, text: str, anchor: str = "start", size: int = 12, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _svg(width: float, height: float, title: str, body: list[str], name: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="figure" data-figure="{name}" role="img" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" height="{height:.0f}" '
        f'font-family="{FONT}"><title>{escape(title)}</title>'
        + _text(8, 18, title, size=14, extra=' font-weight="600"')
        + "".join(body)
        + "</svg>"
    )


def _number(value: Value) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _legend(labels: list[str], x: float, y: float, colors: tuple[str, ...] = PALETTE) -> tuple[list[str], float]:
    """Legend items from (x, y), wrapped at 700px; returns the elements and the height used."""
    out, cx, cy = [], x, y
    for i, label in enumerate(labels):
        width = 18 + display_width(label) * CHAR + 16
        if cx + width > 700 and cx > x:
            cx, cy = x, cy + 18
        out.append(f'<rect x="{cx:.1f}" y="{cy - 10:.1f}" width="12" height="12" fill="{colors[i % len(colors)]}"/>')
        out.append(_text(cx + 16, cy, label))
        cx += width
    return out, cy - y + 18


def bars(figure: Bars, width: float = 720, height: float = 300) -> str:
    left, right, top, bottom = 48.0, 12.0, 34.0, 40.0
    labels = [s.label for s in figure.series]
    legend, legend_h = _legend(labels, left, height - 8)
    lows = [v for s in figure.series for v in (*s.values, *s.low) if v is not None]
    y_min = min(0.0, min(lows, default=0.0))
    y_min = -1.0 if y_min < -0.5 else (-0.5 if y_min < 0 else 0.0)
    total_h = height + legend_h
    plot_h = height - top - bottom
    plot_w = width - left - right

    def y(v: float) -> float:
        return top + plot_h * (1 - (v - y_min) / (1 - y_min))

    body = []
    tick = y_min
    while tick <= 1.0001:
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#ddd"/>')
        body.append(_text(left - 6, y(tick) + 4, f"{tick:.1f}", "end", 11))
        tick = round(tick + (0.5 if y_min < 0 else 0.2), 10)
    body.append(f'<line x1="{left}" x2="{width - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#888"/>')
    n_cat, n_series = max(len(figure.categories), 1), max(len(figure.series), 1)
    slot = plot_w / n_cat
    bar_w = slot * 0.8 / n_series
    for ci, category in enumerate(figure.categories):
        x0 = left + ci * slot + slot * 0.1
        body.append(_text(left + (ci + 0.5) * slot, top + plot_h + 16, category, "middle", 11))
        for si, series in enumerate(figure.series):
            value, low, high = series.values[ci], series.low[ci], series.high[ci]
            x = x0 + si * bar_w
            tip = f"{series.label} — {category}: {_number(value)}" + (
                "" if low is None or high is None else f" [95% CI {low:.4f}, {high:.4f}]"
            )
            if value is None:
                body.append(_text(x + bar_w / 2, y(0) - 4, "n/a", "middle", 9, ' fill="#888"'))
                continue
            y_top, y_base = sorted((y(value), y(0)))
            body.append(
                f'<rect x="{x + 1:.1f}" y="{y_top:.1f}" width="{max(bar_w - 2, 1):.1f}" '
                f'height="{max(y_base - y_top, 0.5):.1f}" fill="{PALETTE[si % len(PALETTE)]}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if low is not None and high is not None:
                cx = x + bar_w / 2
                for part in (
                    f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}"',
                    f'<line x1="{cx - 3:.1f}" x2="{cx + 3:.1f}" y1="{y(low):.1f}" y2="{y(low):.1f}"',
                    f'<line x1="{cx - 3:.1f}" x2="{cx + 3:.1f}" y1="{y(high):.1f}" y2="{y(high):.1f}"',
                ):
                    body.append(part + ' stroke="#222" stroke-width="1.2"/>')
    return _svg(width, total_h, figure.title, body + legend, figure.name)


NEGATIVE = (0xD5, 0x5E, 0x00)  # Okabe-Ito vermillion: the low side of a diverging scale
POSITIVE = (0x00, 0x72, 0xB2)  # Okabe-Ito blue: the high side


def _shade(position: float) -> str:
    """A colour for `Panel.position`: white at 0, blue towards 1, vermillion towards -1."""
    t = max(-1.0, min(1.0, position))
    end = POSITIVE if t >= 0 else NEGATIVE
    r, g, b = (int(255 + (c - 255) * abs(t)) for c in end)
    return f"#{r:02x}{g:02x}{b:02x}"


# Column labels (model names) are drawn rotated by this angle: each one's whole name stays inside
# the figure, which is as wide and as tall as the longest one needs.
_ANGLE = 35
_COS, _SIN = 0.819, 0.574
SCALE_STEPS = 11  # swatches of a panel's colour scale


def _scale(panel: Any, x: float, y: float, width: float) -> list[str]:
    """A panel's colour scale under its grid: swatches from its low to its high value, the ends
    (and a diverging scale's middle) labelled with the values they stand for."""
    out = []
    step = width / SCALE_STEPS
    for k in range(SCALE_STEPS):
        value = panel.low + (panel.high - panel.low) * k / (SCALE_STEPS - 1)
        fill = _shade(panel.position(value))
        out.append(
            f'<rect class="scale" x="{x + k * step:.1f}" y="{y:.1f}" width="{step:.1f}" height="8" fill="{fill}" '
            f'stroke="#ccc" stroke-width="0.5"><title>{value:.2f}</title></rect>'
        )
    out.append(_text(x, y + 20, f"{panel.low:g}", "start", 10))
    if panel.middle is not None:
        out.append(_text(x + width / 2, y + 20, f"{panel.middle:g}", "middle", 10))
    out.append(_text(x + width, y + 20, f"{panel.high:g}", "end", 10))
    return out


def heatmap(figure: Heatmap) -> str:
    cell_w, cell_h = 58.0, 22.0
    row_label = max((display_width(r) for r in figure.rows), default=4) * CHAR + 20
    name_w = max((display_width(c) for c in figure.columns), default=4) * CHAR * 11 / 12
    col_label = name_w * _SIN + 16
    title_w = max((display_width(p.title) for p in figure.panels), default=0) * CHAR
    n = max(len(figure.columns), 1)
    grid_w = cell_w * n
    # The last column's name runs right of its cell's middle: the panel leaves it room.
    panel_w = max(grid_w, title_w, (n - 0.5) * cell_w + name_w * _COS) + 16
    per_line = max(1, int((900 - row_label) // panel_w))
    lines = (len(figure.panels) + per_line - 1) // per_line
    panel_h = 20 + col_label + cell_h * len(figure.rows) + 40
    width = row_label + panel_w * min(per_line, max(len(figure.panels), 1))
    height = 30 + panel_h * lines
    body = []
    for pi, panel in enumerate(figure.panels):
        px = row_label + (pi % per_line) * panel_w
        py = 30 + (pi // per_line) * panel_h
        body.append(_text(px, py + 14, panel.title, size=12, extra=' font-weight="600"'))
        grid_top = py + 20 + col_label
        for ci, column in enumerate(figure.columns):
            cx = px + (ci + 0.5) * cell_w
            turn = f' class="column" transform="rotate(-{_ANGLE} {cx:.1f} {grid_top - 6:.1f})"'
            body.append(_text(cx, grid_top - 6, column, "start", 11, turn))
        for ri, row in enumerate(figure.rows):
            ry = grid_top + ri * cell_h
            if pi % per_line == 0:
                body.append(_text(px - 6, ry + 15, row, "end", 11))
            for ci, value in enumerate(panel.values[ri]):
                cx = px + ci * cell_w
                fill = "#f2f2f2" if value is None else _shade(panel.position(value))
                tip = f"{row} — {figure.columns[ci]} — {panel.title}: {_number(value)}"
                body.append(
                    f'<rect x="{cx:.1f}" y="{ry:.1f}" width="{cell_w - 2:.1f}" height="{cell_h - 2:.1f}" '
                    f'fill="{fill}"><title>{escape(tip)}</title></rect>'
                )
                ink = "#fff" if value is not None and abs(panel.position(value)) > 0.6 else "#222"
                label = "–" if value is None else f"{value:.2f}"
                body.append(_text(cx + cell_w / 2 - 1, ry + 15, label, "middle", 11, f' fill="{ink}"'))
        body.extend(_scale(panel, px, grid_top + cell_h * len(figure.rows) + 6, min(grid_w - 2, 200.0)))
    return _svg(width, height, figure.title, body, figure.name)


def stacked(figure: Stacked) -> str:
    label_w = max((display_width(r) for r in figure.rows), default=4) * CHAR + 12
    bar_w, row_h, top = 520.0, 26.0, 34.0
    width = label_w + bar_w + 20
    legend, legend_h = _legend(figure.segments, label_w, top + row_h * len(figure.rows) + 22)
    body = []
    for ri, row in enumerate(figure.rows):
        ry = top + ri * row_h
        body.append(_text(label_w - 6, ry + 16, row, "end", 11))
        x = label_w
        for si, share in enumerate(figure.shares[ri]):
            if not share:
                continue
            w = bar_w * share
            tip = f"{row} — {figure.segments[si]}: {share:.1%}"
            body.append(
                f'<rect x="{x:.1f}" y="{ry:.1f}" width="{w:.1f}" height="{row_h - 6:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(tip)}</title></rect>'
            )
            if w > 34:
                body.append(_text(x + w / 2, ry + 14, f"{share:.0%}", "middle", 10, ' fill="#fff"'))
            x += w
    height = top + row_h * len(figure.rows) + 22 + legend_h
    return _svg(width, height, figure.title, body + legend, figure.name)


def render(figure: Figure) -> list[str]:
    """One figure as SVG elements (a stacked figure with a side chart gives two)."""
    if isinstance(figure, Bars):
        return [bars(figure)]
    if isinstance(figure, Heatmap):
        return [heatmap(figure)]
    out = [stacked(figure)] if figure.rows else []
    if figure.side is not None:
        out.append(bars(figure.side, width=420, height=260))
    return out
