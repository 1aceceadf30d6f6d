"""Garbage collection while `tail` runs: between rounds, on CPython's own schedule, never in a
round; the process's collector as it was once `run()` returns."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from logwatch.alerts import AlertEvent
from logwatch.drivers.gc_rounds import RoundCollector, due_generation
from logwatch.drivers.plugins import DriverView, Plugin
from tests.support.tailkit import Tail, wait_until


@pytest.mark.parametrize(
    ("counts", "thresholds", "expected"),
    [
        ((700, 0, 0), (700, 10, 10), None),  # not over the young threshold yet
        ((701, 0, 0), (700, 10, 10), 0),
        ((701, 10, 10), (700, 10, 10), 0),  # at, not over, the older thresholds
        ((701, 11, 0), (700, 10, 10), 1),
        ((701, 11, 11), (700, 10, 10), 2),
        ((701, 3, 11), (700, 10, 10), 2),  # the oldest generation over its threshold wins
        ((10**6, 50, 50), (0, 10, 10), None),  # gc.set_threshold(0): collection is off
    ],
)
def test_due_generation_is_cpythons_choice(
    counts: tuple[int, int, int], thresholds: tuple[int, int, int], expected: int | None
) -> None:
    """The generation collected is the one CPython's collector picks at those counts."""
    assert due_generation(counts, thresholds) == expected


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The process as `logwatch tail` starts it, nothing frozen (tests/conftest.py freezes what
    the suite's collection made): the collector freezes start-up's objects itself."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()


class _Node:
    """A container object in a reference cycle (only the collector frees it)."""

    def __init__(self) -> None:
        self.me = self


class _CycleMaker(Plugin):
    """Makes garbage cycles in every round and notes whether automatic collection was on."""

    def __init__(self) -> None:
        self.auto_in_round: list[bool] = []
        self.first: weakref.ref[_Node] | None = None

    def round(self, driver: DriverView) -> Sequence[AlertEvent]:
        self.auto_in_round.append(gc.isenabled())
        nodes = [_Node() for _ in range(2 * gc.get_threshold()[0])]
        if self.first is None:
            self.first = weakref.ref(nodes[0])
        return []


@pytest.mark.usefixtures("unfrozen")
def test_run_collects_garbage_between_rounds_not_in_them(tmp_path: Path) -> None:
    """While `run()` loops no collection can start inside a round (automatic collection is off),
    the cycles rounds leave are still collected, and afterwards the collector is on again with
    nothing left frozen."""
    assert gc.isenabled() and not gc.get_freeze_count()
    plugin = _CycleMaker()
    tail = Tail(tmp_path, state=False, plugins=[plugin])
    tail.driver.open()
    runner = threading.Thread(target=tail.driver.run, daemon=True)
    runner.start()
    try:
        for _ in range(3):
            tail.driver.sync()
        wait_until(lambda: plugin.first is not None and plugin.first() is None)
    finally:
        tail.driver.stop()
        runner.join(timeout=10)
        tail.driver.close(checkpoint=False)
    assert not runner.is_alive()
    assert plugin.auto_in_round and not any(plugin.auto_in_round)
    assert gc.isenabled() and not gc.get_freeze_count()


@pytest.mark.usefixtures("unfrozen")
def test_a_process_that_manages_collection_itself_is_left_alone() -> None:
    """With automatic collection off already, the collector neither turns it on nor collects."""
    collected: list[Any] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collected.append(info["generation"])

    gc.disable()
    gc.callbacks.append(note)
    try:
        with RoundCollector() as collector:
            _ = [_Node() for _ in range(3 * gc.get_threshold()[0])]
            collector.between_rounds()
        assert not gc.isenabled()
        assert collected == []
        assert not gc.get_freeze_count()
    finally:
        gc.callbacks.remove(note)
        gc.enable()
