"""One history per rank for the history rules (`spike`, `drop`): on a log where several ranks
interleave their lines (`[rank3]:`, `3: `), each rank's values are judged against that rank's
own history, so one rank's spike or slowdown is not averaged away among the others'.

The rule's alert stays one per source: it fires when the first rank goes bad and resolves when
no rank is bad any more (as `nonfinite` does), so ranks reporting in turn do not flap. Lines
without a rank make one more history of their own ("-1"). Each rank's state is what the rule
keeps for a whole log (its last `window` values), so the state grows with the ranks only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.rules.base import Transition

UNRANKED = "-1"
"""The history of the lines without a rank."""

Step = Callable[[pl.DataFrame, dict[str, Any]], tuple[list[Transition], dict[str, Any]]]


def rank_states(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each rank's state; a state saved before ranks were kept apart is the unranked one."""
    if "ranks" in state:
        ranks: dict[str, dict[str, Any]] = state["ranks"]
        return ranks
    return {UNRANKED: state}


def by_rank(
    frame: pl.DataFrame,
    state: dict[str, Any],
    *,
    column: str,
    step: Step,
    initial: dict[str, Any],
    firing: Callable[[dict[str, Any]], bool],
    shared: str | None = None,
) -> tuple[list[Transition], dict[str, Any]]:
    """Run `step` over each rank's lines of `frame` (those with a `column` value) on that rank's
    state, and merge the ranks' transitions into the alert of "some rank is `firing`".
    `shared`: a boolean column of the lines every rank sees whatever their rank (a checkpoint
    pause), given to each rank the rule knows."""
    ranks = dict(rank_states(state))
    if "rank" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("rank"))
    rank = frame.get_column("rank")
    if rank.null_count() == frame.height and set(ranks) <= {UNRANKED}:
        # one history, no rank (most logs): the frame as it is
        moved, after = step(frame, ranks.get(UNRANKED, initial))
        if UNRANKED in ranks or after != initial:  # no history starts with nothing in it
            ranks[UNRANKED] = after
        return moved, {"ranks": ranks}
    before = sum(firing(s) for s in ranks.values())
    keyed = frame.with_columns(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"),
        rank.fill_null(int(UNRANKED)).cast(pl.String).alias("_rank"),
    )
    valued = pl.col(column).is_not_null()
    if shared is not None:
        valued = valued & ~pl.col(shared)
    parts = keyed.filter(valued).partition_by("_rank", as_dict=True, maintain_order=True)
    groups = {str(key[0]): part for key, part in parts.items()}
    if shared is not None and frame.get_column(shared).any():
        pauses = keyed.filter(pl.col(shared))
        names = [*ranks, *(name for name in groups if name not in ranks)]
        groups = {
            name: pl.concat([groups[name], pauses]).sort("_row") if name in groups else pauses
            for name in names
        }
    found: list[Transition] = []
    for name, group in groups.items():
        moved, after = step(group, ranks.get(name, initial))
        if name in ranks or after != initial:  # a rank whose lines moved nothing keeps none
            ranks[name] = after
        rows = group.get_column("_row")
        found.extend(replace(t, row=int(rows[t.row])) for t in moved)
    return _merged(found, before), {"ranks": ranks}


def _merged(found: list[Transition], before: int) -> list[Transition]:
    """The ranks' transitions as one alert: a fire where the first rank goes bad, a resolve
    where the last one comes back (`before`: the ranks bad when the batch began)."""
    bad, out = before, []
    for transition in sorted(found, key=lambda t: t.row):
        if transition.status == FIRING:
            bad += 1
            if bad == 1:
                out.append(transition)
        elif transition.status == RESOLVED:
            bad -= 1
            if bad == 0:
                out.append(transition)
    return out


def quiet_ranks(state: dict[str, Any], quiet: Callable[[dict[str, Any]], bool]) -> bool:
    """Every rank is quiet."""
    return all(quiet(s) for s in rank_states(state).values())


def after_tail(tail: list[float], values: pl.Series) -> pl.Series:
    """A history's carried tail followed by this batch's values."""
    return pl.concat([pl.Series(tail, dtype=pl.Float64), values.cast(pl.Float64)])
