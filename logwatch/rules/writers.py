"""One alert per rank in a file that many ranks write: a SLURM node's `slurm-JOB-HOST.out`
(`[default3]:` prefixes, local ranks) or `srun -l`'s `3: ` (global ranks). The line rules that
fire once per run and label set (`match`, `classify`) count the rank of a prefixed line as part
of that set, as `rank` (global) or `local_rank` labels: eight ranks' NCCL timeouts in one node
file are eight alerts. A line without a rank prefix adds nothing, so a single-rank file's alerts
keep their identity."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from logwatch.parse.prefix import prefixes

W_RANK = "_w_rank"
W_LOCAL = "_w_local"
WRITER_COLUMNS = [W_RANK, W_LOCAL]


def with_writers(hits: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """`hits` (rows of `frame`, by `_row`) with the rank their line's prefix names (`W_RANK`:
    global, `W_LOCAL`: local), null where none."""
    texts = frame.get_column("text").gather(hits.get_column("_row"))
    found = pl.DataFrame({"text": texts}).select(prefixes(pl.col("text")))
    columns = [found.get_column("p_rank").alias(W_RANK), found.get_column("p_local").alias(W_LOCAL)]
    if W_RANK in hits.columns or W_LOCAL in hits.columns:
        return hits.with_columns(columns)
    return hits.hstack(columns)  # native: no query


def writer_labels(hit: Mapping[str, Any], labels: dict[str, str]) -> dict[str, str]:
    """`labels` (the pattern's) with the hit's rank labels after them (a pattern's own `rank`
    or `local_rank` group wins)."""
    out = dict(labels)
    if hit[W_RANK] is not None:
        out.setdefault("rank", str(hit[W_RANK]))
    if hit[W_LOCAL] is not None:
        out.setdefault("local_rank", str(hit[W_LOCAL]))
    return out
