"""Build a report: one replay with a collecting hook, then charts and the page."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from logwatch.actions.pids import RunPids
from logwatch.actions.plan import plan_actions
from logwatch.actions.spec import ActionSpec
from logwatch.alerts import AlertEvent
from logwatch.drivers.replay import Progress, ReplayOptions, ReplayResult, replay
from logwatch.drivers.window import Window
from logwatch.engine import ErrorHandler, WarningHandler
from logwatch.errors import InputError, ReportError
from logwatch.report.actions import action_table
from logwatch.report.charts import (
    Placed,
    all_charts,
    axis_for,
    event_x,
    left_out,
    place,
    run_of,
)
from logwatch.report.collect import Collector, Kind, Place
from logwatch.report.page import page, run_header
from logwatch.report.svg import XAxis
from logwatch.rules.loader import RuleSpec
from logwatch.words import counted

AXES = ("step", "time")
"""What `--x` may ask for; without it: steps when every file has them, else time when every
file has timestamps, else each file's line numbers."""
_AXIS_WORDS = {"step": "step", "time": "time", "line": "line-number"}
_KINDS: dict[str | None, tuple[Kind, ...]] = {
    None: ("time", "line", "step"),
    "step": ("step",),
    "time": ("time",),
}


@dataclass(frozen=True, slots=True)
class Report:
    """A rendered report: the page, its charts (for `--png`), and the replay behind it."""

    html: str
    charts: list[str]
    result: ReplayResult
    sources: list[str]  # in report order
    x: Kind  # what the x axis counts

    def write(self, path: str) -> int:
        """Write the page; its size in bytes."""
        data = self.html.encode("utf-8")
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(data)
        except OSError as exc:
            raise InputError(
                f"-o {path}: cannot write the report: {exc.strerror or exc} (choose a writable path)"
            ) from None
        return len(data)


def build_report(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    *,
    options: ReplayOptions | None = None,
    window: Window | None = None,
    on_error: ErrorHandler | None = None,
    on_warning: WarningHandler | None = None,
    x: str | None = None,
    progress: Progress | None = None,
    on_stage: Callable[[str], None] | None = None,
    actions: Sequence[ActionSpec] = (),
) -> Report:
    """Replay `paths` once and draw what they say: each run its own series on one x axis
    (`x`: "step" or "time"; None: see `AXES`), the files ordered by their first timestamp
    (argument order where one has none). `progress` sees each block read, `on_stage` each
    step after the reading. With `actions` (the config's [[action]]), what they would have
    done is listed under the alerts (nothing is run)."""
    if x is not None and x not in AXES:
        raise ReportError(f"--x {x}: unknown axis (expected one of: {', '.join(AXES)})")
    # Which axis is drawn is known only at the end, unless `--x` says: then only its view
    # is fed (the step view alone costs about a fifth of a replay on a DFlash log).
    collector = Collector(kinds=_KINDS[x])
    pids = RunPids()

    def read(source: str, done: int, total: int) -> None:
        collector.progress(source, done, total)
        if progress is not None:
            progress(source, done, total)

    found: list[AlertEvent] = []  # as the engine found them, while their block was at hand

    def seen(event: AlertEvent) -> None:
        collector.on_event(event)
        found.append(event)

    result = replay(
        paths,
        rules,
        options=options or ReplayOptions(),
        window=window,
        on_frame=_with_pids(collector, pids) if actions else collector,
        on_found=seen,
        on_error=on_error,
        on_warning=on_warning,
        progress=read,
    )
    if on_stage is not None:
        on_stage("drawing the charts")
    names = [p for p in dict.fromkeys(paths) if p in result.stats]
    timed = bool(names) and all(result.stats[p].first_ts is not None for p in names)
    if timed:
        names.sort(key=lambda p: result.stats[p].first_ts or "")
    kind = _kind(x, names, result, timed=timed)
    data = [(p, collector.sources[p]) for p in names if p in collector.sources]
    placed = place(data, kind=kind)
    axis = axis_for(placed, kind=kind)
    events = sorted(
        result.events, key=lambda e: (names.index(e.source) if e.source in names else 0, e.line)
    )
    places = _placed_as_found(collector.places, found, result)
    charts = all_charts(placed, axis, events, places)
    runs = {p: [(q.label, q.colour) for q in placed if q.source == p] for p in names}
    headers = [
        run_header(p, result.stats[p], _starts(collector, p), events, runs[p]) for p in names
    ]
    missing = left_out(placed, events, places, axis)
    unplaced = sum(1 for e in events if _unplaced(e, placed, places, axis))
    title = "logwatch report: " + ", ".join(Path(p).name for p in names)
    fleet = result.fleet
    verdict = ""
    if fleet is not None and fleet.failed:
        # a fleet: its folder and size in the title, the verdict first, alerts in time order,
        # no header per file (hundreds)
        folder = os.path.commonpath([os.path.abspath(p) for p in names]) if names else ""
        size = f"{counted(len(fleet.ranks), 'rank')} on {counted(len(fleet.hosts), 'host')}"
        title = f"logwatch report: {folder}: {size}"
        verdict = "Root cause: " + "; ".join(v.summary for v in fleet.verdicts) + ". "
        ordered = sorted(result.events, key=lambda e: (e.ts is None, e.ts or datetime.min))
        events = [*fleet.verdicts, *(e for e in ordered if all(e is not v for v in fleet.verdicts))]
        headers = []
    note = verdict + (
        f"{len(names)} log file(s), {len(placed)} run(s), on one {_AXIS_WORDS[kind]} axis"
        + (", ordered by time" if timed and len(names) > 1 else "")
        + f"; {len(events)} alert events."
        + (f" Not drawn (past the caps): {'; '.join(missing)}." if missing else "")
        + (
            f" {unplaced} alert event(s) are in files with nothing drawn on this axis: in the "
            "table only."
            if unplaced
            else ""
        )
    )
    planned = plan_actions(actions, result.events, pids, dict(os.environ)) if actions else []
    html = page(title, headers, charts, events, note, places, action_table(planned))
    return Report(html, charts, result, names, kind)


def _placed_as_found(
    places: Mapping[int, Place], found: Sequence[AlertEvent], result: ReplayResult
) -> dict[int, Place]:
    """The places of the events as replay returns them (labelled with rank, host and line
    time at their file's end) from those of the events as found (`replay`'s `on_found`)."""
    verdicts = {id(v) for v in result.fleet.verdicts} if result.fleet is not None else set()
    out = [e for e in result.events if id(e) not in verdicts]
    return {
        id(event): places[id(raw)]
        for raw, event in zip(found, out, strict=True)
        if id(raw) in places
    }


def _kind(x: str | None, names: Sequence[str], result: ReplayResult, *, timed: bool) -> Kind:
    """The x axis asked for, or the default; a file that cannot be drawn on the one asked
    for is an error naming it."""
    stepped = [p for p in names if result.stats[p].steps_seen]
    if x == "step":
        lacking = [p for p in names if p not in stepped]
        if lacking:
            raise ReportError(
                f"--x step: {lacking[0]} has no step lines; leave out --x (or pass --x time)"
            )
        return "step"
    if x == "time":
        lacking = [p for p in names if result.stats[p].first_ts is None]
        if lacking:
            raise ReportError(
                f"--x time: {lacking[0]} has no timestamps; leave out --x (or pass --x step)"
            )
        return "time"
    if names and len(stepped) == len(names):
        return "step"
    return "time" if timed else "line"


def _unplaced(
    event: AlertEvent, placed: Sequence[Placed], places: Mapping[int, Place], axis: XAxis
) -> bool:
    """Whether an event has no x on the axis (its file has nothing drawn on it)."""
    run = run_of(placed, event, places.get(id(event)))
    return run is None or event_x(event, places.get(id(event)), run, axis) is None


def _with_pids(collector: Collector, pids: RunPids) -> Callable[[pl.DataFrame], None]:
    """The collector's frame hook, and the run starts' pids for the action rows."""

    def each(frame: pl.DataFrame) -> None:
        collector(frame)
        pids.observe(frame)

    return each


def _starts(collector: Collector, source: str) -> list[str]:
    return collector.sources[source].starts_text() if source in collector.sources else []
