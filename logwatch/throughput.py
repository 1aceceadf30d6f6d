"""Throughput (`tok/s`, `samples/s`, `it/s`) of step lines, for summaries and reports.

Reads the `throughput` column when the frame has one, else the line's text: a literal test picks
the few candidate rows before any regex runs.
"""

from __future__ import annotations

import polars as pl

_UNITS = [
    f"{thing}{per}"
    for thing in ("tok", "toks", "tokens", "sample", "samples")
    for per in ("/s", "/sec", "_per_sec", "_per_second")
]
# `tok/s 48292`, `tokens_per_sec=1.2e5`, `train_samples_per_second: 3.1`, `it/s: 2`; tqdm's
# `3.21it/s`. Plain literals (no word boundary, no (?i)) keep the regex engine's literal search:
# three times faster, and a rate is never NaN worth plotting.
KEY_FIRST = (
    "(?:" + "|".join(sorted(_UNITS, key=len, reverse=True)) + r"|it/s)['\"]?\s*[=:]?\s*"
    r"(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
)
VALUE_FIRST = r"(\d+(?:\.\d+)?)\s?it/s\b"


def throughput(frame: pl.DataFrame) -> pl.Series:
    """Per row: the line's throughput, or null (a Float64 series as long as the frame)."""
    if "throughput" in frame.columns:
        return frame.get_column("throughput").cast(pl.Float64).alias("throughput")
    text = frame.get_column("text")
    picked = text.str.contains("/s", literal=True) | text.str.contains("_per_s", literal=True)
    out = pl.repeat(None, frame.height, dtype=pl.Float64, eager=True).alias("throughput")
    if not picked.any():
        return out
    rows = text.filter(picked).to_frame("text")
    txt = pl.col("text")
    values = rows.select(
        pl.coalesce(txt.str.extract(KEY_FIRST, 1), txt.str.extract(VALUE_FIRST, 1))
        .cast(pl.Float64, strict=False)
        .alias("throughput")
    ).to_series()
    return out.scatter(picked.arg_true(), values)
