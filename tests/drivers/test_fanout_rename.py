"""FanOut passes a renamed source on to every sink; one that fails to follow it is said."""

from __future__ import annotations

from logwatch.drivers.fanout import FanOut
from logwatch.sinks.base import ListSink
from tests.support.slackhelp import alert


class Renames(ListSink):
    """Keeps the renames it is told of."""

    def __init__(self) -> None:
        super().__init__()
        self.renames: list[tuple[str, str]] = []

    def rename_source(self, old: str, new: str) -> None:
        self.renames.append((old, new))


class RefusesRenames(ListSink):
    """A sink that cannot re-key what it holds."""

    def rename_source(self, old: str, new: str) -> None:
        raise OSError("state file read-only")


def test_every_sink_hears_a_rename_even_after_one_that_fails() -> None:
    """The sinks before and after a failing one are told; the failure names sink, both names
    and why."""
    said: list[str] = []
    first, last = Renames(), Renames()
    fan = FanOut([first, RefusesRenames(), last], report=said.append)
    fan.emit(alert(source="run/train.log"))
    fan.rename_source("run/train.log", "run/train.log.1")
    assert first.renames == last.renames == [("run/train.log", "run/train.log.1")]
    assert said == [
        "sink RefusesRenames did not move run/train.log's alerts to run/train.log.1: "
        "OSError: state file read-only"
    ]
