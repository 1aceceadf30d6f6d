"""`tail --exit-on`: stop following once an alert of a given severity (or worse) or rule fired.

`ExitOn` is a sink placed last behind the others: the terminal has printed the alert and the
config sinks have taken it when it asks the driver to stop; the driver's close then flushes them
(Slack's waiting group is spooled and drained, what is not delivered stays journaled)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from logwatch.alerts import FIRING, AlertEvent, Severity

EXIT_ON_ALERT = 3
"""The exit status of `tail --exit-on` once a matching alert fired (1 and 2 are errors)."""


@dataclass(frozen=True, slots=True)
class ExitCondition:
    """What ends `tail --exit-on`: a firing alert at least this severe, or of one of these rules."""

    min_severity: Severity | None = None
    rules: frozenset[str] = frozenset()

    def matches(self, event: AlertEvent) -> bool:
        """Whether this firing event ends the run."""
        if event.status != FIRING:
            return False
        if self.min_severity is not None and event.severity >= self.min_severity:
            return True
        return event.rule in self.rules


def exit_condition(values: Sequence[str], known_rules: Iterable[str]) -> ExitCondition:
    """`--exit-on` values (severities or rule ids) as one condition; ValueError naming an
    unknown one."""
    known = set(known_rules)
    severities: list[Severity] = []
    rules: set[str] = set()
    for value in values:
        try:
            severities.append(Severity.parse(value))
            continue
        except ValueError:
            pass
        if value not in known:
            levels = ", ".join(s.label for s in Severity)
            raise ValueError(
                f"--exit-on {value!r} is neither a severity ({levels}) nor a loaded rule id "
                f"(see `logwatch rules`)"
            )
        rules.add(value)
    return ExitCondition(min(severities) if severities else None, frozenset(rules))


class ExitOn:
    """A sink that calls `stop` at the first event `condition` matches, and remembers it."""

    def __init__(self, condition: ExitCondition, stop: Callable[[], None]) -> None:
        self.condition, self._stop = condition, stop
        self.matched: AlertEvent | None = None

    def emit(self, event: AlertEvent) -> None:
        if self.matched is None and self.condition.matches(event):
            self.matched = event
            self._stop()

    def tick(self, now: datetime) -> None:
        """Nothing waits on time here."""

    def rename_source(self, old: str, new: str) -> None:
        """Nothing is kept by source."""

    def close(self) -> None:
        """Nothing to release."""
