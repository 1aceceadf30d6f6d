"""The GPU frame of snapshot rows in which every GPU of every line says the same metrics is read
by position (`frames._dense_wide`, no pivot), and is the pivoted frame; rows that only look
dense fall back to the pivot; one frame serves every hold rule of a batch (`scored_metrics`)."""

from __future__ import annotations

import polars as pl
import pytest

from logwatch.gpu import frames
from logwatch.gpu.frames import METRIC, narrow_to_gpu_frame, telemetry_to_gpu_frame
from logwatch.gpu.log_rows import telemetry_rows
from logwatch.parse import parse_lines
from logwatch.rules.gpu import HoldRule, LogGpuRows
from logwatch.rules.gpu_many import scored_metrics


def _parse(lines: list[str]) -> pl.DataFrame:
    return parse_lines(pl.Series(lines, dtype=pl.String), source="s.log", first_line=1)


def _snapshot(second: int, pairs: str) -> str:
    return f"2026-11-01 00:00:{second:02d},000 INFO [wandb] snapshot step={second} {pairs}"


DENSE = [
    _snapshot(
        n,
        " ".join(f"gpu/{g}/util={n + g} gpu/{g}/mem_gb=7{g} gpu/{g}/temp_c=8{n}" for g in range(3)),
    )
    for n in range(4)
]


def test_dense_rows_are_read_by_position_as_the_pivot_reads_them() -> None:
    """Every GPU of every line says util, mem_gb and temp_c: the rows are cut every third row
    (no pivot), and the frame is the wide path's."""
    frame = _parse(DENSE)
    rows = telemetry_rows(frame)
    wide = frames._dense_wide(rows, ["util", "mem_gb", "temp_c"])
    assert wide is not None
    assert wide.height == 12
    assert narrow_to_gpu_frame(rows, row_column="_row").equals(
        telemetry_to_gpu_frame(frame, row_column="_row")
    )


def test_rows_that_only_count_as_dense_fall_back_to_the_pivot() -> None:
    """Two metrics, four rows, metrics in the dense order, but GPU 0 lacks temp_c and GPU 1
    util: each pair of rows spans two GPUs, so they are not read by position."""
    rows = pl.DataFrame(
        {
            "_log_row": [0, 0, 0, 0],
            "ts": [None] * 4,
            "gpu": [0, 1, 2, 2],
            "metric": ["util", "temp_c", "util", "temp_c"],
            "value": [1.0, 90.0, 3.0, 91.0],
        },
        schema={
            "_log_row": pl.UInt32,
            "ts": pl.Datetime("us"),
            "gpu": pl.Int64,
            "metric": METRIC,
            "value": pl.Float64,
        },
    )
    assert frames._dense_wide(rows, ["util", "temp_c"]) is None
    got = narrow_to_gpu_frame(rows, row_column="_row")
    assert got.select("gpu", "util_gpu", "temp_c").rows() == [
        (0, 1.0, None),
        (1, None, 90.0),
        (2, 3.0, 91.0),
    ]


def test_one_frame_scores_every_hold_rule_as_its_own_frame_does() -> None:
    """A rule scored on the frame of all the rows' metrics gives the rows it gives on the frame
    of its own metrics; a rule whose metrics the rows lack keeps its own (and is refused)."""
    read = frozenset({"util", "temp_c", "mem_gb", "mem_total_gb"})
    assert scored_metrics(frozenset({"util"}), read) == read
    assert scored_metrics(frozenset({"util"}), None) is None
    assert scored_metrics(frozenset({"power_w"}), read) == frozenset({"power_w"})
    assert scored_metrics(None, read) is None
    lines = [*DENSE, _snapshot(9, "gpu/0/util=2 gpu/5/temp_c=99")]
    rows = LogGpuRows(telemetry_rows(_parse(lines), read), read)
    hot = HoldRule(condition=pl.col("temp_c") >= 85, hold_s=0.0)
    idle = HoldRule(condition=pl.col("util_gpu") < 3, hold_s=0.0)
    for rule in (hot, idle):
        own = rule.score(rows.frame(rule.log_metrics))
        assert rows.scored(rule).equals(own)
    assert rows.scored(hot).height == 13  # 12 dense rows and GPU 5's
    with pytest.raises(ValueError, match="power_w"):
        rows.scored(HoldRule(condition=pl.col("power_w") > 700, hold_s=0.0))
