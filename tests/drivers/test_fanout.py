"""FanOut: every sink gets every event; a failing sink is reported, never fatal (but a broken
pipe still stops)."""

from __future__ import annotations

from datetime import datetime

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
