"""The early exits of the streak and spike rules are exact: over random values cut into random
batches, each gives the transitions and the end state of its logic without the exit."""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from logwatch.rules.base import Transition
from logwatch.rules.log import StreakRule
from logwatch.rules.spike import SpikeRule
from tests.support.properties import examples
from tests.support.stateful_reference import ranked, spike, streak

# Mostly a flat loss (the exit's case), with noise, spikes, NaN and gaps now and then.
VALUES = st.lists(
    st.sampled_from(
        [2.0, 2.01, 1.99, 2.02, 2.0, 1.98, 2.0, 2.01] * 8
        + [40.0, 400.0, None, float("nan"), 0.7, 2.9]
    ),
    min_size=1,
    max_size=300,
)


def _batches(
    values: list[float | None], cuts: list[int], ranks: list[int | None] | None = None
) -> list[pl.DataFrame]:
    frame = pl.DataFrame(
        {"loss": values, "rank": ranks or [None] * len(values)},
        schema={"loss": pl.Float64, "rank": pl.Int64},
    )
    bounds = sorted({0, frame.height, *(c % frame.height for c in cuts)})
    return [frame.slice(a, b - a) for a, b in itertools.pairwise(bounds)]


def _spike_reference(
    rule: SpikeRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    def step(part: pl.DataFrame, rank: dict[str, Any]) -> tuple[list[Transition], dict[str, Any]]:
        return spike(rule, part, rank)

    initial = {"values": [], "deviations": [], "streak": {"run": 0}}
    firing = lambda rank: rank["streak"]["run"] > 0  # noqa: E731 (a one-line predicate)
    return ranked(step, frame, state, column="loss", initial=initial, firing=firing)


@settings(max_examples=examples(300), deadline=None)
@given(
    VALUES,
    st.lists(st.integers(0, 300), max_size=5),
    st.sampled_from([5, 10, 30]),
    st.booleans(),
    st.sampled_from([(0.0, 3), (100.0, 3), (10.0, 1), (1.05, 5)]),
    st.lists(st.sampled_from([None, 0, 1, 7]), max_size=300),
)
# a Hypothesis find: a NaN alone moves no history, so the fast path keeps no state for its rank
@example([float("nan")], [], 5, True, (0.0, 3), [])
@example([float("nan")], [], 5, True, (0.0, 3), [7])
def test_spike_early_exit_matches_the_full_logic(
    values: list[float | None],
    cuts: list[int],
    window: int,
    singles: bool,
    extreme: tuple[float, int],
    ranks: list[int | None],
) -> None:
    """Flat, noisy and spiking losses of one rank or several, with or without the extreme
    limit, any batch cut or a line a batch (live): same transitions, same state."""
    factor, after = extreme
    rule = SpikeRule(
        column="loss",
        window=window,
        k=6.0,
        min_rise=0.1,
        extreme=factor,
        extreme_after=after,
        extreme_summary="leapt",
    )
    state = ref = rule.initial_state()
    cut = list(range(len(values))) if singles else cuts
    ranks = (ranks * len(values))[: len(values)] if ranks else None
    for batch in _batches(values, cut, ranks):
        found, state = rule.evaluate(batch, state)
        expected, ref = _spike_reference(rule, batch, ref)
        assert repr(found) == repr(expected)  # repr: a NaN field equals itself there
        assert state == ref


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.sampled_from([None, 0, 1, 2]), min_size=1, max_size=120),
    st.lists(st.integers(0, 120), max_size=5),
)
def test_streak_early_exit_matches_the_full_logic(
    values: list[int | None], cuts: list[int]
) -> None:
    """A streak over nullable counts, any batch cut: same transitions; a run of 0 either way."""
    rule = StreakRule(
        applies=pl.col("n").is_not_null(), condition=pl.col("n") > 0, count=3, value_column="n"
    )
    state = ref = rule.initial_state()
    frame = pl.DataFrame({"n": values}, schema={"n": pl.Int64})
    bounds = sorted({0, frame.height, *(c % frame.height for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        found, state = rule.evaluate(frame.slice(a, b - a), state)
        expected, ref = streak(rule, frame.slice(a, b - a), ref)
        assert found == expected
        assert state == ref
