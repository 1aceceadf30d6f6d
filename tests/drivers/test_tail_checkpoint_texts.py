"""A checkpoint exports again only the sources a round touched, and still holds every source's
state exactly as the engine has it (the texts it reuses are never stale)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from logwatch.drivers.checkpoint import StateDir
from logwatch.rules.base import WallClockRule
from tests.support.tailkit import BUILTIN, Tail

UNCLOCKED = [spec for spec in BUILTIN if not isinstance(spec.rule, WallClockRule)]
"""The built-in rules less the wall-clock ones: no tick touches a source that got lines."""
STEP = "2026-11-28 14:02:{s:02d},199 INFO [train] step {n}/200000 | loss {loss} | lr 2.40e-05\n"


def _append(path: Path, first: int, count: int, loss: str = "2.1") -> None:
    with path.open("a") as out:
        out.writelines(STEP.format(s=n % 60, n=n, loss=loss) for n in range(first, first + count))


def _saved(tail: Tail) -> dict[str, Any]:
    """The sources' states as the state directory holds them now (base and delta lines)."""
    loaded = StateDir(tail.folder / "state", print).load()
    assert loaded is not None
    return dict(loaded.sources)


def _live(tail: Tail) -> dict[str, Any]:
    """Every followed source's state as the engine would export it now."""
    engine = tail.driver.engine
    names = {f.source for f in tail.driver.files.followers.values()}
    return {name: json.loads(json.dumps(engine.export_state(name))) for name in names}


def _round(tail: Tail, seconds: float = 1.5) -> None:
    tail.clock.advance(seconds)
    tail.driver.poll_once()


@pytest.mark.parametrize("clocked", [True, False], ids=["builtin", "no-wallclock-rules"])
def test_the_checkpoint_equals_a_fresh_export_through_lines_ticks_alerts_and_truncation(
    tmp_path: Path, clocked: bool
) -> None:
    """Rounds with lines in one file or two (parsed and stepped together), quiet ticks, a NaN
    alert, a stall that fires on a tick, a truncated file: after each, the saved states equal
    the engine's own export (with the built-in rules, and without their wall-clock ones, where
    only the lines mark a source)."""
    logs = [tmp_path / f"rank{i}.log" for i in range(4)]
    for log in logs:
        _append(log, 1, 3)
    tail = Tail(tmp_path, rules=BUILTIN if clocked else UNCLOCKED, watcher_factory=None)
    tail.driver.open()
    try:
        steps = [
            lambda: _append(logs[0], 10, 5),
            lambda: None,  # a quiet round: ticks only
            lambda: _append(logs[1], 10, 2, loss="nan"),
            lambda: _append(logs[2], 10, 1),
            lambda: tail.clock.advance(900),  # long silence: log-stalled fires on a tick
            lambda: logs[3].write_text(STEP.format(s=1, n=1, loss="2.0")),  # truncated
            lambda: _append(logs[0], 20, 3),
            lambda: (_append(logs[1], 30, 2), _append(logs[2], 30, 4)),  # parsed together
        ]
        for step in steps:
            step()
            _round(tail)
            assert _saved(tail) == _live(tail)
        assert any(e.rule == "log-stalled" for e in tail.sink.events) == clocked
        assert any(e.rule == "nan-loss" for e in tail.sink.events)
    finally:
        tail.driver.close()


def test_a_round_exports_only_the_sources_it_touched(tmp_path: Path) -> None:
    """Once every file is settled, a round where one of five files gets a line exports that
    source's state only; the other four keep the text of the checkpoint before."""
    logs = [tmp_path / f"rank{i}.log" for i in range(5)]
    for log in logs:
        _append(log, 1, 3)
    tail = Tail(tmp_path, rules=BUILTIN, watcher_factory=None)
    engine = tail.driver.engine
    exported: list[str] = []
    export = engine.export_state

    def counted(source: str) -> dict[str, Any]:
        exported.append(source)
        return export(source)

    engine.export_state = counted  # type: ignore[method-assign]  # counts the calls
    tail.driver.open()
    try:
        for log in logs:
            _append(log, 10, 2)
        for _ in range(3):  # lines, then quiet ticks (the first after lines: `arrived`)
            _round(tail)
        exported.clear()
        _append(logs[2], 20, 1)
        _round(tail)
        assert exported == [str(logs[2])]
        assert _saved(tail) == _live(tail)
    finally:
        tail.driver.close()
