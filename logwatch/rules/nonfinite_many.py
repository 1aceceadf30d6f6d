"""`NonFiniteRule.evaluate_many`: the nonfinite rule's step on many sources' batches in a few
queries for all. A part whose state has no bad rank and whose values are all finite passes as
it is (most batches); a part of unranked lines is stepped with the others in one query (its
"some rank is bad" after each line, and where that changes). A part with ranked lines, or with
a value so large that its sum could overflow, takes the rule's own step (None)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, cast

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.rules.base import Outcome, Override, Part, Transition, part_of

HUGE = 1e300
"""A finite value above this may make a part's sum overflow: `evaluate` then takes its exact
path (which records the unranked lines' rank), so such a part takes it too."""


FEW_PARTS = 16
"""Below this many parts, a round that is not calm leaves every part to `evaluate`: measured
in `tail` (8 files x 10 lines/s), the two queries cost more than 8 sources' own steps (the
rule's gate skips most of them); at 200 sources they cost far less."""


class NonFinite(Protocol):
    """What the step reads of a `nonfinite.NonFiniteRule`."""

    @property
    def column(self) -> str: ...
    @property
    def masked_by(self) -> str | None: ...
    @property
    def masked_summary(self) -> str | None: ...


def nonfinite_many(
    rule: NonFinite, frame: pl.DataFrame, parts: Sequence[Part]
) -> list[Outcome | None]:
    """`rule.evaluate` on each part (None for a part it leaves to `evaluate`)."""
    if not parts:
        return []
    if _all_calm(rule, frame, parts):
        return [([], part.state) for part in parts]  # most rounds: no query at all
    if len(parts) < FEW_PARTS:
        return [None] * len(parts)  # each its own step: cheaper than two queries
    flags = _flags(rule, frame, parts)
    out: list[Outcome | None] = []
    stepped: list[int] = []
    for number, (part, row) in enumerate(zip(parts, flags.iter_rows(), strict=True)):
        valued, odd, huge, ranked = row
        calm = not any(part.state["bad"].values()) and not odd
        if (calm and not huge) or not valued:
            out.append(([], part.state))  # nothing is bad and nothing goes bad; or no value
        elif huge or ranked:
            out.append(None)
        else:
            out.append(None)
            stepped.append(number)
    if stepped:
        for number, outcome in _unranked(rule, frame, parts, stepped).items():
            out[number] = outcome
    return out


def _all_calm(rule: NonFinite, frame: pl.DataFrame, parts: Sequence[Part]) -> bool:
    """No part's state has a bad rank and every value (and mask) is finite and at most `HUGE`,
    so no part's sum can overflow: every part passes as it is. Series sums and extremes, no
    query: the rule's gate keeps the engine from stepping such parts at all, so this check
    must cost next to nothing."""
    if any(any(part.state["bad"].values()) for part in parts):
        return False
    columns = [rule.column] if rule.masked_by is None else [rule.column, rule.masked_by]
    for name in columns:
        values = frame.get_column(name)
        if not math.isfinite(values.sum()):
            return False
        low, high = cast(float | None, values.min()), cast(float | None, values.max())
        if low is not None and high is not None and max(-low, high) > HUGE:
            return False
    return True


def _flags(rule: NonFinite, frame: pl.DataFrame, parts: Sequence[Part]) -> pl.DataFrame:
    """Per part (in order, one row each, empty parts too): whether a line has a value, whether
    a value or mask is non-finite, whether a value is huge, whether a line has a rank; from
    each flag's running count (one query), at each part's ends."""
    value = pl.col(rule.column)
    odd, huge = ~value.is_finite(), _huge(value)
    if rule.masked_by is not None:
        odd = odd | ~pl.col(rule.masked_by).is_finite()
        huge = huge | _huge(pl.col(rule.masked_by))
    flags = {
        "_valued": value.is_not_null(),
        "_odd": odd.fill_null(False),
        "_huge": huge.fill_null(False),
        "_ranked": pl.col("rank").is_not_null(),
    }
    # a count before the first row (0), then after each row
    counts = frame.select(
        pl.lit(0, dtype=pl.UInt32).append(flag.cast(pl.UInt32).cum_sum()).alias(name)
        for name, flag in flags.items()
    )
    ends = pl.Series([part.end for part in parts], dtype=pl.UInt32)
    begins = pl.Series([part.begin for part in parts], dtype=pl.UInt32)
    return counts.select(pl.all().gather(ends) > pl.all().gather(begins))


def _unranked(
    rule: NonFinite, frame: pl.DataFrame, parts: Sequence[Part], stepped: list[int]
) -> dict[int, Outcome]:
    """`evaluate`'s step of each stepped part (all its lines unranked: rank "-1"), in one
    query: after each line with a value, some rank is bad if this line is or another rank
    was; a transition wherever that changes, from the state's to the last line's."""
    begins = pl.Series([part.begin for part in parts], dtype=pl.Int64)
    counts = [_bad_count(part.state) for part in parts]
    index = part_of(pl.int_range(frame.height, dtype=pl.UInt32, eager=True), parts)
    # per line, of its part: another rank is bad; some rank is bad before the batch
    others = pl.Series(
        [n - bool(part.state["bad"].get("-1")) > 0 for n, part in zip(counts, parts, strict=True)]
    ).gather(index)
    before = pl.Series([n > 0 for n in counts]).gather(index)
    value = pl.col(rule.column)
    masked = pl.lit(False)
    if rule.masked_by is not None:
        masked = ((value == 0) & ~pl.col(rule.masked_by).is_finite()).fill_null(False)
    lines = (
        frame.lazy()
        .select(
            index.cast(pl.Int64).alias("_g"),
            (pl.int_range(pl.len(), dtype=pl.Int64) - begins.gather(index)).alias("_row"),
            value.alias("_value"),
            (~value.is_finite() | masked).alias("_bad"),
            masked.alias("_masked"),
            others.alias("_others"),
            before.alias("_before"),
        )
        .filter(pl.col("_g").is_in(stepped) & pl.col("_value").is_not_null())
        .with_columns((pl.col("_bad") | pl.col("_others")).alias("_on"))
        .with_columns(
            (pl.col("_on") != pl.col("_on").shift(1).over("_g").fill_null(pl.col("_before"))).alias(
                "_changed"
            ),
            pl.col("_g").is_last_distinct().alias("_last"),
        )
        .filter(pl.col("_changed") | pl.col("_last"))
        .collect()
    )
    override = Override(summary=rule.masked_summary) if rule.masked_summary else None
    found: dict[int, list[Transition]] = {n: [] for n in stepped}
    lasts: dict[int, bool] = {}
    columns = ("_g", "_row", "_on", "_value", "_masked", "_changed", "_last", "_bad")
    for g, row, fire, number, hidden, changed, last, bad in zip(
        *(lines.get_column(name) for name in columns), strict=True
    ):
        if changed:
            status = FIRING if fire else RESOLVED
            placed = override if fire and hidden else None
            found[g].append(Transition(row=row, status=status, value=number, override=placed))
        if last:
            lasts[g] = bool(bad)
    out: dict[int, Outcome] = {}
    for number in stepped:
        known: dict[str, bool] = dict(parts[number].state["bad"])
        known["-1"] = lasts[number]
        out[number] = (found[number], {"bad": known})
    return out


def _huge(value: pl.Expr) -> pl.Expr:
    """A finite value above `HUGE` (polars orders NaN above every number)."""
    return value.is_finite() & (value.abs() > HUGE)


def _bad_count(state: dict[str, Any]) -> int:
    """How many ranks the state holds bad."""
    return sum(state["bad"].values())
