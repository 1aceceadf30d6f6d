"""Snapshot telemetry: a line's `a/b/c=<number>` pairs, of which the `gpu/<i>/<metric>` ones are
GPU keys. The GPU stage (`gpu.frames`) reads its rows from the log with this same grammar."""

from __future__ import annotations

import polars as pl

from logwatch.parse.dialects.generic import NUMBER

# The parser's telemetry grammar: `a/b/c=<number>` pairs, of which the `gpu/<i>/<metric>` ones
# are GPU keys.
TELEMETRY_PAIR = r"(?:[\w.-]+/)+[\w.-]+=" + NUMBER


PAIRS_COLUMN = "telemetry_pairs"
"""A column of `telemetry_pairs()` a caller may have put in a log frame, so that the pairs are
extracted once for `gpu_key_count` and `gpu.log_rows.telemetry_rows`."""


def telemetry_pairs() -> pl.Expr:
    """Each line's telemetry pairs (`key=value` strings) over `text`, as the parser reads them."""
    return pl.col("text").str.extract_all(TELEMETRY_PAIR)


def gpu_key_count(pairs: pl.Expr | None = None) -> pl.Expr:
    """How many of a line's telemetry keys start with `gpu/` (over `text`, or over `pairs` from
    `telemetry_pairs()`): the `gpu_keys` column, without the parsed `telemetry` column."""
    starts = pl.element().str.starts_with("gpu/").cast(pl.UInt32)
    found = telemetry_pairs() if pairs is None else pairs
    return found.list.eval(starts).list.sum().cast(pl.UInt32)


def _telemetry() -> pl.Expr:
    pairs = telemetry_pairs()
    return pairs.list.eval(
        pl.struct(
            pl.element().str.extract(r"^([^=]+)=", 1).alias("key"),
            pl.element()
            .str.extract(r"=(" + NUMBER + ")", 1)
            .cast(pl.Float64, strict=False)
            .alias("value"),
        )
    )


def _gpu_keys_of(telemetry: pl.Expr) -> pl.Expr:
    """`gpu_keys` from a parsed `telemetry` column."""
    starts = pl.element().struct.field("key").str.starts_with("gpu/").cast(pl.UInt32)
    return telemetry.list.eval(starts).list.sum().alias("gpu_keys")


def _gpu_keys_of_text() -> pl.Expr:
    """`gpu_keys` from a snapshot line's text."""
    return gpu_key_count().alias("gpu_keys")
