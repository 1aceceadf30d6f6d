"""What a report keeps of each parsed block: reduced as the blocks pass, never the lines.

`Collector` is replay's `on_frame` hook. Per source it folds each block into two views (the x
axis is time when every source has timestamps, else line numbers, and that is known only at
the end): the series downsampled per x cell (`reduce.py`), every NaN/Inf marker, restarts,
stalls and starvation streaks, each capped with a count of what was left out. Memory is
bounded by what the charts draw, not by the file's lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from logwatch.report.reduce import (
    Capped,
    MarkerReducer,
    MedianReducer,
    MixReducer,
    PointReducer,
)

STEP_COLUMNS = ("loss", "grad_norm", "lr", "throughput")
GPU_METRICS = {
    "util": "utilization %",
    "mem": "memory",
    "power": "power W",
    "temp": "temperature °C",
}
"""Snapshot key families (`gpu/<i>/util`, `gpu/<i>/mem_gb`, `gpu/<i>/power_w`, `gpu/<i>/temp_c`)."""
_GPU_KEY = r"^gpu/(\d+)/(util|mem|power|temp)[\w.-]*$"
KEYS = {name: i for i, name in enumerate((*STEP_COLUMNS, "q_hs"))}
"""Each series' key in the reducers; GPU metrics follow (`gpu_key`)."""
THROUGHPUT = KEYS["throughput"]


def gpu_key(gpu: int, metric: str) -> int:
    """The reducers' key of one GPU's metric."""
    return 16 + 4 * gpu + list(GPU_METRICS).index(metric)


STARVED_AFTER = 5
"""Consecutive single-bucket queue reports shaded as starvation (bucket-starvation's count)."""
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
    """One source on one kind of x axis: `time` (epoch seconds) or line numbers.

    The marks (extent, run starts, starvation streaks) see every row with an x on this axis;
    the reducers only the rows that are this view's own: the time view's those with a
    timestamp, the line view's those without (so each row is reduced once; on a line-number
    axis both views' reducers are drawn)."""

    time: bool
    points: PointReducer = field(default_factory=PointReducer)
    markers: MarkerReducer = field(default_factory=MarkerReducer)
    medians: MedianReducer = field(default_factory=MedianReducer)
    mix: MixReducer = field(default_factory=MixReducer)
    streaks: Streaks = field(default_factory=Streaks)
    starts: Capped = field(default_factory=lambda: Capped(BAND_CAP))
    lo: float | None = None
    hi: float | None = None
    first_step_x: float | None = None

    def x(self) -> pl.Expr:
        """This view's x of a row."""
        if self.time:
            return (pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6).alias("x")
        return pl.col("line").cast(pl.Float64).alias("x")

    def add(self, block: Block) -> None:
        """Fold in one block's projections."""
        x = self.x()
        placed = [f.with_columns(x).filter(pl.col("x").is_not_null()) for f in block.series]
        rows = pl.concat([p.select("key", "x", "y", "line", "step", "ts") for p in placed])
        starts = block.starts.with_columns(x).filter(pl.col("x").is_not_null())
        self.starts.add(starts)
        steps = placed[0]
        if self.first_step_x is None and steps.height:
            first = steps.filter(pl.col("line") == pl.col("line").min())
            self.first_step_x = float(first.item(0, "x"))
        self._span([rows.get_column("x"), starts.get_column("x")])
        queue = block.queue.with_columns(x).filter(pl.col("x").is_not_null())
        reports = queue.filter(pl.col("q_hsb").is_not_null())
        self.streaks.add(reports.select("x", "line", (pl.col("q_hsb_nonzero") == 1).alias("one")))
        own = pl.lit(True) if self.time else pl.col("ts").is_null()
        rows = rows.filter(own).drop("ts")
        finite = pl.col("y").is_finite()
        self.points.add(rows.filter(finite))
        self.markers.add(rows.filter(~finite))
        throughput = finite & (pl.col("key") == THROUGHPUT)
        self.medians.add(rows.filter(throughput).select("key", "x", "y", "line"))
        self.mix.add(_shares(reports.filter(own)))

    def _span(self, xs: list[pl.Series]) -> None:
        for s in xs:
            if s.len():
                lo, hi = float(s.min()), float(s.max())  # type: ignore[arg-type]  # Float64
                self.lo = lo if self.lo is None else min(self.lo, lo)
                self.hi = hi if self.hi is None else max(self.hi, hi)


@dataclass(frozen=True, slots=True)
class Block:
    """One block's projections: `series` rows (`key`, `line`, `ts`, `y`, `step`; the step
    lines' first), the queue reports and the run starts."""

    series: list[pl.DataFrame]
    queue: pl.DataFrame
    starts: pl.DataFrame


@dataclass(slots=True)
class SourceData:
    """One source, reduced: both views, the stalls, and where lines lacked a timestamp."""

    by_time: View = field(default_factory=lambda: View(time=True))
    by_line: View = field(default_factory=lambda: View(time=False))
    gaps: Capped = field(default_factory=lambda: Capped(BAND_CAP))
    untimed: list[pl.DataFrame] = field(default_factory=list)  # runs: `line`, `line_last`, `ts`
    last_start: str | None = None
    last_ts: datetime | None = None
    lines: int = 0

    def view(self, *, time: bool) -> View:
        """The view for this kind of x axis."""
        return self.by_time if time else self.by_line

    def starts(self) -> list[str]:
        """The text of the run starts kept, and of the last one."""
        texts = self.by_line.starts.frame(_STARTS).get_column("text").to_list()
        if self.last_start is not None and self.by_line.starts.dropped:
            texts.append(self.last_start)
        return texts

    def untimed_ts(self, lines: list[int]) -> dict[int, datetime]:
        """For lines without a timestamp: the last timestamp before each."""
        if not self.untimed or not lines:
            return {}
        runs = pl.concat(self.untimed)
        wanted = pl.DataFrame({"want": lines}, schema={"want": pl.Int64}).sort("want")
        found = wanted.join_asof(runs.sort("line"), left_on="want", right_on="line").filter(
            pl.col("want") <= pl.col("line_last")
        )
        return dict(
            zip(found.get_column("want").to_list(), found.get_column("ts").to_list(), strict=True)
        )


class Collector:
    """Replay's `on_frame` hook for a report: reduces per source what the plots draw."""

    def __init__(self, stall_after_s: float = 600.0) -> None:
        self.sources: dict[str, SourceData] = {}
        self.stall_after = timedelta(seconds=stall_after_s)

    def __call__(self, frame: pl.DataFrame) -> None:
        if frame.is_empty():
            return
        data = self.sources.setdefault(str(frame.item(0, "source")), SourceData())
        data.lines += frame.height
        data.gaps.add(self._gaps(frame, data.last_ts))
        # A line without its own timestamp sits at the last one before it. Columns are picked
        # before rows: filtering the whole block would copy every line's text.
        ts = pl.col("ts").fill_null(strategy="forward")
        filled = frame.select(
            "line",
            ts if data.last_ts is None else ts.fill_null(data.last_ts),
            "step",
            *STEP_COLUMNS,
            "q_hs",
            "q_hsb",
            "q_hsb_nonzero",
        )
        untimed = filled.select("line", "ts").filter(
            frame.get_column("ts").is_null() & pl.col("ts").is_not_null()
        )
        if untimed.height:
            data.untimed.append(_runs(untimed))
        last = filled.get_column("ts").drop_nulls()
        data.last_ts = last[-1] if last.len() else data.last_ts
        block = self._block(frame, filled)
        if block.starts.height:
            data.last_start = block.starts.item(-1, "text")
        data.by_time.add(block)
        data.by_line.add(block)

    def _block(self, frame: pl.DataFrame, filled: pl.DataFrame) -> Block:
        steps = filled.select("line", "ts", "step", *STEP_COLUMNS).filter(
            pl.any_horizontal(pl.col(c).is_not_null() for c in STEP_COLUMNS)
        )
        long = pl.concat(
            [
                steps.select(
                    pl.lit(KEYS[c], pl.Int32).alias("key"),
                    "line",
                    "ts",
                    pl.col(c).alias("y"),
                    "step",
                ).filter(pl.col("y").is_not_null())
                for c in STEP_COLUMNS
            ]
        )
        queue = filled.select("line", "ts", "q_hs", "q_hsb", "q_hsb_nonzero").filter(
            pl.col("q_hs").is_not_null() | pl.col("q_hsb").is_not_null()
        )
        q_hs = queue.filter(pl.col("q_hs").is_not_null()).select(
            pl.lit(KEYS["q_hs"], pl.Int32).alias("key"),
            "line",
            "ts",
            pl.col("q_hs").cast(pl.Float64).alias("y"),
            pl.lit(None, pl.Int64).alias("step"),
        )
        series = [long, q_hs]
        snapshots = frame.get_column("gpu_keys") > 0
        if snapshots.any():
            rows = frame.select("line", "ts", "telemetry").filter(snapshots)
            series.append(_gpu_rows(rows))
        starts = frame.select("line", "ts", "text").filter(frame.get_column("run_start"))
        return Block(series, queue, starts)

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


def _runs(untimed: pl.DataFrame) -> pl.DataFrame:
    """Consecutive lines that share one carried timestamp, as (`line`, `line_last`, `ts`)."""
    new = (pl.col("ts") != pl.col("ts").shift(1)) | (pl.col("line") != pl.col("line").shift(1) + 1)
    return (
        untimed.with_columns(new.fill_null(True).cum_sum().alias("_run"))
        .group_by("_run", maintain_order=True)
        .agg(pl.col("line").first(), pl.col("line").last().alias("line_last"), pl.col("ts").first())
        .drop("_run")
    )


def _shares(reports: pl.DataFrame) -> pl.DataFrame:
    """Each queue report's share per length bucket (`b0`..; an all-zero report is all 0)."""
    lists = reports.filter(pl.col("q_hsb").list.len() > 0)
    if lists.is_empty():
        return pl.DataFrame(schema={"key": pl.Int32, "x": pl.Float64, "line": pl.Int64})
    width = int(lists.get_column("q_hsb").list.len().max())  # type: ignore[arg-type]  # UInt32
    total = pl.col("q_hsb").list.sum().cast(pl.Float64)
    return lists.select(
        pl.lit(0, pl.Int32).alias("key"),
        "x",
        "line",
        *(
            (pl.col("q_hsb").list.get(i, null_on_oob=True).fill_null(0) / total)
            .fill_nan(0.0)
            .fill_null(0.0)
            .alias(f"b{i}")
            for i in range(width)
        ),
    )


def _gpu_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per `gpu/<i>/<metric>` key of snapshot lines (`line`, `ts`, `telemetry`), keyed
    `gpu/<i>/<metric>`; `mem_total` is capacity, not use."""
    pairs = frame.explode("telemetry").unnest("telemetry")
    names = pairs.get_column("key").unique().drop_nulls()
    found = names.str.extract_groups(_GPU_KEY)
    keep = found.struct.field("1").is_not_null() & ~names.str.contains("total")
    metric = found.struct.field("2").replace_strict(
        list(GPU_METRICS), range(len(GPU_METRICS)), default=0
    )
    ids = (16 + 4 * found.struct.field("1").cast(pl.Int32) + metric.cast(pl.Int32)).filter(keep)
    return pairs.select(
        pl.col("key").replace_strict(names.filter(keep), ids, default=None, return_dtype=pl.Int32),
        "line",
        "ts",
        pl.col("value").cast(pl.Float64).alias("y"),
        pl.lit(None, pl.Int64).alias("step"),
    ).filter(pl.col("key").is_not_null())
