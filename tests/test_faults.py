"""`logwatch.faults.RepeatedFaults`: an error that repeats is said when it starts, summarised at
most once a minute while it lasts, and said when it ends."""

from __future__ import annotations

from logwatch.faults import Episode, RepeatedFaults
from logwatch.testing import FakeClock


def ended(episode: Episode, now_s: float) -> str:
    return (
        f"{episode.key}: works again after {episode.failures} failures in {episode.lasted(now_s)}"
    )


def test_said_at_start_summarised_once_a_minute_said_at_end() -> None:
    """14 failures 11 s apart give one start line, a summary a minute (not one per failure) and
    one end line."""
    clock = FakeClock()
    said: list[str] = []
    faults = RepeatedFaults(said.append, clock=clock.monotonic)
    for _ in range(14):
        faults.failed("slack", "slack: down; retrying", detail="HTTP 502")
        clock.advance(11)
    assert faults.recovered("slack", ended) is not None
    assert said == [
        "slack: down; retrying",
        "slack: still failing, 7 times in 1m06s; HTTP 502",
        "slack: still failing, 13 times in 2m12s; HTTP 502",
        "slack: works again after 14 failures in 2m34s",
    ]


def test_keys_are_apart_and_a_recovery_without_failure_says_nothing() -> None:
    """Each key has its own episode; `recovered` of a key that was not failing is silent, and a
    new failure after the end starts a new episode (said again)."""
    clock = FakeClock()
    said: list[str] = []
    faults = RepeatedFaults(said.append, clock=clock.monotonic)
    assert faults.recovered("a.log", ended) is None
    assert faults.failed("a.log", "a.log: cannot open")
    assert faults.failed("b.log", "b.log: cannot open")
    assert not faults.failed("a.log", "a.log: cannot open")
    faults.recovered("a.log", ended)
    assert faults.failing("a.log") is None and faults.failing("b.log") is not None
    assert faults.failed("a.log", "a.log: cannot open")
    assert said == [
        "a.log: cannot open",
        "b.log: cannot open",
        "a.log: works again after 2 failures in 0s",
        "a.log: cannot open",
    ]
