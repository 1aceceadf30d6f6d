"""Rule types that compare a metric with its own recent history: `spike` (a loss above a robust
band) and `drop` (throughput under a fraction of its rolling median).

Both keep the last `window` values in their state and look at that tail followed by the batch,
so every value is judged against the same `window` predecessors whatever the split of the file
into batches. The window decides the subtle cases once it is full; an extreme move (`extreme` x
the median of the values before it, away from it) is one with any history of at least
`extreme_after` values, so a loss that leaps by orders of magnitude at step 10 is not missed.
Each rank of a multi-rank log has its own history (`logwatch.rules.ranked`).

The rules are `logwatch.rules.spike` and `logwatch.rules.drop`; here, their rule types as rule
packs name them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from logwatch.rules.base import Rule, RuleType, Templates
from logwatch.rules.drop import DropRule
from logwatch.rules.params import Kind, Param, ParamError
from logwatch.rules.spike import SpikeRule

_MIN_WINDOW = 5


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

__all__ = ["ANOMALY_RULE_TYPES"]
