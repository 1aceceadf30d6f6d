"""A block's projections for the report's reducers: the series rows in long form (`key`, `line`,
`ts`, `at_step`, `y`, `step`), the queue reports and the run starts, from the columns the
collector keeps of each block (`COLUMNS`, with what `collect._filled` carries)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from logwatch.parse.telemetry import telemetry_pairs

STEP_COLUMNS = ("loss", "grad_norm", "lr", "throughput")
COLUMNS = frozenset(
    {"source", "line", "ts", "text", "run_start", "step", *STEP_COLUMNS}
    | {"q_hs", "q_hsb", "q_hsb_nonzero", "snapshot", "gpu_keys"}
)
"""The parsed columns the collector reads (replay's `frame_columns`): not `telemetry`, whose
GPU pairs it reads from the snapshot lines' text itself (`gpu_rows`)."""
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


@dataclass(frozen=True, slots=True)
class Block:
    """One block's projections: `series` rows (`key`, `line`, `ts`, `at_step`, `y`, `step`;
    the step lines' first), the queue reports and the run starts."""

    series: list[pl.DataFrame]
    queue: pl.DataFrame
    starts: pl.DataFrame


def project(rows: pl.DataFrame) -> Block:
    """One run's part of a block (`Collector`'s rows) as its projections."""
    steps = rows.select("line", "ts", "at_step", "step", *STEP_COLUMNS).filter(
        pl.any_horizontal(pl.col(c).is_not_null() for c in STEP_COLUMNS)
    )
    long = pl.concat(
        [
            steps.select(
                pl.lit(KEYS[c], pl.Int32).alias("key"),
                "line",
                "ts",
                "at_step",
                pl.col(c).alias("y"),
                "step",
            ).filter(pl.col("y").is_not_null())
            for c in STEP_COLUMNS
        ]
    )
    queue = rows.select("line", "ts", "at_step", "q_hs", "q_hsb", "q_hsb_nonzero").filter(
        pl.col("q_hs").is_not_null() | pl.col("q_hsb").is_not_null()
    )
    q_hs = queue.filter(pl.col("q_hs").is_not_null()).select(
        pl.lit(KEYS["q_hs"], pl.Int32).alias("key"),
        "line",
        "ts",
        "at_step",
        pl.col("q_hs").cast(pl.Float64).alias("y"),
        pl.lit(None, pl.Int64).alias("step"),
    )
    series = [long, q_hs]
    # the lines whose `telemetry` the parser reads: snapshots (with `gpu/` keys)
    snapshots = (rows.get_column("gpu_keys") > 0) & rows.get_column("snapshot").fill_null(False)
    if snapshots.any():
        snaps = rows.select("line", "ts", "at_step", "text").filter(snapshots)
        series.append(gpu_rows(snaps))
    starts = rows.select("line", "ts", "at_step", "text").filter(rows.get_column("run_start"))
    return Block(series, queue, starts)


def shares(reports: pl.DataFrame) -> pl.DataFrame:
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


def gpu_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per `gpu/<i>/<metric>` key of snapshot lines (`line`, `ts`, `at_step`, `text`):
    `keyed` of their pairs, read as the parser reads `telemetry` (`parse.telemetry`: its pairs,
    each cut at its first `=`, which no key holds, and the number after it read as a float),
    of the `gpu/` keys only."""
    pairs = (
        frame.select("line", "ts", "at_step", telemetry_pairs().alias("pair"))
        .explode("pair")
        .filter(pl.col("pair").str.starts_with("gpu/"))
        .with_columns(pl.col("pair").str.splitn("=", 2).struct.rename_fields(["key", "value"]))
        .unnest("pair")
    )
    return keyed(pairs)


def keyed(pairs: pl.DataFrame) -> pl.DataFrame:
    """Snapshot pairs (`line`, `ts`, `at_step`, `key`, `value`) as series rows, keyed
    `gpu/<i>/<metric>` (`gpu_key`); the other keys left out, and `mem_total`: capacity, not use."""
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
        "at_step",
        pl.col("value").cast(pl.Float64, strict=False).alias("y"),
        pl.lit(None, pl.Int64).alias("step"),
    ).filter(pl.col("key").is_not_null())
