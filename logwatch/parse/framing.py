"""Lines into a frame: source, line number, text, the timestamp in Python logging's default
form (the others: `parse.timestamps`), run starts and, for a live batch, each line's shape."""

from __future__ import annotations

from functools import cache

import polars as pl

from logwatch.parse.dialects.dflash import RUN_START_LITERAL
from logwatch.parse.shapes import SHAPES

_LOGGING_TS_FORMAT = "%Y-%m-%d %H:%M:%S,%3f"  # Python logging's default, the most common by far


# Every shape's literal in one Aho-Corasick pass (which uses no slot of polars' regex cache).
_SHAPE_LITERALS = (
    pl.col("text")
    .str.extract_many([shape.literal for shape in SHAPES], overlapping=True)
    .alias("_literals")
)
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
        columns.append(_SHAPE_LITERALS)
    frame = pl.DataFrame([origin, line, text.alias("text")]).select(columns)
    if shaped:
        frame.hstack([_live_shapes(frame, frame.drop_in_place("_literals"))], in_place=True)
    return frame


def _live_shapes(frame: pl.DataFrame, literals: pl.Series) -> pl.Series:
    """Each line of a live batch's shape, as `shapes.line_shape` gives it: the patterns of only
    the shapes whose literal some line holds. Polars keeps 32 compiled regexes per thread (a
    literal `str.contains` takes one too); a live round that runs more than that compiles every
    one of them again, each round (BENCHMARKS.md, branch `sparse`): every shape's pattern on
    every batch, as `line_shape` runs them, would take 20 of those 32."""
    held = frozenset(literal for row in literals.to_list() for literal in row)
    numbers = tuple(n for n, shape in enumerate(SHAPES) if shape.literal in held)
    if not numbers:
        return pl.Series("_shape", [None] * frame.height, dtype=pl.Int8)
    texts = pl.DataFrame([frame.get_column("text"), literals])
    return texts.select(_shapes_of(numbers)).to_series()


@cache
def _shapes_of(numbers: tuple[int, ...]) -> pl.Expr:
    """`line_shape` over only these shapes (indices in `SHAPES`), the literals read from the
    `_literals` lists (`_SHAPE_LITERALS`)."""
    found = pl.col("_literals")
    return pl.coalesce(
        pl.when(found.list.contains(SHAPES[n].literal) & SHAPES[n].fits()).then(
            pl.lit(n, dtype=pl.Int8)
        )
        for n in numbers
    ).alias("_shape")
