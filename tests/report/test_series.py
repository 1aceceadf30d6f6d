"""Downsampling for the report: small output, every NaN/Inf and every extreme kept."""

from __future__ import annotations

import polars as pl

from logwatch.report.series import bucketed, mix, points


def _series(n: int) -> pl.DataFrame:
    i = pl.int_range(0, n, eager=True)
    return pl.DataFrame(
        {"x": i.cast(pl.Float64), "y": (i.cast(pl.Float64) / 50).sin(), "line": i + 1, "step": i}
    )


def test_long_series_shrinks_but_keeps_extremes_and_nonfinite() -> None:
    """A 200k-point series becomes at most 4 points per bucket; the spike, the dip, each NaN
    and each Inf survive, the non-finite ones as markers with their line and step."""
    frame = _series(200_000).with_columns(
        pl.when(pl.col("step") == 1234)
        .then(float("nan"))
        .when(pl.col("step") == 99_999)
        .then(float("inf"))
        .when(pl.col("step") == 150_001)
        .then(1e6)
        .when(pl.col("step") == 7)
        .then(-1e6)
        .otherwise(pl.col("y"))
        .alias("y")
    )
    drawn = points(frame, "y", buckets=500)
    assert drawn.finite.height <= 4 * 500
    ys = drawn.finite.get_column("y")
    assert (ys.max(), ys.min()) == (1e6, -1e6)
    assert drawn.nonfinite.select("step", "line").rows() == [(1234, 1235), (99_999, 100_000)]
    assert drawn.finite.get_column("x").is_sorted()


def test_short_series_is_untouched() -> None:
    """Below the bucket budget every point is drawn."""
    frame = _series(300).select("x", "y")
    assert bucketed(frame, buckets=100).equals(frame)


def test_bucket_mix_is_shares_per_report() -> None:
    """q_hsb lists become per-bucket shares that sum to 1 (an all-zero report is all 0)."""
    frame = pl.DataFrame({"x": [1.0, 2.0, 3.0], "q_hsb": [[1, 3], [0, 5], [0, 0]]})
    assert mix(frame).rows() == [(1.0, 0.25, 0.75), (2.0, 0.0, 1.0), (3.0, 0.0, 0.0)]
