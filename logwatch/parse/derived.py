"""The counts the rules test, derived from parsed columns: non-empty queue buckets, `gpu/` keys
in a snapshot."""

from __future__ import annotations

import polars as pl

from logwatch.parse.sparse import _sparse
from logwatch.parse.telemetry import _gpu_keys_of, _gpu_keys_of_text


def _derived(frame: pl.DataFrame, computed: frozenset[str]) -> list[pl.Series]:
    """The counts the rules test, from the columns just `computed`: non-empty queue buckets;
    `gpu/` keys in a snapshot (what a shape counted on its lines, else from `telemetry` when it
    was parsed, else from the snapshot lines' text, on those lines only)."""
    counted = frame.get_column("gpu_keys") if "gpu_keys" in frame.columns else None
    dense: list[pl.Expr] = []
    if "q_hsb_nonzero" in computed:
        dense.append(_nonzero_buckets(pl.col("q_hsb")))
    if "gpu_keys" in computed and "telemetry" in computed:
        keys = _gpu_keys_of(pl.col("telemetry"))
        dense.append(
            keys
            if counted is None
            else pl.col("gpu_keys").fill_null(keys).alias(keys.meta.output_name())
        )
    out = frame.select(dense).get_columns() if dense else []  # one query for them all
    if "gpu_keys" in computed and "telemetry" not in computed:
        rows = frame.get_column("snapshot")
        if counted is not None:
            rows = rows & counted.is_null()
        keys_of_text = _sparse(frame, rows, _gpu_keys_of_text(), "gpu_keys")
        out.append(keys_of_text if counted is None else counted.fill_null(keys_of_text))
    return out


def _nonzero_buckets(q_hsb: pl.Expr) -> pl.Expr:
    """`q_hsb_nonzero`: how many of a queue report's buckets are not 0."""
    nonzero = q_hsb.list.eval((pl.element() != 0).cast(pl.UInt32)).list.sum()
    return nonzero.alias("q_hsb_nonzero")
