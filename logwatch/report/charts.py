"""The report's charts for a set of runs on one x axis (steps, time, or each file's lines).

Each run (a file, and each `run start:` restart in it) is its own series in its own colour,
named in the legend; the per-run charts (queue, per-GPU) are drawn once per run, one under the
other, on the same x range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from logwatch.alerts import FIRING, AlertEvent
from logwatch.engine import run_id
from logwatch.redact import redact
from logwatch.report.collect import (
    RUN_CAP,
    Kind,
    Place,
    RunData,
    SourceData,
    View,
)
from logwatch.report.project import GPU_METRICS, KEYS, gpu_key
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
from logwatch.report.ticks import linear_ticks, si_label, time_labels, time_ticks

SPAN_CAP = 2000
"""Alert bars drawn; the rest are counted in the page's note."""
OVERLAID_FREE = 8
"""Runs overlaid in one chart at full detail; with more, each is drawn coarser."""
STACKED_FREE = 2
"""Runs whose per-run charts are drawn at full detail; with more, each is drawn coarser, so
the per-run charts of N runs weigh about what STACKED_FREE runs' would (the page's size is
bounded whatever the number of runs)."""


@dataclass(frozen=True, slots=True)
class Detail:
    """How finely a chart's series are drawn: cells of `2**exp`, and whether short series
    are merged per cell too (`coarse`)."""

    exp: int
    coarse: bool = False


def detail(exp: int, runs: int, free: int) -> Detail:
    """Full detail for up to `free` runs; past that, cells as many times wider as there are
    times more runs (rounded up to a power of two)."""
    if runs <= free:
        return Detail(exp)
    return Detail(exp + math.ceil(math.log2(runs / free)), coarse=True)


@dataclass(frozen=True, slots=True)
class Placed:
    """One run on the report's x axis, in report order, with its legend label and colour."""

    source: str
    key: int  # the run's key in its source's `runs`
    label: str
    data: SourceData
    run: RunData
    view: View
    offset: int  # line-number axis: where this run's file's line 1 sits
    colour: str
    dashed: bool

    @property
    def shift(self) -> float:
        """What to add to this run's x: its file's offset on a line-number axis."""
        return float(self.offset) if self.view.kind == "line" else 0.0


def place(
    ordered: Sequence[tuple[str, SourceData]],
    *,
    kind: Kind,
    labels: Mapping[str, str] | None = None,
) -> list[Placed]:
    """Give every run its x (steps, epoch seconds, or its file's line numbers plus the lines
    of the files before it), a label and a colour; `labels`: a file's legend name, when not
    its own (a fleet's `rank 15 on node-001 · stdout.log`)."""
    names = [Path(s).name for s, _ in ordered]
    out: list[Placed] = []
    offset = 0
    for source, data in ordered:
        name = Path(source).name if names.count(Path(source).name) == 1 else source
        name = (labels or {}).get(source, name)
        keys = [k for k in sorted(data.runs) if data.runs[k].drawn]
        for n, key in enumerate(keys):
            run = data.runs[key]
            i = len(out)
            label = _label(redact(name), run, n, several=len(keys) > 1)
            if key == RUN_CAP and data.segment > RUN_CAP:
                label += f" (and the {data.segment - RUN_CAP:,} restarts after it)"
            colour, dashed = PALETTE[i % len(PALETTE)], i >= len(PALETTE)
            out.append(
                Placed(source, key, label, data, run, run.view(kind), offset, colour, dashed)
            )
        offset += data.lines
    return out


def _label(name: str, run: RunData, restart: int, *, several: bool) -> str:
    """`train.log`, `train.log · r2`, `train.log · restart 1`, `train.log · r2 · restart 1`."""
    if not several:
        return name
    parts = [name]
    found = run_id(run.start) if run.start is not None else None
    if found:
        parts.append(found)
    if restart:
        parts.append(f"restart {restart}")
    return " · ".join(parts)


def axis_for(placed: Sequence[Placed], *, kind: Kind) -> XAxis:
    """The x range every chart shares, with its ticks (and on a line-number axis, each
    file's own line numbers and a divider naming it)."""
    lo = [p.view.lo + p.shift for p in placed if p.view.lo is not None]
    hi = [p.view.hi + p.shift for p in placed if p.view.hi is not None]
    if kind == "line":
        files = {p.source: (p.offset, p.data.lines) for p in placed}
        lo.extend(offset + 1.0 for offset, _ in files.values())
        hi.extend(float(offset + lines) for offset, lines in files.values())
    if not lo:
        return XAxis(0.0, 1.0, kind)
    a, b = min(lo), max(hi) if max(hi) > min(lo) else min(lo) + 1.0
    if kind == "time":
        found = time_ticks(a, b)
        return XAxis(a, b, kind, tuple(zip(found, time_labels(found), strict=True)))
    if kind == "step":
        found = linear_ticks(a, b, 8, least=1.0)
        step = found[1] - found[0] if len(found) > 1 else None
        return XAxis(a, b, kind, tuple((v, si_label(v, step)) for v in found))
    ticks: list[tuple[float, str]] = []
    dividers: list[tuple[float, str]] = []
    for source, (offset, lines) in files.items():
        dividers.append((offset + 1.0, redact(Path(source).name)))
        most = int(PLOT_W * lines / (b - a) / 110)
        if most >= 1:
            found = [v for v in linear_ticks(1, lines, most, least=1.0) if v >= 1]
            step = found[1] - found[0] if len(found) > 1 else None
            ticks.extend((v + offset, si_label(v, step)) for v in found)
    return XAxis(a, b, kind, tuple(ticks), tuple(dividers))


def all_charts(
    placed: Sequence[Placed],
    axis: XAxis,
    events: Sequence[AlertEvent],
    places: Mapping[int, Place],
) -> list[str]:
    """Every chart that has data, as inline SVG, in reading order."""
    exp = draw_exp(axis.hi - axis.lo, PLOT_W)
    overlaid = detail(exp, len(placed), OVERLAID_FREE)
    stacked = detail(exp, len(placed), STACKED_FREE)
    common = run_bands(placed, axis)
    charts = [
        _metric("loss", "loss", "loss", placed, overlaid, axis, common),
        _metric("grad-norm", "gradient norm", "grad_norm", placed, overlaid, axis, common),
        _metric("lr", "learning rate", "lr", placed, overlaid, axis, common),
        _throughput(placed, overlaid, axis, common),
    ]
    several = len(placed) > 1
    for n, p in enumerate(placed, 1):
        suffix, tag = (f": {p.label}", f"-r{n}") if several else ("", "")
        bands = [*common, *_starvation(p)]
        title = "q_hs (HS queue depth)" + suffix
        charts.append(_metric("q-hs" + tag, title, "q_hs", [p], stacked, axis, bands, log=False))
        mix = shares(p.run, stacked.exp, kind=axis.kind, shift=p.shift, coarse=stacked.coarse)
        if mix.height:
            title = "q_hsb bucket mix (share per length bucket)" + suffix
            charts.append(stack_chart("q-hsb" + tag, title, axis, [mix], bands))
    for metric, label in GPU_METRICS.items():
        for n, p in enumerate(placed, 1):
            suffix, tag = (f": {p.label}", f"-r{n}") if several else ("", "")
            charts.append(_gpu_chart(metric, label + suffix, tag, p, stacked, axis, common))
    spans = alert_spans(placed, events, places, axis)[:SPAN_CAP]
    charts.append(span_chart("alerts", "alerts (firing to resolved)", axis, spans))
    return [chart for chart in charts if chart]


def _series(placed: Sequence[Placed], key: int, fine: Detail, axis: XAxis) -> list[Line]:
    """One series per run that has it, in the run's colour."""
    kind = axis.kind
    lines = []
    for p in placed:
        if has(p.run, key, kind=kind):
            found = points(p.run, key, fine.exp, kind=kind, shift=p.shift, coarse=fine.coarse)
            if not found.empty:
                lines.append(Line(p.label, [found], p.colour, p.dashed))
    return lines


def _metric(
    chart_id: str,
    title: str,
    column: str,
    placed: Sequence[Placed],
    fine: Detail,
    axis: XAxis,
    bands: Sequence[Band],
    *,
    log: bool = True,
) -> str:
    lines = _series(placed, KEYS[column], fine, axis)
    if not lines:
        return ""
    return line_chart(chart_id, title, axis, lines, bands, log_toggle=log)


def _throughput(placed: Sequence[Placed], fine: Detail, axis: XAxis, bands: Sequence[Band]) -> str:
    key = KEYS["throughput"]
    lines = _series(placed, key, fine, axis)
    if not lines:
        return ""
    kind = axis.kind
    for p in placed:
        if has(p.run, key, kind=kind):
            median = rolling_median(p.run, key, fine.exp, kind=kind, shift=p.shift)
            lines.append(Line(f"{p.label} rolling median", [median], p.colour, True, False))
    lines.append(Line("rolling median", [], "#888", dashed=True))
    return line_chart("throughput", "throughput /s", axis, lines, bands)


def _gpu_chart(
    metric: str,
    title: str,
    tag: str,
    p: Placed,
    fine: Detail,
    axis: XAxis,
    bands: Sequence[Band],
) -> str:
    views = (p.run.by_time, p.run.by_line, p.run.by_step)
    seen = {k for v in views for r in (v.points, v.markers) for k in r.counts}
    gpus = sorted({(k - 16) // 4 for k in seen if k >= 16 and k == gpu_key((k - 16) // 4, metric)})
    lines = []
    for i, gpu in enumerate(gpus):
        for line in _series([p], gpu_key(gpu, metric), fine, axis):
            lines.append(Line(f"GPU {gpu}", line.parts, PALETTE[i % len(PALETTE)]))
    if not lines:
        return ""
    return line_chart(f"gpu-{metric}{tag}", f"GPU {title}", axis, lines, bands, log_toggle=False)


def run_bands(placed: Sequence[Placed], axis: XAxis) -> list[Band]:
    """On a time or line-number axis: restarts (each `run start:` after the first file's
    first line; by time, where each later file's steps begin) and, by time, stalls. Runs on a
    step axis are told apart by colour, files on a line-number axis by labelled dividers."""
    if axis.kind == "step":
        return []
    bands = []
    width = (axis.hi - axis.lo) / 400
    for i, data in enumerate(_files(placed)):
        first, source = data[0], data[0].source
        for row in first.data.starts.frame().iter_rows(named=True):
            if row["line"] <= 1 and i == 0:
                continue
            if axis.time and row["ts"] is None:
                continue
            x = _epoch(row["ts"]) if axis.time else float(row["line"] + first.offset)
            bands.append(
                Band(x, x + width, "restart", f"run restarted: {source} line {row['line']}")
            )
        step_x = first.view.first_step_x
        if axis.time and i > 0 and step_x is not None and not first.data.starts.total:
            x = step_x + first.shift
            bands.append(Band(x, x + width, "restart", f"next file: {source}"))
        if axis.time:
            for gap in first.data.gaps.frame().iter_rows(named=True):
                took = (gap["end"] - gap["start"]).total_seconds()
                bands.append(
                    Band(
                        _epoch(gap["start"]),
                        _epoch(gap["end"]),
                        "stall",
                        f"no lines for {took:.0f}s before {source} line {gap['line']}",
                    )
                )
    return bands


def _files(placed: Sequence[Placed]) -> list[list[Placed]]:
    """The runs grouped by file, in report order."""
    out: dict[str, list[Placed]] = {}
    for p in placed:
        out.setdefault(p.source, []).append(p)
    return list(out.values())


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


def left_out(
    placed: Sequence[Placed],
    events: Sequence[AlertEvent],
    places: Mapping[int, Place],
    axis: XAxis,
) -> list[str]:
    """What the charts do not draw (past the caps), one phrase each; empty when all is drawn."""
    out: list[str] = []
    for runs in _files(placed):
        data, source = runs[0].data, runs[0].source
        counts = {
            "restarts": data.starts.dropped if axis.kind != "step" else 0,
            "stalls": data.gaps.dropped if axis.time else 0,
            "starvation streaks": sum(p.view.streaks.bands.dropped for p in runs),
        }
        out.extend(f"{n:,} more {what} in {source}" for what, n in counts.items() if n)
    spans = alert_spans(placed, events, places, axis)
    if len(spans) > SPAN_CAP:
        out.append(f"{len(spans) - SPAN_CAP:,} more alert bars (the table lists every event)")
    return out


def run_of(placed: Sequence[Placed], event: AlertEvent, where: Place | None) -> Placed | None:
    """The drawn run an event belongs to (its file's last one when its line says nothing)."""
    mine = [p for p in placed if p.source == event.source]
    if where is not None and where.run is not None:
        found = [p for p in mine if p.key == where.run]
        if found:
            return found[0]
    return mine[-1] if mine else None


def event_x(event: AlertEvent, where: Place | None, run: Placed, axis: XAxis) -> float | None:
    """An event's x on this axis: its own time or step, else its line's carried one (the
    last before it), else the start of its run (an alert before the run's first step or
    time); None where its run has no x at all."""
    if axis.kind == "line":
        return float(event.line + run.offset)
    found: float | None = None
    if axis.kind == "step":
        step = event.step if event.step is not None else (where.step if where else None)
        found = float(step) if step is not None else None
    else:
        when = event.ts or (where.ts if where else None)
        found = _epoch(when) if when is not None else None
    return found if found is not None else run.view.lo


def alert_spans(
    placed: Sequence[Placed],
    events: Sequence[AlertEvent],
    places: Mapping[int, Place],
    axis: XAxis,
) -> list[Span]:
    """Each alert from firing to its resolve (or to the end of its run)."""
    open_spans: dict[str, tuple[AlertEvent, float, float | None]] = {}
    spans = []
    for event in events:
        where = places.get(id(event))
        run = run_of(placed, event, where)
        x = event_x(event, where, run, axis) if run is not None else None
        if run is None or x is None:
            continue
        if event.status == FIRING:
            end = run.view.hi + run.shift if run.view.hi is not None else None
            open_spans[event.fingerprint] = (event, x, end)
            continue
        began = open_spans.pop(event.fingerprint, None)
        if began is not None:
            spans.append(_span(began[0], began[1], x, f"{event.status} at line {event.line}"))
    for event, x, end in open_spans.values():
        spans.append(_span(event, x, max(end or x, x), "still firing at the end"))
    return sorted(spans, key=lambda s: s.x0)


def _epoch(when: datetime) -> float:
    """Naive log times as polars counts them (as UTC), whatever this host's zone."""
    return when.replace(tzinfo=UTC).timestamp()


def _span(event: AlertEvent, x0: float, x1: float, end: str) -> Span:
    title = f"{event.rule} ({event.severity.label}) from line {event.line}, {end}: {event.summary}"
    return Span(event.rule, event.severity.label, x0, x1, title)


__all__ = ["Placed", "Points", "all_charts", "axis_for", "left_out", "place"]
