"""The log rule types: `nonfinite` (`logwatch.rules.nonfinite`), `streak`, `match` and
`stalled`, vectorized over a frame with their state carried from batch to batch (the protocol
they follow: `logwatch.rules.base`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from logwatch.alerts import FIRING, RESOLVED
from logwatch.parse import SCHEMA
from logwatch.rules.base import (
    Needs,
    Outcome,
    Part,
    Rule,
    RuleType,
    Templates,
    Transition,
    matching_rows,
    replace_state,
)
from logwatch.rules.gates import NEVER, gate_for
from logwatch.rules.nonfinite import NonFiniteRule
from logwatch.rules.params import Columns, Kind, Param
from logwatch.rules.streak_many import streak_many
from logwatch.rules.writers import WRITER_COLUMNS, with_writers, writer_labels


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


@dataclass(frozen=True, slots=True)
class StreakRule:
    """Fires at the `count`-th consecutive applicable row meeting `condition`; resolves at the
    first applicable row that does not."""

    applies: pl.Expr
    condition: pl.Expr
    count: int
    value_column: str | None = None

    @property
    def needs(self) -> Needs:
        """The columns its expressions and value read; no gate (they are not about text)."""
        needed = {*self.applies.meta.root_names(), *self.condition.meta.root_names()}
        if self.value_column:
            needed.add(self.value_column)
        return Needs(frozenset(needed))

    def quiet(self, state: dict[str, Any]) -> bool:
        """No streak is running."""
        return int(state["run"]) == 0

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """`evaluate` on each part, its streaks counted over all parts in a few queries."""
        return list(streak_many(self, frame, parts))

    def initial_state(self) -> dict[str, Any]:
        return {"run": 0}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        if self.quiet(state) and not frame.select(streak_starts(self)).item():
            return [], state  # no streak carried in and none starts: the run stays 0
        # only the rows it applies to, with what it reads of them: whether each meets the
        # condition and the value (its other columns, a list of buckets say, are not copied)
        columns = [
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
            self.condition.fill_null(False).alias("_cond"),
            *([pl.col(self.value_column)] if self.value_column else []),
        ]
        applies = self.applies.fill_null(False).alias("_applies")
        rows = frame.select(*columns, applies).filter("_applies")
        if rows.is_empty():
            return [], state
        carried = int(state["run"])
        cond = pl.col("_cond")
        changed = cond != cond.shift(1, fill_value=carried > 0)
        group = changed.cast(pl.UInt32).cum_sum()
        position = pl.int_range(1, pl.len() + 1).over(group) + pl.when(group == 0).then(
            carried
        ).otherwise(0)
        run = pl.when(cond).then(position).otherwise(0)
        scored = rows.with_columns(run.alias("_run")).with_columns(
            pl.col("_run").shift(1, fill_value=carried).alias("_prev_run")
        )
        events = scored.with_columns((pl.col("_run") == self.count).alias("_fire")).filter(
            pl.col("_fire") | ((pl.col("_run") == 0) & (pl.col("_prev_run") >= self.count))
        )
        last_run = int(scored.get_column("_run")[-1])
        return _transitions(events, self.value_column), {"run": last_run}


def streak_starts(rule: StreakRule) -> pl.Expr:
    """Whether some row of a frame can start (or go on with) a streak of `rule`: one that it
    applies to and that meets its condition. A quiet streak rule moves on no other frame."""
    return (rule.applies & rule.condition).fill_null(False).any()


@dataclass(frozen=True, slots=True)
class MatchRule:
    """Fires at the first line matching `pattern`, once per run and per label set; never
    resolves within the run. Named groups in the pattern become labels, and a prefixed line's
    rank one more (`rules.writers`)."""

    pattern: str
    label_names: tuple[str, ...] = ()

    @property
    def needs(self) -> Needs:
        """The text, gated by the literals the pattern needs."""
        return Needs(frozenset({"text"}), gate_for(self.pattern), pattern=self.pattern)

    def quiet(self, state: dict[str, Any]) -> bool:
        """Always: a batch without a matching line moves nothing (the fired labels only grow)."""
        return True

    def initial_state(self) -> dict[str, Any]:
        return {"fired": []}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        hits = matching_rows(frame, self.pattern, self.needs.gate)
        if hits.is_empty():
            return [], state
        fired: list[str] = list(state["fired"])
        if self.label_names:
            groups = hits.get_column("text").str.extract_groups(self.pattern)
            keys = [
                {name: str(g.get(name) or "") for name in self.label_names}
                for g in groups.to_list()
            ]
        else:
            keys = [{} for _ in range(hits.height)]
        writers = with_writers(hits, frame).select(WRITER_COLUMNS).iter_rows(named=True)
        keys = [writer_labels(hit, labels) for hit, labels in zip(writers, keys, strict=True)]
        out: list[Transition] = []
        for row, labels in zip(hits.get_column("_row"), keys, strict=True):
            key = repr(sorted(labels.items()))
            if key in fired:
                continue
            fired.append(key)
            out.append(Transition(row=row, status=FIRING, value=None, labels=labels))
        return out, replace_state(state, fired=fired)


@dataclass(frozen=True, slots=True)
class StallRule:
    """Fires when a source that was receiving lines gets none for `stall_after_s` of wall time;
    resolves at the first line that comes after."""

    stall_after_s: float

    @property
    def needs(self) -> Needs:
        """Nothing but that lines came: no batch moves it unless it is stalled."""
        return Needs(frozenset(), NEVER)

    def quiet(self, state: dict[str, Any]) -> bool:
        """Not stalled."""
        return not state["stalled"]

    def initial_state(self) -> dict[str, Any]:
        return {"last_s": None, "stalled": False}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        if frame.is_empty() or not state["stalled"]:
            return [], state
        return [Transition(row=0, status=RESOLVED, value=None)], replace_state(state, stalled=False)

    def tick(
        self, state: dict[str, Any], now_s: float, arrived: bool
    ) -> tuple[list[Transition], dict[str, Any]]:
        if arrived:
            return [], replace_state(state, last_s=now_s, stalled=False)
        last = state["last_s"]
        if last is None or state["stalled"] or now_s - last < self.stall_after_s:
            return [], state
        fired = Transition(row=0, status=FIRING, value=round(now_s - last, 3))
        return [fired], replace_state(state, stalled=True)


# --- construction from rule-pack parameters --------------------------------------------------

FLOAT_COLUMNS = ("loss", "grad_norm", "lr")
LOG_COLUMNS = Columns(SCHEMA, "{name} {text!r}: expression refers to something the frame lacks")
"""What streak expressions run over: the parsed log frame."""


def _build_nonfinite(params: Mapping[str, Any]) -> Rule:
    return NonFiniteRule(
        column=params["column"],
        masked_by=params["masked_by"],
        masked_summary=params["masked_summary"],
    )


def _nonfinite_templates(params: Mapping[str, Any]) -> Templates:
    masked = params["masked_summary"]
    return Templates(summaries=(("masked_summary", masked),) if masked else ())


def _build_streak(params: Mapping[str, Any]) -> Rule:
    return StreakRule(
        applies=params["applies"],
        condition=params["condition"],
        count=params["count"],
        value_column=params["value"],
    )


def _build_stalled(params: Mapping[str, Any]) -> Rule:
    return StallRule(stall_after_s=params["stall_after"])


def _build_match(params: Mapping[str, Any]) -> Rule:
    pattern: re.Pattern[str] = params["pattern"]
    return MatchRule(pattern=pattern.pattern, label_names=tuple(pattern.groupindex))


LOG_RULE_TYPES: dict[str, RuleType] = {
    "nonfinite": RuleType(
        (
            Param("column", Kind.STRING, required=True, choices=FLOAT_COLUMNS),
            Param("masked_by", Kind.STRING, choices=FLOAT_COLUMNS),
            Param("masked_summary", Kind.STRING),
        ),
        _build_nonfinite,
        _nonfinite_templates,
    ),
    "streak": RuleType(
        (
            Param("applies", Kind.SQL, required=True, columns=LOG_COLUMNS),
            Param("condition", Kind.SQL, required=True, columns=LOG_COLUMNS),
            Param("count", Kind.INT, required=True, minimum=1),
            Param("value", Kind.STRING, choices=tuple(SCHEMA)),
        ),
        _build_streak,
    ),
    "match": RuleType((Param("pattern", Kind.REGEX, required=True),), _build_match),
    "stalled": RuleType(
        (Param("stall_after", Kind.DURATION, default="10m", positive=True),), _build_stalled
    ),
}
"""The log rule types (`logwatch.rules.registry` assembles every rule type)."""


__all__ = ["LOG_RULE_TYPES", "MatchRule", "StallRule", "StreakRule", "streak_starts"]
