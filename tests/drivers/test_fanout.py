"""FanOut: every sink gets every event; a failing sink is reported, never fatal (but a broken
pipe still stops)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from logwatch.drivers.fanout import FanOut
from logwatch.sinks.base import ListSink
from tests.support.slackhelp import T0, alert


class Failing:
    """A sink whose every step raises `exc`."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
        self.closed = False

    def emit(self, event: object) -> None:
        raise self.exc

    def tick(self, now: datetime) -> None:
        raise self.exc

    def close(self) -> None:
        self.closed = True
        raise self.exc


def test_a_failing_sink_is_reported_and_the_others_still_get_the_event() -> None:
    """Each failure is said (which sink, which alert, why); a repeat carries its count; the sinks
    before and after the failing one get every event."""
    said: list[str] = []
    first, last = ListSink(), ListSink()
    fan = FanOut([first, Failing(OSError("destination unreachable")), last], report=said.append)
    events = [alert(line=1), alert(status="resolved", line=2), alert(line=3)]
    for event in events:
        fan.emit(event)
    assert first.events == events and last.events == events
    assert said[0] == (
        "sink Failing did not take nan-loss firing (run/train.log:1): "
        "OSError: destination unreachable"
    )
    assert said[1].startswith("sink Failing did not take nan-loss resolved (run/train.log:2)")
    assert said[1].endswith("(failure 2 of this kind)")
    assert said[2].endswith("(failure 3 of this kind)")


def test_ticks_and_closes_reach_every_sink_despite_a_failing_one() -> None:
    """A failing tick or close is said; every other sink is still ticked and closed."""
    said: list[str] = []
    ticks: list[datetime] = []

    class Ticked(ListSink):
        def tick(self, now: datetime) -> None:
            ticks.append(now)

    broken = Failing(ValueError("bad state"))
    fan = FanOut([broken, Ticked()], report=said.append)
    fan.tick(T0)
    fan.close()
    assert ticks == [T0] and broken.closed
    assert said == [
        "sink Failing failed a periodic step: ValueError: bad state",
        "sink Failing did not close cleanly: ValueError: bad state",
    ]


def test_a_broken_pipe_propagates() -> None:
    """BrokenPipeError (stdout's reader left) is not swallowed, on emit nor on close; close
    still closes the other sinks first."""
    said: list[str] = []
    after = Failing(OSError("x"))
    fan = FanOut([Failing(BrokenPipeError()), after], report=said.append)
    with pytest.raises(BrokenPipeError):
        fan.emit(alert())
    with pytest.raises(BrokenPipeError):
        fan.close()
    assert after.closed


def test_a_tick_that_keeps_failing_is_said_once_a_minute_and_when_it_works_again() -> None:
    """A sink whose tick fails every round (a second apart) for 2m05s: the first failure, one
    summary a minute, and one line when it works again; not 126 lines."""
    said: list[str] = []

    class Flaky(ListSink):
        broken = True

        def tick(self, now: datetime) -> None:
            if self.broken:
                raise OSError("spool disk full")

    flaky = Flaky()
    fan = FanOut([flaky], report=said.append)
    for second in range(126):
        fan.tick(T0 + timedelta(seconds=second))
    flaky.broken = False
    fan.tick(T0 + timedelta(seconds=126))
    fan.tick(T0 + timedelta(seconds=127))
    assert said == [
        "sink Flaky failed a periodic step: OSError: spool disk full",
        "sink Flaky's periodic step: still failing, 61 times in 1m00s; OSError: spool disk full",
        "sink Flaky's periodic step: still failing, 121 times in 2m00s; OSError: spool disk full",
        "sink Flaky's periodic step works again (it failed 126 times in 2m06s)",
    ]
