"""Every annotated sample and every built-in pack's own tests (`logwatch test rules/`) pass
`logwatch test` (whole and in 1- and 4096-byte blocks), and together they cover each built-in
rule firing and resolving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.rules.base import WallClockRule
from logwatch.rules.gpu import needs_nvml
from logwatch.rules.loader import builtin_rules_dir, load_rules
from logwatch.ruletest import load_test_file
from tests.support.paths import ROOT, SAMPLES
from tests.support.samples import expected_alerts, sample_logs

RULES = load_rules([builtin_rules_dir()])
RULES_DIR = ROOT / "rules"
PACK_TESTS = sorted(RULES_DIR.glob("*.test.toml"))
SAMPLE_TESTS = sorted(SAMPLES.rglob("*.test.toml"))


def test_logwatch_test_rules_runs_every_packs_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """`logwatch test rules/`, from the checkout's root, runs every test of every built-in
    pack's `PACK.test.toml` (and nothing else) and all pass: exit 0."""
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["test", "rules/"])
    count = sum(len(load_test_file(path).tests) for path in PACK_TESTS)
    assert (result.exit_code, result.output) == (0, f"{count} tests, 0 failed\n")


def test_each_builtin_pack_has_its_tests_beside_it() -> None:
    """`rules/` holds the built-in packs, each with its `logwatch test` file beside it (a pack
    whose rules only `tail` can fire, live.toml, is driven by tests/drivers/test_tail_rules.py),
    and they are the packs the loader finds in a checkout."""
    packs = sorted(p for p in RULES_DIR.glob("*.toml") if not p.name.endswith(".test.toml"))
    assert builtin_rules_dir() == RULES_DIR
    assert [p.name for p in packs] == sorted(
        {spec.origin.rsplit(":", 1)[0].rsplit("/", 1)[-1] for spec in RULES}
    )
    assert sorted(p.name.removesuffix(".test.toml") for p in PACK_TESTS) == sorted(
        p.stem for p in packs if p.name != "live.toml"
    )


@pytest.mark.parametrize("tests", SAMPLE_TESTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_logwatch_test_passes(tests: Path) -> None:
    """`logwatch test` on the file exits 0: every expected alert at its line, nothing else of the
    rules it names (of any rule for the strict sample tests), the same in every block size."""
    result = CliRunner().invoke(cli, ["test", str(tests)])
    assert result.exit_code == 0, result.output
    assert result.output.endswith(" failed\n") and ", 0 failed" in result.output


def test_the_tests_cover_every_builtin_rule_firing_and_resolving() -> None:
    """Each built-in rule a log can show fires and resolves in some test (rules that need live
    NVML are covered by tests/test_gpu_live.py; wall-clock rules cannot fire in replay,
    tests/drivers/test_tail_rules.py drives them through `tail`)."""
    seen = {
        (e.rule, str(e.status))
        for path in PACK_TESTS + SAMPLE_TESTS
        for test in load_test_file(path).tests
        for e in test.expect
    }
    replayable = {
        spec.id
        for spec in RULES
        if not needs_nvml(spec.rule) and not isinstance(spec.rule, WallClockRule)
    }
    missing = sorted(
        f"{rule} {status}"
        for rule in replayable
        for status in ("firing", "resolved")
        if (rule, status) not in seen
    )
    assert missing == [], f"add a [[test]] to a {RULES_DIR}/PACK.test.toml for: {missing}"


def test_every_sample_is_a_strict_test_with_blocks() -> None:
    """Each sample log has its test file (no old `.expect` left: `python samples/sample_tests.py`
    converts one), strict and replayed in 1-byte blocks too."""
    assert sorted(SAMPLES.rglob("*.expect")) == []
    assert {p for p in SAMPLES.rglob("*.log")} == set(sample_logs())
    for path in SAMPLE_TESTS:
        (test,) = load_test_file(path).tests
        assert test.strict and 1 in test.blocks, path


@pytest.mark.parametrize("log", sample_logs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_sample_through_cli_jsonl(log: Path) -> None:
    """The CLI's JSON lines carry the same alerts, as strict JSON with the contract fields."""
    result = CliRunner().invoke(cli, ["replay", str(log), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    # A pasted multi-rank log that failed as a crowd also gets the fleet's verdict (at most one);
    # tests/fleet/test_cli_fleet.py checks those.
    verdicts = [e for e in events if e["rule"] == "root-cause"]
    assert len(verdicts) <= 1
    events = [e for e in events if e["rule"] != "root-cause"]
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
