"""What `replay --actions dry-run` says: the actions the alerts of finished logs would have run,
and when, in log time. The same `ActionSink` as `tail`, in a dry run, on a clock that follows the
alerts' timestamps: an `after` is log time, a resolve inside it cancels, `max_per_hour` caps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from logwatch.actions.journal import DryJournal
from logwatch.actions.pids import RunPids
from logwatch.actions.process import RunResult
from logwatch.actions.sink import ActionOutcome, ActionSink
from logwatch.actions.spec import ActionSpec
from logwatch.alerts import AlertEvent


class _LogClock:
    """Seconds of the latest alert time seen (naive log times read as local, like `tail`)."""

    def __init__(self) -> None:
        self.at = 0.0

    def __call__(self) -> float:
        return self.at


class _NeverRun:
    """A dry run starts nothing; reaching this is a bug."""

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> RunResult:
        raise AssertionError("a dry run started a command")


def plan_actions(
    specs: Sequence[ActionSpec],
    events: Sequence[AlertEvent],
    pids: RunPids,
    env: Mapping[str, str],
) -> list[ActionOutcome]:
    """What each action would have done for these events (in time order when every event has
    a time; an event without one happens at the time before it)."""
    clock = _LogClock()
    said: list[ActionOutcome] = []
    sink = ActionSink(
        specs,
        DryJournal(clock),
        _NeverRun(),
        pids=pids.pid,
        env=env,
        now=clock,
        report=lambda line: None,
        dry_run=True,
        listeners=[said.append],
    )
    ordered = list(events)
    if all(event.ts is not None for event in ordered):
        ordered.sort(key=lambda event: event.ts.timestamp() if event.ts else 0.0)
    for event in ordered:
        if event.ts is not None:
            _until(sink, clock, event.ts.timestamp())
            clock.at = max(clock.at, event.ts.timestamp())
        sink.emit(event)
    # Alerts still firing when the logs end: their `after` would have run out.
    _until(sink, clock, float("inf"))
    return said


def _until(sink: ActionSink, clock: _LogClock, end: float) -> None:
    """Run what falls due up to `end`, each at its own time."""
    while (due := sink.next_due()) is not None and due <= end:
        clock.at = max(clock.at, due)
        sink.tick(datetime.fromtimestamp(clock.at))
