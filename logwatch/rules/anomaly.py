"""Rule types that compare a metric with its own recent history: `spike` (a loss above a robust
band) and `drop` (throughput under a fraction of its rolling median).

Both keep the last `window` values in their state and look at that tail followed by the batch,
so every value is judged against the same `window` predecessors whatever the split of the file
into batches. The window decides the subtle cases once it is full; an extreme move (`extreme` x
the median of the values before it, away from it) is one with any history of at least
`extreme_after` values, so a loss that leaps by orders of magnitude at step 10 is not missed.
Each rank of a multi-rank log has its own history (`logwatch.rules.ranked`).

`spike` needs its band at every value (a noisy loss is near it often), so it uses rolling
medians. `drop` is rarely near its threshold: a cheap rolling max first picks the values that
could be under it, and the exact window median is computed for those (and the rows right after
them, where an alert can resolve) only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from logwatch.alerts import FIRING
from logwatch.rules.base import Needs, Override, Rule, RuleType, Templates, Transition
from logwatch.rules.log import StreakRule
from logwatch.rules.params import Kind, Param, ParamError
from logwatch.rules.ranked import by_rank, quiet_ranks

_MIN_WINDOW = 5
# The spike band's median and MAD use partial windows early on (a robust scale needs a few
# values); the band is only used once a full window is there.
_MIN_SAMPLES = 5

# Lines after which the next throughput report is a pause, not a slowdown: checkpoint saves and
# evaluation / validation runs. Case-sensitive literals, so the scan is a fast literal search.
PAUSE_PATTERN = (
    r"[Ss]aving (?:model )?checkpoint|[Cc]heckpoint saved|[Ss]aved checkpoint|"
    r"Running Evaluation|[Ee]valuating|eval_loss|[Vv]alidation|validating|Epoch\(val\)|"
    r"saving checkpoint|save_checkpoint|valid on '"
)


def _series(tail: list[float], values: pl.Series) -> pl.Series:
    """The carried tail followed by this batch's values."""
    return pl.concat([pl.Series(tail, dtype=pl.Float64), values.cast(pl.Float64)])


def _bound(x: pl.Series, window: int, *, low: bool) -> pl.Series:
    """The min (or max) of the `window` values before each one; null without a full window."""
    rolled = x.rolling_min(window) if low else x.rolling_max(window)
    return rolled.shift(1)


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


def _history(values: pl.Series, tail: list[float | None], window: int, after: int) -> pl.DataFrame:
    """The carried tail followed by this batch's values, with the median of the `window` values
    before each one (`_median`), that median from `after` values on (`_base`) and its position
    (`_i`, the tail first)."""
    series = pl.concat([pl.Series(tail, dtype=pl.Float64), values.cast(pl.Float64)])
    before = pl.col("_x").rolling_median(window, min_samples=min(after, _MIN_SAMPLES)).shift(1)
    return pl.DataFrame({"_x": series}).with_columns(
        pl.when(pl.int_range(0, pl.len()) >= _MIN_SAMPLES).then(before).alias("_median"),
        pl.when(pl.int_range(0, pl.len()) >= after).then(before).alias("_base"),
        pl.int_range(0, pl.len()).alias("_i"),
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


_HIGH = StreakRule(
    applies=pl.col("_x").is_not_null(), condition=pl.col("_high"), count=1, value_column="_x"
)


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
        initial = {"values": [], "deviations": [], "streak": _HIGH.initial_state()}
        return by_rank(
            frame,
            state,
            column=self.column,
            step=self._step,
            initial=initial,
            firing=lambda rank: not _spike_quiet(rank),
        )

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
        band = pl.col("_median") + pl.max_horizontal(
            self.k * pl.col("_mad"), self.min_rise * pl.col("_median").abs()
        )
        full = pl.col("_i") >= self.window
        # the extreme limit, where there is one: a positive median of enough values
        limit = pl.when((pl.col("_base") > 0) & (self.extreme > 0)).then(
            self.extreme * pl.col("_base")
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
            .with_columns(band.alias("_band"), limit.alias("_limit"))
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
            .slice(len(tail))
            .collect()
        )
        found, streak = _HIGH.evaluate(scored, state["streak"])
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
            initial={"values": [], "seen": False, "skip": False, "streak": {"run": 0}},
            firing=lambda rank: int(rank["streak"]["run"]) >= self.count,
            shared=PAUSES,
        )

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
        x = _series(tail, kept.get_column(self.column))
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
    x = _series(state["values"], values)
    if x.len() < 2 * w:
        return None
    low = _bound(x, w, low=True)
    floor = low + rule.min_rise * low.abs()
    if (x > floor).fill_null(True).slice(len(state["values"])).any():
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


def _extreme(params: Mapping[str, Any]) -> float:
    """The `extreme` factor: 0 (off) or over 1."""
    extreme = float(params["extreme"])
    if extreme != 0 and extreme <= 1:
        raise ParamError(
            f"extreme must be over 1 (x the median) or 0 to turn it off, got {extreme:g}",
            name="extreme",
        )
    return extreme


def _build_spike(params: Mapping[str, Any]) -> Rule:
    return SpikeRule(
        column=params["column"],
        window=params["window"],
        k=params["k"],
        min_rise=params["min_rise"],
        extreme=_extreme(params),
        extreme_after=params["extreme_after"],
        extreme_summary=params["extreme_summary"],
    )


def _spike_templates(params: Mapping[str, Any]) -> Templates:
    summary: str | None = params["extreme_summary"]
    return Templates(summaries=(("extreme_summary", summary),) if summary else ())


def _build_drop(params: Mapping[str, Any]) -> Rule:
    return DropRule(
        column=params["column"],
        window=params["window"],
        fraction=params["fraction"],
        count=params["count"],
        extreme=_extreme(params),
        extreme_after=params["extreme_after"],
    )


_EXTREME_AFTER = Param("extreme_after", Kind.INT, default=3, minimum=1)

ANOMALY_RULE_TYPES: dict[str, RuleType] = {
    "spike": RuleType(
        (
            Param("column", Kind.STRING, default="loss", choices=("loss", "grad_norm")),
            Param("window", Kind.INT, default=30, minimum=_MIN_WINDOW),
            Param("k", Kind.FLOAT, default=6.0),
            Param("min_rise", Kind.FLOAT, default=0.1),
            Param("extreme", Kind.FLOAT, default=100.0),
            _EXTREME_AFTER,
            Param("extreme_summary", Kind.STRING),
        ),
        _build_spike,
        _spike_templates,
        fields=frozenset({"median", "band"}),
    ),
    "drop": RuleType(
        (
            Param("column", Kind.STRING, default="throughput", choices=("throughput",)),
            Param("window", Kind.INT, default=20, minimum=_MIN_WINDOW),
            Param("fraction", Kind.FLOAT, default=0.5),
            Param("count", Kind.INT, default=3, minimum=1),
            Param("extreme", Kind.FLOAT, default=10.0),
            _EXTREME_AFTER,
        ),
        _build_drop,
        fields=frozenset({"median"}),
    ),
}
"""The history rule types (`logwatch.rules.registry` assembles every rule type)."""
