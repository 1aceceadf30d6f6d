"""The report's charts for a set of sources on one x axis (time, else line numbers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from logwatch.alerts import FIRING, AlertEvent
from logwatch.report.collect import GPU_METRICS, KEYS, SourceData, View, gpu_key
from logwatch.report.series import Points, draw_exp, has, points, rolling_median, shares
from logwatch.report.svg import (
    PALETTE,
    PLOT_W,
    Band,
    Line,
    Span,
    XAxis,
    line_chart,
    span_chart,
    stack_chart,
)

SPAN_CAP = 2000
"""Alert bars drawn; the rest are counted in the page's note."""


@dataclass(frozen=True, slots=True)
class Placed:
    """One source's reduced data on the report's x axis, in report order."""

    source: str
    data: SourceData
    view: View
    offset: int  # line-number axis: where this source's line 1 sits

    @property
    def shift(self) -> float:
        """What to add to this source's x: its offset on a line-number axis."""
        return 0.0 if self.view.time else float(self.offset)


def place(ordered: Sequence[tuple[str, SourceData]], *, time: bool) -> list[Placed]:
    """Give every source its x: epoch seconds of its timestamps, or its line numbers plus the
    lines of the sources before it."""
    out, offset = [], 0
    for source, data in ordered:
        out.append(Placed(source, data, data.view(time=time), offset))
        offset += data.lines
    return out


def x_of(when: datetime | None, line: int, offset: int, *, time: bool) -> float | None:
    """An event's x, or None (a line without a timestamp on a time axis)."""
    if not time:
        return float(line + offset)
    return _epoch(when) if when is not None else None


def _epoch(when: datetime) -> float:
    """Naive log times as polars counts them (as UTC), whatever this host's zone."""
    return when.replace(tzinfo=UTC).timestamp()


def all_charts(placed: Sequence[Placed], axis: XAxis, events: Sequence[AlertEvent]) -> list[str]:
    """Every chart that has data, as inline SVG, in reading order."""
    exp = draw_exp(axis.hi - axis.lo, PLOT_W)
    common = run_bands(placed, axis)
    charts = [
        _metric("loss", "loss", "loss", placed, exp, axis, common, PALETTE[0]),
        _metric("grad-norm", "gradient norm", "grad_norm", placed, exp, axis, common, PALETTE[1]),
        _metric("lr", "learning rate", "lr", placed, exp, axis, common, PALETTE[2]),
        _throughput(placed, exp, axis, common),
    ]
    starved = [band for p in placed for band in _starvation(p)]
    title = "q_hs (HS queue depth)"
    bands = [*common, *starved]
    charts.append(_metric("q-hs", title, "q_hs", placed, exp, axis, bands, PALETTE[3], log=False))
    time = axis.time
    mixes = [shares(p.data, exp, time=time, shift=p.shift) for p in placed]
    mixes = [m for m in mixes if m.height]
    if mixes:
        title = "q_hsb bucket mix (share per length bucket)"
        charts.append(stack_chart("q-hsb", title, axis, mixes, bands))
    for metric, label in GPU_METRICS.items():
        charts.append(_gpu_chart(metric, label, placed, exp, axis, common))
    spans = alert_spans(placed, events, axis)[:SPAN_CAP]
    charts.append(span_chart("alerts", "alerts (firing to resolved)", axis, spans))
    return [chart for chart in charts if chart]


def _series(placed: Sequence[Placed], key: int, exp: int, axis: XAxis) -> list[Points]:
    """One series' points per source that has it."""
    found = [
        points(p.data, key, exp, time=axis.time, shift=p.shift)
        for p in placed
        if has(p.data, key, time=axis.time)
    ]
    return [p for p in found if not p.empty]


def _metric(
    chart_id: str,
    title: str,
    column: str,
    placed: Sequence[Placed],
    exp: int,
    axis: XAxis,
    bands: Sequence[Band],
    colour: str,
    *,
    log: bool = True,
) -> str:
    parts = _series(placed, KEYS[column], exp, axis)
    if not parts:
        return ""
    return line_chart(chart_id, title, axis, [Line(title, parts, colour)], bands, log_toggle=log)


def _throughput(placed: Sequence[Placed], exp: int, axis: XAxis, bands: Sequence[Band]) -> str:
    key = KEYS["throughput"]
    rates = [p for p in placed if has(p.data, key, time=axis.time)]
    if not rates:
        return ""
    medians = [rolling_median(p.data, key, exp, time=axis.time, shift=p.shift) for p in rates]
    lines = [
        Line("throughput /s", _series(rates, key, exp, axis), PALETTE[4]),
        Line("rolling median", medians, "#333", True),
    ]
    return line_chart("throughput", "throughput", axis, lines, bands)


def _gpu_chart(
    metric: str,
    label: str,
    placed: Sequence[Placed],
    exp: int,
    axis: XAxis,
    bands: Sequence[Band],
) -> str:
    views = [v for p in placed for v in (p.data.by_time, p.data.by_line)]
    seen = {k for v in views for r in (v.points, v.markers) for k in r.counts}
    gpus = sorted({(k - 16) // 4 for k in seen if k >= 16 and k == gpu_key((k - 16) // 4, metric)})
    if not gpus:
        return ""
    lines = []
    for i, gpu in enumerate(gpus):
        parts = _series(placed, gpu_key(gpu, metric), exp, axis)
        lines.append(Line(f"GPU {gpu}", parts, PALETTE[i % len(PALETTE)]))
    return line_chart(f"gpu-{metric}", f"GPU {label}", axis, lines, bands, log_toggle=False)


def run_bands(placed: Sequence[Placed], axis: XAxis) -> list[Band]:
    """Restarts (each `run start:` after a log's first line, each later file) and stalls."""
    bands = []
    width = (axis.hi - axis.lo) / 400
    for i, p in enumerate(placed):
        for row in p.view.starts.frame().iter_rows(named=True):
            if row["line"] <= 1 and i == 0:
                continue
            x = float(row["x"]) + p.shift
            bands.append(
                Band(x, x + width, "restart", f"run restarted: {p.source} line {row['line']}")
            )
        first = p.view.first_step_x
        if i > 0 and first is not None and not p.data.by_line.starts.total:
            x = first + p.shift
            bands.append(Band(x, x + width, "restart", f"next file: {p.source}"))
        if axis.time:
            for gap in p.data.gaps.frame().iter_rows(named=True):
                took = (gap["end"] - gap["start"]).total_seconds()
                bands.append(
                    Band(
                        _epoch(gap["start"]),
                        _epoch(gap["end"]),
                        "stall",
                        f"no lines for {took:.0f}s before {p.source} line {gap['line']}",
                    )
                )
    return bands


def _starvation(p: Placed) -> list[Band]:
    """Streaks of `STARVED_AFTER` or more queue reports with exactly one non-empty bucket."""
    return [
        Band(
            r["x0"] + p.shift,
            r["x1"] + p.shift,
            "starved",
            f"starved to one bucket for {r['n']} reports from line {r['line']}",
        )
        for r in p.view.streaks.finish().iter_rows(named=True)
    ]


def left_out(placed: Sequence[Placed], events: Sequence[AlertEvent], axis: XAxis) -> list[str]:
    """What the charts do not draw (past the caps), one phrase each; empty when all is drawn."""
    out: list[str] = []
    for p in placed:
        counts = {
            "restarts": p.view.starts.dropped,
            "stalls": p.data.gaps.dropped if axis.time else 0,
            "starvation streaks": p.view.streaks.bands.dropped,
        }
        out.extend(f"{n:,} more {what} in {p.source}" for what, n in counts.items() if n)
    spans = len(alert_spans(placed, events, axis))
    if spans > SPAN_CAP:
        out.append(f"{spans - SPAN_CAP:,} more alert bars (the table lists every event)")
    return out


def alert_spans(placed: Sequence[Placed], events: Sequence[AlertEvent], axis: XAxis) -> list[Span]:
    """Each alert from firing to its resolve (or to the end of its log)."""
    offsets = {p.source: p.offset for p in placed}
    untimed = {p.source: _untimed(p, events) for p in placed}
    ends = {p.source: p.view.hi + p.shift if p.view.hi is not None else None for p in placed}
    open_spans: dict[str, tuple[AlertEvent, float]] = {}
    spans = []
    for event in events:
        if event.source not in offsets:
            continue
        when = event.ts or untimed[event.source].get(event.line)
        x = x_of(when, event.line, offsets[event.source], time=axis.time)
        if x is None:
            continue
        if event.status == FIRING:
            open_spans[event.fingerprint] = (event, x)
            continue
        began = open_spans.pop(event.fingerprint, None)
        if began is not None:
            spans.append(_span(began[0], began[1], x, f"{event.status} at line {event.line}"))
    for event, x in open_spans.values():
        spans.append(_span(event, x, ends.get(event.source) or x, "still firing at the end"))
    return sorted(spans, key=lambda s: s.x0)


def _untimed(p: Placed, events: Sequence[AlertEvent]) -> dict[int, datetime]:
    """For alerts on lines without a timestamp: the last timestamp before each such line."""
    return p.data.untimed_ts([e.line for e in events if e.source == p.source and e.ts is None])


def _span(event: AlertEvent, x0: float, x1: float, end: str) -> Span:
    title = f"{event.rule} ({event.severity.label}) from line {event.line}, {end}: {event.summary}"
    return Span(event.rule, event.severity.label, x0, x1, title)


def axis_for(placed: Sequence[Placed], *, time: bool) -> XAxis:
    """The x range every chart shares."""
    lo = [p.view.lo + p.shift for p in placed if p.view.lo is not None]
    hi = [p.view.hi + p.shift for p in placed if p.view.hi is not None]
    if not lo:
        return XAxis(0.0, 1.0, time)
    return XAxis(min(lo), max(hi) if max(hi) > min(lo) else min(lo) + 1.0, time)


__all__ = ["Placed", "Points", "all_charts", "axis_for", "left_out", "place"]
