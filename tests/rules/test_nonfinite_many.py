"""`NonFiniteRule.evaluate_many` gives, for each part it answers, exactly what `evaluate` gives on
that part alone: the same transitions (rows, values, overrides) and the same state."""

from __future__ import annotations

import random

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.rules.base import Outcome, Override, Part
from logwatch.rules.nonfinite import NonFiniteRule
from logwatch.rules.nonfinite_many import FEW_PARTS
from tests.support.properties import examples

RULES = [
    NonFiniteRule("loss"),
    NonFiniteRule("loss", masked_by="grad_norm", masked_summary="masked NaN at {line}"),
]
VALUES = [1.5, 2.0, 0.0, float("nan"), float("inf"), float("-inf"), 1e308, None]


def _part(rng: random.Random) -> tuple[list[float | None], list[float | None], list[int | None]]:
    """One source's batch: losses (mostly finite, NaN stretches, nulls, huge values), grad
    norms (some NaN), ranks (none for most batches, some ranked lines in a few)."""
    height = rng.choice([0, 1, 1, 2, 5, 12, 40])
    bad_weight = rng.choice([0.0, 0.0, 0.3, 0.9])
    weights = [1, 1, 0.5, bad_weight, bad_weight / 3, bad_weight / 5, 0.02, 0.6]
    losses = rng.choices(VALUES, weights=weights, k=height)
    grads = rng.choices([1.0, float("nan"), None, 1e308], weights=[4, 1, 1, 0.05], k=height)
    ranked = rng.random() < 0.2
    ranks = [rng.choice([0, 1, 3, None]) if ranked else None for _ in range(height)]
    return losses, grads, ranks


def _state(rng: random.Random) -> dict[str, dict[str, bool]]:
    """A rule state before the batch: no rank, a few ranks (some bad), the unranked "-1"."""
    names = rng.sample(["-1", "0", "1", "3"], rng.randint(0, 3))
    return {"bad": {name: rng.random() < 0.5 for name in names}}


def _frame(
    parts: list[tuple[list[float | None], list[float | None], list[int | None]]],
) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "loss": [x for losses, _, _ in parts for x in losses],
            "grad_norm": [x for _, grads, _ in parts for x in grads],
            "rank": [x for _, _, ranks in parts for x in ranks],
        },
        schema={"loss": pl.Float64, "grad_norm": pl.Float64, "rank": pl.Int64},
    )


def _said(outcome: Outcome) -> str:
    """An outcome as its repr: a NaN value equals itself there."""
    return repr(outcome)


@settings(max_examples=examples(100), deadline=None)
@given(
    st.integers(0, 10**6),
    st.integers(FEW_PARTS, FEW_PARTS + 12),
    st.sampled_from(range(len(RULES))),
)
def test_each_part_is_its_own_evaluate(seed: int, count: int, which: int) -> None:
    """Random parts (calm, NaN stretches, masked zeros, nulls, huge values, ranked lines) and
    states, enough parts to be stepped together: each answered part is `evaluate` of that
    part with its state."""
    rng = random.Random(seed)
    rule = RULES[which]
    batches = [_part(rng) for _ in range(count)]
    frame = _frame(batches)
    parts, begin = [], 0
    for losses, _, _ in batches:
        parts.append(Part(begin, begin + len(losses), _state(rng)))
        begin += len(losses)
    got = rule.evaluate_many(frame, parts)
    assert len(got) == len(parts)
    for part, outcome in zip(parts, got, strict=True):
        if outcome is None:
            continue
        own = frame.slice(part.begin, part.end - part.begin)
        assert _said(outcome) == _said(rule.evaluate(own, part.state))


def test_unranked_parts_are_stepped_together_with_their_transitions() -> None:
    """Unranked parts that go bad, stay bad or recover are answered (not left to `evaluate`),
    with their fires, resolves and masked overrides; a ranked part and one with a huge value
    are left to `evaluate`."""
    nan, rule = float("nan"), RULES[1]
    batches = [
        ([1.0, nan, nan, 2.0], [1.0, 1.0, 1.0, 1.0], [None] * 4),  # fires, resolves
        ([nan, 3.0], [1.0, 1.0], [None] * 2),  # was bad on another rank: stays on
        ([0.0, 1.0], [nan, 1.0], [None] * 2),  # a masked zero fires with its summary
        ([nan], [1.0], [2]),  # ranked
        ([1e308, 1e308], [1.0, 1.0], [None] * 2),  # its sum overflows
        ([None, None], [None, None], [None] * 2),  # no value: passes as it is
    ]
    batches += [([], [], [])] * FEW_PARTS  # enough parts to be stepped together
    frame = _frame(batches)
    states = [{"bad": {}}, {"bad": {"3": True}}, {"bad": {"-1": False}}, {"bad": {}}]
    states += [{"bad": {}}, {"bad": {"-1": True}}] + [{"bad": {}}] * FEW_PARTS
    parts, begin = [], 0
    for (losses, _, _), state in zip(batches, states, strict=True):
        parts.append(Part(begin, begin + len(losses), state))
        begin += len(losses)
    got = rule.evaluate_many(frame, parts)
    assert [o is None for o in got] == [False, False, False, True, True] + [False] * (1 + FEW_PARTS)
    assert rule.evaluate_many(frame.head(4), parts[:1]) == [None]  # one part: its own step
    for part, outcome in zip(parts, got, strict=True):
        if outcome is not None:
            own = frame.slice(part.begin, part.end - part.begin)
            assert _said(outcome) == _said(rule.evaluate(own, part.state))
    first, second, third = (o for o in got[:3] if o is not None)
    assert [(t.row, t.status) for t in first[0]] == [(1, "firing"), (3, "resolved")]
    assert first[1] == {"bad": {"-1": False}}
    assert second == ([], {"bad": {"3": True, "-1": False}})
    assert [(t.row, t.status) for t in third[0]] == [(0, "firing"), (1, "resolved")]
    assert [t.override for t in third[0]] == [Override(summary="masked NaN at {line}"), None]
    assert third[1] == {"bad": {"-1": False}}


def test_a_calm_round_passes_every_part_as_it_is() -> None:
    """A round with no bad rank and only finite values: every part's outcome is its state, as
    `evaluate` gives it; a huge value (whose part's sum may overflow) leaves that part to
    `evaluate`, the others still pass."""
    rule = RULES[1]
    calm = [([1.0, 2.0], [1.0, None], [None] * 2), ([None], [None], [None]), ([], [], [])]
    huge = [*calm, ([1e308, 1e308], [1.0, 1.0], [None] * 2), *[([], [], [])] * FEW_PARTS]
    for batches, left in ((calm, [False] * 3), (huge, [False] * 3 + [True] + [False] * FEW_PARTS)):
        frame = _frame(batches)
        parts, begin = [], 0
        for losses, _, _ in batches:
            parts.append(Part(begin, begin + len(losses), {"bad": {"-1": False}}))
            begin += len(losses)
        got = rule.evaluate_many(frame, parts)
        assert [o is None for o in got] == left
        for part, outcome in zip(parts, got, strict=True):
            if outcome is not None:
                assert outcome == ([], part.state)
                own = frame.slice(part.begin, part.end - part.begin)
                assert _said(outcome) == _said(rule.evaluate(own, part.state))
