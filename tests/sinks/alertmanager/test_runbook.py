"""A rule's `runbook_url`: checked at load, carried by its events, Alertmanager's annotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import logwatch
from logwatch.errors import RulesError
from logwatch.sinks.alertmanager.payload import alert_annotations

PACK = """[[rule]]
id = "loader-crash"
type = "match"
severity = "critical"
pattern = 'DataLoader worker .* is killed'
summary = "a data-loader worker was killed (line {line})"
fix = "Lower num_workers."
runbook_url = "https://wiki.example.com/runbooks/loader-crash"
"""


def test_runbook_url_reaches_the_event_jsonl_and_the_alertmanager_annotation(
    tmp_path: Path,
) -> None:
    """The pack's runbook_url is on every event of the rule, in JSONL and in the annotations
    logwatch posts; a rule without one posts no runbook_url."""
    pack = tmp_path / "mine.toml"
    pack.write_text(PACK)
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.0\nDataLoader worker (pid 42) is killed by signal: Killed.\n")
    result = logwatch.replay(log, rules=logwatch.load_rules([pack]))
    [event] = [e for e in result.events if e.rule == "loader-crash"]
    assert event.runbook_url == "https://wiki.example.com/runbooks/loader-crash"
    assert json.loads(event.to_jsonl())["runbook_url"] == event.runbook_url
    assert alert_annotations(event)["runbook_url"] == event.runbook_url
    others = [e for e in result.events if e.rule != "loader-crash"]  # host-oom: the same line
    assert others and all("runbook_url" not in alert_annotations(e) for e in others)


def test_a_runbook_url_that_is_no_url_is_a_file_line_error(tmp_path: Path) -> None:
    """`runbook_url = "see wiki"` is refused at load, naming the pack and the key."""
    pack = tmp_path / "mine.toml"
    pack.write_text(PACK.replace("https://wiki.example.com/runbooks/loader-crash", "see wiki"))
    with pytest.raises(RulesError, match=r"mine\.toml:\d+: .*runbook_url 'see wiki'"):
        logwatch.load_rules([pack])
