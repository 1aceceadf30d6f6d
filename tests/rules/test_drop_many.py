"""`DropRule.evaluate_many` gives, for each part it answers, exactly what `evaluate` gives on that
part alone: calm parts (values, no rank, no pause, nothing near the limit) in one query for all,
parts that may move left to `evaluate` (None)."""

from __future__ import annotations

import random

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.rules.base import Part
from logwatch.rules.drop import DropRule
from tests.support.properties import examples

RULES = [
    DropRule(column="throughput", window=5, fraction=0.5, count=1),
    DropRule(column="throughput", window=8, fraction=0.35, count=2, extreme=2.0),
    DropRule(column="throughput", window=5, fraction=-0.5, count=1),
]
TEXTS = ["iter {n} throughput", "iter {n} throughput", "Saving checkpoint", "other"]


def _batch(rng: random.Random) -> tuple[list[float | None], list[str], list[int | None]]:
    """One source's lines: steady rates (most), a slowdown now and then, NaN, nulls, pauses,
    ranked lines in a few sources."""
    height = rng.choice([0, 1, 3, 8, 20])
    slow = rng.random() < 0.3
    values: list[float | None] = []
    for _ in range(height):
        pick = rng.random()
        if pick < 0.15:
            values.append(None)
        elif pick < 0.17:
            values.append(float("nan"))
        else:
            values.append(rng.uniform(1.0, 30.0) if slow else rng.uniform(95.0, 105.0))
    pause = rng.random() < 0.2
    texts = [rng.choice(TEXTS if pause else TEXTS[:2]).format(n=n) for n in range(height)]
    ranked = rng.random() < 0.2
    ranks = [rng.choice([None, 0, 1]) if ranked else None for _ in range(height)]
    return values, texts, ranks


def _frame(batches: list[tuple[list[float | None], list[str], list[int | None]]]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "throughput": [v for values, _, _ in batches for v in values],
            "text": [t for _, texts, _ in batches for t in texts],
            "rank": [r for _, _, ranks in batches for r in ranks],
        },
        schema={"throughput": pl.Float64, "text": pl.String, "rank": pl.Int64},
    )


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 12), st.sampled_from(range(len(RULES))))
def test_each_part_is_its_own_evaluate(seed: int, count: int, which: int) -> None:
    """Random sources, each stepped over a first batch alone (its history, maybe a streak or a
    pause carried) and then, with the others, over its second: each answered part is
    `evaluate` of that part."""
    rng = random.Random(seed)
    rule = RULES[which]
    firsts = [_batch(rng) for _ in range(count)]
    seconds = [_batch(rng) for _ in range(count)]
    states = [rule.evaluate(_frame([b]), rule.initial_state())[1] for b in firsts]
    whole = _frame(seconds)
    parts, begin = [], 0
    for (values, _, _), state in zip(seconds, states, strict=True):
        parts.append(Part(begin, begin + len(values), state))
        begin += len(values)
    got = rule.evaluate_many(whole, parts)
    assert len(got) == len(parts)
    for part, outcome in zip(parts, got, strict=True):
        if outcome is None or part.end == part.begin:
            continue
        own = whole.slice(part.begin, part.end - part.begin)
        assert repr(outcome) == repr(rule.evaluate(own, part.state))


def test_calm_parts_are_answered_and_the_others_left_to_evaluate() -> None:
    """Steady unranked rates are answered with their history's tail; a slowdown, a pause, a
    ranked line and a NaN are left to `evaluate`."""
    rule = RULES[0]
    steady = ([100.0, 101.0, 99.0], ["a"] * 3, [None] * 3)
    batches = [
        steady,
        ([100.0, 100.0, 100.0, 100.0, 100.0, 10.0], ["a"] * 6, [None] * 6),  # a slowdown
        ([100.0, 100.0], ["a", "Saving checkpoint"], [None] * 2),  # a pause
        ([100.0], ["a"], [1]),  # ranked
        ([100.0, float("nan")], ["a"] * 2, [None] * 2),  # NaN
    ]
    whole = _frame(batches)
    parts, begin = [], 0
    for values, _, _ in batches:
        parts.append(Part(begin, begin + len(values), rule.initial_state()))
        begin += len(values)
    got = rule.evaluate_many(whole, parts)
    assert [o is None for o in got] == [False, True, True, True, True]
    calm = {"values": [100.0, 101.0, 99.0], "seen": True, "skip": False, "streak": {"run": 0}}
    assert got[0] == ([], {"ranks": {"-1": calm}})
    assert got[0] == rule.evaluate(whole.slice(0, 3), parts[0].state)


def test_a_value_under_the_extreme_limit_after_a_short_history_is_left_to_evaluate() -> None:
    """With `extreme`, the fourth value ever (after `extreme_after` values) can already be low:
    that part is not calm, and `evaluate` fires on it."""
    rule = DropRule(column="throughput", window=8, fraction=0.35, count=1, extreme=2.0)
    whole = _frame([([100.0, 100.0, 100.0, 10.0], ["a"] * 4, [None] * 4)])
    part = Part(0, 4, rule.initial_state())
    assert rule.evaluate_many(whole, [part]) == [None]
    fired, _ = rule.evaluate(whole, part.state)
    assert [t.row for t in fired] == [3]
