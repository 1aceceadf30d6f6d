"""`SpikeRule.evaluate_many`: the spike rule's step on many sources' batches, each source's
one history (no ranks) scored in one query for all: the carried tail and this batch's finite
values, their rolling medians and streamed MAD per history (`over`). The streak then moves
only in the histories with a value above its band or a streak carried in, each on its own
rows, as `SpikeRule._step` does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import polars as pl

from logwatch.alerts import FIRING
from logwatch.rules.base import Outcome, Override, Part, Transition, part_of
from logwatch.rules.log import StreakRule
from logwatch.rules.ranked import UNRANKED, rank_states

MIN_SAMPLES = 5
"""The spike band's median and MAD use partial windows early on (a robust scale needs a few
values); the band is only used once a full window is there."""

HIGH = StreakRule(
    applies=pl.col("_x").is_not_null(), condition=pl.col("_high"), count=1, value_column="_x"
)
"""A history's streak of values above the band (`spike.SpikeRule`)."""


class Spiky(Protocol):
    """What the step reads of a `spike.SpikeRule`."""

    @property
    def column(self) -> str: ...
    @property
    def window(self) -> int: ...
    @property
    def k(self) -> float: ...
    @property
    def min_rise(self) -> float: ...
    @property
    def extreme(self) -> float: ...
    @property
    def extreme_after(self) -> int: ...
    @property
    def extreme_summary(self) -> str | None: ...


def spike_many(rule: Spiky, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
    """`rule.evaluate` on each part of one history whose batch has two lines or more (None for
    the others: a part with ranks, a one-line live batch)."""
    initial = _initial()
    ranks_null = _counts(frame.get_column("rank").is_null(), parts)
    valued = _counts(frame.get_column(rule.column).is_not_null(), parts)
    histories: dict[int, dict[str, Any]] = {}
    bare: dict[int, Outcome] = {}  # the parts without a value: no history moves
    for number, part in enumerate(parts):
        ranks = rank_states(part.state)
        if not valued[number]:
            bare[number] = ([], {"ranks": dict(ranks)})
            continue
        if part.end - part.begin < 2 or ranks_null[number] != part.end - part.begin:
            continue
        if set(ranks) - {UNRANKED}:
            continue
        history = ranks.get(UNRANKED, initial)
        if len(history["values"]) != len(history["deviations"]):
            continue
        histories[number] = history
    moved = _stepped(rule, frame, parts, histories) if histories else {}
    out: list[Outcome | None] = []
    for number, part in enumerate(parts):
        if number not in moved:
            out.append(bare.get(number))
            continue
        found, after = moved[number]
        ranks = dict(rank_states(part.state))
        if UNRANKED in ranks or after != initial:  # no history starts with nothing in it
            ranks[UNRANKED] = after
        out.append((found, {"ranks": ranks}))
    return out


def _counts(flags: pl.Series, parts: Sequence[Part]) -> list[int]:
    """How many of each part's rows are flagged."""
    total = flags.cast(pl.UInt32).cum_sum()
    return [
        int(total[p.end - 1]) - (int(total[p.begin - 1]) if p.begin else 0)
        if p.end > p.begin
        else 0
        for p in parts
    ]


def _initial() -> dict[str, Any]:
    return {"values": [], "deviations": [], "streak": HIGH.initial_state()}


def _stepped(
    rule: Spiky,
    frame: pl.DataFrame,
    parts: Sequence[Part],
    histories: dict[int, dict[str, Any]],
) -> dict[int, Outcome]:
    """`SpikeRule._step` of each history (part number -> its state before), in one query."""
    index = part_of(pl.int_range(frame.height, dtype=pl.UInt32, eager=True), parts)
    begins = pl.Series([part.begin for part in parts], dtype=pl.Int64)
    values = frame.select(
        index.cast(pl.Int64).alias("_g"),
        (pl.int_range(pl.len(), dtype=pl.Int64) - begins.gather(index)).alias("_row"),
        pl.col(rule.column).cast(pl.Float64).alias("_x"),
        pl.lit(None, dtype=pl.Float64).alias("_carried"),
    ).filter(pl.col("_g").is_in(list(histories)) & pl.col("_x").is_finite())
    valued = set(values.get_column("_g").unique().to_list())
    out: dict[int, Outcome] = {n: ([], h) for n, h in histories.items() if n not in valued}
    if not valued:
        return out
    tails = pl.DataFrame(
        {
            "_g": [n for n in histories if n in valued for _ in histories[n]["values"]],
            "_row": [
                i - len(histories[n]["values"])
                for n in histories
                if n in valued
                for i in range(len(histories[n]["values"]))
            ],
            "_x": [v for n in histories if n in valued for v in histories[n]["values"]],
            "_carried": [d for n in histories if n in valued for d in histories[n]["deviations"]],
        },
        schema={"_g": pl.Int64, "_row": pl.Int64, "_x": pl.Float64, "_carried": pl.Float64},
    )
    scored = _scored(rule, pl.concat([tails, values]).sort("_g", "_row", maintain_order=True))
    kept = (
        scored.group_by("_g", maintain_order=True)
        .agg(pl.col("_x").tail(rule.window), pl.col("_dev").tail(rule.window))
        .iter_rows()
    )
    lasts = {g: (xs, devs) for g, xs, devs in kept}
    scored = scored.filter(pl.col("_row") >= 0)
    moving = {
        g
        for g, high in scored.group_by("_g").agg(pl.col("_high").any()).iter_rows()
        if high or int(histories[g]["streak"]["run"])
    }
    override = Override(summary=rule.extreme_summary)
    for g in sorted(valued):
        history = histories[g]
        found: list[Transition] = []
        streak = history["streak"]
        if g in moving:
            mine = scored.filter(pl.col("_g") == g)
            found, streak = HIGH.evaluate(mine, streak)
            banded, rows = mine.get_column("_banded"), mine.get_column("_row")
            fields = mine.select("median", "band")
            found = [
                _placed(
                    t if t.status != FIRING or banded[t.row] else replace(t, override=override),
                    rows,
                    fields,
                )
                for t in found
            ]
        xs, devs = lasts[g]
        out[g] = (found, {"values": list(xs), "deviations": list(devs), "streak": streak})
    return out


def _placed(t: Transition, rows: pl.Series, fields: pl.DataFrame) -> Transition:
    """A streak transition (a row of the history's values) at its row of the part, with the
    median and band it was judged by (`spike._with_fields`)."""
    extra = {name: fields.get_column(name)[t.row] for name in fields.columns}
    return replace(t, row=int(rows[t.row]), fields=extra)


def _scored(rule: Spiky, history: pl.DataFrame) -> pl.DataFrame:
    """Every history's tail and values (`_g`, `_row`: negative for the tail, `_x`, `_carried`:
    the tail's carried deviations) scored as `SpikeRule._step` scores one, in one query."""
    g, after, w = "_g", rule.extreme_after, rule.window
    i = pl.int_range(0, pl.len()).over(g)
    before = pl.col("_x").rolling_median(w, min_samples=min(after, MIN_SAMPLES)).shift(1).over(g)
    mad = pl.col("_dev").rolling_median(w, min_samples=MIN_SAMPLES).shift(1).over(g)
    scored = (
        history.lazy()
        .with_columns(
            pl.when(i >= MIN_SAMPLES).then(before).alias("_median"),
            pl.when(i >= after).then(before).alias("_base"),
            i.alias("_i"),
        )
        .with_columns(
            pl.when(pl.col("_row") < 0)
            .then(pl.col("_carried"))
            .otherwise((pl.col("_x") - pl.col("_median")).abs())
            .alias("_dev")
        )
        .with_columns(mad.alias("_mad"))
    )
    return judged(rule, scored).collect()


def judged(rule: Spiky, scored: pl.LazyFrame) -> pl.LazyFrame:
    """Each value (`_x`) judged against its band, from the median of the window before it
    (`_median`; `_base` from `extreme_after` values on), its position (`_i`) and the MAD
    (`_mad`): whether it is high (`_high`, `_banded`: above the band, not only the extreme
    limit) and the `median` and `band` its summary shows."""
    band = pl.col("_median") + pl.max_horizontal(
        rule.k * pl.col("_mad"), rule.min_rise * pl.col("_median").abs()
    )
    full = pl.col("_i") >= rule.window
    # the extreme limit, where there is one: a positive median of enough values
    limit = pl.when((pl.col("_base") > 0) & (rule.extreme > 0)).then(rule.extreme * pl.col("_base"))
    return (
        scored.with_columns(band.alias("_band"), limit.alias("_limit"))
        .with_columns(
            (full & (pl.col("_x") > pl.col("_band"))).fill_null(False).alias("_banded"),
            (pl.col("_x") >= pl.col("_limit")).fill_null(False).alias("_extreme"),
        )
        .with_columns(
            (pl.col("_banded") | pl.col("_extreme")).alias("_high"),
            pl.when(full).then("_median").otherwise("_base").alias("median"),
            pl.when(full)
            .then(pl.min_horizontal("_band", "_limit"))
            .otherwise("_limit")
            .alias("band"),
        )
    )
