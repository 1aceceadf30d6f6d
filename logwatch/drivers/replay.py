"""The replay driver: whole files through the engine in large blocks, for post-mortems; and the
same blocks as frames for library use (`scan_log`, `read_log`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Any

import polars as pl

from logwatch.alerts import AlertEvent, Severity, json_number, still_firing
from logwatch.drivers.ahead import ordered_map as _ordered_map
from logwatch.drivers.ahead import prefetch as _prefetch
from logwatch.drivers.placing import fleet_facts
from logwatch.drivers.ranks import FleetFacts, SourceTap
from logwatch.drivers.replay_many import (
    SMALL_FILE_BYTES,
    ManyOptions,
    Prepare,
    parsed_columns,
    replay_all,
)
from logwatch.drivers.verdict import Fleet, analyse
from logwatch.drivers.window import Window
from logwatch.engine import (
    DataWarning,
    Engine,
    ErrorHandler,
    Prepared,
    SourceStats,
    WarningHandler,
    kept_last,
)
from logwatch.errors import InputError
from logwatch.parse import SCHEMA, parse_block
from logwatch.parse.timestamps import ParsedBlock, YearCarry
from logwatch.rules.loader import RuleSpec
from logwatch.sources.framing import (
    DEFAULT_BLOCK_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    LineBlock,
    read_blocks,
)
from logwatch.sources.streams import check_readable, close_stream, open_log

PathArg = str | os.PathLike[str]

Progress = Callable[[str, int, int], None]
"""Called as (source, bytes done, bytes total) after each block."""


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How replay reads files."""

    block_bytes: int = DEFAULT_BLOCK_BYTES
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    workers: int = min(2, os.cpu_count() or 1)  # threads parsing blocks in parallel
    metrics: bool = False  # fill the `metrics` column (exports); rules do not read it
    stats: bool = True  # the per-source summary (`--format jsonl` shows none: False skips it)
    shapes: bool = True  # False: every line by the general parse path (the shapes' reference)
    layout: str | None = None  # `--layout`: rank and host from paths no built-in layout knows
    skew_s: float = 30.0  # `--skew`: how far the hosts' clocks may differ (the fleet's verdict)
    gpus_per_node: int | None = None  # `--gpus-per-node`: a local rank and its node's index
    # files up to this size (and one block) are parsed together with the small files next to
    # them in the list (`replay_many`); 0: every file on its own
    small_file_bytes: int = SMALL_FILE_BYTES


def scan_log(
    path: PathArg,
    *,
    source: str | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Iterator[pl.DataFrame]:
    """A log (plain, gzip, bzip2, xz, UTF-16 with a BOM, or '-' for standard input) as parsed
    frames with `logwatch.SCHEMA`, block by block in file order, in bounded memory."""
    name = os.fspath(path)
    check_readable([name])
    options = ReplayOptions(block_bytes=block_bytes, max_line_bytes=max_line_bytes, metrics=True)
    for frame, _, _, _ in _scan(name, source or name, options):
        yield frame


def read_log(
    path: PathArg, *, source: str | None = None, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> pl.DataFrame:
    """Every line of a log as one frame with `logwatch.SCHEMA` (what `scan_log` yields, joined)."""
    frames = list(scan_log(path, source=source, max_line_bytes=max_line_bytes))
    return pl.concat(frames) if frames else pl.DataFrame(schema=SCHEMA)


def _scan(
    path: str,
    source: str,
    options: ReplayOptions,
    columns: frozenset[str] | None = None,
    prepare: Prepare | None = None,
) -> Iterator[tuple[pl.DataFrame, int, int, Prepared | None]]:
    """(frame, end offset, size on disk, prepared) per block: read on one thread, parsed (and
    `prepare`d) on `workers`; `columns`: parse only these (None: all)."""
    stream, total, year = open_log(path)
    # Blocks parse in parallel, so a block's yearless head is moved to the carried year after.
    carry = YearCarry(year)
    try:
        blocks = read_blocks(
            stream, block_bytes=options.block_bytes, max_line_bytes=options.max_line_bytes
        )

        def parse(block: LineBlock) -> tuple[ParsedBlock, int, Prepared | None]:
            parsed = parse_block(
                block.text,
                source=source,
                first_line=block.first_line,
                default_year=year,
                metrics=options.metrics,
                columns=columns,
                shapes=options.shapes,
            )
            ready = None
            if prepare is not None:
                ready = prepare(parsed.frame, shapes=parsed.shapes)
            return parsed, block.end_offset, ready

        for parsed, end, ready in _ordered_map(parse, _prefetch(blocks), workers=options.workers):
            frame = carry.frame(parsed)  # a moved year: `ready` for the moved frame
            if ready is not None and frame is not parsed.frame:
                ready = ready.moved(frame)
            yield frame, end, total, ready
    except EOFError as exc:
        raise InputError(
            f"{path}: damaged compressed data ({exc}); the lines before the damage were checked, "
            "the rest cannot be read"
        ) from None
    except OSError as exc:
        raise InputError(f"{path}: read failed: {exc.strerror or exc}") from None
    finally:
        close_stream(stream)


FrameHook = Callable[[pl.DataFrame], None]
"""Sees each parsed block (inside the window, with the `SCHEMA` columns) before the rules do:
exports, reports, metrics. Every column is computed, unless replay is told which the hook
reads (`frame_columns`): then those and the engine's, the others null."""


def replay_file(
    path: str,
    engine: Engine,
    *,
    options: ReplayOptions = ReplayOptions(),
    progress: Progress | None = None,
    source: str | None = None,
    window: Window | None = None,
    on_frame: FrameHook | None = None,
    tap: FrameHook | None = None,
    frame_columns: frozenset[str] | None = None,
) -> Iterator[AlertEvent]:
    """Yield the alert events of one file, in file order; `source` names it (default: `path`),
    `window` keeps only the lines between `--since` and `--until`, `on_frame` sees each block
    (with `frame_columns` computed: `FrameHook`), `tap` each block as the engine gets it (ranks
    and times: `logwatch.drivers.ranks`)."""
    name = source or path
    stats = engine.state_of(name).stats
    rates: list[pl.Series] = []
    # Hooks see whole frames (or the columns they read); the engine alone needs only what its
    # rules read.
    columns = parsed_columns(engine.columns | _stats_columns(options), on_frame, frame_columns)
    # a window keeps other rows
    prepare = partial(engine.prepare, computed=columns) if window is None else None
    last: pl.DataFrame | None = None  # the last lines, for the rules that read them at the end
    for block, end_offset, total, ready in _scan(path, name, options, columns, prepare):
        frame = block if window is None else window.select(block)
        if frame.height:
            if options.stats:
                rates.append(frame.get_column("throughput").drop_nulls())
            if on_frame is not None:
                on_frame(frame)
            if tap is not None:
                tap(frame)
            yield from engine.process(frame, columns, ready)
            if engine.last_lines:
                last = kept_last(last, frame, engine.last_lines)
        if progress is not None:
            progress(path, end_offset, total)
    yield from engine.finish(name, last, computed=SCHEMA if columns is None else columns)
    if rates:
        stats.throughput_median = pl.concat(rates).median()  # type: ignore[assignment]  # Float64: a float or None


def _stats_columns(options: ReplayOptions) -> frozenset[str]:
    return frozenset({"throughput"}) if options.stats else frozenset()


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Everything replay found: the events in order, and per-source stats."""

    events: list[AlertEvent]
    stats: dict[str, SourceStats]
    facts: FleetFacts | None = None  # who wrote what (the fleet post-mortem reads it)
    fleet: Fleet | None = None  # the ranks, cascades and verdicts (`root-cause`, in `events` too)
    unread: tuple[str, ...] = ()  # files not read (to their end) on a cluster: why, and where

    def events_frame(self) -> pl.DataFrame:
        """The events as a frame, one row each in file order, with the JSONL output's field names."""
        rows = [_event_row(event) for event in self.events]
        return pl.DataFrame(rows, schema=EVENT_SCHEMA, orient="row")

    def fired(self, at_least: Severity) -> bool:
        """Whether an alert of this severity or worse fired (`replay --fail-on`'s exit 1)."""
        return any(e.severity >= at_least and e.status == "firing" for e in self.events)

    def to_json(self) -> dict[str, Any]:
        """`replay --format json`: the events (JSONL's objects) and each source's stats, plus
        the alerts still firing at the end, as strict-JSON data."""
        # a source's own alerts: the fleet's verdict is the whole replay's, not its file's
        verdicts = self.fleet.verdicts if self.fleet is not None else []
        firing = still_firing(e for e in self.events if all(e is not v for v in verdicts))
        return {
            "events": [event.to_json() for event in self.events],
            "stats": {
                source: {
                    **{
                        name: _json_stat(getattr(stats, name))
                        for name in SourceStats.__slots__
                        if name != "fired"
                    },
                    "restarts": max(stats.runs - 1, 0),
                    "fired": dict(sorted(stats.fired.items())),
                    "still_firing": list(
                        dict.fromkeys(e.rule for e in firing if e.source == source)
                    ),
                }
                for source, stats in self.stats.items()
            },
        }


def _json_stat(value: Any) -> Any:
    return json_number(value) if isinstance(value, float) else value


EVENT_SCHEMA: dict[str, Any] = {
    "rule": pl.String,
    "severity": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "source": pl.String,
    "line": pl.Int64,
    "ts": pl.Datetime("us"),
    "step": pl.Int64,
    "value": pl.Float64,
    "summary": pl.String,
    "fix": pl.String,
    "text": pl.String,
    "labels": pl.List(pl.Struct({"key": pl.String, "value": pl.String})),
    "run": pl.String,
    "runbook_url": pl.String,
    "fingerprint": pl.String,
}
"""`ReplayResult.events_frame()`: JSONL's fields; `value` keeps NaN / inf as floats, and `labels`
is a list of key/value pairs (as `telemetry` in the log frame)."""


def _event_row(event: AlertEvent) -> tuple[Any, ...]:
    labels = [{"key": k, "value": v} for k, v in event.labels.items()]
    return (
        event.rule,
        event.severity.label,
        event.status,
        event.reason,
        event.source,
        event.line,
        event.ts,
        event.step,
        event.value,
        event.summary,
        event.fix,
        event.text,
        labels,
        event.run,
        event.runbook_url,
        event.fingerprint,
    )


def _not_text_warning(on_warning: WarningHandler | None) -> Callable[[str, str], None] | None:
    """A file that is mostly not text, said as a data warning on its line 1 (replay reads it as
    lines anyway)."""
    if on_warning is None:
        return None
    warn = on_warning
    return lambda path, note: warn(DataWarning(path, 1, note))


def replay(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    *,
    options: ReplayOptions = ReplayOptions(),
    progress: Progress | None = None,
    on_event: Callable[[AlertEvent], None] | None = None,
    on_error: ErrorHandler | None = None,
    window: Window | None = None,
    on_frame: FrameHook | None = None,
    on_warning: WarningHandler | None = None,
    on_found: Callable[[AlertEvent], None] | None = None,
    frame_columns: frozenset[str] | None = None,
) -> ReplayResult:
    """Replay files one after another through one engine; each file is its own source.
    `window`: only the lines between `--since` and `--until`; `on_frame` sees each block
    (`frame_columns`: the columns it reads, see `FrameHook`; None: every column);
    `on_warning` each data warning (`DataWarning`: what was read otherwise than written).
    `on_event` gets each event as it goes out: a file's at its end, with its rank, host and
    line time (`FleetFacts.label`), then the fleet's verdicts; `on_found` each event as the
    engine finds it, its block still at hand, in the order `events` lists them (the
    verdicts aside), each found event becoming the placed one at its index."""
    check_readable(paths, not_text=_not_text_warning(on_warning))
    engine = Engine(rules, on_error=on_error, stats=options.stats, on_warning=on_warning)
    facts = fleet_facts(options.layout, options.gpus_per_node, rules)
    events: list[AlertEvent] = []

    def emit(event: AlertEvent) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    placer = _Placer(facts, emit)

    def one(path: str) -> Iterator[AlertEvent]:
        tap = placer.start(path)  # lazily: the file before it is placed by now
        yield from replay_file(
            path,
            engine,
            options=options,
            progress=progress,
            window=window,
            on_frame=on_frame,
            tap=tap.see,
            frame_columns=frame_columns,
        )

    try:
        found = replay_all(
            paths,
            engine,
            many_options(options),
            one=one,
            start=placer.start,
            progress=progress,
            window=window,
            on_frame=on_frame,
            frame_columns=frame_columns,
        )
        for event in found:
            if on_found is not None:
                on_found(event)
            placer.hold(event)
    finally:  # what was read before a read error still goes out, placed, first
        placer.flush()
    # lines from two or more ranks that failed as a crowd: the verdict, after every file
    fleet = analyse(facts, skew=timedelta(seconds=options.skew_s))
    for event in fleet.verdicts:
        emit(event)
    stats = {source: state.stats for source, state in engine.sources.items()}
    return ReplayResult(events, stats, facts, fleet)


class _Placer:
    """Each file's events held until its end (a later line may name the rank or give the time),
    then labelled with its rank, host and line times (`FleetFacts.label`) and emitted; the same
    whether the file is read alone (`replay_file`) or with its group (`replay_group`)."""

    def __init__(self, facts: FleetFacts, emit: Callable[[AlertEvent], None]) -> None:
        self._facts = facts
        self._emit = emit
        self._tap: SourceTap | None = None
        self._held: list[AlertEvent] = []

    def start(self, path: str) -> SourceTap:
        """A file's turn: the one before it is placed, and this one's tap sees its blocks."""
        self.flush()
        self._tap = self._facts.tap(path, path)
        return self._tap

    def hold(self, event: AlertEvent) -> None:
        self._held.append(event)

    def flush(self) -> None:
        """Place and emit the current file's events (at its end)."""
        tap, held = self._tap, self._held
        self._tap, self._held = None, []
        if tap is not None:
            for event in self._facts.label(tap, held):
                self._emit(event)


def many_options(options: ReplayOptions) -> ManyOptions:
    """What the grouped path (`replay_many.replay_all`) needs of `options`."""
    return ManyOptions(
        options.block_bytes,
        options.max_line_bytes,
        options.workers,
        options.metrics,
        options.stats,
        options.shapes,
        options.small_file_bytes,
    )
