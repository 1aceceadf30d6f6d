"""The stateful rules' evaluate as they were before their batch steps were fused into few polars
calls: the reference the fused code must equal, transition for transition and state for state,
at any cut of the input into batches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.rules.base import Override, Transition
from logwatch.rules.drop import PAUSE_PATTERN, DropRule
from logwatch.rules.log import StreakRule
from logwatch.rules.nonfinite import NonFiniteRule
from logwatch.rules.spike import SpikeRule


def _transitions(events: pl.DataFrame, value_column: str | None) -> list[Transition]:
    values = events.get_column(value_column) if value_column else None
    return [
        Transition(
            row=row,
            status=FIRING if fire else RESOLVED,
            value=None if values is None else values[i],
        )
        for i, (row, fire) in enumerate(
            zip(events.get_column("_row"), events.get_column("_fire"), strict=True)
        )
    ]


def streak(
    rule: StreakRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """StreakRule.evaluate before its early exit and its fusion."""
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
    return _transitions(events, rule.value_column), {"run": int(scored.get_column("_run")[-1])}


def nonfinite(
    rule: NonFiniteRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """NonFiniteRule.evaluate before its fusion."""
    if not any(state["bad"].values()) and frame.get_column(rule.column).is_finite().all():
        return [], state
    col = pl.col(rule.column)
    rows = (
        frame.select(rule.column, pl.col("rank").fill_null(-1).cast(pl.String).alias("_rank"))
        .with_row_index("_row")
        .filter(col.is_not_null())
    )
    if rows.is_empty():
        return [], state
    known: dict[str, bool] = dict(state["bad"])
    before = sum(known.values())
    was_bad = (
        pl.col("_bad")
        .shift(1)
        .over("_rank")
        .fill_null(pl.col("_rank").replace_strict(known, default=False, return_dtype=pl.Boolean))
    )
    counted = (
        rows.with_columns((~col.is_finite()).alias("_bad"))
        .with_columns((pl.col("_bad").cast(pl.Int64) - was_bad.cast(pl.Int64)).alias("_delta"))
        .with_columns((before + pl.col("_delta").cum_sum()).alias("_count"))
        .with_columns(pl.col("_count").shift(1, fill_value=before).alias("_before"))
    )
    events = counted.with_columns((pl.col("_count") > 0).alias("_fire")).filter(
        (pl.col("_count") > 0) != (pl.col("_before") > 0)
    )
    last = counted.group_by("_rank").agg(pl.col("_bad").last())
    known.update(dict(zip(last.get_column("_rank"), last.get_column("_bad"), strict=True)))
    return _transitions(events, rule.column), {"bad": known}


def _with_fields(
    transitions: list[Transition], rows: list[int], fields: pl.DataFrame
) -> list[Transition]:
    out = []
    for t in transitions:
        extra = {name: fields.get_column(name)[t.row] for name in fields.columns}
        out.append(replace(t, row=rows[t.row], fields=extra))
    return out


_HIGH = StreakRule(
    applies=pl.col("_x").is_not_null(), condition=pl.col("_high"), count=1, value_column="_x"
)


def spike(
    rule: SpikeRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """SpikeRule.evaluate before its early exit and its fusion."""
    rows = frame.select(rule.column).with_row_index("_row").filter(pl.col(rule.column).is_finite())
    if rows.is_empty():
        return [], state
    tail = state["values"]
    series = pl.concat(
        [pl.Series(tail, dtype=pl.Float64), rows.get_column(rule.column).cast(pl.Float64)]
    )
    history = pl.DataFrame({"_x": series}).with_columns(
        pl.col("_x").rolling_median(rule.window, min_samples=5).shift(1).alias("_median"),
        pl.col("_x")
        .rolling_median(rule.window, min_samples=rule.extreme_after)
        .shift(1)
        .alias("_base"),
        pl.int_range(0, pl.len()).alias("_i"),
    )
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
        .with_columns(band.alias("_band"), (rule.extreme * pl.col("_base")).alias("_limit"))
        .with_columns(
            ((pl.col("_i") >= rule.window) & (pl.col("_x") > pl.col("_band")))
            .fill_null(False)
            .alias("_banded"),
            ((rule.extreme > 0) & (pl.col("_base") > 0) & (pl.col("_x") >= pl.col("_limit")))
            .fill_null(False)
            .alias("_extreme"),
        )
        .with_columns((pl.col("_banded") | pl.col("_extreme")).alias("_high"))
        .slice(len(tail))
    )
    found, streak_state = streak(_HIGH, scored, state["streak"])
    override = Override(summary=rule.extreme_summary)
    banded = scored.get_column("_banded")
    found = [
        t if t.status != FIRING or banded[t.row] else replace(t, override=override) for t in found
    ]
    full = pl.col("_i") >= rule.window
    limit = pl.when((rule.extreme > 0) & (pl.col("_base") > 0)).then(pl.col("_limit"))
    fields = scored.select(
        pl.when(full).then("_median").otherwise("_base").alias("median"),
        pl.when(full).then(pl.min_horizontal("_band", limit)).otherwise(limit).alias("band"),
    )
    new_state = {
        "values": history.get_column("_x").tail(rule.window).to_list(),
        "deviations": deviation.tail(rule.window).to_list(),
        "streak": streak_state,
    }
    return _with_fields(found, rows.get_column("_row").to_list(), fields), new_state


def _window_stats(x: pl.Series, at: pl.Series, window: int) -> pl.DataFrame:
    spans = pl.DataFrame({"_i": at.cast(pl.Int64).unique(maintain_order=True)})
    start = pl.max_horizontal(pl.col("_i") - window, pl.lit(0, dtype=pl.Int64))
    flat = spans.with_columns(pl.int_ranges(start, pl.col("_i")).alias("_j"))
    flat = flat.explode("_j")
    flat = flat.with_columns(x.gather(flat.get_column("_j")).alias("_v"))
    median = pl.col("_v").median()
    return flat.group_by("_i", maintain_order=True).agg(
        median.alias("median"), (pl.col("_v") - median).abs().median().alias("mad")
    )


def _judged(x: pl.Series, first: int, at: pl.Series, window: int) -> pl.DataFrame:
    stats = (
        _window_stats(x, at, window)
        if at.len()
        else pl.DataFrame(schema={"_i": pl.Int64, "median": pl.Float64, "mad": pl.Float64})
    )
    return stats.with_columns(
        (pl.col("_i") - first).alias("_p"), x.gather(stats.get_column("_i")).alias("_x")
    )


def _near(candidates: pl.Series, first: int, size: int, carried: bool) -> pl.Series:
    after = candidates + 1
    parts = [candidates, after.filter(after < first + size)]
    if carried:
        parts.append(pl.Series([first], dtype=candidates.dtype))
    return pl.concat(parts).unique().sort()


def drop(
    rule: DropRule, frame: pl.DataFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    """DropRule.evaluate before its fusion."""
    present = frame.get_column(rule.column).is_not_null()
    if not present.any():
        if not state["seen"] or state["skip"]:
            return [], state
        paused = bool(frame.get_column("text").str.contains(PAUSE_PATTERN).any())
        return [], {**state, "skip": paused}
    marked = (
        frame.select(rule.column, "text")
        .with_row_index("_row")
        .with_columns(pl.col("text").str.contains(PAUSE_PATTERN).alias("_pause"))
        .filter(pl.col(rule.column).is_not_null() | pl.col("_pause"))
    )
    if not state["seen"]:  # pauses before the first report ever are no one's
        marked = marked.filter((pl.col(rule.column).is_not_null() & ~pl.col("_pause")).cum_max())
        if marked.is_empty():
            return [], state
    skip = pl.col("_pause").shift(1, fill_value=state["skip"] and state["seen"])
    kept = marked.with_columns(skip.alias("_skip")).filter(
        pl.col(rule.column).is_not_null() & ~pl.col("_pause") & ~pl.col("_skip")
    )
    new_state = {**state, "seen": True, "skip": bool(marked.get_column("_pause")[-1])}
    if kept.is_empty():
        return [], new_state
    tail: list[float] = state["values"]
    x = pl.concat(
        [pl.Series(tail, dtype=pl.Float64), kept.get_column(rule.column).cast(pl.Float64)]
    )
    first, size = len(tail), kept.height
    ratio = 1 / rule.extreme if rule.extreme > 0 else 0.0
    highest = x.rolling_max(rule.window).shift(1)
    early = x.rolling_max(rule.window, min_samples=rule.extreme_after).shift(1)
    candidates = (
        (x < rule.fraction * highest).fill_null(False) | (x < ratio * early).fill_null(False)
    ).slice(first).arg_true().cast(pl.Int64) + first
    carried = int(state["streak"]["run"]) > 0
    near = _near(candidates, first, size, carried)
    judged = _judged(x, first, near.filter(near >= rule.extreme_after), rule.window)
    full_low = (pl.col("_i") >= rule.window) & (pl.col("_x") < rule.fraction * pl.col("median"))
    extreme_low = (rule.extreme > 0) & (pl.col("_x") < pl.col("median") * ratio)
    judged = judged.with_columns((full_low | extreme_low).alias("_low"))
    low = pl.repeat(False, size, eager=True).scatter(
        judged.filter(pl.col("_low")).get_column("_p"), True
    )
    scored = pl.DataFrame({"_x": x.slice(first), "_low": low})
    low_streak = StreakRule(
        applies=pl.col("_x").is_not_null(),
        condition=pl.col("_low"),
        count=rule.count,
        value_column="_x",
    )
    found, streak_state = streak(low_streak, scored, state["streak"])
    medians = dict(zip(judged.get_column("_p"), judged.get_column("median"), strict=True))
    rows = kept.get_column("_row")
    new_state["values"] = x.tail(rule.window).to_list()
    new_state["streak"] = streak_state
    return [
        Transition(rows[t.row], t.status, t.value, fields={"median": medians.get(t.row)})
        for t in found
    ], new_state


Step = Callable[[pl.DataFrame, dict[str, Any]], tuple[list[Transition], dict[str, Any]]]


def ranked(
    step: Step,
    frame: pl.DataFrame,
    state: dict[str, Any],
    *,
    column: str,
    initial: dict[str, Any],
    firing: Callable[[dict[str, Any]], bool],
    pauses: list[bool] | None = None,
) -> tuple[list[Transition], dict[str, Any]]:
    """A history rule kept per rank, the slow way: each rank's rows (and every pause row) run
    through `step` on that rank's state, row by row in Python; the alert is on while some rank
    is `firing`."""
    ranks = dict(state["ranks"])
    values = frame.get_column(column).to_list()
    names = ["-1" if r is None else str(r) for r in frame.get_column("rank").to_list()]
    paused = pauses or [False] * frame.height
    own = {n for n, v, p in zip(names, values, paused, strict=True) if v is not None and not p}
    stepped = [*ranks, *sorted(own - set(ranks), key=names.index)]
    before = sum(firing(s) for s in ranks.values())
    found: list[Transition] = []
    for name in stepped:
        rows = [
            i
            for i in range(frame.height)
            if paused[i] or (names[i] == name and values[i] is not None)
        ]
        if name not in own and not any(paused):
            continue
        moved, after = step(frame[rows], ranks.get(name, initial))
        if name in ranks or after != initial:  # no history starts with nothing in it
            ranks[name] = after
        found.extend(replace(t, row=rows[t.row]) for t in moved)
    bad, out = before, []
    for t in sorted(found, key=lambda t: t.row):
        bad += 1 if t.status == FIRING else -1
        if bad == (1 if t.status == FIRING else 0):
            out.append(t)
    return out, {"ranks": ranks}
