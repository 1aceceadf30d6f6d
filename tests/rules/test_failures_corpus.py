"""Every real failure line of tests/data/failures.toml fires exactly its rules, with the details
its summary must name, replayed from a log file whole and byte by byte."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.rules.loader import builtin_rules_dir, load_rules
from tests.support.paths import ROOT
from tests.support.together import Replayed, replay_each
from tests.test_words import PLACEHOLDER

RULES = load_rules([builtin_rules_dir()])
CORPUS: list[dict[str, Any]] = tomllib.loads(
    (ROOT / "tests" / "data" / "failures.toml").read_text(encoding="utf-8")
)["line"]


@pytest.fixture(scope="module")
def corpus_logs(tmp_path_factory: pytest.TempPathFactory) -> list[Replayed]:
    """Each corpus line's events, as replaying its own log file gives them (the files are
    replayed together, each its own source: one replay's fixed cost, not one per line)."""
    root = tmp_path_factory.mktemp("failures")
    return replay_each(root, [case["text"] + "\n" for case in CORPUS], RULES)


@pytest.mark.parametrize("number", range(len(CORPUS)), ids=lambda n: CORPUS[n]["source"][:60])
def test_corpus_line_fires_exactly_its_rules(number: int, corpus_logs: list[Replayed]) -> None:
    """The line fires exactly the rules listed, the first summary names its details, and no
    summary says `?` for a value the line does not carry."""
    case, events = CORPUS[number], corpus_logs[number].events
    assert sorted(e.rule for e in events) == sorted(case["rules"]), case["text"]
    if "summary" in case:
        assert case["summary"] in events[0].summary
    assert [e.summary for e in events if PLACEHOLDER.search(e.summary)] == []


@pytest.mark.parametrize(
    "number",
    [n for n, c in enumerate(CORPUS) if "\n" in c["text"]],
    ids=lambda n: CORPUS[n]["source"][:60],
)
def test_a_wrapped_message_fires_the_same_in_any_split(
    number: int, corpus_logs: list[Replayed]
) -> None:
    """A message wrapped over two lines gives the same events in 1-byte blocks as whole (a
    look-alike: none either way)."""
    case, log = CORPUS[number], corpus_logs[number]
    whole = [e.to_json() for e in log.events]
    tiny = replay([str(log.path)], RULES, options=ReplayOptions(block_bytes=1)).events
    assert bool(whole) == bool(case["rules"])
    assert [e.to_json() for e in tiny] == whole
