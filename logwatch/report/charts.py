"""The report's charts for a set of sources on one x axis (time, else line numbers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from logwatch.alerts import FIRING, AlertEvent
from logwatch.report.collect import GPU_METRICS, SourceData
from logwatch.report.series import Points, mix, points, rolling_median
from logwatch.report.svg import (
    PALETTE,
    Band,
    Line,
    Span,
    XAxis,
    line_chart,
    span_chart,
    stack_chart,
)

STARVED_AFTER = 5
"""Consecutive single-bucket queue reports shaded as starvation (bucket-starvation's count)."""


_UNPLACED = ("gaps", "untimed")  # frames that are not drawn as points


@dataclass(frozen=True, slots=True)
class Placed:
    """One source's projections with an `x` column each, in report order."""

    source: str
    frames: dict[str, pl.DataFrame]
    offset: int  # line-number axis: where this source's line 1 sits


def place(ordered: Sequence[tuple[str, SourceData]], *, time: bool) -> list[Placed]:
    """Give every row an x: epoch seconds of its timestamp, or its line plus the lines of the
    sources before it."""
    out, offset = [], 0
    for source, data in ordered:
        frames = data.frames()
        x = (
            pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6
            if time
            else (pl.col("line") + offset).cast(pl.Float64)
        )
        placed = {
            name: frame.with_columns(x.alias("x")) if name not in _UNPLACED else frame
            for name, frame in frames.items()
        }
        out.append(Placed(source, placed, offset))
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
    common = run_bands(placed, axis)
    steps = [p.frames["steps"] for p in placed]
    charts = [
        _metric("loss", "loss", steps, axis, common, PALETTE[0]),
        _metric("grad-norm", "gradient norm", steps, axis, common, PALETTE[1], column="grad_norm"),
        _metric("lr", "learning rate", steps, axis, common, PALETTE[2], column="lr"),
        _throughput(steps, axis, common),
    ]
    queue = [p.frames["queue"] for p in placed]
    starved = [band for p in placed for band in _starvation(p.frames["queue"])]
    charts.append(
        _metric(
            "q-hs",
            "q_hs (HS queue depth)",
            queue,
            axis,
            [*common, *starved],
            PALETTE[3],
            column="q_hs",
            log=False,
        )
    )
    shares = [m for m in (mix(q) for q in queue if q.height) if m.height]
    if shares:
        title = "q_hsb bucket mix (share per length bucket)"
        charts.append(stack_chart("q-hsb", title, axis, shares, [*common, *starved]))
    gpus = [p.frames["gpus"] for p in placed]
    for metric, label in GPU_METRICS.items():
        charts.append(_gpu_chart(metric, label, gpus, axis, common))
    charts.append(
        span_chart("alerts", "alerts (firing to resolved)", axis, alert_spans(placed, events, axis))
    )
    return [chart for chart in charts if chart]


def _metric(
    chart_id: str,
    title: str,
    frames: Sequence[pl.DataFrame],
    axis: XAxis,
    bands: Sequence[Band],
    colour: str,
    *,
    column: str | None = None,
    log: bool = True,
) -> str:
    parts = [points(f, column or chart_id) for f in frames if f.height]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return ""
    return line_chart(chart_id, title, axis, [Line(title, parts, colour)], bands, log_toggle=log)


def _throughput(frames: Sequence[pl.DataFrame], axis: XAxis, bands: Sequence[Band]) -> str:
    rates = [f.filter(pl.col("throughput").is_not_null()) for f in frames]
    rates = [f for f in rates if f.height]
    if not rates:
        return ""
    medians = [_with_nulls(rolling_median(f, "throughput")) for f in rates]
    lines = [
        Line("throughput /s", [points(f, "throughput") for f in rates], PALETTE[4]),
        Line("rolling median", [points(m, "throughput_median") for m in medians], "#333", True),
    ]
    return line_chart("throughput", "throughput", axis, lines, bands)


def _with_nulls(frame: pl.DataFrame) -> pl.DataFrame:
    """A derived series has no line of its own."""
    return frame.with_columns(pl.lit(None, pl.Int64).alias("line"))


def _gpu_chart(
    metric: str, label: str, frames: Sequence[pl.DataFrame], axis: XAxis, bands: Sequence[Band]
) -> str:
    rows = [f.filter(pl.col("metric") == metric) for f in frames]
    rows = [f for f in rows if f.height]
    if not rows:
        return ""
    gpus = sorted(set(pl.concat([f.get_column("gpu") for f in rows]).to_list()))
    lines = []
    for i, gpu in enumerate(gpus):
        parts = [
            points(
                f.filter(pl.col("gpu") == gpu).with_columns(pl.lit(None, pl.Int64).alias("step")),
                "value",
            )
            for f in rows
        ]
        lines.append(
            Line(f"GPU {gpu}", [p for p in parts if not p.empty], PALETTE[i % len(PALETTE)])
        )
    return line_chart(f"gpu-{metric}", f"GPU {label}", axis, lines, bands, log_toggle=False)


def run_bands(placed: Sequence[Placed], axis: XAxis) -> list[Band]:
    """Restarts (each `run start:` after a log's first line, each later file) and stalls."""
    bands = []
    width = (axis.hi - axis.lo) / 400
    for i, p in enumerate(placed):
        for row in p.frames["starts"].iter_rows(named=True):
            if row["x"] is None or (row["line"] <= 1 and i == 0):
                continue
            x = float(row["x"])
            bands.append(
                Band(x, x + width, "restart", f"run restarted: {p.source} line {row['line']}")
            )
        if i > 0 and p.frames["steps"].height and p.frames["starts"].is_empty():
            first = p.frames["steps"].get_column("x").drop_nulls()
            if first.len():
                x = float(first[0])
                bands.append(Band(x, x + width, "restart", f"next file: {p.source}"))
        if axis.time:
            for gap in p.frames["gaps"].iter_rows(named=True):
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


def _starvation(queue: pl.DataFrame) -> list[Band]:
    """Streaks of `STARVED_AFTER` or more queue reports with exactly one non-empty bucket."""
    reports = queue.filter(pl.col("q_hsb").is_not_null() & pl.col("x").is_not_null())
    if reports.is_empty():
        return []
    one = pl.col("q_hsb_nonzero") == 1
    streaks = (
        reports.with_columns(
            one.alias("_one"), (one != one.shift(1)).fill_null(True).cum_sum().alias("_run")
        )
        .filter(pl.col("_one"))
        .group_by("_run")
        .agg(
            pl.col("x").min().alias("x0"),
            pl.col("x").max().alias("x1"),
            pl.len().alias("n"),
            pl.col("line").first(),
        )
        .filter(pl.col("n") >= STARVED_AFTER)
        .sort("x0")
    )
    return [
        Band(
            r["x0"],
            r["x1"],
            "starved",
            f"starved to one bucket for {r['n']} reports from line {r['line']}",
        )
        for r in streaks.iter_rows(named=True)
    ]


def alert_spans(placed: Sequence[Placed], events: Sequence[AlertEvent], axis: XAxis) -> list[Span]:
    """Each alert from firing to its resolve (or to the end of its log)."""
    offsets = {p.source: p.offset for p in placed}
    untimed = {p.source: _untimed(p, events) for p in placed}
    ends = {p.source: _last_x(p) for p in placed}
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
    lines = [e.line for e in events if e.source == p.source and e.ts is None]
    rows = p.frames["untimed"].filter(pl.col("line").is_in(lines))
    return dict(
        zip(rows.get_column("line").to_list(), rows.get_column("ts").to_list(), strict=True)
    )


def _span(event: AlertEvent, x0: float, x1: float, end: str) -> Span:
    title = f"{event.rule} ({event.severity.label}) from line {event.line}, {end}: {event.summary}"
    return Span(event.rule, event.severity.label, x0, x1, title)


def _last_x(p: Placed) -> float | None:
    xs = [
        f.get_column("x").drop_nulls()
        for n, f in p.frames.items()
        if n not in _UNPLACED and f.height
    ]
    found = [float(s.max()) for s in xs if s.len()]  # type: ignore[arg-type]  # Float64
    return max(found) if found else None


def axis_for(placed: Sequence[Placed], *, time: bool) -> XAxis:
    """The x range every chart shares."""
    lo, hi = [], []
    for p in placed:
        for name, frame in p.frames.items():
            if name not in _UNPLACED and frame.height:
                xs = frame.get_column("x").drop_nulls()
                if xs.len():
                    lo.append(float(xs.min()))  # type: ignore[arg-type]  # Float64
                    hi.append(float(xs.max()))  # type: ignore[arg-type]  # Float64
    if not lo:
        return XAxis(0.0, 1.0, time)
    return XAxis(min(lo), max(hi) if max(hi) > min(lo) else min(lo) + 1.0, time)


__all__ = ["Placed", "Points", "all_charts", "axis_for", "place"]
