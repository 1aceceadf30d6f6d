"""One sink in front of several, as the drivers hand events on: each event to each, a failing
sink reported and never fatal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from logwatch.alerts import AlertEvent, Sink
from logwatch.faults import Episode, RepeatedFaults
from logwatch.redact import stderr_line


class FanOut:
    """Emits, ticks and closes every sink in order; what one sink fails to do is said on `report`
    and the others still get it. BrokenPipeError propagates: stdout's reader left, time to stop."""

    def __init__(
        self, sinks: Sequence[Sink], *, report: Callable[[str], None] = stderr_line
    ) -> None:
        self.sinks, self.report = list(sinks), report
        self._failures: dict[tuple[int, str, str], int] = {}
        # A tick fails every round while a sink is broken: said when it starts, once a minute
        # while it lasts (on the ticks' clock) and when it works again.
        self._now_s = 0.0
        self._ticks = RepeatedFaults(report, clock=lambda: self._now_s)

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
        self._now_s = now.timestamp()
        for sink in self.sinks:
            key = f"sink {type(sink).__name__}'s periodic step"
            try:
                sink.tick(now)
            except BrokenPipeError:
                raise
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                said = f"sink {type(sink).__name__} failed a periodic step: {reason}"
                self._ticks.failed(key, said, detail=reason)
            else:
                self._ticks.recovered(key, _works_again)

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


def _works_again(episode: Episode, now_s: float) -> str:
    times = f"{episode.failures} time{'' if episode.failures == 1 else 's'}"
    return f"{episode.key} works again (it failed {times} in {episode.lasted(now_s)})"
