"""The throughput-drop and non-finite rules equal their reference logic (tests/support/stateful_reference)
over random inputs cut into random batches, 1-row batches included: same transitions (values,
medians), same state after every batch."""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from logwatch.rules.base import Transition
from logwatch.rules.drop import PAUSE_PATTERN, DropRule
from logwatch.rules.nonfinite import NonFiniteRule
from tests.support.properties import examples
from tests.support.stateful_reference import drop, nonfinite, ranked


def _cuts(height: int, cuts: list[int], singles: bool) -> list[tuple[int, int]]:
    """Batch bounds: random cuts, or every row its own batch (the live case)."""
    if singles:
        return [(i, i + 1) for i in range(height)]
    bounds = sorted({0, height, *(c % height for c in cuts)})
    return list(itertools.pairwise(bounds))


def _same(found: list[Transition], expected: list[Transition]) -> None:
    # repr: a NaN value equals itself there, not under ==
    assert repr(found) == repr(expected)


# A steady rate with slowdowns, a zero and an overflowed (inf) rate; None: a line without one.
RATES = st.sampled_from([1000.0] * 6 + [990.0, 1010.0, 400.0, 300.0, 50.0, 0.0, float("inf"), None])
# A report, a pause (checkpoint save, evaluation), or another line.
LINES = st.lists(st.tuples(RATES, st.sampled_from(["step", "step", "step", "saving checkpoint"])))


def _drop_reference(
    rule: DropRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    def step(part: pl.DataFrame, rank: dict[str, Any]) -> tuple[list[Transition], dict[str, Any]]:
        return drop(rule, part, rank)

    initial = {"values": [], "seen": False, "skip": False, "streak": {"run": 0}}
    pauses = frame.get_column("text").str.contains(PAUSE_PATTERN).to_list()
    firing = lambda rank: rank["streak"]["run"] >= rule.count  # noqa: E731 (a one-line predicate)
    return ranked(
        step, frame, state, column="throughput", initial=initial, firing=firing, pauses=pauses
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    LINES.filter(bool),
    st.lists(st.integers(0, 400), max_size=6),
    st.booleans(),
    st.sampled_from(
        [
            (5, 0.5, 1, 0.0),
            (5, 0.5, 3, 10.0),
            (8, 0.35, 2, 2.0),
            (5, -0.5, 1, 0.0),
            (8, 0.5, 1, 3.0),
        ]
    ),
    st.lists(st.sampled_from([None, 0, 1, 5]), max_size=40),
)
def test_drop_matches_its_reference(
    lines: list[tuple[float | None, str]],
    cuts: list[int],
    singles: bool,
    params: tuple[int, float, int, float],
    ranks: list[int | None],
) -> None:
    """Rates of one rank or several with pauses between, with or without the extreme limit,
    any batch cut or 1-line batches: same transitions, same state."""
    window, fraction, count, extreme = params
    rule = DropRule(
        column="throughput", window=window, fraction=fraction, count=count, extreme=extreme
    )
    frame = pl.DataFrame(
        {
            "throughput": [r for r, _ in lines],
            "text": [t for _, t in lines],
            "rank": (ranks * len(lines))[: len(lines)] if ranks else [None] * len(lines),
        },
        schema={"throughput": pl.Float64, "text": pl.String, "rank": pl.Int64},
    )
    state = ref = rule.initial_state()
    for a, b in _cuts(frame.height, cuts, singles):
        found, state = rule.evaluate(frame.slice(a, b - a), state)
        expected, ref = _drop_reference(rule, frame.slice(a, b - a), ref)
        _same(found, expected)
        assert state == ref


LOSSES = st.sampled_from([2.0, 1.9, None, float("nan"), float("inf"), float("-inf")])
RANKS = st.sampled_from([None, 0, 1, 3])


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.tuples(LOSSES, RANKS), min_size=1, max_size=80),
    st.lists(st.integers(0, 80), max_size=6),
    st.booleans(),
)
def test_nonfinite_matches_its_reference(
    lines: list[tuple[float | None, int | None]], cuts: list[int], singles: bool
) -> None:
    """Losses of several ranks (or none), NaN / Inf among them, any cut: same transitions, same
    per-rank state."""
    rule = NonFiniteRule(column="loss")
    frame = pl.DataFrame(
        {"loss": [v for v, _ in lines], "rank": [r for _, r in lines]},
        schema={"loss": pl.Float64, "rank": pl.Int64},
    )
    state = ref = rule.initial_state()
    for a, b in _cuts(frame.height, cuts, singles):
        found, state = rule.evaluate(frame.slice(a, b - a), state)
        expected, ref = nonfinite(rule, frame.slice(a, b - a), ref)
        _same(found, expected)
        assert state == ref
