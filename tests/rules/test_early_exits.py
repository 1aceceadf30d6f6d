"""The early exits of the streak and spike rules are exact: over random values cut into random
batches, each gives the transitions and the end state of its logic without the exit."""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.alerts import FIRING, RESOLVED
from logwatch.rules.anomaly import _HIGH, SpikeRule, _history, _with_fields
from logwatch.rules.log import StreakRule, Transition


def _spike_reference(
    rule: SpikeRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """SpikeRule.evaluate as it was before its early exit."""
    rows = frame.select(rule.column).with_row_index("_row").filter(pl.col(rule.column).is_finite())
    if rows.is_empty():
        return [], state
    tail = state["values"]
    history = _history(rows.get_column(rule.column), tail, rule.window)
    fresh = (pl.col("_x") - pl.col("_median")).abs()
    carried = pl.Series(state["deviations"], dtype=pl.Float64)
    deviation = pl.concat([carried, history.select(fresh).to_series().slice(len(tail))])
    band = pl.col("_median") + pl.max_horizontal(
        rule.k * pl.col("_mad"), rule.min_rise * pl.col("_median").abs()
    )
    scored = (
        history.with_columns(deviation.alias("_dev"))
        .with_columns(
            pl.col("_dev").rolling_median(rule.window, min_samples=5).shift(1).alias("_mad")
        )
        .with_columns(band.alias("band"))
        .with_columns(
            ((pl.col("_i") >= rule.window) & (pl.col("_x") > pl.col("band")))
            .fill_null(False)
            .alias("_high")
        )
        .slice(len(tail))
    )
    found, streak = _HIGH.evaluate(scored, state["streak"])
    fields = scored.select(pl.col("_median").alias("median"), "band")
    new_state = {
        "values": history.get_column("_x").tail(rule.window).to_list(),
        "deviations": deviation.tail(rule.window).to_list(),
        "streak": streak,
    }
    return _with_fields(found, rows.get_column("_row").to_list(), fields), new_state


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
@given(VALUES, st.lists(st.integers(0, 300), max_size=5), st.sampled_from([5, 10, 30]))
def test_spike_early_exit_matches_the_full_logic(
    values: list[float | None], cuts: list[int], window: int
) -> None:
    """Flat, noisy and spiking losses, any batch cut: same transitions, same state."""
    rule = SpikeRule(column="loss", window=window, k=6.0, min_rise=0.1)
    state = ref = rule.initial_state()
    for batch in _batches(values, cuts):
        found, state = rule.evaluate(batch, state)
        expected, ref = _spike_reference(rule, batch, ref)
        assert found == expected
        assert state == ref


def _streak_reference(
    rule: StreakRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """StreakRule.evaluate as it was before its early exit."""
    rows = frame.select(sorted(rule.needs.columns)).with_row_index("_row")
    rows = rows.filter(rule.applies.fill_null(False))
    if rows.is_empty():
        return [], state
    carried = int(state["run"])
    cond = rule.condition.fill_null(False)
    changed = cond != cond.shift(1, fill_value=carried > 0)
    group = changed.cast(pl.UInt32).cum_sum()
    position = pl.int_range(1, pl.len() + 1).over(group) + pl.when(group == 0).then(
        carried
    ).otherwise(0)
    run = pl.when(cond).then(position).otherwise(0)
    scored = rows.with_columns(run.alias("_run")).with_columns(
        pl.col("_run").shift(1, fill_value=carried).alias("_prev_run")
    )
    events = scored.with_columns((pl.col("_run") == rule.count).alias("_fire")).filter(
        pl.col("_fire") | ((pl.col("_run") == 0) & (pl.col("_prev_run") >= rule.count))
    )
    values = events.get_column(rule.value_column) if rule.value_column else None
    found = [
        Transition(row, FIRING if fire else RESOLVED, None if values is None else values[i])
        for i, (row, fire) in enumerate(
            zip(events.get_column("_row"), events.get_column("_fire"), strict=True)
        )
    ]
    return found, {"run": int(scored.get_column("_run")[-1])}


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
        expected, ref = _streak_reference(rule, frame.slice(a, b - a), ref)
        assert found == expected
        assert state == ref
