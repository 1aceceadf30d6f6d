"""`ActionSink` with its clock and process runner passed in: the lifecycle rules of actions
(after, cancel, restart, when = resolved) without waiting on real time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from logwatch.actions.journal import ActionJournal
from logwatch.actions.process import RunResult
from logwatch.actions.sink import ActionSink
from logwatch.actions.spec import ActionSpec
from logwatch.alerts import Status
from tests.support.slackhelp import alert

NOW = datetime(2026, 12, 1, 12, 0, 0)


class Runner:
    """Records each command instead of running it."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, ...]] = []

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> RunResult:
        self.ran.append(tuple(argv))
        return RunResult(0, 0.1)


class Clock:
    def __init__(self) -> None:
        self.at = 1_000_000.0

    def __call__(self) -> float:
        return self.at


def open_sink(
    state: Path, spec: ActionSpec, clock: Clock, runner: Runner, said: list[str]
) -> ActionSink:
    return ActionSink(
        [spec],
        ActionJournal(state, now=clock, report=said.append),
        runner,
        pids=lambda source, line: 4242,
        env={},
        now=clock,
        report=said.append,
    )


STOP = ActionSpec(name="stop", on=("nan-loss",), run=("kill", "{pid}"), after_s=120.0)


def test_a_wait_survives_a_restart_and_runs_when_due(tmp_path: Path) -> None:
    """Stopped 1 minute into a 2 minute `after`: the next process runs it at 2 minutes."""
    clock, runner, said = Clock(), Runner(), []
    first = open_sink(tmp_path, STOP, clock, runner, said)
    first.emit(alert())
    clock.at += 60
    first.tick(NOW)
    first.close()
    assert runner.ran == []
    second = open_sink(tmp_path, STOP, clock, runner, said)
    clock.at += 59
    second.tick(NOW)
    assert runner.ran == []
    clock.at += 1
    second.tick(NOW)
    second.close()  # joins the command's thread
    assert runner.ran == [("kill", "4242")]


def test_a_resolve_after_a_restart_cancels_the_wait(tmp_path: Path) -> None:
    """The alert resolves (in the next process) before `after` ran out: nothing runs, ever."""
    clock, runner, said = Clock(), Runner(), []
    first = open_sink(tmp_path, STOP, clock, runner, said)
    first.emit(alert())
    first.close()
    second = open_sink(tmp_path, STOP, clock, runner, said)
    second.emit(alert(status=Status.RESOLVED, line=11))
    clock.at += 600
    second.tick(NOW)
    second.close()
    third = open_sink(tmp_path, STOP, clock, runner, said)
    third.tick(NOW)
    third.close()
    assert runner.ran == []
    assert any(
        "action stop: cancelled: nan-loss on run/train.log:10 resolved inside" in s for s in said
    )


def test_when_resolved_runs_on_the_recovery_only(tmp_path: Path) -> None:
    """`when = "resolved"`: the firing runs nothing, the recovery runs the command once."""
    clock, runner, said = Clock(), Runner(), []
    spec = ActionSpec(name="resume", on=("*",), run=("echo", "{rule}"), when=Status.RESOLVED)
    sink = open_sink(tmp_path, spec, clock, runner, said)
    sink.emit(alert())
    assert runner.ran == []
    sink.emit(alert(status=Status.RESOLVED, line=11))
    sink.emit(alert(status=Status.RESOLVED, line=11))  # the same resolve again: once
    sink.close()
    assert runner.ran == [("echo", "nan-loss")]


def test_max_per_hour_counts_across_restarts(tmp_path: Path) -> None:
    """Two runs, a restart, a third alert within the hour: capped; an hour later it runs."""
    clock, runner, said = Clock(), Runner(), []
    spec = ActionSpec(name="cap", on=("nan-loss",), run=("echo", "{line}"), max_per_hour=2)
    first = open_sink(tmp_path, spec, clock, runner, said)
    first.emit(alert(line=10))
    first.emit(alert(line=20))
    first.close()
    clock.at += 1800
    second = open_sink(tmp_path, spec, clock, runner, said)
    second.emit(alert(line=30))
    clock.at += 1801
    second.emit(alert(line=40))
    second.close()
    assert sorted(runner.ran) == [("echo", "10"), ("echo", "20"), ("echo", "40")]  # threads
    assert sum("max_per_hour = 2 reached" in line for line in said) == 1


def test_a_wait_follows_its_alert_to_the_rotated_name(tmp_path: Path) -> None:
    """The log rotates while an action waits; the resolve comes under the new name and still
    cancels it."""
    clock, runner, said = Clock(), Runner(), []
    sink = open_sink(tmp_path, STOP, clock, runner, said)
    sink.emit(alert(source="train.log"))
    sink.rename_source("train.log", "train.log.1")
    sink.emit(alert(source="train.log.1", status=Status.RESOLVED, line=11))
    clock.at += 600
    sink.tick(NOW)
    sink.close()
    assert runner.ran == []


def test_run_once_runs_a_waiting_action_now_and_once_across_a_restart(tmp_path: Path) -> None:
    """A Slack Stop run press (`run_once`) on an alert whose action waits for its `after`: it
    runs now, `then` gets the outcome, the wait does not run it again when due, and neither a
    second press nor a press after a restart runs it again (the journal's at-most-once)."""
    clock, runner, said = Clock(), Runner(), []
    sink = open_sink(tmp_path, STOP, clock, runner, said)
    event = alert()
    sink.emit(event)
    outcomes: list[str] = []
    assert sink.run_once("stop", event, lambda o: outcomes.append(o.outcome)) is None
    sink.close()  # joins the command's thread
    assert runner.ran == [("kill", "4242")] and outcomes == ["ok"]
    clock.at += 121
    sink.tick(NOW)
    assert sink.run_once("stop", event, outcomes.append) == (
        "action stop already ran for nan-loss on run/train.log:10 (at most once per alert)"
    )
    again = open_sink(tmp_path, STOP, clock, runner, said)
    assert "already ran" in str(again.run_once("stop", event, outcomes.append))
    assert (
        again.run_once("nope", event, outcomes.append) == "no [[action]] named 'nope' in the config"
    )
    again.close()
    assert runner.ran == [("kill", "4242")] and outcomes == ["ok"]
