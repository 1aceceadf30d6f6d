"""What a report keeps of each parsed block: reduced as the blocks pass, never the lines.

`Collector` is replay's `on_frame` hook. Per source it splits each block into runs (a file,
and each `run start:` restart in it) and folds each run's rows into three views, one per kind
of x axis (step, time, line numbers: which one is drawn is known only at the end): the series
downsampled per x cell (`reduce.py`), every NaN/Inf marker, restarts, stalls and starvation
streaks, each capped with a count of what was left out. Memory is bounded by what the charts
draw, not by the file's lines.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.report.project import STEP_COLUMNS, THROUGHPUT, Block, project, shares
from logwatch.report.reduce import (
    Capped,
    MarkerReducer,
    MedianReducer,
    MixReducer,
    PointReducer,
)

STARVED_AFTER = 5
"""Consecutive single-bucket queue reports shaded as starvation (bucket-starvation's count)."""
Kind = Literal["time", "step", "line"]
"""What the report's x axis counts: wall-clock time, training steps, or each file's lines."""
RUN_CAP = 8
"""Restarts in one file drawn as their own series; later ones join the last series."""
BAND_CAP = 1000
"""Restarts, stalls and starvation streaks drawn per source and kind; the rest are counted."""
_STARTS: dict[str, Any] = {
    "line": pl.Int64,
    "ts": pl.Datetime("us"),
    "text": pl.String,
    "x": pl.Float64,
}
_STREAKS: dict[str, Any] = {"x0": pl.Float64, "x1": pl.Float64, "n": pl.Int64, "line": pl.Int64}


@dataclass(slots=True)
class Streaks:
    """Runs of `STARVED_AFTER`+ queue reports with exactly one non-empty bucket, across blocks."""

    bands: Capped = field(default_factory=lambda: Capped(BAND_CAP))
    open: tuple[float, float, int, int] | None = None  # x0, x1, n, first line of the open run

    def add(self, reports: pl.DataFrame) -> None:
        """Fold in a block's reports (`x`, `line`, `one`) in file order."""
        if reports.is_empty():
            return
        one = pl.col("one")
        runs = (
            reports.with_columns((one != one.shift(1)).fill_null(True).cum_sum().alias("_run"))
            .group_by("_run", maintain_order=True)
            .agg(
                one.first(),
                pl.col("x").min().alias("x0"),
                pl.col("x").max().alias("x1"),
                pl.len().cast(pl.Int64).alias("n"),
                pl.col("line").first(),
            )
            .drop("_run")
        )
        if self.open is not None:
            x0, x1, n, line = self.open
            if runs.item(0, "one"):  # the open run goes on
                head = runs.row(0, named=True)
                x0, x1, n = min(x0, head["x0"]), max(x1, head["x1"]), n + head["n"]
                runs = runs.slice(1)
            carried = {"one": True, "x0": x0, "x1": x1, "n": n, "line": line}
            runs = pl.concat([pl.DataFrame([carried], schema=runs.schema), runs])
        tail = runs.row(-1, named=True)
        self.open = (tail["x0"], tail["x1"], tail["n"], tail["line"]) if tail["one"] else None
        done = runs.slice(0, runs.height - 1) if tail["one"] else runs
        self._close(done.filter(pl.col("one")).select(_STREAKS.keys()))

    def _close(self, runs: pl.DataFrame) -> None:
        self.bands.add(runs.filter(pl.col("n") >= STARVED_AFTER).cast(_STREAKS))  # type: ignore[arg-type]  # a schema dict

    def finish(self) -> pl.DataFrame:
        """Every streak kept, the one still open at the end included."""
        if self.open is not None:
            x0, x1, n, line = self.open
            self._close(pl.DataFrame([{"x0": x0, "x1": x1, "n": n, "line": line}], schema=_STREAKS))
            self.open = None
        return self.bands.frame(_STREAKS).sort("x0")


@dataclass(slots=True)
class View:
    """One run on one kind of x axis: `time` (epoch seconds), `step` (the training step; a
    line without one sits at the run's last step before it) or `line` numbers.

    The marks (extent, run starts, starvation streaks) see every row with an x on this axis;
    the reducers only the rows that are this view's own: the line view's are those without a
    timestamp (the time view's rows are drawn at their lines too, so each row is reduced once
    for a line-number axis)."""

    kind: Kind
    points: PointReducer = field(default_factory=PointReducer)
    markers: MarkerReducer = field(default_factory=MarkerReducer)
    medians: MedianReducer = field(default_factory=MedianReducer)
    mix: MixReducer = field(default_factory=MixReducer)
    streaks: Streaks = field(default_factory=Streaks)
    lo: float | None = None
    hi: float | None = None
    first_step_x: float | None = None

    @property
    def time(self) -> bool:
        """Whether x is epoch seconds."""
        return self.kind == "time"

    def x(self) -> pl.Expr:
        """This view's x of a row."""
        if self.kind == "time":
            return (pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6).alias("x")
        if self.kind == "step":
            return pl.col("at_step").cast(pl.Float64).alias("x")
        return pl.col("line").cast(pl.Float64).alias("x")

    def add(self, block: Block) -> None:
        """Fold in one block's projections."""
        x = self.x()
        placed = [f.with_columns(x).filter(pl.col("x").is_not_null()) for f in block.series]
        rows = pl.concat([p.select("key", "x", "y", "line", "step", "ts") for p in placed])
        starts = block.starts.with_columns(x).filter(pl.col("x").is_not_null())
        steps = placed[0]
        if self.first_step_x is None and steps.height:
            first = steps.filter(pl.col("line") == pl.col("line").min())
            self.first_step_x = float(first.item(0, "x"))
        self._span([rows.get_column("x"), starts.get_column("x")])
        queue = block.queue.with_columns(x).filter(pl.col("x").is_not_null())
        reports = queue.filter(pl.col("q_hsb").is_not_null())
        self.streaks.add(reports.select("x", "line", (pl.col("q_hsb_nonzero") == 1).alias("one")))
        own = pl.col("ts").is_null() if self.kind == "line" else pl.lit(True)
        rows = rows.filter(own).drop("ts")
        finite = pl.col("y").is_finite()
        self.points.add(rows.filter(finite))
        self.markers.add(rows.filter(~finite))
        throughput = finite & (pl.col("key") == THROUGHPUT)
        self.medians.add(rows.filter(throughput).select("key", "x", "y", "line"))
        self.mix.add(shares(reports.filter(own)))

    def _span(self, xs: list[pl.Series]) -> None:
        for s in xs:
            if s.len():
                lo, hi = float(s.min()), float(s.max())  # type: ignore[arg-type]  # Float64
                self.lo = lo if self.lo is None else min(self.lo, lo)
                self.hi = hi if self.hi is None else max(self.hi, hi)


@dataclass(slots=True)
class RunData:
    """One run (a file, or a `run start:` restart within it), reduced on each kind of axis.

    `restart` is its number in its file (0: the file's first run); `start` the text of the
    `run start:` line that began it, if one did. Past `RUN_CAP` restarts in a file, the
    later ones are drawn in the last run's series."""

    start: str | None = None
    kinds: tuple[Kind, ...] = ("time", "line", "step")  # the views fed (`--x` needs one)
    by_time: View = field(default_factory=lambda: View("time"))
    by_line: View = field(default_factory=lambda: View("line"))
    by_step: View = field(default_factory=lambda: View("step"))

    def view(self, kind: Kind) -> View:
        """The view for this kind of x axis."""
        return {"time": self.by_time, "line": self.by_line, "step": self.by_step}[kind]

    @property
    def drawn(self) -> bool:
        """Whether the run has anything to draw (a series row or a queue report)."""
        views = (self.by_time, self.by_line, self.by_step)
        return any(r.counts for v in views for r in (v.points, v.markers, v.mix))

    def add(self, block: Block, stepped: bool = False) -> None:
        """Fold in one block of this run's rows, on every axis it may be drawn on (`stepped`:
        the step axis alone, as the only one that can still be drawn)."""
        for kind in ("step",) if stepped and "step" in self.kinds else self.kinds:
            self.view(kind).add(block)


@dataclass(frozen=True, slots=True)
class Place:
    """Where an alert event sits when its own line does not say: the last timestamp before
    it and the line that had it, the run's last step, the run, and whether it was found at
    the end of the file (after the last block); `looked_up`: False when the event's line
    was too far behind the block at hand to look it up (its own time and step are all)."""

    ts: datetime | None
    ts_line: int | None
    step: int | None
    run: int | None
    at_end: bool
    looked_up: bool = True


@dataclass(slots=True)
class SourceData:
    """One source, reduced: its runs, its restarts and stalls, and what places its alerts."""

    runs: dict[int, RunData] = field(default_factory=dict)
    starts: Capped = field(default_factory=lambda: Capped(BAND_CAP))
    gaps: Capped = field(default_factory=lambda: Capped(BAND_CAP))
    run_lines: list[int] = field(default_factory=list)  # the first line of each run kept
    segment: int = 0  # `run start:` lines so far (the current segment's number)
    last_start: str | None = None
    last_ts: datetime | None = None
    last_ts_line: int | None = None
    last_step: int | None = None
    lines: int = 0
    recent: list[pl.DataFrame] = field(default_factory=list)  # the last two blocks' places
    ended: bool = False  # every block is in: events now come from the end of the file
    stepped: bool = False  # a line of it had a step (the stats' `steps_seen`)

    def starts_text(self) -> list[str]:
        """The text of the run starts kept, and of the last one."""
        texts = self.starts.frame(_STARTS).get_column("text").to_list()
        if self.last_start is not None and self.starts.dropped:
            texts.append(self.last_start)
        return texts

    def ordered_runs(self) -> list[RunData]:
        """The runs with something to draw, in file order."""
        return [self.runs[k] for k in sorted(self.runs) if self.runs[k].drawn]

    def place(self, line: int) -> Place:
        """Where line `line` sits (see `Place`)."""
        for frame in reversed(self.recent):
            lines = frame.get_column("line")
            i = int(lines.search_sorted(line))
            if i < frame.height and lines[i] == line:
                _, ts, ts_line, step, run = frame.row(i)
                return Place(ts, ts_line, step, run, at_end=self.ended)
        i = bisect.bisect_right(self.run_lines, line) - 1
        keys = sorted(self.runs)
        run = keys[i] if 0 <= i < len(keys) else None
        if self.ended:
            return Place(self.last_ts, self.last_ts_line, self.last_step, run, at_end=True)
        return Place(None, None, None, run, at_end=False, looked_up=False)


class Collector:
    """Replay's `on_frame` hook for a report: reduces per run what the plots draw; its
    `on_event` and `progress` place the alerts whose lines say no time or step.

    With `background`, each block's runs are reduced on a worker thread while replay's engine
    works on the block (polars releases the GIL: on two cores the reduction takes the time the
    engine leaves idle), one block at a time; `close` waits for the last and stops the thread.
    What places the alerts is kept as each block comes, as without it."""

    def __init__(
        self,
        stall_after_s: float = 600.0,
        kinds: tuple[Kind, ...] = ("time", "line", "step"),
        *,
        one_file: bool = False,
        background: bool = False,
    ) -> None:
        self.kinds = kinds
        # The default axis of a one-file report is the step axis once the file has a step
        # line (`build._kind`: `steps_seen`): from the block that has the first, only the step
        # view is fed (the others cost about a fifth of a replay and their working set).
        self.one_file = one_file
        self.sources: dict[str, SourceData] = {}
        self.stall_after = timedelta(seconds=stall_after_s)
        self.places: dict[int, Place] = {}  # by id() of the events of this replay
        self._worker = (
            ThreadPoolExecutor(1, thread_name_prefix="logwatch-report") if background else None
        )
        self._reducing: Future[None] | None = None  # the block the worker is on

    def __call__(self, frame: pl.DataFrame) -> None:
        if frame.is_empty():
            return
        data = self.sources.setdefault(str(frame.item(0, "source")), SourceData())
        data.ended = False
        data.lines += frame.height
        data.gaps.add(self._gaps(frame, data.last_ts))
        rows = frame.select(*_filled(data), "text", "run_start", "gpu_keys", "snapshot")
        data.recent = [*data.recent[-1:], rows.select("line", "ts", "ts_line", "at_step", "run")]
        last = rows.tail(1).row(0, named=True)
        data.last_ts, data.last_ts_line = last["ts"], last["ts_line"]
        data.last_step, data.segment = last["at_step"], last["segment"]
        starts = rows.filter(pl.col("run_start"))
        data.starts.add(starts.select("line", "ts", "text", pl.lit(None, pl.Float64).alias("x")))
        if starts.height:
            data.last_start = starts.item(-1, "text")
        if self.one_file and not data.stepped:
            data.stepped = frame.get_column("step").is_not_null().any()
        parts = [rows] if rows.get_column("run").n_unique() == 1 else rows.partition_by("run")
        work: list[tuple[RunData, pl.DataFrame]] = []
        for part in parts:
            run = int(part.item(0, "run"))
            if run not in data.runs:
                data.runs[run] = _new_run(part, data, self.kinds)
            work.append((data.runs[run], part))
        if self._worker is None:
            _reduce(work, data.stepped)
            return
        self.finish()  # one block at a time: the next waits for this one
        self._reducing = self._worker.submit(_reduce, work, data.stepped)

    def finish(self) -> None:
        """Wait for the block being reduced on the worker thread, if any (raising what its
        reduction raised): then every run holds every block."""
        reducing, self._reducing = self._reducing, None
        if reducing is not None:
            reducing.result()

    def close(self) -> None:
        """`finish`, and stop the worker thread."""
        try:
            self.finish()
        finally:
            if self._worker is not None:
                self._worker.shutdown(cancel_futures=True)
                self._worker = None

    def on_event(self, event: AlertEvent) -> None:
        """Remember where `event` sits, while its block is at hand."""
        data = self.sources.get(event.source)
        if data is not None:
            self.places[id(event)] = data.place(event.line)

    def progress(self, source: str, done: int, total: int) -> None:
        """After each block: events until the next block come from the end of the file."""
        if source in self.sources:
            self.sources[source].ended = True

    def _gaps(self, frame: pl.DataFrame, before: datetime | None) -> pl.DataFrame:
        """Where the log fell silent for `stall_after` or longer (by its own timestamps)."""
        stamped = frame.select("line", "ts").filter(pl.col("ts").is_not_null())
        previous = stamped.get_column("ts").shift(1)
        if before is not None:
            previous = previous.fill_null(before)
        return (
            stamped.with_columns(previous.alias("start"))
            .filter((pl.col("ts") - pl.col("start")) >= self.stall_after)
            .select("line", "start", pl.col("ts").alias("end"))
        )


def _reduce(work: Sequence[tuple[RunData, pl.DataFrame]], stepped: bool) -> None:
    """Fold each run's part of a block into the run (`stepped`: see `RunData.add`)."""
    for run, part in work:
        run.add(project(part), stepped=stepped)


def _filled(data: SourceData) -> list[pl.Expr | str]:
    """A block's columns with what a line lacks carried from the lines before it: the last
    timestamp (`ts`) and its line (`ts_line`), the segment (`run start:` lines so far), the
    run drawn (`run`: the segment, capped) and the run's last step (`at_step`)."""
    ts = pl.col("ts").fill_null(strategy="forward")
    ts_line = pl.when(pl.col("ts").is_not_null()).then(pl.col("line")).forward_fill()
    segment = pl.col("run_start").cast(pl.Int64).cum_sum() + data.segment
    at_step = pl.col("step").forward_fill().over(segment)
    if data.last_step is not None:  # the run going on from the block before
        at_step = pl.when(segment == data.segment).then(at_step.fill_null(data.last_step))
        at_step = at_step.otherwise(pl.col("step").forward_fill().over(segment))
    return [
        "line",
        ts if data.last_ts is None else ts.fill_null(data.last_ts),
        ts_line.alias("ts_line")
        if data.last_ts_line is None
        else ts_line.fill_null(data.last_ts_line).alias("ts_line"),
        segment.alias("segment"),
        segment.clip(upper_bound=RUN_CAP).alias("run"),
        at_step.alias("at_step"),
        "step",
        *STEP_COLUMNS,
        "q_hs",
        "q_hsb",
        "q_hsb_nonzero",
    ]


def _new_run(part: pl.DataFrame, data: SourceData, kinds: tuple[Kind, ...]) -> RunData:
    """A run's record, from the rows that begin it."""
    first = part.filter(pl.col("run_start")).head(1)
    start = str(first.item(0, "text")) if first.height else None
    data.run_lines.append(int(part.item(0, "line")))
    return RunData(start=start, kinds=kinds)
