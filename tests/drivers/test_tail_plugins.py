"""The tail driver's plugins and its one sink: every step of the plugin protocol, ticks per round."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.drivers.plugins import Plugin
from logwatch.sinks.base import ListSink
from logwatch.testing import running
from tests.support.slackhelp import alert
from tests.support.tailkit import BUILTIN, Tail

NAN = b"step 1 | loss nan\nstep 2 | loss 1.0\n"


class Recorder(Plugin):
    """Records what the driver hands it; keeps a counter as checkpointed state."""

    def __init__(self, name: str = "rec", log: list[str] | None = None) -> None:
        self.name = name
        self.log = log if log is not None else []
        self.lines = 0
        self.restored: Any = None

    def observe(self, frame: pl.DataFrame) -> None:
        self.lines += frame.height

    def start_events(self) -> list[AlertEvent]:
        return [alert("plugin-started", source="plugin")]

    def export_state(self) -> Any:
        return {"lines": self.lines}

    def import_state(self, data: Any) -> None:
        self.restored = data

    def close(self) -> None:
        self.log.append(f"close {self.name}")


class Renamer(Plugin):
    """Rewrites nan-loss summaries and drops resolved events."""

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        if event.status == "resolved":
            return None
        return replace(event, summary="seen by the plugin")


class ClosingSink(ListSink):
    """A list sink that notes when it is closed and records its ticks."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log, self.ticks = log, []

    def tick(self, now: datetime) -> None:
        self.ticks.append(now)

    def close(self) -> None:
        self.log.append("close sink")


def test_plugins_see_frames_filter_events_and_speak_after_catch_up(tmp_path: Path) -> None:
    """observe sees every line, filters run in order (one drops, one rewrites), the start events
    come after the caught-up history's alerts."""
    (tmp_path / "a.log").write_bytes(NAN)
    rec = Recorder()
    tail = Tail(tmp_path, rules=BUILTIN, plugins=[rec, Renamer()], start="beginning")
    with running(tail.driver) as driver:
        driver.sync()
    assert rec.lines == 2
    assert [(e.rule, e.status) for e in tail.sink.events] == [
        ("nan-loss", "firing"),
        ("plugin-started", "firing"),
    ]
    assert {e.summary for e in tail.sink.events} == {"seen by the plugin"}


def test_plugin_state_is_checkpointed_under_its_name_and_restored(tmp_path: Path) -> None:
    """export_state lands in the checkpoint's extras under the plugin's name (None: no key), and
    a restarted driver hands it back to the plugin of that name."""
    (tmp_path / "a.log").write_bytes(NAN)
    tail = Tail(tmp_path, plugins=[Recorder("rec"), Plugin()])
    with running(tail.driver) as driver:
        driver.sync()
    extras = json.loads((tmp_path / "state" / "checkpoint.json").read_text())["extras"]
    assert set(extras) == {"rec", "placement"}  # the driver's own placement, and the plugin's
    assert extras["rec"] == {"lines": 2}
    again = Recorder("rec")
    with running(Tail(tmp_path, plugins=[again]).driver) as driver:
        driver.sync()
    assert again.restored == {"lines": 2}


def test_the_sink_is_ticked_each_round_and_closed_before_the_plugins(tmp_path: Path) -> None:
    """Every round ticks the sink with the driver clock's wall time; close closes the sink, then
    each plugin once."""
    log: list[str] = []
    tail = Tail(tmp_path, plugins=[Recorder("one", log), Recorder("two", log)])
    sink = ClosingSink(log)
    tail.driver.sink = sink
    tail.driver.open()
    start = tail.clock.now()
    tail.driver.poll_once()
    tail.clock.advance(5)
    tail.driver.poll_once()
    tail.driver.close()
    tail.driver.close()
    assert sink.ticks == [start, start + timedelta(seconds=5)]
    assert log == ["close sink", "close one", "close two"]
