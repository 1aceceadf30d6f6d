"""Rule types that compare a metric with its own recent history: `spike` (a loss above a robust
band) and `drop` (throughput under a fraction of its rolling median).

Both keep the last `window` values in their state and look at that tail followed by the batch,
so every value is judged against the same `window` predecessors whatever the split of the file
into batches; a rule fires only once a full window of history is there.

`spike` needs its band at every value (a noisy loss is near it often), so it uses rolling
medians. `drop` is rarely near its threshold: a cheap rolling max first picks the values that
could be under it, and the exact window median is computed for those (and the rows right after
them, where an alert can resolve) only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from logwatch.rules.log import Needs, Rule, RuleType, StreakRule, Transition
from logwatch.rules.params import Kind, Param

_MIN_WINDOW = 5
# The spike band's median and MAD use partial windows early on (a robust scale needs a few
# values); the band is only used once a full window is there.
_MIN_SAMPLES = 5

# Lines after which the next throughput report is a pause, not a slowdown: checkpoint saves and
# evaluation / validation runs. Case-sensitive literals, so the scan is a fast literal search.
PAUSE_PATTERN = (
    r"[Ss]aving (?:model )?checkpoint|[Cc]heckpoint saved|[Ss]aved checkpoint|"
    r"Running Evaluation|[Ee]valuating|eval_loss|[Vv]alidation|validating|Epoch\(val\)|"
    r"saving checkpoint|save_checkpoint"
)


def _series(tail: list[float], values: pl.Series) -> pl.Series:
    """The carried tail followed by this batch's values."""
    return pl.concat([pl.Series(tail, dtype=pl.Float64), values.cast(pl.Float64)])


def _bound(x: pl.Series, window: int, *, low: bool) -> pl.Series:
    """The min (or max) of the `window` values before each one; null without a full window."""
    rolled = x.rolling_min(window) if low else x.rolling_max(window)
    return rolled.shift(1)


def _window_stats(x: pl.Series, at: pl.Series, window: int) -> pl.DataFrame:
    """Median and MAD of the `window` values before each index in `at` (each >= window)."""
    spans = pl.DataFrame({"_i": at.cast(pl.Int64).unique(maintain_order=True)})
    flat = spans.with_columns(pl.int_ranges(pl.col("_i") - window, pl.col("_i")).alias("_j"))
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


def _history(values: pl.Series, tail: list[float | None], window: int) -> pl.DataFrame:
    """The carried tail followed by this batch's values, with the median of the `window` values
    before each one (`_median`) and its position (`_i`, the tail first)."""
    series = pl.concat([pl.Series(tail, dtype=pl.Float64), values.cast(pl.Float64)])
    return pl.DataFrame({"_x": series}).with_columns(
        pl.col("_x").rolling_median(window, min_samples=_MIN_SAMPLES).shift(1).alias("_median"),
        pl.int_range(0, pl.len()).alias("_i"),
    )


def _with_fields(
    transitions: list[Transition], rows: pl.Series, fields: pl.DataFrame
) -> list[Transition]:
    """Streak transitions (rows of a filtered frame) mapped back to frame rows, with fields."""
    out = []
    for t in transitions:
        extra = {name: fields.get_column(name)[t.row] for name in fields.columns}
        out.append(Transition(rows[t.row], t.status, t.value, fields=extra))
    return out


_HIGH = StreakRule(
    applies=pl.col("_x").is_not_null(), condition=pl.col("_high"), count=1, value_column="_x"
)


@dataclass(frozen=True, slots=True)
class SpikeRule:
    """Fires when `column` rises above median + k x MAD of its last `window` finite values (and
    at least `min_rise` x the median above it); resolves at the first value back inside.

    The MAD is streamed: each value's deviation is taken from the median of the window before
    it, and the MAD is the median of the last `window` such deviations."""

    column: str
    window: int
    k: float
    min_rise: float

    @property
    def needs(self) -> Needs:
        """Its column; no gate: every finite value joins the history."""
        return Needs(frozenset({self.column}))

    def quiet(self, state: dict[str, Any]) -> bool:
        """Not above the band."""
        return int(state["streak"]["run"]) == 0

    def initial_state(self) -> dict[str, Any]:
        return {"values": [], "deviations": [], "streak": _HIGH.initial_state()}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
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
        history = _history(rows.get_column(self.column), tail, self.window)
        fresh = (pl.col("_x") - pl.col("_median")).abs()
        carried = pl.Series(state["deviations"], dtype=pl.Float64)
        deviation = pl.concat([carried, history.select(fresh).to_series().slice(len(tail))])
        band = pl.col("_median") + pl.max_horizontal(
            self.k * pl.col("_mad"), self.min_rise * pl.col("_median").abs()
        )
        scored = (  # one query
            history.lazy()
            .with_columns(deviation.alias("_dev"))
            .with_columns(
                pl.col("_dev")
                .rolling_median(self.window, min_samples=_MIN_SAMPLES)
                .shift(1)
                .alias("_mad")
            )
            .with_columns(band.alias("band"))
            .with_columns(
                ((pl.col("_i") >= self.window) & (pl.col("_x") > pl.col("band")))
                .fill_null(False)
                .alias("_high")
            )
            .slice(len(tail))
            .collect()
        )
        found, streak = _HIGH.evaluate(scored, state["streak"])
        fields = scored.select(pl.col("_median").alias("median"), "band")
        new_state = {
            "values": history.get_column("_x").tail(self.window).to_list(),
            "deviations": deviation.tail(self.window).to_list(),
            "streak": streak,
        }
        return _with_fields(found, rows.get_column("_row"), fields), new_state


@dataclass(frozen=True, slots=True)
class DropRule:
    """Fires at the `count`-th consecutive value of `column` under `fraction` x the median of its
    last `window` values; resolves at the first one back above. The first value after a pause
    line (a checkpoint save, an evaluation) counts neither in the streak nor in the median."""

    column: str
    window: int
    fraction: float
    count: int

    @property
    def needs(self) -> Needs:
        """Its column, and the text for pause lines (found ahead where the engine can); no
        gate: every value joins the history."""
        return Needs(frozenset({self.column, "text"}), ahead={PAUSES: PAUSE_PATTERN})

    def quiet(self, state: dict[str, Any]) -> bool:
        """No low streak running."""
        return int(state["streak"]["run"]) == 0

    def _streak(self) -> StreakRule:
        return StreakRule(
            applies=pl.col("_x").is_not_null(),
            condition=pl.col("_low"),
            count=self.count,
            value_column="_x",
        )

    def initial_state(self) -> dict[str, Any]:
        return {"values": [], "seen": False, "skip": False, "streak": {"run": 0}}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
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
        # Only throughput and pause rows are left: "the row before is a pause" is "a pause
        # came since the last report". Pauses before the first report ever are no one's pause.
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
        x = _series(tail, kept.get_column(self.column))
        first, size = len(tail), kept.height
        # median <= the window's max: a value at or over fraction x max is not low.
        highest = _bound(x, self.window, low=False)
        candidates = (x < self.fraction * highest).fill_null(False).slice(first).arg_true().cast(
            pl.Int64
        ) + first
        carried = int(state["streak"]["run"]) > 0
        near = _near(candidates, first, size, carried)
        judged = _judged(x, first, near.filter(near >= self.window), self.window)
        judged = judged.with_columns(
            (pl.col("_x") < self.fraction * pl.col("median")).alias("_low")
        )
        low = pl.repeat(False, size, eager=True).scatter(
            judged.filter(pl.col("_low")).get_column("_p"), True
        )
        scored = pl.DataFrame({"_x": x.slice(first), "_low": low})
        found, streak = self._streak().evaluate(scored, state["streak"])
        medians = dict(zip(judged.get_column("_p"), judged.get_column("median"), strict=True))
        rows = kept.get_column("_row")
        new_state["values"] = x.tail(self.window).to_list()
        new_state["streak"] = streak
        return [
            Transition(rows[t.row], t.status, t.value, fields={"median": medians.get(t.row)})
            for t in found
        ], new_state


PAUSES = "_pauses"
"""The `ahead` column of the lines that are pauses (`PAUSE_PATTERN`)."""
_PAUSE_ROWS = pl.col("text").str.contains(PAUSE_PATTERN)


def _pauses(frame: pl.DataFrame) -> pl.Series:
    """Which lines of the batch are pauses: the column found ahead, else from the text."""
    if PAUSES in frame.columns:
        return frame.get_column(PAUSES)
    return frame.select(_PAUSE_ROWS).to_series()


def _spike_calm(rule: SpikeRule, values: pl.Series, state: dict[str, Any]) -> dict[str, Any] | None:
    """The state after `values` when the rule is quiet and no value can be above its band,
    else None. A band is at least median + min_rise x |median|, which grows with the median,
    and a median is at least the window's minimum: a value at or under min + min_rise x |min|
    is not high. Then only the last values make the state: their window medians are all full
    when the batch brings at least `window` values and the history twice that."""
    w = rule.window
    if not rule.quiet(state) or rule.k < 0 or not 0 <= rule.min_rise <= 1 or values.len() < w:
        return None
    x = _series(state["values"], values)
    if x.len() < 2 * w:
        return None
    low = _bound(x, w, low=True)
    floor = low + rule.min_rise * low.abs()
    if (x > floor).fill_null(False).slice(len(state["values"])).any():
        return None
    recent = x.tail(2 * w)
    median = recent.rolling_median(w, min_samples=_MIN_SAMPLES).shift(1)
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
    band is at least when k >= 0 (or without a full window, when there is no band)."""
    if value is None or not math.isfinite(value):
        return state
    tail: list[float] = state["values"]
    if not rule.quiet(state) or rule.k < 0:
        return None
    median = _median(tail) if len(tail) >= _MIN_SAMPLES else None
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


def _drop_calm(
    rule: DropRule, values: pl.Series, pauses: pl.Series, state: dict[str, Any]
) -> dict[str, Any] | None:
    """The state after a batch with `values` when the rule is quiet and no value can be low,
    else None: no polars call. With no pause line in the batch or just before it, every value
    is kept; a value is a candidate (possibly low) only under `fraction` x the max of its
    window, at most the max of the history, and only with a full window before it."""
    if not rule.quiet(state) or rule.fraction < 0 or pauses.any() or state["skip"]:
        return None
    kept = (values.drop_nulls() if values.null_count() else values).cast(pl.Float64)
    x = pl.Series(state["values"], dtype=pl.Float64).append(kept)
    # ignore: the min and max of a float column with a value are floats, which mypy cannot see
    if x.len() > rule.window and not kept.min() >= rule.fraction * x.max():  # type: ignore[operator]
        return None
    return {**state, "values": x.tail(rule.window).to_list(), "seen": True, "skip": False}


def _build_spike(params: Mapping[str, Any]) -> Rule:
    return SpikeRule(
        column=params["column"],
        window=params["window"],
        k=params["k"],
        min_rise=params["min_rise"],
    )


def _build_drop(params: Mapping[str, Any]) -> Rule:
    return DropRule(
        column=params["column"],
        window=params["window"],
        fraction=params["fraction"],
        count=params["count"],
    )


ANOMALY_RULE_TYPES: dict[str, RuleType] = {
    "spike": RuleType(
        (
            Param("column", Kind.STRING, default="loss", choices=("loss", "grad_norm")),
            Param("window", Kind.INT, default=30, minimum=_MIN_WINDOW),
            Param("k", Kind.FLOAT, default=6.0),
            Param("min_rise", Kind.FLOAT, default=0.1),
        ),
        _build_spike,
        fields=frozenset({"median", "band"}),
    ),
    "drop": RuleType(
        (
            Param("column", Kind.STRING, default="throughput", choices=("throughput",)),
            Param("window", Kind.INT, default=20, minimum=_MIN_WINDOW),
            Param("fraction", Kind.FLOAT, default=0.5),
            Param("count", Kind.INT, default=3, minimum=1),
        ),
        _build_drop,
        fields=frozenset({"median"}),
    ),
}
"""The history rule types (`logwatch.rules.registry` assembles every rule type)."""
