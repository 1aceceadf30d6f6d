"""Parsing a block of lines: the frame (`parse.framing`), its timestamps, each line's values by
its shape or by the general path, and the derived counts; and `complete`, for columns a
first parse skipped."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache

import polars as pl

from logwatch.parse.derived import _derived
from logwatch.parse.framing import _framed
from logwatch.parse.general import _general, _metrics
from logwatch.parse.schema import _VALUE_COLUMNS, ALWAYS, SCHEMA, _with_bases, closure
from logwatch.parse.shaped import _COUNTED, _CUT_COLUMNS, _one_shape, _shaped, _shapes_for
from logwatch.parse.shapes import line_shape
from logwatch.parse.sparse import TINY_BATCH_ROWS, _nulls
from logwatch.parse.timestamps import ParsedBlock, _timestamps


def parse_lines(
    text: pl.Series,
    *,
    source: str,
    first_line: int,
    default_year: int | None = None,
    metrics: bool = False,
    columns: Iterable[str] | None = None,
    shapes: bool = True,
) -> pl.DataFrame:
    """Parse a block of lines into a frame with the `SCHEMA` columns, vectorized.

    Lines of a known shape (`logwatch.parse.shapes`) are cut by one anchored pattern; every other line
    takes the general path, where dense columns (metrics most lines carry) are extracted over
    all its lines and sparse ones (snapshots, rank prefixes, rare dialects, timestamp
    fallbacks) only over the rows a cheap literal test selects. A timestamp without a year
    takes the year of the last dated line before it in the block, else `default_year` (this
    year when None); `parse_block` says which lines took `default_year`, for drivers that carry
    the year from block to block. `metrics`: fill the `metrics` column (exports, reports; rules
    do not read it), else it is null. `columns`: compute only these (and `ALWAYS`); the others
    are null, until `complete` adds them. `shapes=False`: every line by the general path (the
    reference the shapes are tested against).
    """
    block = parse_block(
        text,
        source=source,
        first_line=first_line,
        default_year=default_year,
        metrics=metrics,
        columns=columns,
        shapes=shapes,
    )
    return block.frame


def parse_block(
    text: pl.Series,
    *,
    source: str,
    first_line: int,
    default_year: int | None = None,
    metrics: bool = False,
    columns: Iterable[str] | None = None,
    shapes: bool = True,
    segments: Sequence[tuple[int, int]] | None = None,
) -> ParsedBlock:
    """`parse_lines`, with where its timestamps without a year got their year. `segments`:
    the block is the lines of several files one after another, (lines, default year) each; a
    timestamp without a year takes the year of the last dated line before it in its own file,
    else that file's default year, and `segment_years` says each file's last dated year."""
    year = default_year if default_year is not None else datetime.now().year
    wanted = closure(columns, metrics=metrics)
    # A live batch (a few lines) pays polars' fixed cost per query, not per line: the query
    # that builds its frame finds each line's shape, and one more cuts and finishes a batch
    # of one shape.
    tiny = shapes and 0 < text.len() <= TINY_BATCH_ROWS and bool(wanted & _CUT_COLUMNS)
    frame = _framed(text, source, first_line, shaped=tiny)
    which = frame.drop_in_place("_shape") if tiny else None
    frame, head_rows, last_year, segment_years = _timestamps(frame, year, segments)
    finished = None if which is None else _one_shape(frame, which, wanted)
    shaped_rows = None
    if finished is None:
        # a live batch none of whose lines has a shape takes the general path alone
        shaped = shapes and (which is None or which.null_count() < which.len())
        if wanted & _VALUE_COLUMNS:  # else: only what `_framed` gives (and derived counts)
            texts = frame.select("text")
            found = _shapes_for(texts.get_column("text"), wanted, shapes=shaped, which=which)
            values = _values(texts, wanted, found)
            frame = frame.hstack(values.get_columns())
            if found is not None and not tiny:
                shaped_rows = found.alias("shape")
        if "metrics" in wanted:
            frame = frame.with_columns(_metrics(frame))
        finished = _finished(frame, wanted)
    return ParsedBlock(
        finished,
        default_year=year,
        head_rows=head_rows,
        last_year=last_year,
        segment_years=segment_years,
        shapes=shaped_rows,
    )


FEW_ROWS = 256
"""The most lines `complete` finds the shapes of in one query (`line_shape`: every shape's
pattern on every line; on more lines, `shape_of` first picks each shape's candidates)."""


def complete(
    frame: pl.DataFrame, columns: Iterable[str], *, shapes: pl.Series | None = None
) -> pl.DataFrame:
    """A parsed frame (`SCHEMA`) with `columns` computed too, for a frame parsed without them
    (`parse_lines(columns=...)`): the engine asks for what a rule needs only when it needs it.
    The caller says which are missing: a computed column may be all null. `shapes`: each
    line's shape where its parse found them (`ParsedBlock.shapes`, cut to the frame's rows),
    not found again."""
    missing = frozenset(columns) - ALWAYS - {"metrics"}
    if not missing or frame.is_empty():
        return frame
    wanted = _with_bases(missing)
    said = None
    if shapes is not None:
        if shapes.len() != frame.height:
            raise ValueError(f"shapes has {shapes.len()} rows for a frame of {frame.height}")
        texts, said = frame.select("text"), shapes
    elif frame.height <= FEW_ROWS and wanted & _CUT_COLUMNS:
        # each line's shape in the query that picks the text (`shape_of` runs a few per shape)
        texts = frame.select("text", line_shape())
        said = texts.drop_in_place("_shape")
    else:
        texts = frame.select("text")
    which = _shapes_for(texts.get_column("text"), wanted, shapes=True, which=said)
    values = _values(texts, wanted - ALWAYS, which)
    return _finished(frame.with_columns(values.get_columns()), wanted)


def completed_columns(columns: Iterable[str]) -> frozenset[str]:
    """The columns `complete(frame, columns)` (re)computes: the others it leaves as they were
    (so a frame's `columns` may be taken from another frame of the same lines, completed)."""
    missing = frozenset(columns) - ALWAYS - {"metrics"}
    return _with_bases(missing) - ALWAYS if missing else frozenset()


def _finished(frame: pl.DataFrame, computed: frozenset[str]) -> pl.DataFrame:
    """The `SCHEMA` columns in order, typed; the derived ones of those `computed` computed; the
    skipped ones null."""
    derived = _derived(frame, computed)
    if derived:
        frame = frame.with_columns(derived)
    return frame.select(_final_columns(frozenset(frame.columns)))


@cache
def _final_columns(present: frozenset[str]) -> list[pl.Expr]:
    """The `SCHEMA` columns in order, typed, from a frame with the columns `present`."""
    return [
        (pl.col(name) if name in present else pl.lit(None, dtype=dtype)).cast(dtype).alias(name)
        for name, dtype in SCHEMA.items()
    ]


def _values(texts: pl.DataFrame, wanted: frozenset[str], which: pl.Series | None) -> pl.DataFrame:
    """The wanted value columns of these lines: lines of a shape (`which`, from `_shapes_for`)
    cut by their shape, the rest by the general path; one row per line, in order."""
    names = sorted(_VALUE_COLUMNS & wanted, key=list(SCHEMA).index)
    if which is None:
        return _general(texts, wanted).select(names)
    # derived columns a shape counts on its lines (the others' are derived after, `_derived`)
    counted = [name for name in _COUNTED if name in wanted]
    parts: list[pl.DataFrame] = []
    general_rows = which.is_null()
    index = pl.int_range(0, texts.height, eager=True, dtype=pl.UInt32).alias("_i")
    if general_rows.any():
        values = _general(texts.filter(general_rows), wanted).select(names)
        uncounted = [_nulls(values.height, name, SCHEMA[name]) for name in counted]
        columns = [*values.get_columns(), *uncounted]
        parts.append(pl.DataFrame([index.filter(general_rows)]).hstack(columns))
    for number in sorted(which.drop_nulls().unique()):  # the shapes present, in order
        picked = (which == number).fill_null(False)
        values = _shaped(number, texts.filter(picked), [*names, *counted])
        parts.append(pl.DataFrame([index.filter(picked)]).hstack(values.get_columns()))
    if len(parts) == 1:
        return parts[0].drop("_i")
    return pl.concat(parts, how="vertical").sort("_i").drop("_i")
