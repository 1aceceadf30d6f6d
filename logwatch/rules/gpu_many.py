"""The GPU hold rules over many files' GPU rows at once: what each file's step asks of its
scored rows before anything else (which GPUs they are of, when no condition holds on them),
answered for every file of a parse group in one query (`LogGpuRows.pieces`), and the one GPU
frame a batch's hold rules are scored on."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

_PIECE = "_piece"


def piece_keys(
    scored: pl.DataFrame, row: str, bounds: Sequence[tuple[int, int]]
) -> list[list[str]]:
    """The GPUs (as strings, in the order they first appear) of the rows of `scored` (sorted by
    its log row column `row`) in each [begin, end) of `bounds` (ascending, not overlapping): what
    `HoldRule._evaluated` selects of each piece's rows, in one query for all pieces."""
    if scored.is_empty() or not bounds:
        return [[] for _ in bounds]
    rows = scored.get_column(row)
    edges = pl.Series([edge for bound in bounds for edge in bound], dtype=rows.dtype)
    at = rows.search_sorted(edges, side="left")
    lows, highs = at.gather_every(2), at.gather_every(2, offset=1)
    index = pl.int_range(scored.height, dtype=pl.UInt32, eager=True)  # as `at`
    # a row's piece: the last whose first row is at or before it (an empty piece shares its
    # first row with the next one), if the row is before that piece's end (not in a gap)
    piece = lows.search_sorted(index, side="right").cast(pl.Int64) - 1
    inside = index < highs.gather(piece.clip(lower_bound=0))
    found = (
        pl.DataFrame([scored.get_column("gpu"), piece.alias(_PIECE)])
        .filter(inside & (piece >= 0))
        .group_by(_PIECE, maintain_order=True)
        .agg(pl.col("gpu").cast(pl.String).unique(maintain_order=True))
    )
    keys: dict[int, list[str]] = dict(found.iter_rows())
    return [keys.get(n, []) for n in range(len(bounds))]


def scored_metrics(
    wanted: frozenset[str] | None, read: frozenset[str] | None
) -> frozenset[str] | None:
    """The metrics of the GPU frame a hold rule that reads `wanted` (`HoldRule.log_metrics`) is
    scored on, of rows read for `read` (None: all): all of `read`, so that one frame serves
    every hold rule of a batch. Its scored rows are those of the frame of `wanted` alone: a
    row without one of `wanted` has a null condition (`_log_metrics`), which `_scored` drops,
    and it reads no other metric. `wanted` itself where it is not within `read` (the frame
    then says what is missing)."""
    if wanted is not None and (read is None or wanted <= read):
        return read
    return wanted
