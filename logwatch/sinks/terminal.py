"""tail's terminal sink: the text timeline fitted to the terminal, silenced alerts marked, and
arrival times for lines without a timestamp. Colour follows https://no-color.org."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Protocol, TextIO

from logwatch.alerts import AlertEvent
from logwatch.sinks.base import OutputFormat, StreamSink
from logwatch.sinks.render import timeline_entry


class Silences(Protocol):
    """What the sink asks of the silence store (`sinks.slack.silences.SilenceStore`)."""

    def muting(self, rule: str, source: str, now: datetime) -> object | None:
        """The active silence covering this alert, if any."""
        ...


def wants_colour(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Colour on a terminal, unless NO_COLOR is set to something (no-color.org)."""
    env = os.environ if env is None else env
    return stream.isatty() and not env.get("NO_COLOR")


class TerminalSink(StreamSink):
    """A StreamSink for `tail`: in text format, rows wrap to the terminal's width when `stream`
    is one (read at each row: the window may be resized), silenced alerts say `(silenced)`,
    and a line without a timestamp shows when it arrived (`now`)."""

    def __init__(
        self,
        stream: TextIO,
        *,
        fmt: str = OutputFormat.TEXT,
        silences: Silences | None = None,
        now: Callable[[], datetime] = datetime.now,
    ) -> None:
        super().__init__(stream, fmt=fmt, colour=fmt == OutputFormat.TEXT and wants_colour(stream))
        self.silences, self.now = silences, now
        self.wrap = stream.isatty()
        self._arrived = now()

    def _opened(self) -> None:
        self._arrived = self.now()

    def render(self, events: list[AlertEvent]) -> str:
        now = self._arrived
        silenced = frozenset(
            i
            for i, event in enumerate(events)
            if self.silences is not None
            and self.silences.muting(event.rule, event.source, now) is not None
        )
        width = shutil.get_terminal_size().columns if self.wrap else None
        return timeline_entry(
            events, colour=self.colour, width=width, arrived=now, silenced=silenced
        )
