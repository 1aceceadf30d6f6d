"""`Engine.process_many` does not step a batched rule that every source's turn skips (quiet,
its gate shut on each small batch; a quiet streak rule no line can start a streak in), and
steps it as before once one batch opens its gate or can start its streak."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import logwatch
from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.rules.base import Part
from logwatch.rules.classify import ClassifyRule
from logwatch.rules.log import StreakRule

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


DFLASH = (
    "2026-11-28 14:02:{s:02d},199 INFO [train] step {n}/200000 | loss 2.1182 | acc 0.242 | "
    "lr 2.40e-05 | grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb={hsb}"
)


@pytest.fixture
def streaks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Each `StreakRule.evaluate_many` call: its rule's id and how many sources it was given."""
    calls: list[tuple[str, int]] = []
    ids = {id(spec.rule): spec.id for spec in RULES}
    original = StreakRule.evaluate_many

    def counted(self: StreakRule, frame: pl.DataFrame, parts: list[Part]) -> Any:
        calls.append((ids[id(self)], len(parts)))
        return original(self, frame, parts)

    monkeypatch.setattr(StreakRule, "evaluate_many", counted)
    return calls


def _same_as_one_by_one(
    lines: dict[str, list[str]], engines: tuple[Engine, Engine] | None = None
) -> list[list[Any]]:
    """`process_many`'s events, checked equal to `process`'s source by source, states too."""
    many, one = engines or (Engine(RULES), Engine(RULES))
    found = many.process_many(_frames(lines), None)
    assert found == [one.process(frame) for frame in _frames(lines)]
    for source in lines:
        assert many.export_state(source) == one.export_state(source)
    return found


def test_a_round_where_no_streak_can_start_steps_no_streak_rule(
    streaks: list[tuple[str, int]],
) -> None:
    """Eight ranks' DFlash step lines, every queue bucket busy (no starvation streak can
    start), no NaN iteration, no GPU snapshot: no streak rule is stepped for the round, and
    the events and states are those of `process` source by source."""
    hsb = "[1,2,2,6,3,5]"
    lines = {f"rank{r}": [DFLASH.format(s=n, n=n, hsb=hsb) for n in range(10)] for r in range(8)}
    assert _same_as_one_by_one(lines) == [[]] * 8
    assert streaks == []


def test_a_streak_that_starts_in_one_batch_is_stepped_for_all(
    streaks: list[tuple[str, int]],
) -> None:
    """One rank of eight starves (one busy bucket, five lines): bucket-starvation is stepped
    for the eight and fires for that rank, as `process` does; the other streak rules are not
    stepped. In the next round, that rank's streak is carried (not quiet): stepped again."""
    lines = {
        f"rank{r}": [DFLASH.format(s=n, n=n, hsb="[1,2,2,6,3,5]") for n in range(6)]
        for r in range(8)
    }
    lines["rank5"] = [DFLASH.format(s=n, n=n, hsb="[0,0,0,0,0,9]") for n in range(6)]
    engines = Engine(RULES), Engine(RULES)
    found = _same_as_one_by_one(lines, engines)
    assert [(e.source, e.rule) for events in found for e in events] == [
        ("rank5", "bucket-starvation")
    ]
    assert streaks == [("bucket-starvation", 8)]
    calm = {r: [DFLASH.format(s=6, n=6, hsb="[1,2,2,6,3,5]")] for r in lines}
    found = _same_as_one_by_one(calm, engines)
    assert [(e.source, e.rule, e.status) for events in found for e in events] == [
        ("rank5", "bucket-starvation", "resolved")
    ]
    assert streaks == [("bucket-starvation", 8)] * 2


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
