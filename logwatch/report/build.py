"""Build a report: one replay with a collecting hook, then charts and the page (a fleet's:
the replay of every file, then the charts of a few, `logwatch.report.fleet`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from logwatch.actions.pids import RunPids
from logwatch.actions.plan import plan_actions
from logwatch.actions.sink import ActionOutcome
from logwatch.actions.spec import ActionSpec
from logwatch.alerts import AlertEvent
from logwatch.drivers.replay import Progress, ReplayOptions, ReplayResult, replay
from logwatch.drivers.verdict import Fleet
from logwatch.drivers.window import Window
from logwatch.engine import ErrorHandler, WarningHandler
from logwatch.errors import InputError, ReportError
from logwatch.report import fleet
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
from logwatch.report.project import COLUMNS
from logwatch.report.strip import strip_chart
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


@dataclass(frozen=True, slots=True)
class ReplayAsk:
    """What a report asks its replayer to replay; `on_frame` (the actions' run starts), when
    given, needs every line in this process."""

    paths: Sequence[str]
    rules: Sequence[RuleSpec]
    options: ReplayOptions
    window: Window | None
    progress: Progress | None
    on_frame: Callable[[pl.DataFrame], None] | None


Replayer = Callable[[ReplayAsk], ReplayResult]
"""Where a report's replay runs: this process, or `--jobs`/`--dask` (`logwatch.cli.report`)."""


@dataclass(frozen=True, slots=True)
class _Drawn:
    """A replay with the collector on every file, and its charts."""

    result: ReplayResult
    names: list[str]  # in report order
    kind: Kind
    charts: list[str]
    placed: list[Placed]
    events: list[AlertEvent]  # in report order
    places: dict[int, Place]
    starts: dict[str, list[str]]  # per file, the text of its run starts kept
    note: str  # what the charts hold, for the page's note
    extra: str  # what they leave out (empty, or sentences that begin with a space)


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
    replayer: Replayer | None = None,
) -> Report:
    """Replay `paths` once and draw what they say: each run its own series on one x axis
    (`x`: "step" or "time"; None: see `AXES`), the files ordered by their first timestamp
    (argument order where one has none). `progress` sees each block read, `on_stage` each
    step after the reading. With `actions` (the config's [[action]]), what they would have
    done is listed under the alerts (nothing is run).

    A fleet's files (paths that name two or more ranks or hosts, `fleet.by_path`) are replayed
    by `replayer` (default: in this process) and drawn as one run's post-mortem: the verdict,
    the ranks x time strip, the alerts with each cascade one row, and the charts of the
    culprit's and the lowest rank's files only (read again here: a few small files)."""
    if x is not None and x not in AXES:
        raise ReportError(f"--x {x}: unknown axis (expected one of: {', '.join(AXES)})")
    options = options or ReplayOptions()
    stage = on_stage or (lambda _: None)
    pids = RunPids()
    ask = ReplayAsk(paths, rules, options, window, progress, pids.observe if actions else None)
    if fleet.by_path(paths, options.layout):
        replayer = replayer or _in_process(on_error, on_warning)
        return _fleet_report(ask, x, stage, actions, pids, replayer)
    drawn = _draw(ask, x, stage, (on_error, on_warning), pids if actions else None)
    result = drawn.result
    planned = plan_actions(actions, result.events, pids, dict(os.environ)) if actions else []
    if result.fleet is not None and result.fleet.failed:  # one file of many ranks (`srun -l`)
        strip = strip_chart(result.fleet, result.events)
        html = _fleet_page(drawn.names, result, result.fleet, drawn, drawn.places, planned, strip)
        charts = [c for c in (strip, *drawn.charts) if c]  # the strip too, for --png
        return Report(html, charts, result, drawn.names, drawn.kind)
    runs = {p: [(q.label, q.colour) for q in drawn.placed if q.source == p] for p in drawn.names}
    headers = [
        run_header(p, result.stats[p], drawn.starts.get(p, []), drawn.events, runs[p])
        for p in drawn.names
    ]
    title = "logwatch report: " + ", ".join(Path(p).name for p in drawn.names)
    note = drawn.note + f"; {len(drawn.events)} alert events." + drawn.extra
    html = page(
        title, headers, drawn.charts, drawn.events, note, drawn.places, action_table(planned)
    )
    return Report(html, drawn.charts, result, drawn.names, drawn.kind)


def _fleet_report(
    ask: ReplayAsk,
    x: str | None,
    stage: Callable[[str], None],
    actions: Sequence[ActionSpec],
    pids: RunPids,
    replayer: Replayer,
) -> Report:
    """A fleet's files: replayed by `replayer`, then the charts of a few of them."""
    result = replayer(ask)
    assert result.fleet is not None  # replay always analyses the fleet
    names = [p for p in dict.fromkeys(ask.paths) if p in result.stats]
    chosen = fleet.charted(result, result.fleet)
    drawn = None
    if chosen:
        # what rules and data say was said once already, by the replay of every file
        again = replace(ask, paths=list(chosen), progress=None, on_frame=None)
        drawn = _draw(again, x, stage, (None, None), None, chosen)
    planned = plan_actions(actions, result.events, pids, dict(os.environ)) if actions else []
    strip = strip_chart(result.fleet, result.events)
    html = _fleet_page(names, result, result.fleet, drawn, {}, planned, strip)
    charts = [c for c in (strip, *(drawn.charts if drawn is not None else [])) if c]
    return Report(html, charts, result, names, drawn.kind if drawn is not None else "time")


def _fleet_page(
    names: Sequence[str],
    result: ReplayResult,
    found: Fleet,
    drawn: _Drawn | None,
    places: Mapping[int, Place],
    planned: Sequence[ActionOutcome],
    strip: str,
) -> str:
    """The page of a fleet: its folder and size, the verdict, the strip, the charts drawn,
    the alerts folded; no header per file."""
    table_html, rows = fleet.fleet_table(result, found, places)
    top = fleet.verdict_html(found) + strip
    charts = drawn.charts if drawn is not None else []
    if drawn is None:
        what = "no rank's file has step lines to chart"
    elif drawn.names == list(names):
        what = f"{counted(len(drawn.placed), 'run')} on one {_AXIS_WORDS[drawn.kind]} axis"
    else:
        shown = ", ".join(dict.fromkeys(p.label for p in drawn.placed))
        what = (
            f"charts of {shown} only (the culprit's and the lowest rank's files, not every "
            f"file's), on one {_AXIS_WORDS[drawn.kind]} axis"
        )
    note = (
        f"{counted(len(names), 'log file')}; {what}; "
        f"{counted(len(result.events), 'alert event')} in {counted(rows, 'table row')} "
        "(each symptom that many ranks printed is one row, per rank in --format jsonl)."
        + (drawn.extra if drawn is not None else "")
    )
    return page(
        fleet.title(names, found),
        [],
        charts,
        [],
        note,
        places,
        action_table(planned),
        top=top,
        table_html=table_html,
    )


def _in_process(on_error: ErrorHandler | None, on_warning: WarningHandler | None) -> Replayer:
    """`replay` in this process."""

    def run(ask: ReplayAsk) -> ReplayResult:
        return replay(
            ask.paths,
            ask.rules,
            options=ask.options,
            window=ask.window,
            on_frame=ask.on_frame,
            on_error=on_error,
            on_warning=on_warning,
            progress=ask.progress,
        )

    return run


def _draw(
    ask: ReplayAsk,
    x: str | None,
    stage: Callable[[str], None],
    warn: tuple[ErrorHandler | None, WarningHandler | None],
    pids: RunPids | None,
    labels: Mapping[str, str] | None = None,
) -> _Drawn:
    """Replay `ask.paths` in this process with the collector on every block, and draw them
    (`pids`: the actions' run starts, fed the same blocks)."""
    paths, progress = ask.paths, ask.progress
    # Which axis is drawn is known only at the end, unless `--x` says: then only its view
    # is fed (the step view alone costs about a fifth of a replay on a DFlash log).
    collector = Collector(
        kinds=_KINDS[x], one_file=x is None and len(set(paths)) == 1, background=True
    )
    found: list[AlertEvent] = []  # as the engine found them, while their block was at hand

    def read(source: str, done: int, total: int) -> None:
        collector.progress(source, done, total)
        if progress is not None:
            progress(source, done, total)

    def seen(event: AlertEvent) -> None:
        collector.on_event(event)
        found.append(event)

    try:
        result = replay(
            paths,
            ask.rules,
            options=ask.options,
            window=ask.window,
            on_frame=_with_pids(collector, pids) if pids is not None else collector,
            frame_columns=COLUMNS | {"pid"} if pids is not None else COLUMNS,
            on_found=seen,
            on_error=warn[0],
            on_warning=warn[1],
            progress=read,
        )
    finally:
        collector.close()  # the last block reduced (the worker thread's)
    stage("drawing the charts")
    names = [p for p in dict.fromkeys(paths) if p in result.stats]
    timed = bool(names) and all(result.stats[p].first_ts is not None for p in names)
    if timed:
        names.sort(key=lambda p: result.stats[p].first_ts or "")
    kind = _kind(x, names, result, timed=timed)
    data = [(p, collector.sources[p]) for p in names if p in collector.sources]
    placed = place(data, kind=kind, labels=labels)
    axis = axis_for(placed, kind=kind)
    events = sorted(
        result.events, key=lambda e: (names.index(e.source) if e.source in names else 0, e.line)
    )
    places = _placed_as_found(collector.places, found, result)
    charts = all_charts(placed, axis, events, places)
    missing = left_out(placed, events, places, axis)
    unplaced = sum(1 for e in events if _unplaced(e, placed, places, axis))
    note = f"{len(names)} log file(s), {len(placed)} run(s), on one {_AXIS_WORDS[kind]} axis" + (
        ", ordered by time" if timed and len(names) > 1 else ""
    )
    extra = (f" Not drawn (past the caps): {'; '.join(missing)}." if missing else "") + (
        f" {unplaced} alert event(s) are in files with nothing drawn on this axis: in the "
        "table only."
        if unplaced
        else ""
    )
    starts = {p: data.starts_text() for p, data in collector.sources.items()}
    return _Drawn(result, names, kind, charts, placed, events, places, starts, note, extra)


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
