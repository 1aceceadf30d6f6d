"""`StreakRule.evaluate_many`: a streak rule's step on many sources' batches in a few queries
for all: each source's applicable rows, their runs counted from the run it carries in (`over`
the source's part), its events and the run it carries out, as `StreakRule.evaluate` gives
them source by source."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.rules.base import Outcome, Part, Transition, part_of


class Streaky(Protocol):
    """What the step reads of a `log.StreakRule`."""

    @property
    def applies(self) -> pl.Expr: ...
    @property
    def condition(self) -> pl.Expr: ...
    @property
    def count(self) -> int: ...
    @property
    def value_column(self) -> str | None: ...


def streak_many(rule: Streaky, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome]:
    """`rule.evaluate(frame[begin:end], state)` of each part."""
    if not parts:
        return []
    carried = [int(part.state["run"]) for part in parts]
    if parts[0].begin or parts[-1].end != frame.height:  # cut the frame to the parts
        frame = frame.slice(parts[0].begin, parts[-1].end - parts[0].begin)
        shift = parts[0].begin
        parts = [Part(p.begin - shift, p.end - shift, p.state) for p in parts]
    begins = pl.Series([part.begin for part in parts], dtype=pl.Int64)
    number = part_of(pl.int_range(frame.height, dtype=pl.UInt32, eager=True), parts)
    number = number.alias("_part")
    value = [pl.col(rule.value_column)] if rule.value_column else []
    rows = (
        frame.select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
            rule.condition.fill_null(False).alias("_cond"),
            *value,
            rule.applies.fill_null(False).alias("_applies"),
        )
        .hstack([number])
        .filter("_applies")
    )
    at = rows.get_column("_part")
    rows = rows.hstack(
        [
            pl.Series("_carry", carried, dtype=pl.Int64).gather(at),
            begins.gather(at).alias("_begin"),
        ]
    )
    cond, part, carry = pl.col("_cond"), pl.col("_part"), pl.col("_carry")
    changed = cond != cond.shift(1).over(part).fill_null(carry > 0)
    grouped = rows.with_columns(changed.cast(pl.UInt32).cum_sum().over(part).alias("_group"))
    group = pl.col("_group")
    position = pl.int_range(1, pl.len() + 1).over(part, group) + pl.when(group == 0).then(
        carry
    ).otherwise(0)
    scored = grouped.with_columns(
        pl.when(cond).then(position).otherwise(0).alias("_run"),
        (pl.col("_row") - pl.col("_begin")).alias("_row"),
    ).with_columns(pl.col("_run").shift(1).over(part).fill_null(carry).alias("_prev_run"))
    fire = pl.col("_run") == rule.count
    events = scored.with_columns(fire.alias("_fire")).filter(
        pl.col("_fire") | ((pl.col("_run") == 0) & (pl.col("_prev_run") >= rule.count))
    )
    ends = scored.group_by("_part").agg(pl.col("_run").last(), pl.col("_cond").any())
    last = {int(p): (int(r), bool(c)) for p, r, c in ends.iter_rows()}
    moved: list[list[Transition]] = [[] for _ in parts]
    values = events.get_column(rule.value_column).to_list() if rule.value_column else None
    for i, (at, row, fired) in enumerate(events.select("_part", "_row", "_fire").iter_rows()):
        status = FIRING if fired else RESOLVED
        moved[at].append(Transition(row, status, None if values is None else values[i]))
    out: list[Outcome] = []
    for n, part_state in enumerate(parts):
        found = last.get(n)
        if found is None or (carried[n] == 0 and not found[1]):
            out.append(([], part_state.state))  # no applicable row, or no streak to move
        else:
            out.append((moved[n], {"run": found[0]}))
    return out
