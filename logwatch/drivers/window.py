"""`--since` / `--until`: keep the part of each log between two times or two steps.

A line belongs where the last timestamp (or step) at or before it puts it, so the chatter between
two step lines goes with them; lines before the first timestamp or step only pass without a
`since`. The last position is carried from one block to the next per source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from logwatch.errors import InputError

Bound = datetime | int
"""A time, or a step number."""

_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


def parse_bound(text: str, option: str = "--since") -> Bound:
    """A step (`1400`) or a time (`2026-11-28 14:05`, `2026-11-28T14:05:00`); InputError
    saying what is accepted otherwise."""
    body = text.strip()
    if body.isdigit():
        return int(body)
    cleaned = body.replace("T", " ").replace(",", ".")
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    raise InputError(
        f"{option} {text!r}: not a step or a time (expected a step such as 1400, or a time "
        "such as '2026-11-28 14:05' or 2026-11-28T14:05:00)"
    )


@dataclass(slots=True)
class Window:
    """The rows of each source between `since` and `until` (both included, either optional)."""

    since: Bound | None = None
    until: Bound | None = None
    _last: dict[str, datetime | int | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        kinds = {type(b) for b in (self.since, self.until) if b is not None}
        if len(kinds) > 1:
            raise InputError(
                "--since and --until: give both as steps or both as times, not one of each"
            )

    @property
    def active(self) -> bool:
        """Whether this window drops anything at all."""
        return self.since is not None or self.until is not None

    def select(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The rows of one block (of one source) inside the window, in order."""
        if not self.active or frame.is_empty():
            return frame
        bound = self.since if self.since is not None else self.until
        column = "step" if isinstance(bound, int) else "ts"
        source = str(frame.item(0, "source"))
        position = frame.get_column(column).fill_null(strategy="forward")
        carried = self._last.get(source)
        if carried is not None:
            position = position.fill_null(carried)
        last = position.drop_nulls()
        if last.len():
            self._last[source] = last[-1]
        inside = pl.repeat(True, frame.height, eager=True)
        if self.since is not None:
            inside = (position >= self.since).fill_null(False)
        if self.until is not None:
            # Before the first position: inside when nothing bounds the start.
            inside = inside & (position <= self.until).fill_null(self.since is None)
        return frame.filter(inside)
