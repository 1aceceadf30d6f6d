"""Sinks: where alert events go. The terminal sink ships here; Slack and others plug in beside it.

A sink implements `Sink`, which lives in `logwatch.alerts` beside the events (the drivers that
hand events on import it from there, never a sink) and is named here too."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, TextIO, runtime_checkable

from logwatch.alerts import AlertEvent
from logwatch.alerts import Sink as Sink  # where a sink looks for it
from logwatch.sinks.render import same_incident, timeline_entry


@runtime_checkable
class TakesStopper(Protocol):
    """A sink with a "Stop run" button (Slack): given `ActionSink.run_once` once actions exist."""

    def set_stopper(self, stopper: Any) -> None:
        """What a press calls: (action name, alert, then) -> None when started, else why not."""
        ...


class OutputFormat(StrEnum):
    """`--format` of replay and tail: a human timeline, or one JSON object per event."""

    TEXT = "text"
    JSONL = "jsonl"


class StreamSink:
    """Writes events to a text stream as JSON lines, one per event and flushed per event, or as
    a human timeline: the events of one line (`same_incident`) are one entry, written when an
    event of another line comes, at the next tick (tail's round) or at close."""

    def __init__(
        self, stream: TextIO, *, fmt: str = OutputFormat.TEXT, colour: bool = False
    ) -> None:
        if fmt not in set(OutputFormat):
            raise ValueError(f"unknown format {fmt!r} (expected text or jsonl)")
        self.stream, self.fmt, self.colour = stream, OutputFormat(fmt), colour
        self.count = 0
        self._held: list[AlertEvent] = []

    def emit(self, event: AlertEvent) -> None:
        if self.fmt == OutputFormat.JSONL:
            self._write(event.to_jsonl(), 1)
            return
        if self._held and not same_incident(self._held[0], event):
            self.flush()
        if not self._held:
            self._opened()
        self._held.append(event)

    def flush(self) -> None:
        """Write the incident held, if any."""
        held, self._held = self._held, []
        if held:
            self._write(self.render(held), len(held))

    def render(self, events: list[AlertEvent]) -> str:
        """One incident as a timeline entry."""
        return timeline_entry(events, colour=self.colour)

    def _opened(self) -> None:
        """A new incident begins (the terminal sink notes when it arrived)."""

    def _write(self, text: str, events: int) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
        self.count += events

    def tick(self, now: datetime) -> None:
        """The incident held is complete: the round that found it is over."""
        self.flush()

    def rename_source(self, old: str, new: str) -> None:
        """Nothing here is kept by source: each incident is written as it ends."""
        self.flush()

    def close(self) -> None:
        self.flush()
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
