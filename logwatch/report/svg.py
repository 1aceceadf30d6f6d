"""Inline SVG charts: no script library, nothing fetched, every point in the file.

A chart with a log-scale toggle carries two pre-drawn versions of its lines and y ticks
(`.lin-y`, `.log-y`); the page's checkbox shows one or the other. NaN and ±Inf are markers on the
axis (NaN and -Inf at the bottom, +Inf at the top), drawn in both versions. Ticks are 1-2-5
values (`ticks.py`); the legend wraps onto as many rows as it needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import polars as pl

from logwatch.report.collect import Kind
from logwatch.report.series import Points
from logwatch.report.ticks import linear_ticks, log_ticks, si_label

WIDTH, LEFT, RIGHT, TOP, BOTTOM = 1100, 64, 16, 26, 22
PLOT_W = WIDTH - LEFT - RIGHT
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
SEVERITY_COLOUR = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}


@dataclass(frozen=True, slots=True)
class XAxis:
    """The shared x axis: epoch seconds (`time`), training steps (`step`) or line numbers
    (`line`: files end to end, each with its own line numbers and a labelled divider), with
    its ticks (x, label) and dividers (x, label)."""

    lo: float
    hi: float
    kind: Kind
    ticks: tuple[tuple[float, str], ...] = ()
    dividers: tuple[tuple[float, str], ...] = ()

    @property
    def time(self) -> bool:
        """Whether x is epoch seconds."""
        return self.kind == "time"

    def px(self, x: float) -> float:
        """x to pixels."""
        return (x - self.lo) / ((self.hi - self.lo) or 1.0) * PLOT_W + LEFT

    def px_expr(self, x: pl.Expr) -> pl.Expr:
        """x to pixels, column-wise."""
        return (x - self.lo) / ((self.hi - self.lo) or 1.0) * PLOT_W + LEFT


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded x range: a restart, a stall, a starvation streak."""

    x0: float
    x1: float
    kind: str
    title: str


@dataclass(frozen=True, slots=True)
class Line:
    """One named series, drawn as one polyline per part; `legend`: whether it has an entry."""

    label: str
    parts: Sequence[Points]
    colour: str
    dashed: bool = False
    legend: bool = True


@dataclass(frozen=True, slots=True)
class Geo:
    """A chart's vertical layout: where the plot begins (under the legend) and its height."""

    top: int
    plot_h: int
    height: int


def legend_layout(title: str, lines: Sequence[Line], plot_h: int) -> tuple[Geo, str]:
    """The legend after the title, wrapped onto rows within the chart's width; the layout
    that leaves room for it."""
    entries, x, row = [], LEFT + 12 + 8 * len(title), 0
    for line in (line for line in lines if line.legend):
        width = 24 + 7 * len(line.label)
        if x + width > WIDTH - RIGHT and x > LEFT:
            x, row = LEFT, row + 1
        y = 8 + 15 * row
        dash = ' stroke-dasharray="3 2"' if line.dashed else ""
        entries.append(
            f'<g class="legend-entry" data-series="{escape(line.label)}">'
            f'<line x1="{x}" x2="{x + 12}" y1="{y + 5}" y2="{y + 5}" stroke="{line.colour}" '
            f'stroke-width="3"{dash}/>'
            f'<text class="legend" x="{x + 16:.0f}" y="{y + 9}">{escape(line.label)}</text></g>'
        )
        x += width
    top = TOP + 15 * row
    return Geo(top, plot_h, top + plot_h + BOTTOM), "".join(entries)


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
    geo, legend = legend_layout(title, lines, height - TOP - BOTTOM)
    ys = [p.finite.get_column("y") for line in lines for p in line.parts]
    values = pl.concat(ys) if ys else pl.Series("y", [], dtype=pl.Float64)
    body = [_bands(bands, axis, geo), x_ticks(axis, geo)]
    for scale in ("lin", "log") if log_toggle else ("lin",):
        y_of = _y_scale(values, scale, geo)
        group = [f'<g class="{scale}-y">' if log_toggle else "<g>", y_of.ticks]
        for line in lines:
            group.extend(_polyline(line, p, axis, y_of) for p in line.parts)
        body.append("".join(group) + "</g>")
    for line in lines:
        body.extend(_markers(line, p, axis, geo) for p in line.parts)
    return frame(chart_id, title, legend, geo, "".join(body))


@dataclass(frozen=True, slots=True)
class _YScale:
    expr_of: pl.Expr
    ticks: str
    log: bool


def _y_scale(values: pl.Series, scale: str, geo: Geo) -> _YScale:
    """Where a y value goes in pixels on this scale, and its tick marks (1-2-5 values)."""
    if scale == "log":
        values = values.filter(values > 0).log10()
    lo = float(values.min()) if values.len() else 0.0  # type: ignore[arg-type]  # Float64
    hi = float(values.max()) if values.len() else 1.0  # type: ignore[arg-type]  # Float64
    if hi - lo <= abs(hi) * 1e-9:  # a constant: a band around it
        half = (abs(hi) * 0.1 or 0.5) if scale == "lin" else 0.5
        lo, hi = lo - half, hi + half
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad
    top, plot_h = geo.top, geo.plot_h
    y = pl.col("y").log10() if scale == "log" else pl.col("y")
    expr = top + plot_h - (y - lo) / (hi - lo) * plot_h
    if scale == "log":
        marks = [(math.log10(v), si_label(v)) for v in log_ticks(lo, hi, most=5)]
    else:
        found = linear_ticks(lo, hi, most=5)
        step = found[1] - found[0] if len(found) > 1 else None
        marks = [(v, si_label(v, step)) for v in found]
    out = []
    for v, text in marks:
        py = top + plot_h - (v - lo) / (hi - lo) * plot_h
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{py:.1f}" y2="{py:.1f}"/>'
            f'<text class="tick yt{" ylog" if scale == "log" else " ylin"}" x="{LEFT - 4}" y="{py + 3:.1f}" text-anchor="end">'
            f"{escape(text)}</text>"
        )
    return _YScale(expr, "".join(out), scale == "log")


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


def _markers(line: Line, points: Points, axis: XAxis, geo: Geo) -> str:
    """Each NaN / ±Inf as a marker on the axis, with its step and line in a tooltip."""
    out = []
    for row in points.nonfinite.iter_rows(named=True):
        x = axis.px(float(row["x"]))
        value = row["y"]
        kind = "nan" if math.isnan(value) else ("inf" if value > 0 else "ninf")
        word = {"nan": "NaN", "inf": "+Inf", "ninf": "-Inf"}[kind]
        tip = escape(_marker_tip(line.label, word, row))
        if kind == "inf":
            y0 = geo.top
            shape = f'<path d="M{x:.1f},{y0} l-5,9 l10,0 z"/>'
        else:
            y0 = geo.top + geo.plot_h
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
        step = f" at step {row['step']}" if row["step"] is not None else ""
        return f"{label} {word}{step} (line {row['line']})"
    return (
        f"{label} {word} x{row['n']:,} from step {row['step']} to {row['step_last']} "
        f"(lines {row['line']} to {row['line_last']})"
    )


def _bands(bands: Sequence[Band], axis: XAxis, geo: Geo) -> str:
    out = []
    for band in bands:
        x0 = axis.px(band.x0)
        x1 = max(axis.px(band.x1), x0 + 2)
        out.append(
            f'<rect class="band {band.kind}" x="{x0:.1f}" y="{geo.top}" width="{x1 - x0:.1f}" '
            f'height="{geo.plot_h}"><title>{escape(band.title)}</title></rect>'
        )
    return "".join(out)


def x_ticks(axis: XAxis, geo: Geo) -> str:
    """The x axis line, its ticks and, on a line-number axis, each file's labelled divider."""
    base = geo.top + geo.plot_h
    out = [f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{base}" y2="{base}"/>']
    for x, label in axis.ticks:
        px = axis.px(x)
        anchor = "start" if px < LEFT + 20 else ("end" if px > WIDTH - RIGHT - 20 else "middle")
        out.append(
            f'<line class="tickmark" x1="{px:.1f}" x2="{px:.1f}" y1="{base}" y2="{base + 4}"/>'
            f'<text class="tick xt" x="{px:.1f}" y="{geo.height - 6}" text-anchor="{anchor}">'
            f"{escape(label)}</text>"
        )
    for x, label in axis.dividers:
        px = axis.px(x)
        out.append(
            f'<line class="divider" x1="{px:.1f}" x2="{px:.1f}" y1="{geo.top}" y2="{base}"/>'
            f'<text class="divider-label" x="{px + 3:.1f}" y="{geo.top + 10}">'
            f"{escape(label)}</text>"
        )
    return "".join(out)


def frame(chart_id: str, title: str, legend: str, geo: Geo, body: str) -> str:
    """A chart's `svg` element: its title, legend and body."""
    return (
        f'<svg class="chart" id="{escape(chart_id)}" width="{WIDTH}" height="{geo.height}" '
        f'viewBox="0 0 {WIDTH} {geo.height}" role="img" aria-label="{escape(title)}">'
        f'<text class="title" x="{LEFT}" y="17">{escape(title)}</text>{legend}'
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
    stack per part, so nothing is drawn across the gap between two parts."""
    names = sorted(
        {c for part in parts for c in part.columns if c != "x"}, key=lambda c: int(c[1:])
    )
    lines = [Line(f"bucket {i}", (), PALETTE[i % len(PALETTE)]) for i in range(len(names))]
    geo, legend = legend_layout(title, lines, 170 - TOP - BOTTOM)
    shapes = [_stack(part, names, axis, geo) for part in parts if part.height]
    body = "".join(shapes) + _bands(bands, axis, geo) + x_ticks(axis, geo)
    return frame(chart_id, title, legend, geo, body)


def _stack(shares: pl.DataFrame, names: Sequence[str], axis: XAxis, geo: Geo) -> str:
    xs = [axis.px(float(v)) for v in shares.get_column("x")]
    tops = [0.0] * shares.height
    shapes = []
    top, plot_h = geo.top, geo.plot_h
    for i, name in enumerate(names):
        lows = tops
        column = shares.get_column(name).fill_null(0.0) if name in shares.columns else None
        values = column.to_list() if column is not None else [0.0] * shares.height
        tops = [a + b for a, b in zip(lows, values, strict=True)]
        upper = [f"{x:.1f},{top + plot_h * (1 - t):.1f}" for x, t in zip(xs, tops, strict=True)]
        lower = [f"{x:.1f},{top + plot_h * (1 - t):.1f}" for x, t in zip(xs, lows, strict=True)]
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


def _bars(spans: Sequence[Span], axis: XAxis) -> list[tuple[str, str, float, float, int, str]]:
    """Each rule's spans as drawn bars (rule, severity, x0, x1 in pixels, how many, the first's
    title), in the spans' order: spans of one rule and severity whose bars overlap are one bar
    (thousands of ranks' alerts of one cascade are one bar, not thousands on one spot); spans
    off the axis are left out, those across its ends cut there."""
    bars: list[list[Any]] = []
    last: dict[tuple[str, str], list[Any]] = {}
    for span in sorted(spans, key=lambda s: (s.rule, s.severity, s.x0)):
        if span.x1 < axis.lo or span.x0 > axis.hi:
            continue  # off this chart's axis (a file whose lines it does not draw)
        x0 = axis.px(max(span.x0, axis.lo))
        x1 = max(axis.px(min(span.x1, axis.hi)), x0 + 3)
        key = (span.rule, span.severity)
        bar = last.get(key)
        if bar is not None and x0 <= bar[3]:
            bar[3] = max(bar[3], x1)
            bar[4] += 1
            continue
        bar = last[key] = [span.rule, span.severity, x0, x1, 1, span.title]
        bars.append(bar)
    row = {rule: i for i, rule in enumerate(dict.fromkeys(span.rule for span in spans))}
    bars.sort(key=lambda b: (row[b[0]], b[2]))
    return [(r, s, x0, x1, n, t) for r, s, x0, x1, n, t in bars]


def span_chart(chart_id: str, title: str, axis: XAxis, spans: Sequence[Span]) -> str:
    """One row per rule; a bar per firing-to-resolved span, coloured by severity."""
    rules = list(dict.fromkeys(span.rule for span in spans))
    geo = Geo(TOP, 22 * max(len(rules), 1), TOP + BOTTOM + 22 * max(len(rules), 1))
    body = [x_ticks(axis, geo)]
    for i, rule in enumerate(rules):
        y = TOP + 22 * i
        body.append(f'<text class="rule" x="{LEFT + 4}" y="{y + 15}">{escape(rule)}</text>')
    for rule, severity, x0, x1, count, first in _bars(spans, axis):
        y = TOP + 22 * rules.index(rule) + 3
        colour = SEVERITY_COLOUR.get(severity, "#777")
        said = first if count == 1 else f"{count} {rule} alerts here; the first: {first}"
        body.append(
            f'<rect class="alert-span" data-rule="{escape(rule)}" x="{x0:.1f}" y="{y}" '
            f'width="{x1 - x0:.1f}" height="16" fill="{colour}" fill-opacity="0.55">'
            f"<title>{escape(said)}</title></rect>"
        )
    if not spans:
        body.append(f'<text class="tick" x="{LEFT + 4}" y="{TOP + 15}">no alerts</text>')
    return frame(chart_id, title, "", geo, "".join(body))
