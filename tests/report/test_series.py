"""Downsampling for the report: reduced block by block, small output, every NaN/Inf and every
extreme kept where it was, and nothing reduced below the caps."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl

import logwatch
from logwatch.report.collect import Collector, RunData, Streaks
from logwatch.report.project import KEYS, Block
from logwatch.report.reduce import MAX_CELLS, RAW_MARKERS, RAW_ROWS, PointReducer, cell_of
from logwatch.report.series import draw_exp, points
from logwatch.report.svg import PLOT_W

LOSS = KEYS["loss"]
START = datetime(2026, 11, 1)


def _losses(n: int) -> pl.DataFrame:
    """`n` step lines' losses (a wobble with pseudo-random noise), one a second from START."""
    i = pl.col("i")
    noise = (i.hash(7) % 1000).cast(pl.Float64) / 1000
    return pl.select(i=pl.int_range(0, n)).select(
        pl.lit(LOSS, pl.Int32).alias("key"),
        (i + 1).alias("line"),
        (pl.lit(START, pl.Datetime("us")) + pl.duration(seconds=i)).alias("ts"),
        ((i.cast(pl.Float64) / 5000).sin() + noise).alias("y"),
        i.alias("step"),
    )


_EMPTY_QUEUE = pl.DataFrame(
    schema={
        "line": pl.Int64,
        "ts": pl.Datetime("us"),
        "at_step": pl.Int64,
        "q_hs": pl.Int64,
        "q_hsb": pl.List(pl.Int64),
        "q_hsb_nonzero": pl.UInt32,
    }
)
_NO_STARTS = pl.DataFrame(
    schema={"line": pl.Int64, "ts": pl.Datetime("us"), "at_step": pl.Int64, "text": pl.String}
)


def _fed(frame: pl.DataFrame, block: int = 50_000) -> RunData:
    """A run's data after its series rows came in blocks of `block` lines."""
    data = RunData()
    for part in frame.iter_slices(block):
        data.add(Block([part.with_columns(at_step=pl.col("step"))], _EMPTY_QUEUE, _NO_STARTS))
    return data


def _exp(data: RunData) -> int:
    view = data.by_time
    assert view.lo is not None and view.hi is not None
    return draw_exp(view.hi - view.lo, PLOT_W)


def test_a_million_points_draw_as_at_most_four_per_pixel_cell_in_bounded_memory() -> None:
    """A million losses fed in 20 blocks: what is kept while streaming is bounded by the cell
    count (not the lines), and what is drawn is at most 4 points per cell of at most one pixel
    column: about 8,000 points for the 1,020-pixel plot."""
    data = _fed(_losses(1_000_000))
    reducer = data.by_time.points
    assert reducer.kept is not None and reducer.kept.height <= 4 * MAX_CELLS
    exp = _exp(data)
    lo, hi = data.by_time.lo, data.by_time.hi
    assert lo is not None and hi is not None and 2.0**exp <= (hi - lo) / PLOT_W
    drawn = points(data, LOSS, exp, kind="time")
    assert 2 * PLOT_W < drawn.finite.height <= 4 * (2 * PLOT_W + 1)
    assert drawn.finite.get_column("x").is_sorted()


def test_first_last_min_and_max_of_every_pixel_cell_survive() -> None:
    """Per drawn cell, the points drawn hold the cell's first, last, lowest and highest point
    of the full series (same x, same y), whatever the block boundaries were."""
    frame = _losses(300_000)
    data = _fed(frame, block=37_000)
    exp = _exp(data)
    drawn = points(data, LOSS, exp, kind="time").finite
    x = (pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6).alias("x")
    full = frame.select(x, "y")

    def extremes(rows: pl.DataFrame) -> pl.DataFrame:
        return (
            rows.group_by(cell_of(exp).alias("c"))
            .agg(
                pl.col("x").min().alias("x_first"),
                pl.col("x").max().alias("x_last"),
                pl.col("y").min().alias("y_min"),
                pl.col("y").max().alias("y_max"),
                pl.col("x").min_by("y").alias("x_at_min"),
                pl.col("x").max_by("y").alias("x_at_max"),
            )
            .sort("c")
        )

    assert extremes(drawn).equals(extremes(full))
    assert drawn.height < full.height / 10


def test_one_nan_among_a_million_finite_points_is_a_marker_at_its_place() -> None:
    """A single NaN loss at step 654,321 of a million: one marker, at that line's x, with its
    step and line; the finite points around it are still downsampled."""
    frame = _losses(1_000_000).with_columns(
        pl.when(pl.col("step") == 654_321).then(float("nan")).otherwise(pl.col("y")).alias("y")
    )
    data = _fed(frame)
    drawn = points(data, LOSS, _exp(data), kind="time")
    assert drawn.nonfinite.select("line", "step", "n").rows() == [(654_322, 654_321, 1)]
    assert drawn.nonfinite.item(0, "x") == _epoch0() + 654_321
    assert drawn.finite.height < 10_000


def _epoch0() -> float:
    return float(pl.Series([START]).dt.epoch("us").item()) / 1e6


def test_markers_are_exact_below_their_cap_and_one_per_pixel_cell_above() -> None:
    """Up to RAW_MARKERS non-finite values each keep their own marker (x, step, line); a
    50,000-step NaN stretch becomes one marker per pixel cell it touches, which together count
    every NaN, from its first step to its last, and cover every cell that has one."""
    few = _losses(200_000).with_columns(
        pl.when(pl.col("step") % 250 == 3).then(float("inf")).otherwise(pl.col("y")).alias("y")
    )
    data = _fed(few)
    markers = points(data, LOSS, _exp(data), kind="time").nonfinite
    assert markers.height == 800 <= RAW_MARKERS
    assert markers.get_column("step").to_list() == list(range(3, 200_000, 250))
    assert set(markers.get_column("n").to_list()) == {1}

    stretch = _losses(1_000_000).with_columns(
        pl.when(pl.col("step").is_between(400_000, 449_999))
        .then(float("nan"))
        .otherwise(pl.col("y"))
        .alias("y")
    )
    data = _fed(stretch)
    exp = _exp(data)
    markers = points(data, LOSS, exp, kind="time").nonfinite
    assert markers.height < 200
    assert markers.get_column("n").sum() == 50_000
    assert (markers.item(0, "step"), markers.item(-1, "step_last")) == (400_000, 449_999)
    cells = markers.select(cell_of(exp)).to_series().to_list()
    x = (pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6).alias("x")
    nan_rows = stretch.filter(pl.col("y").is_nan()).select(x)
    assert sorted(cells) == nan_rows.select(cell_of(exp).unique().sort()).to_series().to_list()


def test_a_series_under_the_cap_is_drawn_point_for_point() -> None:
    """RAW_ROWS points (a long but not huge log) are all drawn, unmerged, in x order, even
    when they came in several blocks; one more and the series is reduced."""
    frame = _losses(RAW_ROWS)
    data = _fed(frame, block=1000)
    drawn = points(data, LOSS, _exp(data), kind="time").finite
    assert drawn.get_column("y").to_list() == frame.get_column("y").to_list()
    reducer = PointReducer()
    reducer.add(_losses(RAW_ROWS + 1).with_columns(pl.col("line").cast(pl.Float64).alias("x")))
    assert LOSS in reducer.reduced


def test_line_axis_draws_the_same_points_as_the_time_axis_for_a_small_log() -> None:
    """On a line-number axis the time view's rows sit at their lines: nothing lost."""
    frame = _losses(500)
    data = _fed(frame)
    by_line = points(data, LOSS, 0, kind="line", shift=10.0).finite
    assert by_line.get_column("x").to_list() == [float(i + 11) for i in range(500)]


def test_a_starvation_streak_split_across_blocks_is_one_band() -> None:
    """Single-bucket reports 8..15 arrive in two blocks (8..11, 12..15): one streak of 8."""

    def reports(lines: range, one: set[int]) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "x": [float(n) for n in lines],
                "line": list(lines),
                "one": [n in one for n in lines],
            }
        )

    one = set(range(8, 16)) | {20, 21}
    streaks = Streaks()
    streaks.add(reports(range(1, 12), one))
    streaks.add(reports(range(12, 30), one))
    assert streaks.finish().rows() == [(8.0, 15.0, 8, 8)]
    whole = Streaks()
    whole.add(reports(range(1, 30), one))
    assert whole.finish().rows() == [(8.0, 15.0, 8, 8)]


def test_a_line_without_a_step_sits_at_its_run_s_last_step_across_blocks(tmp_path: Path) -> None:
    """Queue reports between step lines, read in blocks of a few lines: on the step axis each
    report sits at the last step before it in its run, also when that step was in the block
    before; after a `run start:` the old run's step is not carried (the new run's first
    report before any step has no place), and the restart is a run of its own."""
    lines = ["2026-11-01 00:00:00,000 INFO [train] run start: run_id=a"]
    for step in range(0, 400, 10):
        lines.append(f"2026-11-01 00:00:01,000 INFO [train] step {step} | loss 2.0")
        lines.append(f"2026-11-01 00:00:02,000 INFO [hsq] q_hsb=[1,2] at q_hs={step}")
    lines.append("2026-11-01 00:00:03,000 INFO [train] run start: run_id=b")
    lines.append("2026-11-01 00:00:04,000 INFO [hsq] q_hsb=[1,2] at q_hs=7")
    lines.append("2026-11-01 00:00:05,000 INFO [train] step 200 | loss 2.0")
    lines.append("2026-11-01 00:00:06,000 INFO [hsq] q_hsb=[1,2] at q_hs=200")
    log = tmp_path / "q.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    collector = Collector()
    for frame in logwatch.scan_log(log, block_bytes=512):
        collector(frame)
    runs = collector.sources[str(log)].ordered_runs()
    assert [r.start for r in runs] == [lines[0], lines[81]]
    first = points(runs[0], KEYS["q_hs"], 0, kind="step").finite
    assert first.get_column("x").to_list() == first.get_column("y").to_list()
    assert first.height == 40
    second = points(runs[1], KEYS["q_hs"], 0, kind="step").finite
    assert second.rows() == [(200.0, 200.0)]
