"""Every annotated sample replays to exactly its expected alerts, whole and in tiny chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.rules.gpu import needs_nvml
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.rules.log import WallClockRule
from tests.conftest import ROOT, expected_alerts, sample_logs

RULES = load_rules([builtin_rules_dir()])


def test_there_are_samples_for_every_builtin_rule() -> None:
    """Each built-in rule a log can show is exercised by at least one annotated sample (rules
    that need live NVML are covered by tests/test_gpu_live.py; wall-clock rules cannot fire in
    replay, tests/test_tail_rules.py drives them through `tail`)."""
    covered = {rule for log in sample_logs() for _, rule, _ in expected_alerts(log)}
    replayable = {
        spec.id
        for spec in RULES
        if not needs_nvml(spec.rule) and not isinstance(spec.rule, WallClockRule)
    }
    assert replayable <= covered


@pytest.mark.parametrize("log", sample_logs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_sample_alerts_exactly(log: Path) -> None:
    """Replaying the whole file gives exactly the annotated alerts, at their lines."""
    result = replay([str(log)], RULES)
    got = [(e.line, e.rule, e.status) for e in result.events]
    assert sorted(got) == sorted(expected_alerts(log))


@pytest.mark.parametrize("log", sample_logs(), ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize("block_bytes", [97, 4096])
def test_sample_alerts_in_chunks(log: Path, block_bytes: int) -> None:
    """Any split of the file into blocks gives the same events as the whole file."""
    whole = replay([str(log)], RULES).events
    chunked = replay([str(log)], RULES, options=ReplayOptions(block_bytes=block_bytes)).events
    assert [e.to_json() for e in chunked] == [e.to_json() for e in whole]


@pytest.mark.parametrize("log", sample_logs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_sample_through_cli_jsonl(log: Path) -> None:
    """The CLI's JSON lines carry the same alerts, as strict JSON with the contract fields."""
    result = CliRunner().invoke(cli, ["replay", str(log), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    got = [(e["line"], e["rule"], e["status"]) for e in events]
    assert sorted(got) == sorted(expected_alerts(log))
    for e in events:
        assert {
            "rule",
            "severity",
            "status",
            "source",
            "line",
            "ts",
            "step",
            "value",
            "summary",
            "labels",
        } <= set(e)
        assert e["source"] == str(log)
