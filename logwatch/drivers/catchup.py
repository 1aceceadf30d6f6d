"""Catching up on the files that exist at start, many at a time.

Parsing a batch costs a few milliseconds whatever its size (about fifty polars calls), so with
2000 short logs the fixed costs were most of the start-up. Here the history of many files is
parsed as one block (parsing is row by row: no line's columns depend on another's), then cut
back into each file's frames, which the rules see one file at a time and in file order, exactly
as they would have one by one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.parse import SCHEMA, parse_block
from logwatch.sources.follow import Batch, Follower

CHUNK_LINES = 100_000
"""Lines parsed together at most (bounds the memory of a shared block)."""

Evaluate = Callable[[Follower, pl.DataFrame], list[AlertEvent]]


def catch_up(
    followers: Sequence[Follower],
    now: float,
    evaluate: Evaluate,
    *,
    columns: frozenset[str] | None = None,
) -> dict[int, list[AlertEvent]]:
    """Read every follower's history (up to its last whole line) and `evaluate` it, file by
    file in order; the alert events of each, by `id(follower)`. `columns`: parse only these."""
    events: dict[int, list[AlertEvent]] = {id(f): [] for f in followers}
    pending: list[tuple[Follower, Batch]] = []
    lines = 0

    def flush() -> None:
        for follower, frame in parsed_together(pending, columns):
            events[id(follower)].extend(evaluate(follower, frame))
        pending.clear()

    for follower in followers:
        while True:
            result = follower.poll(now, flush_partial=False)
            for batch in result.batches:
                pending.append((follower, batch))
                lines += batch.text.len()
                if lines >= CHUNK_LINES:
                    flush()
                    lines = 0
            if not result.more:
                break
    flush()
    return events


def parsed_together(
    pending: list[tuple[Follower, Batch]], columns: frozenset[str] | None
) -> Iterator[tuple[Follower, pl.DataFrame]]:
    """Each pending batch's frame, parsed in one call (with their own sources and lines). A
    line without a year takes the year of its own file's last dated line (`follower.year`
    carries it, to the next block and to the lines that come live)."""
    if not pending:
        return
    # One segment per file: its batches are consecutive; each starts from its own year.
    files: list[Follower] = []
    sizes: list[int] = []
    for follower, batch in pending:
        if files and files[-1] is follower:
            sizes[-1] += batch.text.len()
        else:
            files.append(follower)
            sizes.append(batch.text.len())
    # one chunk: polars 2.1 panics on some multi-chunk string columns (a filter after a
    # concatenation of small batches: `assertion failed: i < self.len()`)
    text = (
        pl.concat([batch.text for _, batch in pending], rechunk=True)
        if len(pending) > 1
        else pending[0][1].text
    )
    block = parse_block(
        text,
        source="",
        first_line=1,
        default_year=files[0].year,
        columns=columns,
        segments=[(size, f.year) for f, size in zip(files, sizes, strict=True)],
    )
    for follower, year in zip(files, block.segment_years, strict=True):
        if year is not None:
            follower.year = year
    counts = [batch.text.len() for _, batch in pending]
    frame = block.frame.with_columns(*_sources_and_lines(pending, counts))
    offset = 0
    for (follower, _), size in zip(pending, counts, strict=True):
        yield follower, frame.slice(offset, size)
        offset += size


def _sources_and_lines(pending: list[tuple[Follower, Batch]], counts: list[int]) -> list[pl.Series]:
    """The `source` and `line` columns of the pending batches' lines (`counts` lines each), in
    one query for all: each batch's source, and its first line less the lines before it in
    the block (its `base`) to which each line adds its row in the block."""
    starts = itertools.accumulate(counts, initial=0)
    batches = pl.DataFrame(
        {
            "source": [f.source for f, _ in pending],
            "base": [b.first_line - start for (_, b), start in zip(pending, starts, strict=False)],
            "count": counts,
        },
        schema={"source": pl.String, "base": pl.Int64, "count": pl.Int64},
    ).filter(pl.col("count") > 0)
    spread = batches.select(
        pl.col("source").repeat_by("count").explode().cast(SCHEMA["source"]),
        (pl.col("base").repeat_by("count").explode() + pl.int_range(pl.sum("count")))
        .cast(SCHEMA["line"])
        .alias("line"),
    )
    return spread.get_columns()
