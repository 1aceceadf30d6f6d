"""The early exits of the streak and spike rules are exact: over random values cut into random
batches, each gives the transitions and the end state of its logic without the exit."""

from __future__ import annotations

import itertools

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from stateful_reference import spike, streak

from logwatch.rules.anomaly import SpikeRule
from logwatch.rules.log import StreakRule

# Mostly a flat loss (the exit's case), with noise, spikes, NaN and gaps now and then.
VALUES = st.lists(
    st.sampled_from(
        [2.0, 2.01, 1.99, 2.02, 2.0, 1.98, 2.0, 2.01] * 8 + [40.0, None, float("nan"), 0.7, 2.9]
    ),
    min_size=1,
    max_size=300,
)


def _batches(values: list[float | None], cuts: list[int]) -> list[pl.DataFrame]:
    frame = pl.DataFrame({"loss": values}, schema={"loss": pl.Float64})
    bounds = sorted({0, frame.height, *(c % frame.height for c in cuts)})
    return [frame.slice(a, b - a) for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(
    VALUES,
    st.lists(st.integers(0, 300), max_size=5),
    st.sampled_from([5, 10, 30]),
    st.booleans(),
)
def test_spike_early_exit_matches_the_full_logic(
    values: list[float | None], cuts: list[int], window: int, singles: bool
) -> None:
    """Flat, noisy and spiking losses, any batch cut or a line a batch (live): same
    transitions, same state."""
    rule = SpikeRule(column="loss", window=window, k=6.0, min_rise=0.1)
    state = ref = rule.initial_state()
    cut = list(range(len(values))) if singles else cuts
    for batch in _batches(values, cut):
        found, state = rule.evaluate(batch, state)
        expected, ref = spike(rule, batch, ref)
        assert found == expected
        assert state == ref


@settings(max_examples=200, deadline=None)
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
