"""The shape route: which lines have a known shape (`parse.shapes`), and their columns cut by
position, as the general path would give them."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import polars as pl

from logwatch.parse.derived import _nonzero_buckets
from logwatch.parse.schema import _VALUE_COLUMNS, SCHEMA
from logwatch.parse.shapes import SHAPES, cut_tokens
from logwatch.parse.telemetry import _gpu_keys_of, _gpu_keys_of_text, _telemetry

_COUNTED = sorted({name for shape in SHAPES for name in shape.counts})
"""Derived columns some shape counts on its own lines."""


_CUT_COLUMNS = frozenset(
    name for shape in SHAPES for name in (*shape.cuts, *shape.general) if name != "step"
)


def shapes_giving(columns: Iterable[str]) -> frozenset[int]:
    """The shapes (indices in `SHAPES`) on whose lines one of `columns` may have a value: a
    value column that a shape neither cuts, computes, counts nor fixes is null on its lines
    (`_shape_columns`; a flag is false there, a value: flags count as given)."""
    found = set()
    for number, shape in enumerate(SHAPES):
        given = {*shape.cuts, *shape.general, *shape.constants, *shape.counts}
        for name in columns:
            if name not in _VALUE_COLUMNS or name in given or SCHEMA[name] == pl.Boolean():
                found.add(number)
                break
    return frozenset(found)


def _shapes_for(
    text: pl.Series, wanted: frozenset[str], *, shapes: bool, which: pl.Series | None
) -> pl.Series | None:
    """Each line's shape for `_values` (None: every line takes the general path): `which` when
    known already (a live batch's, from `line_shape`), else found here (`shape_of`)."""
    # Recognising shapes costs about what the general path's step pass does: worth it only
    # when a column a shape cuts more cheaply than the general path is wanted.
    if not shapes or not wanted & _CUT_COLUMNS:
        return None
    return shape_of(text) if which is None else which


def shape_of(text: pl.Series) -> pl.Series | None:
    """Which shape (its index in `SHAPES`) each line has, null for the general path; None when
    no line has one."""
    which: pl.Series | None = None
    # A line an earlier shape took is not tried again (every Megatron iteration line holds
    # ` | loss scale:`): each shape's literal pass reads only the lines left, `rest` (their
    # rows in `text`: `at`, None while it is every line). Most of a block's bytes are taken
    # by the first shapes (DFlash: step, queue and snapshot lines), so the later passes read
    # little. (A filter of strings copies their views, not their bytes.)
    rest, at = text, None
    for number, shape in enumerate(SHAPES):
        if rest.is_empty():
            break
        hit = rest.str.contains(shape.literal, literal=True)
        if not hit.any():
            continue
        fits = rest.filter(hit).to_frame("text").select(shape.fits()).to_series()
        if not fits.any():
            continue
        if which is None:
            which = pl.repeat(None, text.len(), dtype=pl.Int8, eager=True)
        tried = hit.arg_true()  # rows in `rest`
        mine = tried.filter(fits)
        taken = mine if at is None else at.gather(mine)
        which = which.scatter(taken, pl.repeat(number, taken.len(), dtype=pl.Int8, eager=True))
        left = hit.scatter(tried, fits).not_()  # of `rest`: not taken here
        rest = rest.filter(left)
        rows = pl.int_range(0, text.len(), dtype=pl.UInt32, eager=True) if at is None else at
        at = rows.filter(left)
    return which


def _shaped(number: int, rows: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """The value columns of lines of one shape (its index in `SHAPES`), cut by position: on
    enough lines, the cuts that know their token from the lines' tokens (`cut_tokens`)."""
    shape = SHAPES[number]
    tokens = [name for name in names if name in shape.cuts and shape.cuts[name].token]
    if shape.tokens and tokens and rows.height >= TOKEN_ROWS:
        found = cut_tokens(shape, rows.get_column("text"), tokens)
        rows = rows.hstack([found.get_column(name).cast(SCHEMA[name]) for name in tokens])
        others = tuple(name for name in names if name not in found.columns)
        return rows.with_columns(_shape_columns(number, others)).select(names)
    # `with_columns`: a constant column has the frame's height, as `select` would not give it.
    return rows.with_columns(_shape_columns(number, tuple(names))).select(names)


_GENERAL_EXPRESSIONS = {"telemetry": lambda: _telemetry()}
"""General-path expressions a shape reuses for a column it does not cut itself."""


TOKEN_ROWS = 256
"""The fewest lines of one shape `_shaped` reads by their tokens (the CSV reader's start-up
costs more than cutting a few lines field by field)."""


@cache
def _shape_columns(number: int, names: tuple[str, ...]) -> list[pl.Expr]:
    """The expressions of `_shaped` (built once: a live batch pays only for running them)."""
    shape = SHAPES[number]
    columns: list[pl.Expr] = []
    for name in names:
        if name in shape.cuts:
            expr = shape.cuts[name].expr()
        elif name in shape.counts:
            expr = pl.col("text").str.count_matches(shape.counts[name], literal=True)
        elif name in shape.general:
            expr = _GENERAL_EXPRESSIONS[name]()
        elif name in shape.constants:
            expr = pl.lit(shape.constants[name])
        elif SCHEMA[name] == pl.Boolean():
            expr = pl.lit(False)
        else:
            expr = pl.lit(None, dtype=SCHEMA[name])
        columns.append(expr.cast(SCHEMA[name]).alias(name))
    return columns


def _one_shape(
    frame: pl.DataFrame, which: pl.Series, wanted: frozenset[str]
) -> pl.DataFrame | None:
    """The finished frame of a batch whose lines all have one shape (`which`: each line's, as
    `shape_of` gives it), as the general route gives it, in one query; None for any other
    batch."""
    number = which.min()
    if (
        not isinstance(number, int)
        or which.null_count()
        or which.max() != number
        or "metrics" in wanted
    ):
        return None
    return frame.select(_one_shape_columns(number, wanted))


@cache
def _one_shape_columns(number: int, wanted: frozenset[str]) -> list[pl.Expr]:
    """`_finished`'s columns for lines of one shape, each from the shape's own expression (one
    eager `select`: polars optimises it as it does any eager call, not as a lazy plan)."""
    counted = [name for name in SHAPES[number].counts if name in wanted]
    names = (*sorted(_VALUE_COLUMNS & wanted, key=list(SCHEMA).index), *counted)
    columns = {name: pl.col(name) for name in ("source", "line", "text", "ts", "run_start")}
    columns.update(zip(names, _shape_columns(number, names), strict=True))
    # `wanted` holds each derived column's base (`closure`).
    if "q_hsb_nonzero" in wanted:
        columns["q_hsb_nonzero"] = _nonzero_buckets(columns["q_hsb"])
    if "gpu_keys" in wanted and "gpu_keys" not in columns:  # not counted by the shape
        if "telemetry" in wanted:
            columns["gpu_keys"] = _gpu_keys_of(columns["telemetry"])
        elif SHAPES[number].constants.get("snapshot", False):
            columns["gpu_keys"] = _gpu_keys_of_text()
    return [
        columns.get(name, pl.lit(None, dtype=dtype)).cast(dtype).alias(name)
        for name, dtype in SCHEMA.items()
    ]
