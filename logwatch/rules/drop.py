"""The `drop` rule: a value (throughput) under a fraction of the median of its own recent history
(see `logwatch.rules.anomaly`), the first value after a pause line (a checkpoint save, an
evaluation) left out. It is rarely near its threshold: a cheap rolling max first picks the values
that could be under it, and the exact window median is computed for those (and the rows right
after them, where an alert can resolve) only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from logwatch.rules.base import Needs, Outcome, Part, Transition
from logwatch.rules.log import StreakRule
from logwatch.rules.ranked import UNRANKED, after_tail, by_rank, quiet_ranks, rank_states

# Lines after which the next throughput report is a pause, not a slowdown: checkpoint saves and
# evaluation / validation runs. Case-sensitive literals, so the scan is a fast literal search.
PAUSE_PATTERN = (
    r"[Ss]aving (?:model )?checkpoint|[Cc]heckpoint saved|[Ss]aved checkpoint|"
    r"Running Evaluation|[Ee]valuating|eval_loss|[Vv]alidation|validating|Epoch\(val\)|"
    r"saving checkpoint|save_checkpoint|valid on '"
)


def _window_stats(x: pl.Series, at: pl.Series, window: int) -> pl.DataFrame:
    """Median and MAD of the (up to) `window` values before each index in `at` (each > 0)."""
    spans = pl.DataFrame({"_i": at.cast(pl.Int64).unique(maintain_order=True)})
    start = pl.max_horizontal(pl.col("_i") - window, pl.lit(0, dtype=pl.Int64))
    flat = spans.with_columns(pl.int_ranges(start, pl.col("_i")).alias("_j"))
    flat = flat.explode("_j")
    flat = flat.with_columns(x.gather(flat.get_column("_j")).alias("_v"))
    median = pl.col("_v").median()
    return flat.group_by("_i", maintain_order=True).agg(
        median.alias("median"), (pl.col("_v") - median).abs().median().alias("mad")
    )


def _near(candidates: pl.Series, first: int, size: int, carried: bool) -> pl.Series:
    """The candidate indexes, the index after each (where an alert can end) and, when an
    alert is carried in, the batch's first index: every place a transition can be."""
    after = candidates + 1
    parts = [candidates, after.filter(after < first + size)]
    if carried:
        parts.append(pl.Series([first], dtype=candidates.dtype))
    return pl.concat(parts).unique().sort()


def _judged(x: pl.Series, first: int, at: pl.Series, window: int) -> pl.DataFrame:
    """Batch positions (`_p`) of `at`, with their value and window stats."""
    stats = (
        _window_stats(x, at, window)
        if at.len()
        else pl.DataFrame(schema={"_i": pl.Int64, "median": pl.Float64, "mad": pl.Float64})
    )
    return stats.with_columns(
        (pl.col("_i") - first).alias("_p"), x.gather(stats.get_column("_i")).alias("_x")
    )


def _initial() -> dict[str, Any]:
    """A history's state before its first value."""
    return {"values": [], "seen": False, "skip": False, "streak": {"run": 0}}


@dataclass(frozen=True, slots=True)
class DropRule:
    """Fires at the `count`-th consecutive value of `column` under `fraction` x the median of its
    last `window` values, or, with any history of `extreme_after` values, under their median /
    `extreme` (0: never); resolves at the first one back above. The first value after a pause
    line (a checkpoint save, an evaluation) counts neither in the streak nor in the median."""

    column: str
    window: int
    fraction: float
    count: int
    extreme: float = 0.0
    extreme_after: int = 3

    @property
    def needs(self) -> Needs:
        """Its column, the rank, and the text for pause lines (found ahead where the engine
        can); no gate: every value joins the history."""
        return Needs(frozenset({self.column, "rank", "text"}), ahead={PAUSES: PAUSE_PATTERN})

    def quiet(self, state: dict[str, Any]) -> bool:
        """No low streak running in any rank."""
        return quiet_ranks(state, _drop_quiet)

    def _streak(self) -> StreakRule:
        return StreakRule(
            applies=pl.col("_x").is_not_null(),
            condition=pl.col("_low"),
            count=self.count,
            value_column="_x",
        )

    def initial_state(self) -> dict[str, Any]:
        return {"ranks": {}}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        # a pause holds up every rank, whatever rank (if any) printed it
        paused = (
            frame if PAUSES in frame.columns else frame.with_columns(_pauses(frame).alias(PAUSES))
        )
        return by_rank(
            paused,
            state,
            column=self.column,
            step=self._step,
            initial=_initial(),
            firing=lambda rank: int(rank["streak"]["run"]) >= self.count,
            shared=PAUSES,
        )

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part without a value or a pause line (no history moves), and on
        each calm one (`_calm_many`), in a few queries for all; None for the others."""
        pauses = _pauses(frame)
        moving = (frame.get_column(self.column).is_not_null() | pauses).cast(pl.UInt32).cum_sum()
        out: list[Outcome | None] = []
        moved: list[int] = []
        for n, part in enumerate(parts):
            before = int(moving[part.begin - 1]) if part.begin else 0
            if part.end > part.begin and int(moving[part.end - 1]) > before:
                out.append(None)
                moved.append(n)
            else:
                out.append(([], {"ranks": dict(rank_states(part.state))}))
        if moved:
            for n, calm in zip(moved, _calm_many(self, frame, pauses, parts, moved), strict=True):
                out[n] = calm
        return out

    def _step(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """One history's step (a rank's, or the whole log's)."""
        values = frame.get_column(self.column)
        if values.null_count() == frame.height:
            if not state["seen"] or state["skip"]:
                return [], state
            return [], {**state, "skip": _pauses(frame).any()}
        pauses = _pauses(frame)
        calm = _drop_calm(self, values, pauses, state)
        if calm is not None:
            return [], calm
        marked = (
            pl.DataFrame({self.column: values, "_pause": pauses})
            .with_row_index("_row")
            .filter(pl.col(self.column).is_not_null() | pl.col("_pause"))
        )
        if not state["seen"]:  # pauses before the first report ever are no one's pause
            marked = marked.filter(
                (pl.col(self.column).is_not_null() & ~pl.col("_pause")).cum_max()
            )
        if marked.is_empty():
            return [], state
        # Only throughput and pause rows are left: "the row before is a pause" is "a pause
        # came since the last report".
        skip = pl.col("_pause").shift(1, fill_value=state["skip"] and state["seen"])
        kept = marked.with_columns(skip.alias("_skip")).filter(
            pl.col(self.column).is_not_null() & ~pl.col("_pause") & ~pl.col("_skip")
        )
        new_state = {
            **state,
            "seen": True,
            "skip": bool(marked.get_column("_pause")[-1]),
        }
        if kept.is_empty():
            return [], new_state
        tail: list[float] = state["values"]
        x = after_tail(tail, kept.get_column(self.column))
        first, size = len(tail), kept.height
        candidates = _drop_candidates(self, x).slice(first).arg_true().cast(pl.Int64) + first
        carried = int(state["streak"]["run"]) > 0
        near = _near(candidates, first, size, carried)
        after = max(self.extreme_after, 1)
        judged = _judged(x, first, near.filter(near >= after), self.window)
        low = (pl.col("_i") >= self.window) & (pl.col("_x") < self.fraction * pl.col("median"))
        if self.extreme > 0:
            low = low | (pl.col("_x") < pl.col("median") / self.extreme)
        judged = judged.with_columns(low.alias("_low"))
        low_rows = pl.repeat(False, size, eager=True).scatter(
            judged.filter(pl.col("_low")).get_column("_p"), True
        )
        scored = pl.DataFrame({"_x": x.slice(first), "_low": low_rows})
        found, streak = self._streak().evaluate(scored, state["streak"])
        medians = dict(zip(judged.get_column("_p"), judged.get_column("median"), strict=True))
        rows = kept.get_column("_row")
        new_state["values"] = x.tail(self.window).to_list()
        new_state["streak"] = streak
        return [
            Transition(rows[t.row], t.status, t.value, fields={"median": medians.get(t.row)})
            for t in found
        ], new_state


def _drop_quiet(state: dict[str, Any]) -> bool:
    """One history has no low streak running."""
    return int(state["streak"]["run"]) == 0


def _drop_candidates(rule: DropRule, x: pl.Series) -> pl.Series:
    """Which values of the history may be low: the median of the values before one is at most
    their max, so a value at or over the limit's factor x that max is not low."""
    ratio = 1 / rule.extreme if rule.extreme > 0 else 0.0
    factor = (
        pl.when(pl.int_range(0, pl.len()) >= rule.window)
        .then(max(rule.fraction, ratio))
        .otherwise(ratio)
    )
    before = pl.col("_x").rolling_max(rule.window, min_samples=max(rule.extreme_after, 1))
    return (
        pl.DataFrame({"_x": x})
        .select((pl.col("_x") < factor * before.shift(1)).fill_null(False))
        .to_series()
    )


PAUSES = "_pauses"
"""The `ahead` column of the lines that are pauses (`PAUSE_PATTERN`)."""
_PAUSE_ROWS = pl.col("text").str.contains(PAUSE_PATTERN)


def _pauses(frame: pl.DataFrame) -> pl.Series:
    """Which lines of the batch are pauses: the column found ahead, else from the text."""
    if PAUSES in frame.columns:
        return frame.get_column(PAUSES)
    return frame.select(_PAUSE_ROWS).to_series()


def _calm_many(
    rule: DropRule,
    frame: pl.DataFrame,
    pauses: pl.Series,
    parts: Sequence[Part],
    chosen: list[int],
) -> list[Outcome | None]:
    """`_drop_calm` of each chosen part with no rank (lines or state) and no pause: its values'
    count, min, max and last `window` (one query for all); None where it is not calm (or a
    value is NaN, which Python's min and max would not order as polars does)."""
    begins = pl.Series([parts[n].begin for n in chosen], dtype=pl.Int64)
    ends = pl.Series([parts[n].end for n in chosen], dtype=pl.Int64)
    index = pl.int_range(frame.height, dtype=pl.Int64, eager=True)
    number = (begins.search_sorted(index, side="right").cast(pl.Int64) - 1).clip(0)
    inside = (index >= begins.gather(number)) & (index < ends.gather(number))
    value = pl.col("_v").drop_nulls().cast(pl.Float64)
    found = (
        pl.DataFrame([number.alias("_n"), frame.get_column(rule.column).alias("_v")])
        .with_columns(_pause=pauses, _ranked=frame.get_column("rank").is_not_null())
        .filter(inside)
        .group_by("_n")
        .agg(
            (pl.col("_pause").any() | pl.col("_ranked").any() | value.is_nan().any()).alias("_no"),
            value.min().alias("_min"),
            value.max().alias("_max"),
            value.len().alias("_len"),
            value.tail(rule.window).alias("_tail"),
        )
    )
    out: list[Outcome | None] = [None] * len(chosen)
    for at, no, low, high, length, tail in found.iter_rows():
        ranks = rank_states(parts[chosen[at]].state)
        if no or not length or not set(ranks) <= {UNRANKED}:
            continue
        state = ranks.get(UNRANKED) or _initial()
        if not _drop_quiet(state) or rule.fraction < 0 or state["skip"]:
            continue
        history: list[float] = state["values"]
        if any(math.isnan(v) for v in history):
            continue
        size = len(history) + length
        ratio = 1 / rule.extreme if rule.extreme > 0 else 0.0
        factor = max(rule.fraction, ratio) if size > rule.window else ratio
        if size > rule.extreme_after and not low >= factor * max([*history, high]):
            continue
        kept = [*history, *tail][-rule.window :]
        calm = {**state, "values": kept, "seen": True, "skip": False}
        out[at] = ([], {"ranks": {**ranks, UNRANKED: calm}})
    return out


def _drop_calm(
    rule: DropRule, values: pl.Series, pauses: pl.Series, state: dict[str, Any]
) -> dict[str, Any] | None:
    """The state after a batch with `values` when the rule is quiet and no value can be low,
    else None: no polars call. With no pause line in the batch or just before it, every value
    is kept; a value is a candidate (possibly low) only under `fraction` x the max of its
    window (1 / `extreme` x it without a full window), at most the max of the history, and only
    with `extreme_after` values before it."""
    if not _drop_quiet(state) or rule.fraction < 0 or pauses.any() or state["skip"]:
        return None
    kept = (values.drop_nulls() if values.null_count() else values).cast(pl.Float64)
    x = pl.Series(state["values"], dtype=pl.Float64).append(kept)
    ratio = 1 / rule.extreme if rule.extreme > 0 else 0.0
    factor = max(rule.fraction, ratio) if x.len() > rule.window else ratio
    # ignore: the min and max of a float column with a value are floats, which mypy cannot see
    if x.len() > rule.extreme_after and not kept.min() >= factor * x.max():  # type: ignore[operator]
        return None
    return {**state, "values": x.tail(rule.window).to_list(), "seen": True, "skip": False}
