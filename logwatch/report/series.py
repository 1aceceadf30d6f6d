"""Series for the report's plots, from the reduced views (`collect.py`, `reduce.py`).

Drawn at cells of at most one pixel column: each keeps its first, last, lowest and highest
point, so every spike and every extreme shows where it was. Non-finite values are never
bucketed with the finite ones: each NaN and ±Inf is a marker (past `RAW_MARKERS` per series,
one per pixel column and kind, counting the ones it stands for).

On a time or a step axis a run's rows are that view's; on a line-number axis, its line view's
(rows without a timestamp) together with its time view's placed at their lines.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from logwatch.report.collect import Kind, RunData, View
from logwatch.report.reduce import CellReducer

MEDIAN_WINDOW = 51
"""Points in the throughput's centred rolling median (while the series is drawn point for point)."""


@dataclass(frozen=True, slots=True)
class Points:
    """One series ready to draw: finite points (`x`, `y`) and non-finite markers (`x`, `y`,
    `line`, `step`, and `n`, `line_last`, `step_last` for a marker standing for several), both
    sorted by x."""

    finite: pl.DataFrame
    nonfinite: pl.DataFrame

    @property
    def empty(self) -> bool:
        """Whether there is nothing to draw."""
        return self.finite.is_empty() and self.nonfinite.is_empty()


def draw_exp(span: float, pixels: int) -> int:
    """The widest cell (`2**exp`) that is at most one of `pixels` columns across `span`."""
    return math.floor(math.log2(span / pixels)) if span > 0 else 0


Pick = Callable[[View], CellReducer]


def drawn(
    data: RunData, pick: Pick, key: int, exp: int, *, kind: Kind, coarse: bool = False
) -> pl.DataFrame:
    """The rows of `key` to draw, on an axis of this kind, at cells of `2**exp` (`coarse`:
    merged per cell even when the series is short enough to be drawn whole)."""
    if kind != "line":
        return pick(data.view(kind)).rows(key, exp, always=coarse)
    timed, untimed = pick(data.by_time), pick(data.by_line)
    rows = pl.concat(
        [timed.on_lines(timed.all_rows(key)), untimed.all_rows(key)], how="diagonal_relaxed"
    )
    if coarse or key in timed.reduced or key in untimed.reduced:
        rows = untimed.merge(rows, max(exp, untimed.exp if untimed.exp is not None else exp))
    return rows.sort("x", maintain_order=True)


def has(data: RunData, key: int, *, kind: Kind) -> bool:
    """Whether series `key` has any row on this axis."""
    views = [data.by_time, data.by_line] if kind == "line" else [data.view(kind)]
    return any(key in v.points.counts or key in v.markers.counts for v in views)


def points(
    data: RunData, key: int, exp: int, *, kind: Kind, shift: float = 0.0, coarse: bool = False
) -> Points:
    """Series `key` of a run at cells of width `2**exp`, its x moved by `shift`; `coarse`:
    see `drawn` (NaN/Inf markers stay exact up to their own cap)."""
    x = (pl.col("x") + shift).alias("x")
    finite = drawn(data, _points, key, exp, kind=kind, coarse=coarse).select(x, "y")
    nonfinite = drawn(data, _markers, key, exp, kind=kind).select(
        x, "y", "line", "step", "n", "line_last", "step_last"
    )
    return Points(finite, nonfinite)


def rolling_median(data: RunData, key: int, exp: int, *, kind: Kind, shift: float = 0.0) -> Points:
    """The centred rolling median of `key` over `MEDIAN_WINDOW` points; for a series longer
    than its raw cap, the median per cell (of the streamed cells' medians, count-weighted)."""
    rows = drawn(data, _medians, key, exp, kind=kind)
    views = (data.by_time, data.by_line) if kind == "line" else (data.view(kind),)
    if any(key in v.medians.reduced for v in views):
        x = (pl.col("sx") / pl.col("n")).alias("x")
        finite = rows.select(x + shift, pl.col("med").alias("y")).sort("x", maintain_order=True)
    else:
        median = pl.col("med").rolling_median(MEDIAN_WINDOW, min_samples=1, center=True)
        finite = rows.select(pl.col("x") + shift, median.alias("y"))
    return Points(finite, pl.DataFrame(schema={"x": pl.Float64, "y": pl.Float64}))


def shares(
    data: RunData, exp: int, *, kind: Kind, shift: float = 0.0, coarse: bool = False
) -> pl.DataFrame:
    """The `q_hsb` bucket mix: `x` and the mean share of each queue bucket (`b0`..) per cell."""
    rows = drawn(data, _mix, 0, exp, kind=kind, coarse=coarse)
    if rows.is_empty():
        return pl.DataFrame(schema={"x": pl.Float64})
    buckets = sorted((c for c in rows.columns if c[:1] == "b"), key=lambda c: int(c[1:]))
    n = pl.col("n").cast(pl.Float64)
    return rows.select(
        (pl.col("sx") / n + shift).alias("x"),
        *((pl.col(b).fill_null(0.0) / n).alias(b) for b in buckets),
    ).sort("x", maintain_order=True)


def _points(view: View) -> CellReducer:
    return view.points


def _markers(view: View) -> CellReducer:
    return view.markers


def _medians(view: View) -> CellReducer:
    return view.medians


def _mix(view: View) -> CellReducer:
    return view.mix
