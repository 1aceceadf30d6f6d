"""Series for the report's plots, downsampled so a 5 M-line log still gives a small file.

Min/max-preserving bucketing: the x range is cut into buckets, and each bucket keeps its first,
last, lowest and highest point, so every spike and every extreme survives. Non-finite values are
never bucketed: each NaN and ±Inf is kept as a marker.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

DEFAULT_BUCKETS = 700
"""About the plot width in pixels: more points per bucket would not show."""


@dataclass(frozen=True, slots=True)
class Points:
    """One series ready to draw: finite points (`x`, `y`) and non-finite markers (`x`, `y`,
    `line`, `step`), both sorted by x."""

    finite: pl.DataFrame
    nonfinite: pl.DataFrame

    @property
    def empty(self) -> bool:
        """Whether there is nothing to draw."""
        return self.finite.is_empty() and self.nonfinite.is_empty()


def points(frame: pl.DataFrame, y: str, *, buckets: int = DEFAULT_BUCKETS) -> Points:
    """Column `y` of `frame` (which has `x`, `line`, `step`) against `x`, downsampled."""
    step = pl.col("step") if "step" in frame.columns else pl.lit(None, pl.Int64).alias("step")
    rows = frame.select("x", pl.col(y).cast(pl.Float64).alias("y"), "line", step).filter(
        pl.col("x").is_not_null() & pl.col("y").is_not_null()
    )
    finite = rows.filter(pl.col("y").is_finite()).select("x", "y").sort("x", maintain_order=True)
    nonfinite = rows.filter(~pl.col("y").is_finite()).sort("x", maintain_order=True)
    return Points(bucketed(finite, buckets), nonfinite)


def bucketed(frame: pl.DataFrame, buckets: int = DEFAULT_BUCKETS) -> pl.DataFrame:
    """At most 4 points per x bucket (first, last, min, max of `y`), in x order."""
    if frame.height <= 4 * buckets:
        return frame
    lo, span = _range(frame)
    bucket = ((pl.col("x") - lo) / span * buckets).floor().clip(0, buckets - 1).cast(pl.Int32)
    keep = (
        frame.with_row_index("_i")
        .group_by(bucket.alias("_b"))
        .agg(
            pl.col("_i").first().alias("a"),
            pl.col("_i").last().alias("b"),
            pl.col("_i").get(pl.col("y").arg_min()).alias("c"),
            pl.col("_i").get(pl.col("y").arg_max()).alias("d"),
        )
        .select(pl.concat_list("a", "b", "c", "d").explode().unique().sort())
        .to_series()
    )
    return frame[keep]


def rolling_median(
    frame: pl.DataFrame, y: str, window: int = 51, *, buckets: int = DEFAULT_BUCKETS
) -> pl.DataFrame:
    """`x` and `{y}_median`: the centred rolling median over `window` finite points; for a
    series longer than the plot is wide, the median per x bucket (the same curve at that width,
    without a sort per point)."""
    finite = frame.select("x", y).filter(pl.col(y).is_finite()).sort("x")
    name = f"{y}_median"
    if finite.height <= 4 * buckets:
        return finite.select(
            "x", pl.col(y).rolling_median(window, min_samples=1, center=True).alias(name)
        )
    lo, span = _range(finite)
    bucket = ((pl.col("x") - lo) / span * buckets).floor().clip(0, buckets - 1)
    return (
        finite.group_by(bucket.alias("_b"))
        .agg(pl.col("x").mean(), pl.col(y).median().alias(name))
        .sort("_b")
        .drop("_b")
    )


def mix(frame: pl.DataFrame, *, buckets: int = DEFAULT_BUCKETS) -> pl.DataFrame:
    """The `q_hsb` bucket mix: per x bucket the mean share of each queue bucket (`b0`..), for
    a stacked area; `x` is the bucket's mean x."""
    lists = frame.filter(pl.col("q_hsb").list.len() > 0)
    if lists.is_empty():
        return pl.DataFrame({"x": []}, schema={"x": pl.Float64})
    width = int(lists.get_column("q_hsb").list.len().max())  # type: ignore[arg-type]  # UInt32
    total = pl.col("q_hsb").list.sum().cast(pl.Float64)
    shares = lists.select(
        "x",
        *(
            (pl.col("q_hsb").list.get(i, null_on_oob=True).fill_null(0) / total)
            .fill_nan(0.0)
            .fill_null(0.0)
            .alias(f"b{i}")
            for i in range(width)
        ),
    ).sort("x")
    if shares.height <= buckets:
        return shares
    lo, span = _range(shares)
    bucket = ((pl.col("x") - lo) / span * buckets).floor().clip(0, buckets - 1)
    return shares.group_by(bucket.alias("_b")).agg(pl.all().mean()).sort("_b").drop("_b")


def _range(frame: pl.DataFrame) -> tuple[float, float]:
    """The lowest x and the width of the x range (1 when all x are equal)."""
    lo, hi = frame.select(pl.col("x").min(), pl.col("x").max().alias("hi")).row(0)
    return float(lo), float(hi - lo) or 1.0
