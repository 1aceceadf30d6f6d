"""The `halving` rule type: an fp16 dynamic loss scale cut again and again without growing back.

Dynamic loss scalers halve the scale on every overflowing step and double it after a window of
clean ones, so a healthy run halves now and then and climbs back. A run on its way to a
collapse halves with no recovery in between: the streak here counts halvings whose new scale is
below the previous report's, resets when a report starts above it (the scale grew back), and
ignores repeats of the same value (several ranks reporting one overflow). Reports before the
run's first training-progress line are the scaler calibrating its start value and do not count.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.parse import NUMBER
from logwatch.rules.log import Needs, Rule, RuleType, Transition
from logwatch.rules.params import Kind, Param

OVERFLOW_HINT = "OVERFLOW|overflow"  # two literals: a fast scan, unlike a case-insensitive one
# The scale after the cut, as each trainer reports it:
#   DeepSpeed  `[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768`
#              (ZeRO-3: `fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: ...`)
#   apex amp   `Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0`
#   fairseq    `NOTE: overflow detected, setting loss scale to: 1024.0` (also `gradient overflow
#              detected, ignoring gradient, setting loss scale to: 4.0`, `| WARNING: overflow ...`)
NEW_SCALE = (
    r"(?:(?:OVERFLOW|overflow)!.*Attempted loss scale: " + NUMBER + r", reducing to "
    r"|Gradient overflow\.\s+Skipping step, loss scaler \d+ reducing loss scale to "
    r"|overflow detected,.*setting loss scale to:? )(" + NUMBER + ")"
)


@dataclass(frozen=True, slots=True)
class HalvingRule:
    """Fires at the `halvings`-th halving of the loss scale in a row; resolves when the scale
    is seen to have grown back."""

    halvings: int

    @property
    def needs(self) -> Needs:
        """The text for reports, step and loss for progress; only overflow lines report."""
        return Needs(frozenset({"text", "step", "loss"}), OVERFLOW_HINT)

    def quiet(self, state: dict[str, Any]) -> bool:
        """The run made progress (before that a batch's progress lines move the state)."""
        return bool(state["progress"])

    def initial_state(self) -> dict[str, Any]:
        return {"last": None, "run": 0, "progress": False}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        hinted = frame.get_column("text").str.contains(OVERFLOW_HINT)
        if state["progress"]:  # once the run made progress, every later report counts
            progress = pl.repeat(True, frame.height, eager=True)
        else:
            seen = pl.col("step").is_not_null() | pl.col("loss").is_not_null()
            progress = frame.select(seen.cast(pl.Int8).cum_max().cast(pl.Boolean)).to_series()
        new_state = {**state, "progress": bool(progress[-1])}
        if not hinted.any():
            return [], new_state
        reports = (
            frame.select(
                pl.col("text")
                .str.extract(NEW_SCALE, 1)
                .cast(pl.Float64, strict=False)
                .alias("_scale")
            )
            .with_row_index("_row")
            .filter(hinted & progress & pl.col("_scale").is_not_null())
        )
        if reports.is_empty():
            return [], new_state
        last, carried = state["last"], int(state["run"])
        before = pl.col("_scale").shift(1, fill_value=last)
        scored = (
            reports.with_columns(
                (before.is_null() | (pl.col("_scale") > before)).alias("_reset"),
                (pl.col("_scale") < before).fill_null(False).cast(pl.Int64).alias("_cut"),
            )
            .with_columns(pl.col("_reset").cum_sum().alias("_group"))
            .with_columns(
                # a streak restarts at 1 with each reset; the first group goes on from the state
                (
                    pl.col("_cut").cum_sum().over("_group")
                    + pl.when(pl.col("_group") == 0).then(carried).otherwise(1)
                ).alias("_run")
            )
            .with_columns((pl.col("_run") >= self.halvings).alias("_on"))
        )
        was_on = pl.col("_on").shift(1, fill_value=carried >= self.halvings)
        events = scored.filter(pl.col("_on") != was_on)
        found = [
            Transition(row=row, status=FIRING if on else RESOLVED, value=scale)
            for row, on, scale in events.select("_row", "_on", "_scale").iter_rows()
        ]
        new_state["last"] = scored.get_column("_scale")[-1]
        new_state["run"] = int(scored.get_column("_run")[-1])
        return found, new_state


def _build_halving(params: Mapping[str, Any]) -> Rule:
    return HalvingRule(halvings=params["halvings"])


SCALE_RULE_TYPES: dict[str, RuleType] = {
    "halving": RuleType((Param("halvings", Kind.INT, default=8, minimum=2),), _build_halving),
}
"""The loss-scale rule type (`logwatch.rules.registry` assembles every rule type)."""
