"""Sparse extraction: an expression run only on the rows a cheap literal prefilter selected,
as a full-length column; and the prefilters themselves, known to select some row or not."""

from __future__ import annotations

import polars as pl

from logwatch.parse.schema import SCHEMA

TINY_BATCH_ROWS = 16
"""The most lines `parse_block` takes as a live batch (see `_one_shape`)."""


class _Prefilters:
    """The prefilter columns `_dense` computed, each known to select some line or not, from one
    query: an extractor whose prefilter selects none costs no call (most, on a live batch)."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self._frame = frame
        names = [name for name in _PREFILTERS if name in frame.columns]
        if frame.height <= TINY_BATCH_ROWS:  # native calls: cheaper than a query on a few lines
            self._some = {name: frame.get_column(name).any() for name in names}
            return
        found = frame.select(pl.col(names).fill_null(False).any()).row(0) if names else ()
        self._some = {name: bool(hit) for name, hit in zip(names, found, strict=True)}

    def __call__(self, name: str) -> pl.Series | None:
        """The prefilter column, or None when it selects no line."""
        return self._frame.get_column(name) if self._some[name] else None

    def some(self, *names: str) -> bool:
        """Whether any of these prefilters selects a line."""
        return any(self._some[name] for name in names)


_PREFILTERS = (
    "snapshot",
    "run_start",
    "_rank_rows",
    "_bracket_rows",
    "_train_rows",
    "_nemo_rows",
    "_megatron_rows",
    "_tag_rows",
    "_maybe_validation",
    "_has_loss_word",
    "_nan_iter_rows",
    "_rare_loss_rows",
    "_throughput_rows",
)


def _either(col: _Prefilters, a: str, b: str) -> pl.Series | None:
    """The lines either prefilter selects (None: none)."""
    rows_a, rows_b = col(a), col(b)
    if rows_a is None or rows_b is None:
        return rows_a if rows_b is None else rows_b
    return rows_a | rows_b


def _first_of(
    frame: pl.DataFrame,
    name: str,
    sparse: list[tuple[pl.Series | None, pl.Expr]],
    *,
    dense_after: int,
) -> pl.Series:
    """Column `name` from several extractors in priority order: the first `dense_after` sparse
    ones outrank the dense column, the rest only fill its gaps."""
    # An extractor whose rows are none adds nothing: skipped, so a small batch (live tail) pays
    # only for the extractors its lines can use; those that select every line (a live batch's
    # one line) run in one query.
    dtype = SCHEMA[name]
    columns: list[pl.Series | None] = [None] * len(sparse)
    every: dict[int, pl.Expr] = {}
    for index, (rows, expr) in enumerate(sparse):
        if rows is None or not rows.any():  # native calls, no query
            continue
        if rows.sum() == frame.height:
            every[index] = expr.cast(dtype).alias(f"_{index}")
        else:
            columns[index] = _sparse(frame, rows, expr, name)
    if every:
        found = frame.select(every.values())
        for index, column in zip(every, found.get_columns(), strict=True):
            columns[index] = column.alias(name)
    dense = frame.get_column(name).cast(dtype)
    ordered = [
        column
        for column in (*columns[:dense_after], dense, *columns[dense_after:])
        if column is not None
    ]
    if len(ordered) == 1:
        return dense.alias(name)
    return frame.select(pl.coalesce(ordered).alias(name)).to_series()


def _first_of_uniform(
    frame: pl.DataFrame,
    name: str,
    sparse: list[tuple[pl.Series | None, pl.Expr]],
    *,
    dense_after: int,
) -> pl.Expr | None:
    """`_first_of` as one expression, for a batch whose every extractor selects all of its
    lines or none (a live batch of one line): None when one selects only some."""
    dtype = SCHEMA[name]
    picked: list[pl.Expr | None] = []
    for rows, expr in sparse:
        count = 0 if rows is None else int(rows.sum())  # native (nulls are not counted)
        if 0 < count < frame.height:
            return None
        picked.append(expr.cast(dtype) if count else None)
    dense = pl.col(name).cast(dtype)
    ordered = [e for e in (*picked[:dense_after], dense, *picked[dense_after:]) if e is not None]
    return (pl.coalesce(ordered) if len(ordered) > 1 else dense).alias(name)


def _sparse(
    frame: pl.DataFrame,
    rows: pl.Series | None,
    expr: pl.Expr,
    name: str,
    *,
    columns: tuple[str, ...] = ("text",),
) -> pl.Series:
    """`expr` (over `columns`) evaluated only where `rows` is true (null elsewhere), as a
    full-length column (`rows` None: none)."""
    dtype = SCHEMA.get(name, pl.Boolean())
    if rows is None:
        return _nulls(frame.height, name, dtype)
    count = int(rows.sum())  # native (nulls are not counted); a fill_null would be a query
    if count == 0:
        return _nulls(frame.height, name, dtype)
    if count == frame.height:
        return frame.select(expr.cast(dtype).alias(name)).to_series()
    picked = rows.fill_null(False)
    index = picked.arg_true()
    values = frame.select(columns).filter(picked).select(expr.cast(dtype).alias(name))
    if dtype.is_nested():
        return (
            pl.DataFrame({"_i": pl.int_range(0, frame.height, eager=True, dtype=pl.UInt32)})
            .join(
                values.with_columns(index.alias("_i")), on="_i", how="left", maintain_order="left"
            )
            .get_column(name)
        )
    return _nulls(frame.height, name, dtype).scatter(index, values.to_series())


def _nulls(height: int, name: str, dtype: pl.DataType) -> pl.Series:
    """A column of `height` nulls (a small one without a polars query)."""
    if height <= TINY_BATCH_ROWS:
        return pl.Series(name, [None] * height, dtype=dtype)
    return pl.repeat(None, height, dtype=dtype, eager=True).alias(name)


def _fill(frame: pl.DataFrame, name: str, fallback: pl.Series) -> pl.Series:
    """The column `name`, its nulls filled from a sparse fallback column."""
    if fallback.null_count() == fallback.len():  # nothing to fill from (a native check)
        return frame.get_column(name).cast(SCHEMA[name]).alias(name)
    return frame.get_column(name).cast(SCHEMA[name]).fill_null(fallback).alias(name)
