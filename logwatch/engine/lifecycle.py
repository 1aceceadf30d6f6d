"""The lifecycle of alerts: fire once, stay firing without repeats, resolve only what fires.

One `Lifecycle` holds the firing alerts of one source, keyed by fingerprint. Both the engine
(log rules, per source) and the GPU monitor (NVML rules) run their rules' transitions through one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from logwatch.alerts import FIRING, RESOLVED, AlertEvent, EndReason, event_from_json
from logwatch.durations import format_duration

if TYPE_CHECKING:
    from logwatch.rules.loader import RuleSpec

Render = Callable[[AlertEvent, "RuleSpec", Mapping[str, Any]], str]
"""Fills an event's summary from its rule spec and the row it happened at."""


class Lifecycle:
    """The firing alerts of one source, by fingerprint, and the transitions that change them."""

    __slots__ = ("_firing", "_note_since", "_render")

    def __init__(self, render: Render, *, note_since: bool = True) -> None:
        """`render` writes summaries; `note_since`: resolves say how long the alert was firing."""
        self._firing: dict[str, AlertEvent] = {}
        self._render = render
        self._note_since = note_since

    def __len__(self) -> int:
        return len(self._firing)

    def __iter__(self) -> Iterator[AlertEvent]:
        """The alerts firing now (the events that fired them), in firing order."""
        return iter(self._firing.values())

    def step(
        self, candidate: AlertEvent, spec: RuleSpec, row: Mapping[str, Any]
    ) -> AlertEvent | None:
        """The event to emit for a candidate transition, or None: a FIRING while already firing
        (no repeat), a RESOLVED while nothing fires."""
        fingerprint = candidate.fingerprint
        firing = self._firing.get(fingerprint)
        if (candidate.status == FIRING) == (firing is not None):
            return None
        event = replace(candidate, summary=self._render(candidate, spec, row))
        if event.status == FIRING:
            self._firing[fingerprint] = event
            return event
        del self._firing[fingerprint]
        if not self._note_since or firing is None:
            return event
        return replace(event, summary=_since_note(event, firing))

    def end_all(self, *, line: int, ts: datetime | None, why: str) -> list[AlertEvent]:
        """End everything firing (in firing order), each as `<rule>: ended, <why>`, with reason
        `restarted`: the run that raised them is gone, nothing was fixed."""
        ended = [
            replace(
                event,
                status=RESOLVED,
                line=line,
                ts=ts,
                step=None,
                summary=f"{event.rule}: ended, {why}",
                reason=EndReason.RESTARTED,
            )
            for event in self._firing.values()
        ]
        self._firing.clear()
        return ended

    def move(self, source: str) -> None:
        """The firing alerts now belong to `source` (the file they came from was renamed, a new
        file took its name). Nothing is emitted: the alert goes on, nothing ended and nothing new
        fired; re-announcing it would repeat every firing alert at every log rotation. The sinks
        hear of it from the driver (`Sink.rename_source`), so a later resolve finds them."""
        moved = [replace(event, source=source) for event in self._firing.values()]
        self._firing = {event.fingerprint: event for event in moved}

    def export_json(self) -> list[dict[str, Any]]:
        """The firing alerts as JSON-able objects (checkpoints), in firing order."""
        return [event.to_json() for event in self._firing.values()]

    def import_json(self, raw: Iterable[Mapping[str, Any]]) -> None:
        """Replace the firing alerts with `export_json`'s data; on malformed data nothing changes
        (ValueError from the event, or the TypeError / KeyError of a wrong shape)."""
        events = [event_from_json(item) for item in raw]
        self._firing = {event.fingerprint: event for event in events}


def moved_source(alerts: Mapping[str, AlertEvent], old: str, new: str) -> dict[str, AlertEvent]:
    """`alerts` (by fingerprint, in order) with those of source `old` now of `new`, re-keyed by
    their new fingerprints: what a sink holds of a renamed source (`Sink.rename_source`)."""
    moved = (replace(e, source=new) if e.source == old else e for e in alerts.values())
    return {event.fingerprint: event for event in moved}


def _since_note(event: AlertEvent, since: AlertEvent) -> str:
    """`<summary> (firing for 12m05s, since line N)`."""
    # A wall-clock alert (log-stalled) fires at logwatch's time and resolves at a line's own
    # timestamp: when the two clocks disagree, no duration beats a wrong one.
    seconds = (event.ts - since.ts).total_seconds() if since.ts and event.ts else -1.0
    took = f"firing for {format_duration(seconds)}, " if seconds >= 0 else "firing "
    return f"{event.summary} ({took}since line {since.line})"
