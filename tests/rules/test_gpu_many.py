"""`piece_keys` gives each piece of a group's scored GPU rows the GPUs that `HoldRule` selects
of that piece's rows alone, and a hold rule stepped on pieces gives the same transitions."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.gpu.log_rows import cut_rows
from logwatch.rules.gpu_many import piece_keys
from tests.support.properties import examples

gpus = st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(0, 7))), max_size=30)
cuts = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6)), min_size=1, max_size=6)


@settings(max_examples=examples(200), deadline=None)
@given(gpus, cuts)
def test_each_piece_has_the_gpus_of_its_own_rows(
    rows: list[tuple[int, int | None]], pieces: list[tuple[int, int]]
) -> None:
    """Random rows (several per log row, null GPUs, log rows with no GPU row) and pieces (gaps
    between them, empty ones): each piece's keys are what the select on its cut rows gives,
    in the same order."""
    log_rows, at = [], 0
    for step, _ in rows:
        at += step
        log_rows.append(at)
    scored = pl.DataFrame(
        {"_row": log_rows, "gpu": [gpu for _, gpu in rows]},
        schema={"_row": pl.UInt32, "gpu": pl.Int64},
    )
    bounds, begin = [], 0
    for gap, size in pieces:
        bounds.append((begin + gap, begin + gap + size))
        begin += gap + size
    want = [
        cut.select(pl.col("gpu").cast(pl.String).unique(maintain_order=True)).to_series().to_list()
        for cut in cut_rows(scored, "_row", bounds)
    ]
    assert piece_keys(scored, "_row", bounds) == want
