"""The `spike` rule: a value (the loss) above a robust band over its own recent history (see
`logwatch.rules.anomaly`). It needs its band at every value (a noisy loss is near it often), so
it uses rolling medians; the MAD is streamed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from logwatch.alerts import FIRING
from logwatch.rules.base import Needs, Outcome, Override, Part, Transition
from logwatch.rules.ranked import after_tail, by_rank, quiet_ranks
from logwatch.rules.spike_many import HIGH, MIN_SAMPLES, judged, spike_many


def _bound(x: pl.Series, window: int, *, low: bool) -> pl.Series:
    """The min (or max) of the `window` values before each one; null without a full window."""
    rolled = x.rolling_min(window) if low else x.rolling_max(window)
    return rolled.shift(1)


def _history(values: pl.Series, tail: list[float | None], window: int, after: int) -> pl.DataFrame:
    """The carried tail followed by this batch's values, with the median of the `window` values
    before each one (`_median`), that median from `after` values on (`_base`) and its position
    (`_i`, the tail first)."""
    series = pl.concat([pl.Series(tail, dtype=pl.Float64), values.cast(pl.Float64)])
    before = pl.col("_x").rolling_median(window, min_samples=min(after, MIN_SAMPLES)).shift(1)
    # the rolling median once (an eager `with_columns` computed it for each column using it)
    return (
        pl.DataFrame({"_x": series})
        .lazy()
        .with_columns(before.alias("_before"), pl.int_range(0, pl.len()).alias("_i"))
        .select(
            "_x",
            pl.when(pl.col("_i") >= MIN_SAMPLES).then("_before").alias("_median"),
            pl.when(pl.col("_i") >= after).then("_before").alias("_base"),
            "_i",
        )
        .collect()
    )


def _with_fields(
    transitions: list[Transition], rows: pl.Series, fields: pl.DataFrame
) -> list[Transition]:
    """Streak transitions (rows of a filtered frame) mapped back to frame rows, with fields."""
    out = []
    for t in transitions:
        extra = {name: fields.get_column(name)[t.row] for name in fields.columns}
        out.append(replace(t, row=rows[t.row], fields=extra))
    return out


@dataclass(frozen=True, slots=True)
class SpikeRule:
    """Fires when `column` rises above median + k x MAD of its last `window` finite values (and
    at least `min_rise` x the median above it), or, with any history of `extreme_after` values,
    to `extreme` x their median (0: never); resolves at the first value back inside. A fire the
    extreme limit alone decides says `extreme_summary`.

    The MAD is streamed: each value's deviation is taken from the median of the window before
    it, and the MAD is the median of the last `window` such deviations."""

    column: str
    window: int
    k: float
    min_rise: float
    extreme: float = 0.0
    extreme_after: int = 3
    extreme_summary: str | None = None

    @property
    def needs(self) -> Needs:
        """Its column and the rank; no gate: every finite value joins the history."""
        return Needs(frozenset({self.column, "rank"}))

    def quiet(self, state: dict[str, Any]) -> bool:
        """No rank above the band."""
        return quiet_ranks(state, _spike_quiet)

    def initial_state(self) -> dict[str, Any]:
        return {"ranks": {}}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        initial = {"values": [], "deviations": [], "streak": HIGH.initial_state()}
        return by_rank(
            frame,
            state,
            column=self.column,
            step=self._step,
            initial=initial,
            firing=lambda rank: not _spike_quiet(rank),
        )

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part of one history (no ranks), scored in one query for all."""
        return spike_many(self, frame, parts)

    def _step(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """One history's step (a rank's, or the whole log's)."""
        if frame.height == 1:  # a live batch: the window's median is the carried tail's
            calm = _spike_one(self, frame.item(0, self.column), state)
            if calm is not None:
                return [], calm
        rows = (
            frame.select(self.column).with_row_index("_row").filter(pl.col(self.column).is_finite())
        )
        if rows.is_empty():
            return [], state
        tail: list[float | None] = state["values"]
        calm = _spike_calm(self, rows.get_column(self.column), state)
        if calm is not None:
            return [], calm
        history = _history(rows.get_column(self.column), tail, self.window, self.extreme_after)
        fresh = (pl.col("_x") - pl.col("_median")).abs()
        carried = pl.Series(state["deviations"], dtype=pl.Float64)
        deviation = pl.concat([carried, history.select(fresh).to_series().slice(len(tail))])
        scored = (  # one query
            judged(
                self,
                history.lazy()
                .with_columns(deviation.alias("_dev"))
                .with_columns(
                    pl.col("_dev")
                    .rolling_median(self.window, min_samples=MIN_SAMPLES)
                    .shift(1)
                    .alias("_mad")
                ),
            )
            .slice(len(tail))
            .collect()
        )
        found, streak = HIGH.evaluate(scored, state["streak"])
        banded = scored.get_column("_banded")
        override = Override(summary=self.extreme_summary)
        found = [
            t if t.status != FIRING or banded[t.row] else replace(t, override=override)
            for t in found
        ]
        fields = scored.select("median", "band")
        new_state = {
            "values": history.get_column("_x").tail(self.window).to_list(),
            "deviations": deviation.tail(self.window).to_list(),
            "streak": streak,
        }
        return _with_fields(found, rows.get_column("_row"), fields), new_state


def _spike_quiet(state: dict[str, Any]) -> bool:
    """One history is not above its band."""
    return int(state["streak"]["run"]) == 0


def _spike_calm(rule: SpikeRule, values: pl.Series, state: dict[str, Any]) -> dict[str, Any] | None:
    """The state after `values` when the rule is quiet and no value can be above its band,
    else None. A band is at least median + min_rise x |median|, which grows with the median,
    and a median is at least the window's minimum: a value at or under min + min_rise x |min|
    is not high. Then only the last values make the state: their window medians are all full
    when the batch brings at least `window` values and the history twice that. Every value
    needs a full window (before one, only the extreme limit judges it, and it is not checked
    here), and the extreme limit must be over the floor: it is then over every such value."""
    w = rule.window
    if not _spike_quiet(state) or rule.k < 0 or not 0 <= rule.min_rise <= 1 or values.len() < w:
        return None
    if 0 < rule.extreme < 1 + rule.min_rise:
        return None
    x = after_tail(state["values"], values)
    if x.len() < 2 * w:
        return None
    low = _bound(x, w, low=True)
    floor = low + rule.min_rise * low.abs()
    if (x > floor).fill_null(True).slice(len(state["values"])).any():
        return None
    recent = x.tail(2 * w)
    median = recent.rolling_median(w, min_samples=MIN_SAMPLES).shift(1)
    deviations = (recent - median).abs().tail(w)
    return {
        "values": x.tail(w).to_list(),
        "deviations": deviations.to_list(),
        "streak": {"run": 0},
    }


def _spike_one(
    rule: SpikeRule, value: float | None, state: dict[str, Any]
) -> dict[str, Any] | None:
    """The state after a batch of one line with `value` when that cannot move the alert, else
    None: no polars call. A line without a finite value changes nothing. Else the median of the
    window before the value is the median of the carried tail (its last `window` values); a
    quiet rule stays quiet when the value is at or under median + min_rise x |median|, which the
    band is at least when k >= 0 (or without a full window, when there is no band), and under
    the extreme limit (`extreme` x that median, from `extreme_after` values on)."""
    if value is None or not math.isfinite(value):
        return state
    tail: list[float] = state["values"]
    if not _spike_quiet(state) or rule.k < 0:
        return None
    base = _median(tail) if tail and len(tail) >= rule.extreme_after else None
    if rule.extreme > 0 and base is not None and base > 0 and value >= rule.extreme * base:
        return None
    median = _median(tail) if len(tail) >= MIN_SAMPLES else None
    high = median is not None and not value <= median + rule.min_rise * abs(median)
    if high and len(tail) >= rule.window:
        return None
    deviation = None if median is None else abs(value - median)
    return {
        "values": [*tail, value][-rule.window :],
        "deviations": [*state["deviations"], deviation][-rule.window :],
        "streak": state["streak"],
    }


def _median(values: list[float]) -> float:
    """The median of finite values, as the rolling median gives it (one kernel)."""
    median = pl.Series(values, dtype=pl.Float64).median()
    assert isinstance(median, float)
    return median
