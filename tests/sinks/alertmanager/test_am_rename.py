"""The Alertmanager sink follows a renamed source, the rule's own labels included, across a
restart (alertmanager.json)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from logwatch.cluster_config import AlertmanagerConfig
from logwatch.sinks.alertmanager.payload import Identity
from logwatch.sinks.alertmanager.sink import AlertmanagerSink
from tests.support.slackhelp import alert


def sink(state: Path) -> AlertmanagerSink:
    """A sink with no peers (nothing posted), its state in `state`."""
    now = datetime(2026, 11, 28, 14, 0, tzinfo=UTC)
    return AlertmanagerSink(
        AlertmanagerConfig(urls=()), Identity(host="h1"), state_file=state, now=lambda: now
    )


def test_a_labelled_alert_resolves_under_its_new_name_after_a_restart(tmp_path: Path) -> None:
    """A firing alert with rule labels, its source renamed, logwatch restarted: the resolve
    under the new name ends the moved alert; the old-labelled one ended at the rename."""
    state = tmp_path / "alertmanager.json"
    fired = replace(alert(source="run/train.log"), labels={"gpu": "3"})
    first = sink(state)
    first.emit(fired)
    first.rename_source("run/train.log", "run/train.log.1")
    first.close()
    second = sink(state)
    second.emit(replace(fired, source="run/train.log.1", status="resolved", line=11))
    saved = json.loads(state.read_text())
    by_source = {a["labels"]["source"]: a for a in saved.values()}
    assert sorted(by_source) == ["run/train.log", "run/train.log.1"]
    assert all(a["ends_at"] is not None for a in saved.values())  # nothing left firing
    assert by_source["run/train.log"]["annotations"]["renamed_to"] == "run/train.log.1"
    assert by_source["run/train.log.1"]["labels"]["gpu"] == "3"
