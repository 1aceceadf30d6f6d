"""Lines to typed polars frames: one explicit schema, vectorized extraction for every dialect.

The stages, in the order a block goes through them: `framing` (lines into a frame, the common
timestamp), `timestamps` (every other form, and the year of those printed without one),
`shaped` with `shapes` (lines of a known shape cut by position), `general` (every other line,
key by key, with `extract`'s expressions run on the rows `sparse`'s prefilters select, and
`throughput`, `telemetry`), `derived` (the counts the rules test); `block` runs them
(`parse_block`, `complete`). What each trainer family prints is in `dialects/`; the frame
they all produce is `schema.SCHEMA`.
"""

from __future__ import annotations

from logwatch.parse.block import complete, completed_columns, parse_block, parse_lines
from logwatch.parse.dialects.generic import NUMBER
from logwatch.parse.schema import ALWAYS, SCHEMA, closure
from logwatch.parse.shaped import TOKEN_ROWS, shape_of, shapes_giving
from logwatch.parse.sparse import TINY_BATCH_ROWS
from logwatch.parse.timestamps import ParsedBlock, YearCarry

__all__ = [
    "ALWAYS",
    "NUMBER",
    "SCHEMA",
    "TINY_BATCH_ROWS",
    "TOKEN_ROWS",
    "ParsedBlock",
    "YearCarry",
    "closure",
    "complete",
    "completed_columns",
    "parse_block",
    "parse_lines",
    "shape_of",
    "shapes_giving",
]
