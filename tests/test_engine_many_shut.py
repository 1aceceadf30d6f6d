"""`Engine.process_many` does not step a batched rule that every source's turn skips (quiet,
its gate shut on each small batch), and steps it as before once one batch opens its gate."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import logwatch
from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.rules.base import Part
from logwatch.rules.classify import ClassifyRule

RULES = logwatch.load_rules()
STEP = "2026-11-28 14:02:07,199 INFO [train] step {n}/200000 | loss 2.1 | lr 2.40e-05"


def _frames(lines: dict[str, list[str]]) -> list[pl.DataFrame]:
    return [
        parse_lines(pl.Series(texts), source=source, first_line=1)
        for source, texts in lines.items()
    ]


@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each `ClassifyRule.evaluate_many` call: how many sources it was given, and its gate."""
    calls: list[tuple[int, str | None]] = []
    original = ClassifyRule.evaluate_many

    def counted(self: ClassifyRule, frame: pl.DataFrame, parts: list[Part]) -> Any:
        calls.append((len(parts), self.needs.gate))
        return original(self, frame, parts)

    monkeypatch.setattr(ClassifyRule, "evaluate_many", counted)
    return calls


def test_a_round_with_no_gate_literal_steps_no_classifier(
    stepped: list[tuple[int, str | None]],
) -> None:
    """Eight ranks' step lines open no classifier's gate but nan-eval-loss's ('loss'): that
    one is stepped, and cuda-oom (a wrapped rule: it joins a line to the one before, and has
    no gate of its own); the other seven are not. The events equal those of `process`."""
    lines = {f"rank{r}": [STEP.format(n=n) for n in range(5)] for r in range(8)}
    many = Engine(RULES).process_many(_frames(lines), None)
    one = Engine(RULES)
    assert many == [one.process(frame) for frame in _frames(lines)]
    classifiers = [s for s in RULES if isinstance(s.rule, ClassifyRule)]
    assert len(classifiers) == 9 and stepped == [(8, "loss|Loss|LOSS"), (8, None)]


def test_one_batch_that_opens_a_gate_steps_that_rule_for_all(
    stepped: list[tuple[int, str | None]],
) -> None:
    """An NCCL error line in one of eight ranks' batches: nccl-error is stepped too (for all
    eight, as before) and fires for that rank, as `process` does."""
    lines = {f"rank{r}": [STEP.format(n=n) for n in range(5)] for r in range(8)}
    lines["rank3"].append("NCCL error in: /opt/nccl/src/init.cc:1234, unhandled system error")
    many = Engine(RULES).process_many(_frames(lines), None)
    one = Engine(RULES)
    assert many == [one.process(frame) for frame in _frames(lines)]
    assert [e.source for events in many for e in events if e.rule == "nccl-error"] == ["rank3"]
    assert [n for n, gate in stepped if gate == "NCCL |nccl"] == [8]
    assert len(stepped) == 4  # and nccl-timeout, whose gate holds "NCCL " too


def test_a_long_batch_prepared_shuts_the_rules_its_gate_hits_leave_out(
    stepped: list[tuple[int, str | None]],
) -> None:
    """A replay's group: seven small batches and one of 100 lines (over the small batches'
    live checks), each prepared (`prepare_many`: its gate hits). The classifiers no gate hit
    opens are not stepped, as with small batches alone; the events equal those of `process`
    on each prepared batch."""
    lines = {f"rank{r}": [STEP.format(n=n) for n in range(5)] for r in range(8)}
    lines["rank5"] = [STEP.format(n=n) for n in range(100)]
    frames = _frames(lines)
    engine = Engine(RULES)
    ready = engine.prepare_many(pl.concat(frames), frames)
    many = engine.process_many(frames, None, ready)
    one = Engine(RULES)
    assert many == [one.process(frame, None, one.prepare(frame)) for frame in frames]
    assert stepped == [(8, "loss|Loss|LOSS"), (8, None)]
