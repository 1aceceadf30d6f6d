"""Why an alert ended: a recovery, or a restart of its run (which fixed nothing)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

import logwatch
from logwatch.alerts import RESOLVED, AlertEvent, EndReason, event_from_json
from logwatch.cli import cli
from logwatch.config import AlertsConfig
from logwatch.engine.lifecycle import Lifecycle
from logwatch.sinks.render import timeline_line
from logwatch.sinks.slack.notifier import Notifier
from logwatch.testing import FakeClock
from tests.support.paths import ROOT
from tests.support.slackhelp import T0, ListOutbox, alert

RESTARTED_LOG = ROOT / "samples" / "dflash" / "train_restarted.log"
NAN_LOG = ROOT / "samples" / "dflash" / "train_nan.log"


def _firing(event: AlertEvent) -> Lifecycle:
    """A lifecycle with `event` firing."""
    cycle = Lifecycle(lambda event, spec, row: event.summary)
    cycle.import_json([event.to_json()])
    return cycle


def _replay(*args: str) -> str:
    result = CliRunner().invoke(cli, ["replay", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_jsonl_says_restarted_for_a_restart_and_recovered_for_a_recovery() -> None:
    """replay's JSONL: `reason` right after `status`; restarted / recovered / null (firing)."""
    events = [
        json.loads(line)
        for line in _replay("--format", "jsonl", str(RESTARTED_LOG), str(NAN_LOG)).splitlines()
    ]
    assert all(
        list(e)[:3] == ["rule", "severity", "status"] and list(e)[3] == "reason" for e in events
    )
    restarted = [(e["line"], e["rule"]) for e in events if e["reason"] == "restarted"]
    assert restarted == [(14, "cuda-oom")]
    firing = {e["reason"] for e in events if e["status"] == "firing"}
    recovered = {e["reason"] for e in events if e["status"] == "resolved" and e["line"] != 14}
    assert firing == {None} and recovered == {"recovered"}


def test_text_timeline_shows_a_restart_as_ended_not_ok() -> None:
    """The text timeline marks the alert the restart ended `ENDED (run restarted)`, not `OK`."""
    lines = _replay(str(RESTARTED_LOG)).splitlines()
    ended = [line for line in lines if ":14  " in line]
    assert len(ended) == 1
    assert "  ENDED (run restarted)  cuda-oom" in ended[0] and "  OK  " not in ended[0]


def test_end_all_gives_restarted_and_a_resolve_recovered() -> None:
    """Lifecycle.end_all's events carry reason restarted; an ordinary resolve, recovered."""
    fired = alert()
    assert fired.reason is None and fired.to_json()["reason"] is None
    [ended] = _firing(fired).end_all(line=20, ts=T0, why="the run restarted at line 20")
    assert ended.reason == EndReason.RESTARTED and ended.restarted
    assert alert(status=RESOLVED).reason == EndReason.RECOVERED


def test_events_saved_before_reasons_existed_still_load() -> None:
    """An event from an old checkpoint or spool (no `reason` key) loads; a resolve as recovered."""
    old = alert(status=RESOLVED).to_json()
    del old["reason"]
    assert event_from_json(old).reason == EndReason.RECOVERED
    again: AlertEvent = event_from_json(alert(status=RESOLVED).to_json())
    assert again.to_json() == alert(status=RESOLVED).to_json()


def test_timeline_line_for_each_reason() -> None:
    """OK for a recovery, ENDED (run restarted) for a restart."""
    assert "  OK    nan-loss" in timeline_line(alert(status=RESOLVED))
    [restart] = _firing(alert()).end_all(line=3, ts=None, why="x")
    assert "ENDED (run restarted)\x1b[0m  nan-loss" in timeline_line(restart, colour=True)


def test_slack_shows_a_group_ended_by_a_restart_as_ended_not_resolved(tmp_path: Path) -> None:
    """Slack: a group ended by a restart is edited to ENDED (run restarted), no ✅ RESOLVED."""
    clock = FakeClock(T0)
    outbox = ListOutbox()
    settings = AlertsConfig(group_wait_s=0, repeat_interval_s=3600)
    notifier = Notifier(outbox, channel="C0ALERTS01", settings=settings, clock=clock)
    fired = alert()
    notifier.emit(fired)
    notifier.tick()
    [ended] = _firing(fired).end_all(line=30, ts=T0, why="the run restarted at line 30")
    notifier.emit(ended)
    texts = [job.text for job in outbox.jobs]
    assert outbox.kinds() == ["post", "update", "reply"]
    assert "ENDED (run restarted) nan-loss" in texts[1] and "RESOLVED" not in texts[1]
    assert "ENDED (run restarted)" in texts[2] and "✅" not in texts[2]


def test_events_carry_the_run_id_each_run_announced(tmp_path: Path) -> None:
    """Each alert names the run whose `run start:` line preceded it; the restart's ENDED event
    belongs to the old run, the new run's alerts to the new one, and JSONL has the field."""
    log = tmp_path / "train.log"
    log.write_text(
        "2026-11-28 14:00:00,000 INFO [train] run start: run_id=first pid=1 gpus=8\n"
        "2026-11-28 14:00:01,000 INFO [train] step 1/10 | loss nan | grad_norm 1.0\n"
        "2026-11-28 14:00:02,000 INFO [train] run start: run_id=second pid=2 gpus=8\n"
        "2026-11-28 14:00:03,000 INFO [train] step 1/10 | loss nan | grad_norm 1.0\n"
    )
    result = logwatch.replay(log)
    got = [(e.rule, e.status, e.line, e.run) for e in result.events]
    assert got == [
        ("nan-loss", "firing", 2, "first"),
        ("nan-loss", "resolved", 3, "first"),
        ("nan-loss", "firing", 4, "second"),
    ]
    assert result.events_frame().get_column("run").to_list() == ["first", "first", "second"]
    assert json.loads(result.events[2].to_jsonl())["run"] == "second"
