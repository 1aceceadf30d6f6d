"""Helpers for the tail tests: a driver on a temp folder that records every line it evaluates."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from logwatch.alerts import AlertEvent
from logwatch.drivers.fanout import FanOut
from logwatch.drivers.layout import path_identity
from logwatch.drivers.plugins import TailPlugin
from logwatch.drivers.replay import replay
from logwatch.drivers.runner import rule_error_reporter
from logwatch.drivers.tail import TailDriver
from logwatch.drivers.tail_options import TailOptions
from logwatch.engine import Engine
from logwatch.rules.loader import RuleSpec, builtin_rules_dir, load_rules
from logwatch.sinks.base import ListSink, Sink
from logwatch.sources.follow import FollowOptions
from logwatch.sources.inotify import watcher_named
from logwatch.sources.watch import WatcherFactory
from logwatch.testing import FakeClock, RecordingRule, recording_spec

BUILTIN = load_rules([builtin_rules_dir()])
SUITE_WATCHER = watcher_named(os.environ.get("LOGWATCH_WATCHER", "auto"))
"""The in-process tails' watcher: `LOGWATCH_WATCHER=watchdog pytest tests/drivers` runs them all
with watchdog's observer (the rotation test runs both in every run)."""
_SEQ = re.compile(r"seq=(\d+)")


def replayed_as(sample: Path, path: Path) -> list[AlertEvent]:
    """The alert events `replay` gives (built-in rules) for `path`, a copy of `sample`: the
    sample's own replay, once per test process, each event's source made `path` (its
    fingerprint follows). For paths that name no writer (no host, rank or node: checked),
    where the file is does not change what replay finds in it. The tests that hold tail to
    replay on every sample share that replay."""
    assert path.read_bytes() == sample.read_bytes(), f"{path} is not a copy of {sample}"
    for where in (sample, path):
        said = path_identity(str(where))
        assert (said.host, said.rank, said.local, said.node) == (None,) * 4, (
            f"{where} names a writer"
        )
    return [dataclasses.replace(event, source=str(path)) for event in _replayed(sample)]


@functools.cache
def _replayed(sample: Path) -> tuple[AlertEvent, ...]:
    return tuple(replay([str(sample)], BUILTIN).events)


def numbered(first: int, last: int, extra: str = "") -> bytes:
    """Lines `seq=first` .. `seq=last` (inclusive), each ending in a newline."""
    return "".join(f"seq={i}{extra}\n" for i in range(first, last + 1)).encode()


def seqs(texts: Sequence[str]) -> list[int]:
    """The `seq=N` numbers in texts, in order (a text without one is skipped)."""
    return [int(m.group(1)) for t in texts if (m := _SEQ.search(t))]


def wait_until(check: Callable[[], bool], timeout_s: float = 20.0) -> None:
    """Poll `check` until it holds; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        time.sleep(0.005)


class Tail:
    """A TailDriver over `folder/*.log` with a FakeClock, a recording rule and a list sink
    (behind a FanOut with `extra_sinks`, whose failures land in `status`)."""

    def __init__(
        self,
        folder: Path,
        *,
        patterns: Sequence[str] = ("*.log",),
        rules: Sequence[RuleSpec] = (),
        state: bool = True,
        clock: FakeClock | None = None,
        watcher_factory: WatcherFactory | None = SUITE_WATCHER,
        plugins: Sequence[TailPlugin] = (),
        extra_sinks: Sequence[Sink] = (),
        **option_changes: Any,
    ) -> None:
        self.folder = folder
        self.clock = clock or FakeClock()
        self.rec = RecordingRule()
        self.sink = ListSink()
        self.status: list[str] = []
        follow = FollowOptions(
            **{k: option_changes.pop(k) for k in list(option_changes) if k in _FOLLOW_FIELDS}
        )
        # No warm-up unless asked: the recording rule would see its lines (test_warmup.py)
        option_changes.setdefault("warm_up", False)
        options = TailOptions(follow=follow, **option_changes)
        engine = Engine(
            [*rules, recording_spec(self.rec)], on_error=rule_error_reporter(self.status.append)
        )
        sink: Sink = (
            FanOut([self.sink, *extra_sinks], report=self.status.append)
            if extra_sinks
            else self.sink
        )
        self.driver = TailDriver(
            [str(folder / p) for p in patterns],
            engine,
            sink,
            plugins=plugins,
            clock=self.clock,
            state_dir=folder / "state" if state else None,
            options=options,
            watcher_factory=watcher_factory,
            status=self.status.append,
        )

    def seqs(self) -> list[int]:
        """The seq numbers the engine saw, in order."""
        return seqs(self.rec.texts())

    def settle(self) -> None:
        """Let the fake wall clock run past run-crashed's quiet_after (2m) with no new line: a
        tick first sees the last lines arrive, then the silence. A traceback the log ends on is
        then decided, as replay decides it at the end of the file."""
        for seconds in (1, 180):
            self.clock.advance(seconds)
            self.driver.sync()

    def alerts(self) -> list[tuple[int, str, str]]:
        """(line, rule, status) of the emitted alerts, in order."""
        return [(e.line, e.rule, e.status) for e in self.sink.events]

    def said(self, fragment: str) -> int:
        """How many status messages contain `fragment`."""
        return sum(fragment in message for message in self.status)


_FOLLOW_FIELDS = set(FollowOptions.__dataclass_fields__)
