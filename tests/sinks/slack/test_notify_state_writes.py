"""The Slack notifier's state file when it cannot be written: said once, retried, not fatal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from logwatch.config import AlertsConfig
from logwatch.sinks.slack.notifier import Notifier
from logwatch.testing import FakeClock
from tests.support.slackhelp import T0, ListOutbox, alert


def test_unwritable_notify_state_is_said_once_and_retried(tmp_path: Path) -> None:
    """With its state directory replaced by a file (a real write failure), the notifier keeps
    taking events and ticking, says so once with the fix, and saves once it can again."""
    folder = tmp_path / "slack"
    folder.mkdir()
    said: list[str] = []
    clock = FakeClock(T0)
    notifier = Notifier(
        ListOutbox(),
        channel="C0ALERTS01",
        settings=AlertsConfig(group_wait_s=0, repeat_interval_s=3600),
        clock=clock,
        state_dir=folder,
        report=said.append,
    )
    shutil.rmtree(folder)
    folder.write_text("not a directory")
    for line in range(1, 6):
        notifier.emit(alert(line=line))
        clock.advance(1)
        notifier.tick()
    failures = [m for m in said if "cannot write" in m]
    assert len(failures) == 1 and "alerts still print" in failures[0], said
    folder.unlink()
    notifier.tick()
    assert json.loads((folder / "notify-state.json").read_text())["firing"]
    assert any("work again" in m for m in said)
