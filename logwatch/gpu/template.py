"""The GPU keys of plain snapshot lines that repeat one key sequence, cut by position.

A run's snapshot lines nearly always carry the same keys in the same order. From one line's
keys (its `template`), every line whose pairs after its first ` gpu/` agree with them token
by token gives its values by column: a value sits at a known offset of a known token, its
GPU, metric and scale come from the template, and the rows' (line, gpu, metric) order is the
template's sorted order. No string join, no sort, no order check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

KeyReader = Callable[[pl.Series, frozenset[str] | None], pl.DataFrame | None]
"""Reads distinct `gpu/<i>/<metric>` keys (`logwatch.gpu.log_rows._read_keys`): the rows
(`_key`, gpu, metric, `_scale`) of the `kept` metrics' keys, or None to refuse them all."""

TEMPLATES_PER_BATCH = 3
"""Key sequences tried on a batch; the lines that follow none are left to the caller."""


@dataclass(frozen=True, slots=True, eq=False)
class Template:
    """One line's tokens from its first ` gpu/` on: each must start with its `prefixes`
    (`key=` for a GPU key) or, where `is_gpu` is false, not start with `gpu/`. `taken`: the
    tokens whose values are rows, in (gpu, metric) order, a key said twice by its last
    token; `offsets` and `scales` per taken token; `gpus` and `metrics` its rows' columns."""

    prefixes: tuple[str, ...]
    is_gpu: tuple[bool, ...]
    taken: tuple[int, ...]
    offsets: tuple[int, ...]
    scales: tuple[float, ...]
    gpus: pl.Series
    metrics: pl.Series


def template_rows(
    lines: pl.DataFrame, kept: frozenset[str] | None, read_keys: KeyReader
) -> tuple[list[pl.DataFrame], pl.DataFrame] | None:
    """The GPU rows of the plain snapshot lines (`_log_row`, ts, `text`) that follow one of
    the batch's first key sequences (one frame per sequence, each in line order), and the
    lines with a GPU key that follow none (`_log_row`, ts, and as `text` the line from its
    first ` gpu/` on, which holds all its GPU pairs). None when `read_keys` refuses a
    sequence's keys."""
    text = pl.col("text")
    rest = lines.select(
        "_log_row", "ts", text.str.slice(text.str.find(" gpu/", literal=True) + 1).alias("_tail")
    ).filter(pl.col("_tail").is_not_null())
    pieces = []
    for _ in range(TEMPLATES_PER_BATCH):
        if rest.is_empty():
            break
        keys = tuple(token.partition("=")[0] for token in rest.item(0, "_tail").split(" "))
        template = _template(keys, kept, read_keys)
        if template is None:
            return None
        rows, rest = _follow(rest, template)
        pieces.append(rows)
    return pieces, rest.rename({"_tail": "text"})


@lru_cache(maxsize=64)
def _template(
    keys: tuple[str, ...], kept: frozenset[str] | None, read_keys: KeyReader
) -> Template | None:
    """The template of one line's keys (None: `read_keys` refuses them)."""
    is_gpu = tuple(key.startswith("gpu/") for key in keys)
    distinct = dict.fromkeys(k for k, gpu in zip(keys, is_gpu, strict=True) if gpu)
    read = read_keys(pl.Series(list(distinct), dtype=pl.String), kept)
    if read is None:
        return None
    order = {row[0]: n for n, row in enumerate(read.iter_rows())}  # key -> its row in `read`
    metric_rank = read.get_column("metric").to_physical().to_list()
    gpus, scales = read.get_column("gpu").to_list(), read.get_column("_scale").to_list()
    last: dict[tuple[int, int], tuple[int, int]] = {}  # (gpu, metric) -> (token, `read` row)
    for position, key in enumerate(keys):
        if key in order:
            row = order[key]
            last[(gpus[row], metric_rank[row])] = (position, row)
    taken = [last[gpu_metric] for gpu_metric in sorted(last)]
    rows = pl.Series([row for _, row in taken], dtype=pl.UInt32)
    return Template(
        prefixes=tuple(f"{key}=" if gpu else "gpu/" for key, gpu in zip(keys, is_gpu, strict=True)),
        is_gpu=is_gpu,
        taken=tuple(position for position, _ in taken),
        offsets=tuple(len(keys[position]) + 1 for position, _ in taken),
        scales=tuple(scales[row] for _, row in taken),
        gpus=read.get_column("gpu").gather(rows),
        metrics=read.get_column("metric").gather(rows),
    )


def _follow(tails: pl.DataFrame, template: Template) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The rows of the lines (`_log_row`, ts, `_tail`) whose tokens agree with `template`,
    and the other lines."""
    agree, values, follows = _checks(template)
    width = len(template.prefixes)
    cut = tails.with_columns(pl.col("_tail").str.split_exact(" ", width).alias("_f")).unnest("_f")
    checked = cut.select("_log_row", "ts", "_tail", agree, *values)
    kept = checked.select(follows).to_series()
    if kept.all():  # the usual batch: every line follows its run's one template
        return _long(checked, template), tails.clear()
    return _long(checked.filter(kept), template), checked.filter(~kept).select(tails.columns)


@lru_cache(maxsize=64)  # as `_template`: built once per template, not per batch
def _checks(template: Template) -> tuple[pl.Expr, tuple[pl.Expr, ...], pl.Expr]:
    """`_follow`'s expressions over a line's tokens (`field_<n>`): whether its other tokens
    agree (`_agree`), its taken values (`_v<n>`), and whether it follows the template."""
    width = len(template.prefixes)
    token = [pl.col(f"field_{n}") for n in range(width + 1)]
    values = []
    for n, (position, scale) in enumerate(zip(template.taken, template.scales, strict=True)):
        # a token without the prefix keeps its `=`, which no number has: its value is null
        unprefixed = token[position].str.strip_prefix(template.prefixes[position])
        value = unprefixed.cast(pl.Float64, strict=False)
        values.append((value * scale if scale != 1.0 else value).alias(f"_v{n}"))
    others = set(range(width)) - set(template.taken)
    agree = [
        token[n].str.starts_with(template.prefixes[n]) == template.is_gpu[n] for n in sorted(others)
    ]
    agree.append(token[width].is_null())  # a token more than the template: field_<width> holds it
    read = [pl.col(f"_v{n}").is_not_null() for n in range(len(values))]
    return (
        pl.all_horizontal(agree).fill_null(False).alias("_agree"),
        tuple(values),
        pl.all_horizontal("_agree", *read),
    )


def _long(followed: pl.DataFrame, template: Template) -> pl.DataFrame:
    """One row per (line, taken token) of the lines' `_v<n>` value columns, line by line."""
    width = len(template.taken)
    if width == 0 or followed.is_empty():
        return pl.DataFrame(
            schema={
                "_log_row": pl.UInt32,
                "ts": followed.schema["ts"],
                "gpu": template.gpus.dtype,
                "metric": template.metrics.dtype,
                "value": pl.Float64,
            }
        )
    value_columns = [f"_v{n}" for n in range(width)]
    value = followed.select(pl.concat_arr(value_columns)).to_series().reshape((-1,))
    line, gpu, metric = (
        column.slice(0, value.len()) for column in _tiled(template, _bucket(followed.height))
    )
    return followed.select(
        pl.col("_log_row").gather(line),
        pl.col("ts").gather(line),
        pl.lit(gpu).alias("gpu"),
        pl.lit(metric).alias("metric"),
        pl.lit(value).alias("value"),
    )


def _bucket(lines: int) -> int:
    """`lines` rounded up to a power of two: the tiles of a template are built for a few."""
    return 1 << max(lines - 1, 0).bit_length()


@lru_cache(maxsize=4)  # a block's 4k lines of 32 rows: 2 MB a tile
def _tiled(template: Template, lines: int) -> tuple[pl.Series, pl.Series, pl.Series]:
    """For `lines` lines of `template`'s rows: each row's line, gpu and metric."""
    width = len(template.taken)
    at = pl.int_range(0, lines * width, dtype=pl.UInt32, eager=True)
    token = at % width
    return at // width, template.gpus.gather(token), template.metrics.gather(token)
