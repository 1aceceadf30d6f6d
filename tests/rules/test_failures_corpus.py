"""Every real failure line of tests/data/failures.toml fires exactly its rules, with the details
its summary must name, replayed from a log file whole and byte by byte."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.support.paths import ROOT
from tests.test_words import PLACEHOLDER

RULES = load_rules([builtin_rules_dir()])
CORPUS: list[dict[str, Any]] = tomllib.loads(
    (ROOT / "tests" / "data" / "failures.toml").read_text(encoding="utf-8")
)["line"]


@pytest.mark.parametrize("case", CORPUS, ids=lambda c: c["source"][:60])
def test_corpus_line_fires_exactly_its_rules(case: dict[str, Any], tmp_path: Path) -> None:
    """The line fires exactly the rules listed, the first summary names its details, and no
    summary says `?` for a value the line does not carry."""
    log = tmp_path / "train.log"
    log.write_text(case["text"] + "\n", encoding="utf-8")
    events = replay([str(log)], RULES).events
    assert sorted(e.rule for e in events) == sorted(case["rules"]), case["text"]
    if "summary" in case:
        assert case["summary"] in events[0].summary
    assert [e.summary for e in events if PLACEHOLDER.search(e.summary)] == []


@pytest.mark.parametrize(
    "case", [c for c in CORPUS if "\n" in c["text"]], ids=lambda c: c["source"][:60]
)
def test_a_wrapped_message_fires_the_same_in_any_split(
    case: dict[str, Any], tmp_path: Path
) -> None:
    """A message wrapped over two lines gives the same events in 1-byte blocks as whole (a
    look-alike: none either way)."""
    log = tmp_path / "train.log"
    log.write_text(case["text"] + "\n", encoding="utf-8")
    whole = [e.to_json() for e in replay([str(log)], RULES).events]
    tiny = replay([str(log)], RULES, options=ReplayOptions(block_bytes=1)).events
    assert bool(whole) == bool(case["rules"])
    assert [e.to_json() for e in tiny] == whole
