"""The annotated sample logs and the alerts their `logwatch test` files expect."""

from __future__ import annotations

from pathlib import Path

from logwatch.ruletest import load_test_file
from tests.support.paths import SAMPLES


def sample_test_file(log: Path) -> Path:
    """The `logwatch test` file of a sample log: `X.log` has `X.test.toml` beside it."""
    return log.with_suffix(".test.toml")


def sample_logs() -> list[Path]:
    """Every annotated sample log (one with a `.test.toml` file beside it)."""
    return sorted(p for p in SAMPLES.rglob("*.log") if sample_test_file(p).exists())


def expected_alerts(log: Path) -> list[tuple[int, str, str]]:
    """The (line, rule, status) triples a sample's test file expects, in file order."""
    (test,) = load_test_file(sample_test_file(log)).tests
    return [(e.line, e.rule, str(e.status)) for e in test.expect]
