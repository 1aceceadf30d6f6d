"""Lines into a frame: source, line number, text, the timestamp in Python logging's default
form (the others: `parse.timestamps`), run starts and, for a live batch, each line's shape."""

from __future__ import annotations

import polars as pl

from logwatch.parse.dialects.dflash import RUN_START_LITERAL
from logwatch.parse.shapes import line_shape

_LOGGING_TS_FORMAT = "%Y-%m-%d %H:%M:%S,%3f"  # Python logging's default, the most common by far


_LINE_SHAPE = line_shape()
_DENSE_TS = (
    pl.col("text")
    .str.slice(0, 23)
    .str.to_datetime(_LOGGING_TS_FORMAT, time_unit="us", strict=False, cache=False)
    .alias("ts")
)
_RUN_START = pl.col("text").str.contains(RUN_START_LITERAL, literal=True).alias("run_start")


def _framed(text: pl.Series, source: str, first_line: int, *, shaped: bool) -> pl.DataFrame:
    """`source`, `line`, `text`, `ts` in logging's default form (null for other forms) and
    `run_start`, and each line's shape (`_shape`, `line_shape`) when `shaped`, in one query."""
    # Built as Series, not as `pl.repeat` / `pl.int_range` over `pl.len()`: in a query, each of
    # those costs several times a regex pass on a short batch.
    n = text.len()
    line = pl.Series("line", range(first_line, first_line + n), dtype=pl.Int64)
    origin = pl.Series("source", [source], dtype=pl.String).new_from_index(0, n)
    columns = [pl.col("source", "line", "text"), _DENSE_TS, _RUN_START]
    if shaped:
        columns.append(_LINE_SHAPE)
    return pl.DataFrame([origin, line, text.alias("text")]).select(columns)
