"""One sink in front of several, as the drivers hand events on: each event to each, a failing
sink reported and never fatal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from logwatch.alerts import AlertEvent, Sink
from logwatch.redact import stderr_line


class FanOut:
    """Emits, ticks and closes every sink in order; what one sink fails to do is said on `report`
    and the others still get it. BrokenPipeError propagates: stdout's reader left, time to stop."""

    def __init__(
        self, sinks: Sequence[Sink], *, report: Callable[[str], None] = stderr_line
    ) -> None:
        self.sinks, self.report = list(sinks), report
        self._failures: dict[tuple[int, str, str], int] = {}

    def emit(self, event: AlertEvent) -> None:
        """Give the event to each sink."""
        for sink in self.sinks:
            try:
                sink.emit(event)
            except BrokenPipeError:
                raise  # `logwatch tail | head`: the reader left
            except Exception as exc:
                what = f"did not take {event.rule} {event.status} ({event.source}:{event.line})"
                self._failed(sink, "emit", what, exc)

    def tick(self, now: datetime) -> None:
        """Tick each sink."""
        for sink in self.sinks:
            try:
                sink.tick(now)
            except BrokenPipeError:
                raise
            except Exception as exc:
                self._failed(sink, "tick", "failed a periodic step", exc)

    def rename_source(self, old: str, new: str) -> None:
        """Tell each sink that `old`'s firing alerts go on under `new`."""
        for sink in self.sinks:
            try:
                sink.rename_source(old, new)
            except Exception as exc:
                self._failed(sink, "rename_source", f"did not move {old}'s alerts to {new}", exc)

    def close(self) -> None:
        """Close each sink, even when an earlier one fails; a broken pipe is raised at the end."""
        broken: BrokenPipeError | None = None
        for sink in self.sinks:
            try:
                sink.close()
            except BrokenPipeError as exc:
                broken = exc  # the other sinks still flush what they hold
            except Exception as exc:
                self._failed(sink, "close", "did not close cleanly", exc)
        if broken is not None:
            raise broken

    def _failed(self, sink: Sink, step: str, what: str, exc: Exception) -> None:
        """Say what a sink could not do, every time; a repeated error (same sink, step and
        reason) with its count."""
        reason = f"{type(exc).__name__}: {exc}"
        key = (id(sink), step, reason)
        self._failures[key] = count = self._failures.get(key, 0) + 1
        again = f" (failure {count} of this kind)" if count > 1 else ""
        self.report(f"sink {type(sink).__name__} {what}: {reason}{again}")
