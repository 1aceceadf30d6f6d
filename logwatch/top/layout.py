"""The table's columns fitted to any width: each source is exactly one line, every column keeps
its place, and when the terminal is too narrow the least important columns give way first
(narrowed, their values cut with `…`, then left out), the source and its alerts last."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

GAP = 1
"""Spaces between two columns."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its natural and smallest width, and its rank (0 is kept longest)."""

    name: str
    width: int
    min_width: int
    rank: int


SOURCE = "source"
ALERTS = "alerts"
SOURCE_MAX_W = 40
"""A source name wider than this is cut (from its left: the file name is what differs)."""
ALERTS_WANT_W = 28
"""What the alerts column asks for before other columns give way (whether or not something
fires, so the table does not move when an alert comes); it takes any room left."""
ALERTS_MIN_W = 16
SOURCE_MIN_W = 10
SOURCE_RANK = 5
"""When the source column is narrowed: after the rarer metrics, tok/s and the trend, before
loss, age and step (it is never left out)."""

METRIC_COLUMNS = (
    Column("run", 12, 5, 8),
    Column("step", 8, 6, 2),
    Column("/s", 6, 4, 9),
    Column("last", 11, 8, 3),
    Column("loss", 8, 6, 4),
    Column("trend", 16, 6, 6),
    Column("gnorm", 6, 5, 11),
    Column("lr", 8, 7, 12),
    Column("tok/s", 8, 6, 7),
    Column("q_hs", 11, 4, 10),
)
"""The columns between source and alerts, in the order they are shown."""


@dataclass(frozen=True, slots=True)
class Layout:
    """The widths one frame uses: source first, then `columns` (name, width), then alerts."""

    source_w: int
    columns: tuple[tuple[str, int], ...]
    alerts_w: int

    def total(self) -> int:
        """The cells a row takes with its alerts cell full."""
        return self.source_w + sum(w + GAP for _, w in self.columns) + GAP + self.alerts_w


def fit(width: int, source_w: int) -> Layout:
    """The layout of a `width`-cell line for source names `source_w` wide (the longest): every metric column at its natural width when it fits; else the least
    important narrowed to its minimum, then left out, one at a time; then the alerts and the
    source narrowed. The alerts column takes whatever room is left."""
    width = max(2 + GAP, width)
    source_w = max(SOURCE_MIN_W, min(source_w, SOURCE_MAX_W))
    source = Column(SOURCE, source_w, SOURCE_MIN_W, SOURCE_RANK)
    alerts = Column(ALERTS, ALERTS_WANT_W, ALERTS_MIN_W, 1)
    dropped: set[str] = set()
    by_rank = sorted(METRIC_COLUMNS, key=lambda c: -c.rank)
    for column in [None, *by_rank]:
        if column is not None:
            dropped.add(column.name)
        kept = [c for c in METRIC_COLUMNS if c.name not in dropped]
        widths = _shrunk([source, *kept, alerts], width)
        if widths is not None:
            return _layout(widths, kept, width)
    source_cut = max(1, min(source.width, width - GAP - min(alerts.width, ALERTS_MIN_W)))
    return Layout(source_cut, (), max(1, width - source_cut - GAP))


def _shrunk(columns: Sequence[Column], width: int) -> dict[str, int] | None:
    """Each column's width once the least important were narrowed (never below their minimum)
    to make the line fit `width`; None when even their minimums do not."""
    widths = {c.name: c.width for c in columns}
    excess = sum(widths.values()) + GAP * (len(columns) - 1) - width
    for column in sorted(columns, key=lambda c: -c.rank):
        if excess <= 0:
            break
        cut = min(excess, max(0, column.width - column.min_width))
        widths[column.name] -= cut
        excess -= cut
    return widths if excess <= 0 else None


def _layout(widths: dict[str, int], kept: Sequence[Column], width: int) -> Layout:
    columns = tuple((c.name, widths[c.name]) for c in kept)
    used = widths[SOURCE] + sum(w + GAP for _, w in columns) + GAP
    return Layout(widths[SOURCE], columns, max(1, width - used))


def cell_len(text: str) -> int:
    """Terminal cells `text` takes (East Asian wide and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def cut_left(text: str, width: int) -> str:
    """`text` in at most `width` cells, its start replaced by `…` when it is longer."""
    if cell_len(text) <= width:
        return text
    kept, used = len(text), 1
    while kept > 0 and used + cell_len(text[kept - 1]) <= width:
        kept -= 1
        used += cell_len(text[kept])
    return "…" + text[kept:]
