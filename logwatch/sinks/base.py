"""Sinks: where alert events go. The terminal sink ships here; Slack and others plug in beside it.

A sink implements `Sink`, which lives in `logwatch.alerts` beside the events (the drivers that
hand events on import it from there, never a sink) and is named here too."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TextIO

from logwatch.alerts import AlertEvent
from logwatch.alerts import Sink as Sink  # where a sink looks for it
from logwatch.sinks.render import timeline_line


class OutputFormat(StrEnum):
    """`--format` of replay and tail: a human timeline, or one JSON object per event."""

    TEXT = "text"
    JSONL = "jsonl"


class StreamSink:
    """Writes events to a text stream as a human timeline or as JSON lines, flushed per event."""

    def __init__(
        self, stream: TextIO, *, fmt: str = OutputFormat.TEXT, colour: bool = False
    ) -> None:
        if fmt not in set(OutputFormat):
            raise ValueError(f"unknown format {fmt!r} (expected text or jsonl)")
        self.stream, self.fmt, self.colour = stream, OutputFormat(fmt), colour
        self.count = 0

    def emit(self, event: AlertEvent) -> None:
        line = (
            event.to_jsonl()
            if self.fmt == OutputFormat.JSONL
            else timeline_line(event, colour=self.colour)
        )
        self.stream.write(line + "\n")
        self.stream.flush()
        self.count += 1

    def tick(self, now: datetime) -> None:
        """Nothing waits on time here."""

    def rename_source(self, old: str, new: str) -> None:
        """Nothing here is kept by source: each event is written as it comes."""

    def close(self) -> None:
        self.stream.flush()


class ListSink:
    """Keeps events in a list (tests, and library use)."""

    def __init__(self) -> None:
        self.events: list[AlertEvent] = []

    def emit(self, event: AlertEvent) -> None:
        self.events.append(event)

    def tick(self, now: datetime) -> None:
        """Nothing waits on time here."""

    def rename_source(self, old: str, new: str) -> None:
        """The events already kept stay as they were emitted."""

    def close(self) -> None:
        pass
