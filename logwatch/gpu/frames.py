"""GPU samples as one long polars frame (a row per GPU per time), from NVML or from the log's
own telemetry snapshots, and the as-of join of log frames with GPU frames."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING

import polars as pl

if TYPE_CHECKING:  # replay builds frames from logs, not samples: it need not load the records
    from logwatch.gpu.model import GpuSample

# Clock-event reasons that mean heat or a power brake (nvml.h): HwSlowdown 0x8,
# SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80. GpuIdle (0x1) and
# SwPowerCap (0x4, normal at full load) are left out on purpose.
THERMAL_REASONS_MASK = 0x8 | 0x20 | 0x40 | 0x80
GIB = 1 << 30

GPU_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Datetime("us"),
    "gpu": pl.Int64(),
    "uuid": pl.String(),
    "name": pl.String(),
    "util_gpu": pl.Float64(),
    "util_mem": pl.Float64(),
    "mem_used_bytes": pl.Int64(),
    "mem_total_bytes": pl.Int64(),
    "power_w": pl.Float64(),
    "power_limit_w": pl.Float64(),
    "temp_c": pl.Float64(),
    "clock_event_reasons": pl.Int64(),
    "clocks_thermal": pl.Boolean(),
    "ecc_uncorrected": pl.Int64(),
    "pids": pl.List(pl.Int64()),
    "lost": pl.Boolean(),
    "origin": pl.String(),
}
"""The GPU frame every GPU rule reads. `origin` is "nvml" or "log"; metrics are null where the
source lacks them (the log has no ECC or clock-event reasons; NVML may not support a metric)."""


def empty_gpu_frame() -> pl.DataFrame:
    """A GPU frame with no rows."""
    return pl.DataFrame(schema=GPU_SCHEMA)


def samples_to_frame(samples: Iterable[GpuSample]) -> pl.DataFrame:
    """NVML samples as a GPU frame."""
    rows = [
        {
            "ts": s.ts,
            "gpu": s.index,
            **s.metrics(),
            "clocks_thermal": None,
            "pids": None if s.processes is None else [p.pid for p in s.processes],
            "origin": "nvml",
        }
        for s in samples
    ]
    frame = pl.DataFrame(rows, schema=GPU_SCHEMA)
    return frame.with_columns(
        ((pl.col("clock_event_reasons") & THERMAL_REASONS_MASK) != 0).alias("clocks_thermal")
    )


_LOG_METRICS = {
    "util": ("util_gpu", 1.0),
    "mem_gb": ("mem_used_bytes", float(GIB)),
    "mem_total_gb": ("mem_total_bytes", float(GIB)),
    "power_w": ("power_w", 1.0),
    "power_limit_w": ("power_limit_w", 1.0),
    "temp_c": ("temp_c", 1.0),
}
"""Snapshot keys `gpu/<i>/<metric>` the log may carry, with their column and scale. `mem_gb`
is read as GiB, as PyTorch's memory counters are usually divided by 2**30."""


def telemetry_to_gpu_frame(frame: pl.DataFrame, *, row_column: str | None = None) -> pl.DataFrame:
    """The log's `gpu/<i>/...` snapshot keys as a GPU frame (same shape as NVML's), from the
    parsed `telemetry` column.

    With `row_column`, the frame keeps each snapshot's row index in the log frame under that
    name, so rules can point their alerts at the snapshot line. `telemetry_rows` reads the same
    values from the text, narrow; the rules use that.
    """
    rows = (
        frame.select("ts", "telemetry", "snapshot", "gpu_keys")
        .with_row_index("_log_row")
        .filter(pl.col("snapshot").fill_null(False) & (pl.col("gpu_keys").fill_null(0) > 0))
    )
    if rows.is_empty():
        return _as_gpu_frame(pl.DataFrame(schema={"_log_row": pl.UInt32}), row_column)
    pairs = (
        rows.select("_log_row", "ts", "telemetry")
        .explode("telemetry")
        .unnest("telemetry")
        .with_columns(pl.col("key").str.extract_groups(r"^gpu/(\d+)/(\w+)$").alias("_k"))
        .with_columns(
            # an index no Int64 holds names no GPU: its keys are dropped (`read_telemetry_rows`)
            pl.col("_k").struct.field("1").cast(pl.Int64, strict=False).alias("gpu"),
            pl.col("_k").struct.field("2").alias("metric"),
        )
        .filter(pl.col("gpu").is_not_null() & pl.col("metric").is_in(list(_LOG_METRICS)))
    )
    wide = pairs.pivot(
        on="metric", index=["_log_row", "ts", "gpu"], values="value", aggregate_function="last"
    )
    columns = [
        (pl.col(key) * scale).alias(column)
        for key, (column, scale) in _LOG_METRICS.items()
        if key in wide.columns
    ]
    return _as_gpu_frame(wide.with_columns(columns), row_column)


def _as_gpu_frame(
    wide: pl.DataFrame, row_column: str | None, *, ordered: bool = False
) -> pl.DataFrame:
    """Rows of (`_log_row`, ts, gpu, some metric columns) in the GPU frame's schema, sorted
    (by `row_column` and gpu, else by ts and gpu; `ordered`: by `_log_row` and gpu already).
    A value its column cannot hold (NaN GiB as bytes) is read as missing."""
    if wide.is_empty():
        return pl.DataFrame(
            schema={**GPU_SCHEMA, **({row_column: pl.UInt32()} if row_column else {})}
        )
    out = wide.with_columns(pl.lit("log").alias("origin"), pl.lit(False).alias("lost"))
    extra = [pl.col("_log_row").alias(row_column)] if row_column else []
    framed = out.select(
        *[
            pl.col(name).cast(dtype, strict=False)
            if name in out.columns
            else pl.lit(None, dtype).alias(name)
            for name, dtype in GPU_SCHEMA.items()
        ],
        *extra,
    )
    if ordered and row_column:
        return framed
    return framed.sort([row_column, "gpu"] if row_column else ["ts", "gpu"], maintain_order=True)


METRIC = pl.Enum(list(_LOG_METRICS))
"""The snapshot metrics (`gpu/<i>/<metric>`) a GPU frame reads, in `telemetry_rows`' order."""
LOG_METRIC_OF: dict[str, str] = {column: key for key, (column, _) in _LOG_METRICS.items()}
"""GPU frame column -> the snapshot key it is read from."""


def narrow_to_gpu_frame(
    narrow: pl.DataFrame,
    *,
    row_column: str | None = None,
    metrics: Collection[str] | None = None,
    present: Collection[str] | None = None,
) -> pl.DataFrame:
    """`telemetry_rows` as a GPU frame (that of `telemetry_to_gpu_frame`); with `metrics`
    (snapshot keys), only the rows and columns of those metrics (the others null). `present`:
    the metrics `narrow` holds, when the caller knows them (`narrow_metrics`)."""
    held = narrow_metrics(narrow) if present is None else list(present)
    wanted = [name for name in held if metrics is None or name in metrics]
    if not wanted:
        return _as_gpu_frame(narrow.clear(), row_column)
    if len(wanted) < len(held):
        one = len(wanted) == 1
        kept = pl.col("metric") == wanted[0] if one else pl.col("metric").is_in(wanted)
        narrow = narrow.filter(kept)
    if len(wanted) == 1:  # one metric: its rows are the frame, no pivot
        wide = narrow.rename({"value": wanted[0]}).drop("metric")
    else:
        dense = _dense_wide(narrow, sorted(wanted, key=list(_LOG_METRICS).index))
        wide = (
            dense
            if dense is not None
            else narrow.with_columns(pl.col("metric").cast(pl.String)).pivot(
                on="metric", index=["_log_row", "ts", "gpu"], values="value", maintain_order=True
            )
        )
    named = wide.rename(
        {key: column for key, (column, _) in _LOG_METRICS.items() if key in wide.columns}
    )
    # `narrow` is in (`_log_row`, gpu) order, and the pivot keeps its (`_log_row`, gpu) in the
    # order it finds them: one row per GPU and line, in order, without a sort
    return _as_gpu_frame(named, row_column, ordered=True)


def _dense_wide(narrow: pl.DataFrame, metrics: list[str]) -> pl.DataFrame | None:
    """The pivot of `narrow` (in (`_log_row`, gpu, metric) order) when each of its GPUs and
    lines has a row of every one of `metrics` (in `METRIC` order): every k-th row, no hash
    of keys (a snapshot line nearly always says each metric of each GPU); else None."""
    k = len(metrics)
    if narrow.height % k:
        return None
    position = pl.int_range(pl.len(), dtype=pl.UInt32) % k
    codes = pl.Series([list(_LOG_METRICS).index(name) for name in metrics], dtype=pl.UInt32)
    row, gpu = pl.col("_log_row"), pl.col("gpu")
    same_key = ((row == row.shift(1)) & (gpu == gpu.shift(1))).fill_null(False)
    dense = (pl.col("metric").to_physical().cast(pl.UInt32) == pl.lit(codes).gather(position)) & (
        same_key == (position != 0)
    )
    if not narrow.select(dense.all()).item():
        return None
    value = pl.col("value")
    return narrow.select(
        row.gather_every(k),
        pl.col("ts").gather_every(k),
        gpu.gather_every(k),
        *[value.gather_every(k, offset=n).alias(name) for n, name in enumerate(metrics)],
    )


def narrow_metrics(narrow: pl.DataFrame) -> list[str]:
    """The snapshot metrics `telemetry_rows` found (each once, in no set order)."""
    return narrow.get_column("metric").unique().cast(pl.String).to_list()


def mark_run_gpus(gpu_frame: pl.DataFrame, run_pids: Collection[int] | None) -> pl.DataFrame:
    """Add `run_uses`: whether one of the run's processes is on the GPU (NVML's compute list).

    Without pids, or when none of them shows up on any GPU (a container's pid namespace), every
    GPU counts as the run's: a wrong "idle" is better than a silent miss of the GPU that hung.
    """
    if not run_pids or gpu_frame.is_empty():
        return gpu_frame.with_columns(pl.lit(True).alias("run_uses"))
    uses = pl.col("pids").list.eval(pl.element().is_in(list(run_pids))).list.any().fill_null(False)
    marked = gpu_frame.with_columns(uses.alias("run_uses"))
    if not marked.get_column("run_uses").any():
        return gpu_frame.with_columns(pl.lit(True).alias("run_uses"))
    return marked


def join_log_gpu(
    log_frame: pl.DataFrame, gpu_frame: pl.DataFrame, *, tolerance_s: float = 30.0
) -> pl.DataFrame:
    """Each log line with the latest GPU sample at or before its time, one column set per GPU
    index as `<metric>_<gpu>` (as-of join on `ts`; lines without a time get nulls)."""
    if gpu_frame.is_empty():
        return log_frame
    wide = gpu_frame.sort("ts").pivot(
        on="gpu",
        index="ts",
        values=["util_gpu", "mem_used_bytes", "power_w", "temp_c"],
        aggregate_function="last",
    )
    wide = wide.rename({c: c.replace('"', "") for c in wide.columns}).sort("ts")
    timed = log_frame.with_row_index("_order")
    known = timed.filter(pl.col("ts").is_not_null()).sort("ts")
    joined = known.join_asof(
        wide.rename({"ts": "gpu_ts"}),
        left_on="ts",
        right_on="gpu_ts",
        strategy="backward",
        tolerance=f"{int(tolerance_s * 1_000_000)}us",
    )
    missing = timed.filter(pl.col("ts").is_null())
    return pl.concat([joined, missing], how="diagonal_relaxed").sort("_order").drop("_order")
