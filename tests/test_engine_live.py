"""On a live batch (a line or a few) the engine checks its gates, the quiet streak rules' first
check and the GPU keys in one select, and leaves a batch's step as it is when every line says
one (`Engine._live_checks`, `_step_filled`): the events and the rule states after every batch
are exactly those of the engine that checks each on its own (its general path), over the
randomized corpus cut into live-sized batches."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logwatch
import logwatch.engine as engine_module
import logwatch.engine.evaluate as evaluate_module
from logwatch.engine import Engine
from logwatch.engine.batch import _LiveChecks, _opened
from logwatch.parse import parse_lines
from logwatch.rules.loader import RuleSpec
from logwatch.rules.log import StreakRule
from logwatch.sources.framing import lines_to_series
from tests.support import corpus
from tests.support.properties import examples

RULES = logwatch.load_rules()


def _general_checks(
    self: Engine, frame: pl.DataFrame, source: str, state: Any, done: Any, gates: Any
) -> _LiveChecks:
    """The general path: the gates alone in their select; the streak rules' steps and the GPU
    rules check the rest themselves."""
    return _LiveChecks(_opened(frame, gates))


def _batches(lines: list[str], sizes: list[int], rules: list[RuleSpec]) -> list[pl.DataFrame]:
    """`lines` cut into batches of `sizes` (in turn), parsed as tail parses them; parsed once
    and fed to both engines (a frame is immutable: neither engine can change what the other
    reads)."""
    columns = Engine(rules).every_column
    frames = []
    start, turn = 0, 0
    while start < len(lines):
        size = sizes[turn % len(sizes)]
        frames.append(
            parse_lines(
                pl.Series(lines[start : start + size], dtype=pl.String),
                source="t",
                first_line=start + 1,
                default_year=2026,
                columns=columns,
            )
        )
        start, turn = start + size, turn + 1
    return frames


def _run(
    batches: list[pl.DataFrame], rules: list[RuleSpec]
) -> tuple[list[str], list[str], list[str]]:
    """(events as JSONL, each source's exported state after every batch, rule errors) of the
    engine over `batches`."""
    errors: list[str] = []
    engine = Engine(rules, on_error=lambda rule, source, exc: errors.append(f"{rule} {source}"))
    columns = engine.every_column
    events, states = [], []
    for frame in batches:
        events += [event.to_jsonl() for event in engine.process(frame, columns)]
        states.append(json.dumps(engine.export_state("t"), sort_keys=True, default=str))
    return events, states, errors


def _corpus_lines(seed: int, count: int) -> list[str]:
    return lines_to_series(corpus.corpus(seed, count)).to_list()


@settings(max_examples=examples(6), deadline=None)
@given(
    st.integers(0, 10**6),
    st.lists(st.sampled_from([1, 1, 1, 2, 3, 7, 64]), min_size=1, max_size=5),
)
def test_live_batches_give_the_general_paths_events_and_states(seed: int, sizes: list[int]) -> None:
    """Every built-in rule over the corpus in batches of 1 to 64 lines (the live sizes): the
    same events and the same rule states after every batch as the general path."""
    batches = _batches(_corpus_lines(seed, 120), sizes, RULES)
    fast = _run(batches, RULES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module.Engine, "_live_checks", _general_checks)
        patch.setattr(evaluate_module, "_step_filled", lambda frame: False)
        general = _run(batches, RULES)
    assert fast == general


STREAKS_FIRED = {"bucket-starvation", "gpu-metrics-missing", "nan-iterations"}
"""The streak rules the corpus lines below fire and resolve."""


def test_the_live_checks_are_taken_and_streaks_still_fire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property above runs the fast path (it would pass vacuously without it): on one-line
    batches of the corpus, streak rules are skipped as calm on most lines, and the streak
    rules still fire and resolve as on the general path."""
    calm: list[int] = []
    checks = Engine._live_checks

    def spy(self: Engine, *args: Any) -> _LiveChecks:
        found = checks(self, *args)
        calm.append(len(found.calm))
        return found

    # 136 lines that fire and resolve all three streak rules (seed 11's 300 lines fired three
    # and resolved two, in 2.2 times the engine steps: each line is a batch, twice)
    lines = _corpus_lines(35, 130)
    monkeypatch.setattr(engine_module.Engine, "_live_checks", spy)
    batches = _batches(lines, [1], RULES)
    events, states, _ = _run(batches, RULES)
    monkeypatch.setattr(engine_module.Engine, "_live_checks", _general_checks)
    monkeypatch.setattr(evaluate_module, "_step_filled", lambda frame: False)
    assert (events, states) == _run(batches, RULES)[:2]
    assert sum(calm) > len(lines)  # three streak rules, calm on most lines
    streaks = {spec.id for spec in RULES if isinstance(spec.rule, StreakRule)}
    assert streaks >= STREAKS_FIRED
    fired = {(json.loads(e)["rule"], json.loads(e)["status"]) for e in events}
    assert {rule for rule, status in fired if status == "firing"} >= STREAKS_FIRED
    assert {rule for rule, status in fired if status == "resolved"} >= STREAKS_FIRED


def test_a_streak_that_fails_on_a_batch_fails_as_on_the_general_path(tmp_path: Path) -> None:
    """A streak expression that raises on some line (a strict cast of the text) breaks the
    shared select: the engine falls back, the rule is reported and switched off for its source
    as its own step would have it, and the other rules' events are unchanged."""
    pack = tmp_path / "digits.toml"
    pack.write_text(DIGITS, encoding="utf-8")
    rules = [*RULES, *logwatch.load_rules([pack], builtin=False)]
    lines = ["5", "7", "9", "x", "8", "2026-11-28 14:02:07,199 INFO [train] step 1 | loss nan"]
    rng = random.Random(3)
    lines += [rng.choice(lines) for _ in range(40)]
    batches = _batches(lines, [1], rules)
    fast = _run(batches, rules)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine_module.Engine, "_live_checks", _general_checks)
        patch.setattr(evaluate_module, "_step_filled", lambda frame: False)
        general = _run(batches, rules)
    assert fast == general
    assert fast[2] == ["digits t"]
    assert any(json.loads(e)["rule"] == "digits" for e in fast[0])


DIGITS = """
[[rule]]
id = "digits"
type = "streak"
severity = "info"
applies = "LENGTH(text) < 3"
condition = "CAST(text AS BIGINT) > 0"
count = 2
summary = "digits at line {line}"
"""
