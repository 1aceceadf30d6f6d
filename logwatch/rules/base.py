"""What a rule is to the engine: the `Rule` protocol and its extensions (`Gated`,
`WallClockRule`, `EndOfInputRule`), what a rule says it reads (`Needs`), what a step returns
(`Transition`, `Override`), what a rule pack's type declares (`RuleType`, `Templates`), and the
small helpers every rule type shares. The rule types themselves live beside this module.

A rule sees one source's lines in order, a batch at a time, and returns the transitions of its
alerts (fire / resolve) found in that batch together with its new state. Because the state holds
everything a batch boundary could cut (the previous row's condition, the length of a streak, the
labels already fired), any split of a file into batches yields the same transitions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

import polars as pl

from logwatch.alerts import Severity, Status
from logwatch.rules.gates import NEVER
from logwatch.rules.params import Param


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
    # Each line on which one of `valued` can have a value (true maybe on more): a batch's other
    # lines cannot move the rule, and its step may be given only these (the engine does, on the
    # pieces of a long batch it parses for the rule alone).
    valued_rows: pl.Expr | None = field(default=None, compare=False)
    # How many of a source's last non-blank lines the rule reads when its input ends (`finish`,
    # replay only): the engine keeps that many, whether or not the gate opened on them, so the
    # end of a file can decide without the gate opening on every line.
    last_lines: int = 0
    # A cheaper expression over `text` true on every line `rows` (or the gate) selects, maybe
    # on more: where the gate is read on the valued rows alone (`rules.scan`), `rows` runs only
    # on the lines it selects (a literal-led regex before one with no literal to skip to).
    candidates: pl.Expr | None = field(default=None, compare=False)
    # The regex of a rule that moves only on the lines it matches and reads nothing of the
    # others (its gate's source): a gate scan passes over the lines of shapes on which no match
    # of it can be (`reach.reached_by`), however many of them hold the gate's literals, and the
    # engine may give the rule only its gate's lines of a batch (`evaluate._pattern_lines`).
    pattern: str | None = None


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
class Part:
    """One source's lines in a frame of many sources' (rows [begin, end)), and the rule's state
    for that source before them (`BatchedRule`)."""

    begin: int
    end: int
    state: dict[str, Any]


Outcome = tuple[list[Transition], dict[str, Any]]
"""What a step returns: the transitions (rows of its frame) and the state after it."""


@runtime_checkable
class BatchedRule(Rule, Protocol):
    """A rule that can take many sources' batches in one frame, in a few queries for all."""

    def evaluate_many(self, frame: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """For each part, exactly what `evaluate(frame[begin:end], state)` returns (transition
        rows counted from `begin`), or None where it does not say (the engine then calls
        `evaluate` on that part). Parts do not overlap and follow each other in `frame`."""
        ...


@runtime_checkable
class BatchedEnd(Protocol):
    """An end-of-input rule that can decide for many sources at once (`Engine.finish_many`)."""

    def finish_many(self, last: pl.DataFrame, parts: Sequence[Part]) -> list[Outcome | None]:
        """For each part (its rows of `last`: that source's last lines), what `finish(state,
        last[begin:end])` returns, or None where it does not say. Parts may be empty."""
        ...


def part_of(rows: pl.Series, parts: Sequence[Part]) -> pl.Series:
    """The index of the part each of `rows` (sorted, of a frame the parts cover) is in."""
    begins = pl.Series([part.begin for part in parts], dtype=rows.dtype)
    return (begins.search_sorted(rows, side="right") - 1).cast(pl.UInt32)


def matching_rows(frame: pl.DataFrame, pattern: str, gate: str | None) -> pl.DataFrame:
    """The rows (`_row`, `text`) whose text matches `pattern`: the pattern runs only on the
    rows its gate lets through, a cheap literal pass."""
    rows = frame.get_column("text").to_frame().with_row_index("_row")  # native: no query
    if gate is not None:
        rows = rows.filter(pl.col("text").str.contains(gate))
        if rows.is_empty():
            return rows
    return rows.filter(pl.col("text").str.contains(pattern))


def replace_state(state: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a rule state with some keys changed."""
    return {**state, **changes}


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
