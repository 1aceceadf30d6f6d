"""What a report keeps of each parsed block: a few small projections, not the lines.

`Collector` is replay's `on_frame` hook. Per source it keeps the step metrics, the queue
reports, the GPU snapshot keys, the run starts and the gaps in the log's timestamps (stalls);
the text of a line is dropped as soon as its block has passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from logwatch.parse import SCHEMA

STEP_COLUMNS = ("loss", "grad_norm", "lr", "throughput")
GPU_METRICS = {
    "util": "utilization %",
    "mem": "memory",
    "power": "power W",
    "temp": "temperature °C",
}
"""Snapshot key families (`gpu/<i>/util`, `gpu/<i>/mem_gb`, `gpu/<i>/power_w`, `gpu/<i>/temp_c`)."""
_GPU_KEY = r"^gpu/(\d+)/(util|mem|power|temp)[\w.-]*$"
_EMPTY_STEPS: dict[str, Any] = {"line": pl.Int64, "ts": pl.Datetime("us"), "step": pl.Int64} | {
    c: pl.Float64 for c in STEP_COLUMNS
}
_EMPTY_QUEUE: dict[str, Any] = {
    name: SCHEMA[name] for name in ("line", "ts", "q_hs", "q_hsb", "q_hsb_nonzero")
}
_EMPTY_GPU: dict[str, Any] = {
    "line": pl.Int64,
    "ts": pl.Datetime("us"),
    "gpu": pl.Int64,
    "metric": pl.String,
    "value": pl.Float64,
}
_EMPTY_STARTS: dict[str, Any] = {"line": pl.Int64, "ts": pl.Datetime("us"), "text": pl.String}
_EMPTY_UNTIMED: dict[str, Any] = {"line": pl.Int64, "ts": pl.Datetime("us")}
_EMPTY_GAPS: dict[str, Any] = {
    "line": pl.Int64,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
}


@dataclass(slots=True)
class SourceData:
    """One source's projections, block by block (joined by `frames()`)."""

    steps: list[pl.DataFrame] = field(default_factory=list)
    queue: list[pl.DataFrame] = field(default_factory=list)
    gpus: list[pl.DataFrame] = field(default_factory=list)
    starts: list[pl.DataFrame] = field(default_factory=list)
    gaps: list[pl.DataFrame] = field(default_factory=list)
    untimed: list[pl.DataFrame] = field(default_factory=list)  # lines placed at an earlier ts
    last_ts: datetime | None = None
    lines: int = 0

    def frames(self) -> dict[str, pl.DataFrame]:
        """Each projection as one frame (an empty one with its columns when nothing came)."""
        empty = {
            "steps": _EMPTY_STEPS,
            "queue": _EMPTY_QUEUE,
            "gpus": _EMPTY_GPU,
            "starts": _EMPTY_STARTS,
            "gaps": _EMPTY_GAPS,
            "untimed": _EMPTY_UNTIMED,
        }
        parts = {
            "steps": self.steps,
            "queue": self.queue,
            "gpus": self.gpus,
            "starts": self.starts,
            "gaps": self.gaps,
            "untimed": self.untimed,
        }
        return {
            name: pl.concat(blocks) if blocks else pl.DataFrame(schema=empty[name])
            for name, blocks in parts.items()
        }


class Collector:
    """Replay's `on_frame` hook for a report: keeps per source what the plots draw."""

    def __init__(self, stall_after_s: float = 600.0) -> None:
        self.sources: dict[str, SourceData] = {}
        self.stall_after = timedelta(seconds=stall_after_s)

    def __call__(self, frame: pl.DataFrame) -> None:
        if frame.is_empty():
            return
        data = self.sources.setdefault(str(frame.item(0, "source")), SourceData())
        data.lines += frame.height
        data.gaps.append(self._gaps(frame, data.last_ts))
        # A line without its own timestamp sits at the last one before it. Columns are picked
        # before rows: filtering the whole block would copy every line's text.
        ts = pl.col("ts").fill_null(strategy="forward")
        own_ts = frame.get_column("ts")
        filled = frame.select(
            "line",
            ts if data.last_ts is None else ts.fill_null(data.last_ts),
            "step",
            *STEP_COLUMNS[:-1],
            "throughput",
            "q_hs",
            "q_hsb",
            "q_hsb_nonzero",
            "run_start",
        )
        data.untimed.append(
            filled.select("line", "ts").filter(own_ts.is_null() & pl.col("ts").is_not_null())
        )
        last = filled.get_column("ts").drop_nulls()
        data.last_ts = last[-1] if last.len() else data.last_ts
        data.steps.append(
            filled.select("line", "ts", "step", *STEP_COLUMNS).filter(
                pl.any_horizontal(pl.col(c).is_not_null() for c in STEP_COLUMNS)
            )
        )
        data.queue.append(
            filled.select(_EMPTY_QUEUE.keys()).filter(
                pl.col("q_hs").is_not_null() | pl.col("q_hsb").is_not_null()
            )
        )
        snapshots = frame.get_column("gpu_keys") > 0
        if snapshots.any():
            data.gpus.append(_gpu_rows(frame.select("line", "ts", "telemetry").filter(snapshots)))
        starts = frame.get_column("run_start")
        if starts.any():
            data.starts.append(frame.select("line", "ts", "text").filter(starts))

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


def _gpu_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per `gpu/<i>/<metric>` key of snapshot lines (`line`, `ts`, `telemetry`);
    `mem_total` is capacity, not use."""
    pairs = frame.explode("telemetry").unnest("telemetry")
    found = pairs.with_columns(pl.col("key").str.extract_groups(_GPU_KEY).alias("_g")).filter(
        pl.col("_g").struct.field("1").is_not_null() & ~pl.col("key").str.contains("total")
    )
    return found.select(
        "line",
        "ts",
        pl.col("_g").struct.field("1").cast(pl.Int64).alias("gpu"),
        pl.col("_g").struct.field("2").alias("metric"),
        pl.col("value").cast(pl.Float64),
    )
