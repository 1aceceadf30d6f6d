"""Inline SVG charts: no script library, nothing fetched, every point in the file.

A chart with a log-scale toggle carries two pre-drawn versions of its lines and y ticks
(`.lin-y`, `.log-y`); the page's checkbox shows one or the other. NaN and ±Inf are markers on the
axis (NaN and -Inf at the bottom, +Inf at the top), drawn in both versions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any

import polars as pl

from logwatch.report.series import Points

WIDTH, LEFT, RIGHT, TOP, BOTTOM = 1100, 64, 16, 26, 22
PLOT_W = WIDTH - LEFT - RIGHT
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
SEVERITY_COLOUR = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}


@dataclass(frozen=True, slots=True)
class XAxis:
    """The shared x axis: epoch seconds (`time`) or line numbers."""

    lo: float
    hi: float
    time: bool

    def px(self, x: float) -> float:
        """x to pixels."""
        return (x - self.lo) / ((self.hi - self.lo) or 1.0) * PLOT_W + LEFT

    def px_expr(self, x: pl.Expr) -> pl.Expr:
        """x to pixels, column-wise."""
        return (x - self.lo) / ((self.hi - self.lo) or 1.0) * PLOT_W + LEFT

    def label(self, x: float) -> str:
        """A tick label."""
        if not self.time:
            return f"{x:,.0f}"
        fmt = "%H:%M:%S" if self.hi - self.lo < 86400 else "%m-%d %H:%M"
        return datetime.fromtimestamp(x, UTC).strftime(fmt)


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded x range: a restart, a stall, a starvation streak."""

    x0: float
    x1: float
    kind: str
    title: str


@dataclass(frozen=True, slots=True)
class Line:
    """One named series, drawn as one polyline per source."""

    label: str
    parts: Sequence[Points]
    colour: str
    dashed: bool = False


def line_chart(
    chart_id: str,
    title: str,
    axis: XAxis,
    lines: Sequence[Line],
    bands: Sequence[Band] = (),
    *,
    log_toggle: bool = True,
    height: int = 210,
) -> str:
    """One chart of lines against x, with markers for non-finite values."""
    plot_h = height - TOP - BOTTOM
    ys = [p.finite.get_column("y") for line in lines for p in line.parts]
    values = pl.concat(ys) if ys else pl.Series("y", [], dtype=pl.Float64)
    body = [_bands(bands, axis, plot_h), _x_ticks(axis, height)]
    for scale in ("lin", "log") if log_toggle else ("lin",):
        y_of = _y_scale(values, scale, plot_h)
        group = [f'<g class="{scale}-y">' if log_toggle else "<g>", y_of.ticks]
        for line in lines:
            group.extend(_polyline(line, p, axis, y_of) for p in line.parts)
        body.append("".join(group) + "</g>")
    for line in lines:
        body.extend(_markers(line, p, axis, plot_h) for p in line.parts)
    return _frame(chart_id, title, lines, height, "".join(body))


@dataclass(frozen=True, slots=True)
class _YScale:
    expr_of: pl.Expr
    ticks: str
    log: bool


def _y_scale(values: pl.Series, scale: str, plot_h: int) -> _YScale:
    """Where a y value goes in pixels on this scale, and its tick marks."""
    if scale == "log":
        values = values.filter(values > 0).log10()
    lo = float(values.min()) if values.len() else 0.0  # type: ignore[arg-type]  # Float64
    hi = float(values.max()) if values.len() else 1.0  # type: ignore[arg-type]  # Float64
    if hi - lo <= abs(hi) * 1e-9:  # a constant: a band around it
        half = abs(hi) * 0.1 or 0.5
        lo, hi = lo - half, hi + half
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad
    y = pl.col("y").log10() if scale == "log" else pl.col("y")
    expr = TOP + plot_h - (y - lo) / (hi - lo) * plot_h
    marks = []
    for i in range(5):
        v = lo + (hi - lo) * (i + 0.5) / 5
        py = TOP + plot_h - (v - lo) / (hi - lo) * plot_h
        text = f"{10**v:.3g}" if scale == "log" else f"{v:.4g}"
        marks.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}"/>'
            f'<text class="tick" x="{LEFT - 4}" y="{py + 3:.1f}" text-anchor="end">{text}</text>'
        )
    return _YScale(expr, "".join(marks), scale == "log")


def _polyline(line: Line, points: Points, axis: XAxis, y: _YScale) -> str:
    finite = points.finite
    if y.log:  # log scale: what is not positive has no place
        finite = finite.filter(pl.col("y") > 0)
    if finite.is_empty():
        return ""
    coords = finite.select(
        pl.format("{},{}", axis.px_expr(pl.col("x")).round(1), y.expr_of.round(1)).str.join(" ")
    ).item()
    dash = ' stroke-dasharray="5 3"' if line.dashed else ""
    return (
        f'<polyline class="series" data-series="{escape(line.label)}" '
        f'data-points="{finite.height}" fill="none" stroke="{line.colour}"{dash} '
        f'points="{coords}"/>'
    )


def _markers(line: Line, points: Points, axis: XAxis, plot_h: int) -> str:
    """Each NaN / ±Inf as a marker on the axis, with its step and line in a tooltip."""
    out = []
    for row in points.nonfinite.iter_rows(named=True):
        x = axis.px(float(row["x"]))
        value = row["y"]
        kind = "nan" if math.isnan(value) else ("inf" if value > 0 else "ninf")
        word = {"nan": "NaN", "inf": "+Inf", "ninf": "-Inf"}[kind]
        tip = escape(_marker_tip(line.label, word, row))
        if kind == "inf":
            y0 = TOP
            shape = f'<path d="M{x:.1f},{y0} l-5,9 l10,0 z"/>'
        else:
            y0 = TOP + plot_h
            shape = (
                f'<circle cx="{x:.1f}" cy="{y0}" r="5"/>'
                if kind == "nan"
                else f'<path d="M{x:.1f},{y0} l-5,-9 l10,0 z"/>'
            )
        out.append(
            f'<g class="nf {kind}-marker" data-series="{escape(line.label)}">'
            f"<title>{tip}</title>{shape}</g>"
        )
    return "".join(out)


def _marker_tip(label: str, word: str, row: dict[str, Any]) -> str:
    """A marker's tooltip: its step and line, or for one standing for several, how many and
    the steps and lines from the first to the last."""
    if row.get("n", 1) == 1:
        return f"{label} {word} at step {row['step']} (line {row['line']})"
    return (
        f"{label} {word} x{row['n']:,} from step {row['step']} to {row['step_last']} "
        f"(lines {row['line']} to {row['line_last']})"
    )


def _bands(bands: Sequence[Band], axis: XAxis, plot_h: int) -> str:
    out = []
    for band in bands:
        x0 = axis.px(band.x0)
        x1 = max(axis.px(band.x1), x0 + 2)
        out.append(
            f'<rect class="band {band.kind}" x="{x0:.1f}" y="{TOP}" width="{x1 - x0:.1f}" '
            f'height="{plot_h}"><title>{escape(band.title)}</title></rect>'
        )
    return "".join(out)


def _x_ticks(axis: XAxis, height: int) -> str:
    out = [
        f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{height - BOTTOM}" '
        f'y2="{height - BOTTOM}"/>'
    ]
    for i in range(7):
        x = axis.lo + (axis.hi - axis.lo) * i / 6
        px = axis.px(x)
        anchor = "start" if i == 0 else ("end" if i == 6 else "middle")
        out.append(
            f'<text class="tick" x="{px:.1f}" y="{height - 6}" text-anchor="{anchor}">'
            f"{escape(axis.label(x))}</text>"
        )
    return "".join(out)


def _frame(chart_id: str, title: str, lines: Sequence[Line], height: int, body: str) -> str:
    legend, x = [], LEFT + 12 + 8 * len(title)
    for line in lines:
        legend.append(
            f'<rect x="{x:.0f}" y="8" width="10" height="10" fill="{line.colour}"/>'
            f'<text class="legend" x="{x + 14:.0f}" y="17">{escape(line.label)}</text>'
        )
        x += 24 + 7 * len(line.label)
    return (
        f'<svg class="chart" id="{escape(chart_id)}" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">'
        f'<text class="title" x="{LEFT}" y="17">{escape(title)}</text>{"".join(legend)}'
        f"{body}</svg>"
    )


def stack_chart(
    chart_id: str,
    title: str,
    axis: XAxis,
    parts: Sequence[pl.DataFrame],
    bands: Sequence[Band],
) -> str:
    """Shares (columns `b0`.. summing to 1 per row) against `x`, as a stacked area; one
    stack per part (source), so nothing is drawn across the gap between two files."""
    height = 170
    plot_h = height - TOP - BOTTOM
    names = sorted(
        {c for part in parts for c in part.columns if c != "x"}, key=lambda c: int(c[1:])
    )
    shapes = [_stack(part, names, axis, plot_h) for part in parts if part.height]
    lines = [Line(f"bucket {i}", (), PALETTE[i % len(PALETTE)]) for i in range(len(names))]
    body = "".join(shapes) + _bands(bands, axis, plot_h) + _x_ticks(axis, height)
    return _frame(chart_id, title, lines, height, body)


def _stack(shares: pl.DataFrame, names: Sequence[str], axis: XAxis, plot_h: int) -> str:
    xs = [axis.px(float(v)) for v in shares.get_column("x")]
    tops = [0.0] * shares.height
    shapes = []
    for i, name in enumerate(names):
        lows = tops
        column = shares.get_column(name).fill_null(0.0) if name in shares.columns else None
        values = column.to_list() if column is not None else [0.0] * shares.height
        tops = [a + b for a, b in zip(lows, values, strict=True)]
        upper = [f"{x:.1f},{TOP + plot_h * (1 - t):.1f}" for x, t in zip(xs, tops, strict=True)]
        lower = [f"{x:.1f},{TOP + plot_h * (1 - t):.1f}" for x, t in zip(xs, lows, strict=True)]
        shapes.append(
            f'<polygon class="series" data-series="bucket {i}" data-points="{len(xs)}" '
            f'fill="{PALETTE[i % len(PALETTE)]}" fill-opacity="0.75" '
            f'points="{" ".join(upper + lower[::-1])}"/>'
        )
    return "".join(shapes)


@dataclass(frozen=True, slots=True)
class Span:
    """An alert from firing to resolved (or to the end of its log)."""

    rule: str
    severity: str
    x0: float
    x1: float
    title: str


def span_chart(chart_id: str, title: str, axis: XAxis, spans: Sequence[Span]) -> str:
    """One row per rule; a bar per firing-to-resolved span, coloured by severity."""
    rules = list(dict.fromkeys(span.rule for span in spans))
    height = TOP + BOTTOM + 22 * max(len(rules), 1)
    body = [_x_ticks(axis, height)]
    for i, rule in enumerate(rules):
        y = TOP + 22 * i
        body.append(f'<text class="rule" x="{LEFT + 4}" y="{y + 15}">{escape(rule)}</text>')
    for span in spans:
        y = TOP + 22 * rules.index(span.rule) + 3
        x0 = axis.px(span.x0)
        x1 = max(axis.px(span.x1), x0 + 3)
        colour = SEVERITY_COLOUR.get(span.severity, "#777")
        body.append(
            f'<rect class="alert-span" data-rule="{escape(span.rule)}" x="{x0:.1f}" y="{y}" '
            f'width="{x1 - x0:.1f}" height="16" fill="{colour}" fill-opacity="0.55">'
            f"<title>{escape(span.title)}</title></rect>"
        )
    if not spans:
        body.append(f'<text class="tick" x="{LEFT + 4}" y="{TOP + 15}">no alerts</text>')
    return _frame(chart_id, title, [], height, "".join(body))
