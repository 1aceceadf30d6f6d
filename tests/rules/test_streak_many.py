"""`StreakRule.evaluate_many` gives each part what `StreakRule.evaluate` gives it alone."""

from __future__ import annotations

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.rules.base import Part
from logwatch.rules.log import StreakRule
from tests.support.properties import examples

RULE = StreakRule(
    applies=pl.col("v").is_not_null(), condition=pl.col("v") > 0, count=3, value_column="v"
)

values = st.lists(st.one_of(st.none(), st.integers(-1, 2)), max_size=12)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(values, st.integers(0, 5)), min_size=1, max_size=6), st.integers(1, 4))
def test_each_part_is_stepped_as_alone(
    batches: list[tuple[list[int | None], int]], count: int
) -> None:
    """Random parts (empty ones, nulls, streaks carried in of 0-5 rows, across a part's
    edge): the transitions (rows, statuses, values) and states of `evaluate` part by part."""
    rule = StreakRule(RULE.applies, RULE.condition, count, RULE.value_column)
    frame = pl.DataFrame({"v": [v for vs, _ in batches for v in vs]}, schema={"v": pl.Int64})
    parts, begin = [], 0
    for vs, run in batches:
        parts.append(Part(begin, begin + len(vs), {"run": run}))
        begin += len(vs)
    got = rule.evaluate_many(frame, parts)
    want = [rule.evaluate(frame.slice(p.begin, p.end - p.begin), p.state) for p in parts]
    assert got == want
