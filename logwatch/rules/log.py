"""Rule types: vectorized evaluation over a frame, with state carried from batch to batch.

A rule sees one source's lines in order, a batch at a time, and returns the transitions of its
alerts (fire / resolve) found in that batch together with its new state. Because the state holds
everything a batch boundary could cut (the previous row's condition, the length of a streak, the
labels already fired), any split of a file into batches yields the same transitions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast, runtime_checkable

import polars as pl

from logwatch.alerts import FIRING, RESOLVED, Severity, Status
from logwatch.parse import SCHEMA
from logwatch.rules.gates import NEVER, gate_for
from logwatch.rules.params import Columns, Kind, Param


@dataclass(frozen=True, slots=True)
class Override:
    """What one kind of line says instead of its rule: its own summary template, fix or
    severity (None: the rule's)."""

    summary: str | None = None
    fix: str | None = None
    severity: Severity | None = None


@dataclass(frozen=True, slots=True)
class Transition:
    """An alert of one rule fired or resolved at a row of the frame. `fields` fill summary
    placeholders only (they vary per occurrence, so they are not the alert's identity, which
    `labels` are; for a transition decided after its line's batch they replace what the summary
    reads from the row); `override` is the event's own summary / fix / severity."""

    row: int
    status: Status
    value: float | None
    labels: Mapping[str, str] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    override: Override | None = None


class Rule(Protocol):
    """What the engine needs from a rule: an initial state and a vectorized step."""

    def initial_state(self) -> dict[str, Any]:
        """State before the first line of a run (JSON-serializable)."""
        ...

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        """Transitions found in `frame` (row indexes into it) and the state after it."""
        ...


@dataclass(frozen=True, slots=True)
class Needs:
    """What a rule reads of a log frame: the `columns` (of SCHEMA), and a `gate`: a regex such
    that a batch in which no line's text matches it leaves a quiet rule (see `Gated.quiet`)
    as it was, with no transition. None: every batch may move the rule."""

    columns: frozenset[str]
    gate: str | None = None
    # Each line's gate match (over `text`) where an expression is cheaper than the gate's regex:
    # it selects every line the regex selects that can move the rule, maybe a few more.
    rows: pl.Expr | None = field(default=None, compare=False)
    # Per-line columns the rule computes from a batch alone, with no state (name -> expression
    # over the columns every parse gives, `text` mostly; names start with `_`): the engine may
    # compute them ahead, on the parse threads, and give them to the rule as columns of its
    # frame; the rule computes one itself where its frame lacks it.
    # A column given as a string is that regex's match over `text`, which the engine can pass
    # over on the lines of shapes no match can be in (`rules.reach`).
    ahead: Mapping[str, pl.Expr | str] = field(default_factory=dict, compare=False)
    # The columns one of which a line must have a value in to move the rule (empty: any line
    # may), as the parse gives them: a gate scan passes over the lines of shapes that give none
    # of them a value (a column the engine fills in, the step, counts as given everywhere).
    valued: frozenset[str] = frozenset()
    # How many of a source's last non-blank lines the rule reads when its input ends (`finish`,
    # replay only): the engine keeps that many, whether or not the gate opened on them, so the
    # end of a file can decide without the gate opening on every line.
    last_lines: int = 0


def ahead_expr(value: pl.Expr | str) -> pl.Expr:
    """A `Needs.ahead` column's expression (a string: its regex's match over `text`)."""
    return pl.col("text").str.contains(value) if isinstance(value, str) else value


def gate_rows(needs: Needs) -> pl.Expr:
    """Each line's gate match (over `text`): the rule's own expression for it, else its regex
    (`NEVER` as false: its regex would step through every line to match none)."""
    if needs.rows is not None:
        return needs.rows
    if needs.gate == NEVER:
        return pl.lit(False)
    return pl.col("text").str.contains(cast(str, needs.gate))


@runtime_checkable
class Gated(Protocol):
    """A rule that says what it reads and when a batch cannot move it."""

    @property
    def needs(self) -> Needs:
        """The columns the rule reads and its gate."""
        ...

    def quiet(self, state: dict[str, Any]) -> bool:
        """Whether, in `state`, a batch with no line matching the gate moves nothing."""
        ...


# Every way a value parses as non-finite (parse.NUMBER and the NaN-in-words patterns): a NaN or
# Inf in some casing, or a number too large for a float, which needs an exponent of 3 digits or,
# with a smaller one, over 200 digits before the point (1.8e308 is the largest float). A value
# ends where the parser's patterns end one (`_END` and `ANY_LOSS`, after `.0` padding), so the
# `INF` of every `INFO` level does not open the gate.
_SPELLED_NONFINITE = r"(?i:nan|inf)(?i:inity)?(?:\.0*)?(?:[\s,|\]})';\"*/]|$)"
NONFINITE_GATE = _SPELLED_NONFINITE + r"|[eE]\+?\d{3}|\d{200}"


def _nonfinite_rows() -> pl.Expr:
    """The lines `NONFINITE_GATE` selects that can hold a non-finite value, and a few more, at a
    third of its cost: its exponent and digit-run branches find no literal to search for, so its
    regex steps through every line. Here the spelled branch is the regex; an exponent a float
    overflows on needs an `e` then a digit or `+` (a literal set); and a run of 200 digits lies
    in a piece of 200 bytes or more between spaces (only long lines are split)."""
    text = pl.col("text")
    spelled = text.str.contains(_SPELLED_NONFINITE)
    exponent = text.str.contains_any([e + c for e in "eE" for c in "+0123456789"])
    pieces = pl.when(text.str.len_bytes() >= 200).then(text).str.split(" ")
    long_piece = pieces.list.eval(pl.element().str.len_bytes()).list.max() >= 200
    return spelled | exponent | long_piece.fill_null(False)


NONFINITE_ROWS = _nonfinite_rows()


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
class NonFiniteRule:
    """Fires at the first row whose `column` is NaN or +-Inf; resolves at the next finite one.

    Lines of several ranks in one log (`[rank3]:` prefixes) are followed per rank: the alert
    fires when the first rank goes non-finite and resolves when no rank is non-finite any more,
    so ranks reporting in turn do not make it flap.

    `masked_by`: a value of exactly 0 on a line where that column is non-finite counts as
    non-finite too (a trainer that leaves NaN losses out of its average prints `'loss': 0.0`
    beside `'grad_norm': nan`); such a line fires with `masked_summary` and never resolves."""

    column: str
    masked_by: str | None = None
    masked_summary: str | None = None

    @property
    def needs(self) -> Needs:
        """The column and the rank; only a line spelling a non-finite value can make it bad."""
        masked = {self.masked_by} if self.masked_by else set()
        return Needs(
            frozenset({self.column, "rank", *masked}),
            NONFINITE_GATE,
            NONFINITE_ROWS,
            valued=frozenset({self.column}),  # a line without a value is passed over
        )

    def quiet(self, state: dict[str, Any]) -> bool:
        """No rank is non-finite."""
        return not any(state["bad"].values())

    def initial_state(self) -> dict[str, Any]:
        return {"bad": {}}

    def evaluate(
        self, frame: pl.DataFrame, state: dict[str, Any]
    ) -> tuple[list[Transition], dict[str, Any]]:
        values = frame.get_column(self.column)
        # A sum is finite only when every value is (a NaN or an Inf carries through; finite
        # values that overflow only take the exact path below): no polars call.
        masks = None if self.masked_by is None else frame.get_column(self.masked_by)
        if (
            not any(state["bad"].values())
            and math.isfinite(values.sum())
            and (masks is None or math.isfinite(masks.sum()))
        ):
            return [], state  # nothing is bad and nothing goes bad: no transition (most batches)
        if values.null_count() == frame.height:
            return [], state  # no value: no rank moves
        known: dict[str, bool] = dict(state["bad"])
        before = sum(known.values())
        if frame.get_column("rank").null_count() == frame.height:
            lines = self._lines(frame, None)
            on = _unranked_on(lines, known, before)
        else:
            lines = self._lines(frame, pl.col("rank").fill_null(-1))
            on = _ranked_on(lines, known, before)
        # a transition wherever "some rank is bad" changes, from the state's to the last line's
        changed = on != pl.Series([before > 0]).append(on.head(-1))
        rows, fires, found_values, masked = (
            series.filter(changed)
            for series in (
                lines.get_column("_row"),
                on,
                lines.get_column("_value"),
                lines.get_column("_masked"),
            )
        )
        override = Override(summary=self.masked_summary) if self.masked_summary else None
        found = [
            Transition(
                row=row,
                status=FIRING if fire else RESOLVED,
                value=value,
                override=override if fire and hidden else None,
            )
            for row, fire, value, hidden in zip(rows, fires, found_values, masked, strict=True)
        ]
        return found, {"bad": known}

    def _lines(self, frame: pl.DataFrame, rank: pl.Expr | None) -> pl.DataFrame:
        """The lines with a value: row, value, whether it is non-finite (and rank), one select
        (without a filter when every line has a value: fewer expressions to plan)."""
        values = frame.get_column(self.column)
        if self.masked_by is None and rank is None and not values.null_count():  # a live line
            rows = pl.Series(range(frame.height))
            bad = ~values.is_finite()
            hidden = pl.Series([False] * frame.height)
            return pl.DataFrame({"_row": rows, "_value": values, "_bad": bad, "_masked": hidden})
        value = pl.col(self.column)
        masked = pl.lit(False)
        if self.masked_by is not None:
            masked = ((value == 0) & ~pl.col(self.masked_by).is_finite()).fill_null(False)
        columns = {
            "_row": pl.int_range(pl.len()),
            "_value": value,
            "_bad": ~value.is_finite() | masked,
            "_masked": masked,
        }
        if rank is not None:
            columns["_rank"] = rank
        if values.null_count():
            columns = {name: expr.filter(value.is_not_null()) for name, expr in columns.items()}
        return frame.select(**columns)


def _unranked_on(lines: pl.DataFrame, known: dict[str, bool], before: int) -> pl.Series:
    """Whether some rank is bad after each of `lines`, all of no rank ("-1"): the other ranks'
    count stays, plus this line's badness. Sets that rank's state in `known` (its last line)."""
    bads = lines.get_column("_bad")
    others = before - known.get("-1", False)
    known["-1"] = bool(bads[-1])
    return bads | (others > 0)


def _ranked_on(lines: pl.DataFrame, known: dict[str, bool], before: int) -> pl.Series:
    """Whether some rank is bad after each of `lines` (with `_rank`): the count of bad ranks,
    moved by each line that changes its rank's badness. Updates `known` with each rank's last
    line."""
    # A rank's previous value: its previous line's, else its state's.
    bad_ranks = [int(name) for name, bad in known.items() if bad]
    stated = pl.col("_rank").is_in(bad_ranks) if bad_ranks else pl.lit(False)
    was_bad = pl.col("_bad").shift(1).over("_rank").fill_null(stated)
    delta = pl.col("_bad").cast(pl.Int64) - was_bad.cast(pl.Int64)
    scored = lines.select(
        (before + delta.cum_sum() > 0).alias("_on"),
        pl.col("_rank").is_last_distinct().alias("_last"),
    )
    last = scored.get_column("_last")
    ranks = lines.get_column("_rank").filter(last).cast(pl.String)
    known.update(zip(ranks, lines.get_column("_bad").filter(last), strict=True))
    return scored.get_column("_on")


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
    resolves within the run. Named groups in the pattern become labels."""

    pattern: str
    label_names: tuple[str, ...] = ()

    @property
    def needs(self) -> Needs:
        """The text, gated by the literals the pattern needs."""
        return Needs(frozenset({"text"}), gate_for(self.pattern))

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
        out: list[Transition] = []
        for row, labels in zip(hits.get_column("_row"), keys, strict=True):
            key = repr(sorted(labels.items()))
            if key in fired:
                continue
            fired.append(key)
            out.append(Transition(row=row, status=FIRING, value=None, labels=labels))
        return out, replace_state(state, fired=fired)


@runtime_checkable
class WallClockRule(Rule, Protocol):
    """A rule that also moves with the wall clock. Only a live driver ticks it; replay never
    does, so such a rule cannot fire in replay."""

    def tick(
        self, state: dict[str, Any], now_s: float, arrived: bool
    ) -> tuple[list[Transition], dict[str, Any]]:
        """Transitions at wall time `now_s` (row 0 is the tick); `arrived`: lines came since."""
        ...


@runtime_checkable
class EndOfInputRule(Rule, Protocol):
    """A rule that waits for lines that may never come. `replay` calls `finish` when a file
    ends; a live driver cannot know the end, so such a rule also needs another way to decide."""

    def finish(
        self, state: dict[str, Any], last: pl.DataFrame
    ) -> tuple[list[Transition], dict[str, Any]]:
        """Transitions now that no line follows (a transition's `fields` give its line); `last`:
        the source's last non-blank lines (`Needs.last_lines` of them, with the rule's columns;
        none where it asks for none)."""
        ...


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


def matching_rows(frame: pl.DataFrame, pattern: str, gate: str | None) -> pl.DataFrame:
    """The rows (`_row`, `text`) whose text matches `pattern`: the pattern runs only on the
    rows its gate lets through, a cheap literal pass."""
    rows = frame.select("text").with_row_index("_row")
    if gate is not None:
        rows = rows.filter(pl.col("text").str.contains(gate))
        if rows.is_empty():
            return rows
    return rows.filter(pl.col("text").str.contains(pattern))


def replace_state(state: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a rule state with some keys changed."""
    return {**state, **changes}


# --- construction from rule-pack parameters --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Templates:
    """What a rule type adds to summary templates: the placeholders it fills (the names its
    details capture) and templates of its own to check like the rule's, as (where, template)."""

    fields: frozenset[str] = frozenset()
    summaries: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RuleType:
    """A rule type as rule packs name it: its parameters, and how to build a rule from their
    typed values (every declared name is present; an optional one without default is None).
    `build` raises ParamError for values that do not fit together; `templates` says what the
    type adds to summary templates."""

    params: tuple[Param, ...]
    build: Callable[[Mapping[str, Any]], Rule]
    templates: Callable[[Mapping[str, Any]], Templates] | None = None
    fields: frozenset[str] = frozenset()  # what its transitions add for summaries to show


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


__all__ = [
    "LOG_RULE_TYPES",
    "NONFINITE_GATE",
    "NONFINITE_ROWS",
    "EndOfInputRule",
    "Gated",
    "MatchRule",
    "Needs",
    "NonFiniteRule",
    "Override",
    "Rule",
    "RuleType",
    "StallRule",
    "StreakRule",
    "Templates",
    "Transition",
    "WallClockRule",
    "ahead_expr",
    "gate_rows",
    "matching_rows",
    "replace",
]
