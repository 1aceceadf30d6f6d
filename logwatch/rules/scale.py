"""The `halving` rule type: an fp16 dynamic loss scale cut again and again without growing back.

Dynamic loss scalers halve the scale on every overflowing step and double it after a window of
clean ones, so a healthy run halves now and then and climbs back. A run on its way to a
collapse halves with no recovery in between: the streak here counts halvings whose new scale is
below the previous report's, resets when a report starts above it (the scale grew back), and
ignores repeats of the same value (several ranks reporting one overflow). Reports before the
run's first training-progress line (a loss, or a step other than the one an overflow report
names: DeepSpeed's `Grad overflow on iteration 3`) are the scaler calibrating its start value
and do not count.
A scaler stuck at its minimum (DeepSpeed's `Attempted loss scale: 1, reducing to 1`) still cut:
each such report counts as a halving. A scale at or under `floor` fires at once, progress or
not: no calibration goes that low (apex's `reducing loss scale to 8.1e-202` cascade).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.parse import NUMBER
from logwatch.rules.base import (
    Needs,
    Outcome,
    Override,
    Part,
    Rule,
    RuleType,
    Templates,
    Transition,
    part_of,
)
from logwatch.rules.params import Kind, Param

# four literals: a fast scan, unlike a case-insensitive one
OVERFLOW_HINT = "OVERFLOW|overflow|Overflow|dynamic loss scale "
# The scale after the cut, as each trainer reports it (and DeepSpeed the scale it tried):
#   DeepSpeed  `[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768`
#              (older: `[deepscale] OVERFLOW! ...`; ZeRO-3: `fp16 dynamic loss scale overflow!
#              Skipping step. ...`; fused optimizer: `[Rank 0] Overflow detected. Skipping step.
#              Attempted loss scale: 524288.0, reducing to 262144.0`), often behind a tqdm redraw
#              DeepSpeed's fused and unfused fp16 optimizers also say, after `Grad overflow on
#              iteration 9` (no scale: not a report), `Reducing dynamic loss scale from 8388608.0
#              to 4194304.0`; apex's fused FP16_Optimizer, after the same line, the scale that
#              overflowed: `Using dynamic loss scale of 65536` (the next report names its half)
#   apex amp   `Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0`
#              (Megatron's fp16 optimizer prints the same words)
#   fairseq    `NOTE: overflow detected, setting loss scale to: 1024.0` (also `gradient overflow
#              detected, ignoring gradient, setting loss scale to: 4.0`, `| WARNING: overflow ...`)
NEW_SCALE = (
    r"(?:(?:OVERFLOW|[Oo]verflow)(?:!| detected\.).*Attempted loss scale: (" + NUMBER + r"), "
    r"reducing to |Reducing dynamic loss scale from ("
    + NUMBER
    + r") to |Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to "
    r"|overflow detected,.*setting loss scale to:? |Using dynamic loss scale of )(" + NUMBER + ")"
)

_SKIPPED_STEP = "overflow on iteration"


@dataclass(frozen=True, slots=True)
class HalvingRule:
    """Fires at the `halvings`-th halving of the loss scale in a row; resolves when the scale
    is seen to have grown back."""

    halvings: int
    floor: float = 1e-5
    floor_summary: str | None = None

    @property
    def needs(self) -> Needs:
        """The text for reports, step and loss for progress; only overflow lines report."""
        return Needs(frozenset({"text", "step", "loss"}), OVERFLOW_HINT)

    def quiet(self, state: dict[str, Any]) -> bool:
        """The run made progress (before that a batch's progress lines move the state)."""
        return bool(state["progress"])

    def initial_state(self) -> dict[str, Any]:
        return {"last": None, "run": 0, "progress": False, "on": False}

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part of a run that made no progress before and reports no
        overflow in it (most first batches: whether they make progress, in one query for all);
        None for the others."""
        begins = [part.begin for part in parts]
        index = part_of(pl.int_range(frame.height, dtype=pl.UInt32, eager=True), parts)
        step = pl.col("step")
        first = pl.int_range(pl.len(), dtype=pl.UInt32) == pl.Series(
            begins, dtype=pl.UInt32
        ).gather(index)
        carried = pl.Series([part.state.get("step") for part in parts], dtype=pl.Int64).gather(
            index
        )
        before = pl.when(first).then(carried).otherwise(step.shift(1))
        stepped = step.is_not_null() & (step != before).fill_null(True)
        stepped = stepped & ~pl.col("text").str.contains(_SKIPPED_STEP)
        found = (
            frame.select(
                index.alias("_part"),
                (stepped | pl.col("loss").is_not_null()).alias("_seen"),
                pl.col("text").str.contains(OVERFLOW_HINT).alias("_hinted"),
            )
            .group_by("_part", maintain_order=True)
            .agg(pl.col("_seen").cast(pl.Int8).cum_max().last(), pl.col("_hinted").any())
        )
        steps = frame.get_column("step")
        out: list[Outcome | None] = []
        for part, (_, seen, hinted) in zip(parts, found.iter_rows(), strict=True):
            if part.state["progress"] or hinted:
                out.append(None)
                continue
            new_state = {**part.state, "progress": bool(seen)}
            if not seen:
                new_state["step"] = steps[part.end - 1]
            out.append(([], new_state))
        return out

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        hinted = frame.get_column("text").str.contains(OVERFLOW_HINT)
        if state["progress"]:  # once the run made progress, every later report counts
            progress = pl.repeat(True, frame.height, eager=True)
        else:
            # A line's own step is a new one (the engine fills the step in on the lines after
            # a step line); `Grad overflow on iteration 3` names the step the scaler skipped.
            step = pl.col("step")
            moved = (step != step.shift(1, fill_value=state.get("step"))).fill_null(True)
            stepped = step.is_not_null() & moved & ~pl.col("text").str.contains(_SKIPPED_STEP)
            seen = stepped | pl.col("loss").is_not_null()
            progress = frame.select(seen.cast(pl.Int8).cum_max().cast(pl.Boolean)).to_series()
        new_state = {**state, "progress": bool(progress[-1])}
        if not new_state["progress"]:
            new_state["step"] = frame.get_column("step")[-1]
        if not hinted.any():
            return [], new_state
        scales = pl.col("text").str.extract_groups(NEW_SCALE)
        reports = (
            frame.select(
                pl.coalesce(scales.struct.field("1"), scales.struct.field("2"))
                .cast(pl.Float64, strict=False)
                .alias("_tried"),
                scales.struct.field("3").cast(pl.Float64, strict=False).alias("_scale"),
            )
            .with_row_index("_row")
            .filter(
                hinted
                & pl.col("_scale").is_not_null()
                & (progress | (pl.col("_scale") <= self.floor))
            )
        )
        if reports.is_empty():
            return [], new_state
        last, carried = state["last"], int(state["run"])
        before = pl.col("_scale").shift(1, fill_value=last)
        # at its minimum the scaler tries to cut and cannot: the report repeats its scale
        stuck = (pl.col("_scale") >= pl.col("_tried")).fill_null(False)
        scored = (
            reports.with_columns(
                (before.is_null() | (pl.col("_scale") > before)).alias("_reset"),
                ((pl.col("_scale") < before).fill_null(False) | stuck).cast(pl.Int64).alias("_cut"),
            )
            .with_columns(pl.col("_reset").cum_sum().alias("_group"))
            .with_columns(
                # a streak restarts at 1 with each reset; the first group goes on from the state
                (
                    pl.col("_cut").cum_sum().over("_group")
                    + pl.when(pl.col("_group") == 0).then(carried).otherwise(1)
                ).alias("_run")
            )
            .with_columns(
                ((pl.col("_run") >= self.halvings) | (pl.col("_scale") <= self.floor)).alias("_on")
            )
        )
        was_on = pl.col("_on").shift(1, fill_value=bool(state.get("on", carried >= self.halvings)))
        events = scored.filter(pl.col("_on") != was_on)
        # fired by the floor before the streak was long enough: the floor's own summary
        floored = Override(summary=self.floor_summary) if self.floor_summary else None
        found = [
            Transition(
                row=row,
                status=FIRING if on else RESOLVED,
                value=scale,
                override=floored if on and run < self.halvings else None,
            )
            for row, on, scale, run in events.select("_row", "_on", "_scale", "_run").iter_rows()
        ]
        new_state["last"] = scored.get_column("_scale")[-1]
        new_state["run"] = int(scored.get_column("_run")[-1])
        new_state["on"] = bool(scored.get_column("_on")[-1])
        return found, new_state


def _build_halving(params: Mapping[str, Any]) -> Rule:
    return HalvingRule(
        halvings=params["halvings"], floor=params["floor"], floor_summary=params["floor_summary"]
    )


def _halving_templates(params: Mapping[str, Any]) -> Templates:
    floor = params["floor_summary"]
    return Templates(summaries=(("floor_summary", floor),) if floor else ())


SCALE_RULE_TYPES: dict[str, RuleType] = {
    "halving": RuleType(
        (
            Param("halvings", Kind.INT, default=8, minimum=2),
            Param("floor", Kind.FLOAT, default=1e-5),
            Param("floor_summary", Kind.STRING),
        ),
        _build_halving,
        _halving_templates,
    ),
}
"""The loss-scale rule type (`logwatch.rules.registry` assembles every rule type)."""
