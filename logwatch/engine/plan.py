"""Planning the rules over blocks: what each rule reads and shows, the gates outside of which a
quiet rule cannot move and the line shapes they reach, and the columns a parse computes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import polars as pl

from logwatch.engine.batch import Group, ReadyChecks
from logwatch.engine.state import (
    STATS_COLUMNS,
    ErrorHandler,
    SourceState,
    WarningHandler,
)
from logwatch.parse import ALWAYS, SCHEMA, shapes_giving
from logwatch.rules.base import (
    BatchedEnd,
    BatchedRule,
    EndOfInputRule,
    Needs,
    Outcome,
    WallClockRule,
    ahead_expr,
    gate_rows,
)
from logwatch.rules.gpu import GpuRule, HoldRule, log_gpu_metrics
from logwatch.rules.loader import RuleSpec
from logwatch.rules.log import StreakRule, streak_starts
from logwatch.rules.reach import ANY, reached, reached_by
from logwatch.rules.scan import GateScan


@dataclass(frozen=True, slots=True)
class _Needs:
    """What one rule reads (`columns`), what its summary shows (`shown`: needed only when it
    transitions), and the gate outside of which a quiet rule cannot move (None: every batch
    can move it)."""

    columns: frozenset[str]
    shown: frozenset[str]
    gate: str | None
    quiet: Callable[[dict[str, Any]], bool] | None
    rows: pl.Expr | None = None  # each line's gate match (`gate_rows`), with a gate
    ahead: Mapping[str, pl.Expr | str] = field(default_factory=dict)  # `Needs.ahead`
    valued: frozenset[str] = frozenset()  # `Needs.valued`
    last_lines: int = 0  # `Needs.last_lines`
    valued_rows: pl.Expr | None = None  # `Needs.valued_rows`
    candidates: pl.Expr | None = None  # `Needs.candidates`
    pattern: str | None = None  # `Needs.pattern`


def _needs_of(spec: RuleSpec) -> _Needs:
    """A rule's needs as its type declares them (`Needs`), and its summary's columns; a type
    that declares none reads every column."""
    declared = getattr(spec.rule, "needs", None)
    shown = frozenset(spec.template_fields & set(SCHEMA))
    if declared is None:
        return _Needs(frozenset(SCHEMA) - {"metrics"}, shown, None, None)
    quiet = getattr(spec.rule, "quiet", None)
    columns, ahead = frozenset(declared.columns), declared.ahead
    if quiet is None or declared.gate is None:
        return _Needs(columns, shown, None, quiet, ahead=ahead, last_lines=declared.last_lines)
    return _Needs(
        columns,
        shown,
        declared.gate,
        quiet,
        gate_rows(declared),
        ahead,
        declared.valued,
        declared.last_lines,
        declared.valued_rows,
        declared.candidates,
        declared.pattern,
    )


_FILLED = frozenset({"step"})
"""Columns the engine fills in on lines without a value of their own (`_filled_step`): a rule
that moves on a value of one may move on any line."""


def _gate_reach(needs: Sequence[_Needs]) -> dict[str, frozenset[int]]:
    """Each gate -> the shapes on whose lines it may match and move a rule behind it: those its
    regex reaches (`reach.reached`) and, for a rule that says its pattern, that pattern may
    match on (`reach.reached_by`); less, for a rule that moves only on lines with a value
    (`Needs.valued`), the shapes that give it none."""
    found: dict[str, frozenset[int]] = {}
    for rule in needs:
        if rule.gate is None:
            continue
        shapes = reached(rule.gate)
        if rule.pattern is not None:  # lines that hold the gate's literals but cannot match
            shapes = reached_by(rule.pattern, shapes)
        if rule.valued and not rule.valued & _FILLED:
            shapes &= shapes_giving(rule.valued)
        found[rule.gate] = found.get(rule.gate, frozenset()) | shapes
    return found


def _gate_valued(needs: Sequence[_Needs]) -> dict[str, tuple[pl.Expr, pl.Expr | None]]:
    """Each gate whose every rule declares the same valued rows (`Needs.valued_rows`) -> that
    expression (the lines outside of which no rule behind the gate can move) and the gate's
    candidates (`Needs.candidates`, where every such rule declares the same)."""
    found: dict[str, tuple[pl.Expr, pl.Expr | None] | None] = {}
    for rule in needs:
        if rule.gate is None:
            continue
        mine = None if rule.valued_rows is None else (rule.valued_rows, rule.candidates)
        if rule.gate not in found:
            found[rule.gate] = mine
            continue
        before = found[rule.gate]
        if before is None or mine is None or not before[0].meta.eq(mine[0]):
            found[rule.gate] = None
        elif before[1] is not None and (mine[1] is None or not before[1].meta.eq(mine[1])):
            found[rule.gate] = (before[0], None)
    return {gate: pair for gate, pair in found.items() if pair is not None}


class _Planned:
    """The rules and what the engine computes for them, once (`Engine`'s configuration)."""

    def __init__(
        self,
        rules: Sequence[RuleSpec],
        on_error: ErrorHandler | None = None,
        *,
        stats: bool = True,
        on_warning: WarningHandler | None = None,
    ) -> None:
        self.rules = list(rules)
        self._stats = stats
        self._needs = [_needs_of(spec) for spec in self.rules]
        dense = {
            name
            for needs in self._needs
            if needs.gate is None
            for name in needs.columns | needs.shown
        }
        self.columns: frozenset[str] = frozenset(
            ALWAYS | dense | (STATS_COLUMNS if stats else set())
        )
        # Every column any rule may read or show: what a live driver parses, as its batches are
        # a few lines, where one more parse pass for a gated rule costs more than it saves.
        self.every_column: frozenset[str] = self.columns | {
            name for needs in self._needs for name in needs.columns | needs.shown
        }
        self.sources: dict[str, SourceState] = {}
        # How many of a source's last non-blank lines its rules read when it ends (`finish`):
        # the driver that calls `finish` keeps them (`kept_last`); a live one keeps none.
        self.last_lines = max((needs.last_lines for needs in self._needs), default=0)
        # the columns those rules read of them (`finish` computes what a driver did not)
        self.end_columns: frozenset[str] = frozenset(
            name for needs in self._needs if needs.last_lines for name in needs.columns
        )
        self._on_error = on_error
        self._failed: set[tuple[str, str]] = set()
        self._initial: dict[str, dict[str, Any]] = {}  # each rule's initial state, only read
        self._on_warning = on_warning
        self._warned: set[tuple[str, str]] = set()  # (source, kind) of the warnings said
        # Protocol isinstance checks are slow: which rules move with the wall clock (ticks are
        # hot, and the tail driver asks per followed file) is known once, here.
        self.wallclock_rules = [s for s in self.rules if isinstance(s.rule, WallClockRule)]
        # Protocol isinstance checks are slow: which rules read GPU frames is known once, here.
        self._gpu: list[GpuRule | None] = [
            spec.rule if isinstance(spec.rule, GpuRule) else None for spec in self.rules
        ]
        self._log_gpu = any(rule is not None and not rule.nvml_only for rule in self._gpu)
        # the snapshot metrics those read on a log (None: all): the only GPU rows read
        self._gpu_metrics = log_gpu_metrics(rule for rule in self._gpu if rule is not None)
        # the GPU rules whose step on a log batch `prepare` can compute most of ahead
        self._log_holds = [
            rule for rule in self._gpu if isinstance(rule, HoldRule) and not rule.nvml_only
        ]
        # Each distinct gate's check, built once: making expressions costs more than matching
        # them on a one-line batch.
        rows = {
            needs.gate: needs.rows
            for needs in self._needs
            if needs.gate is not None and needs.rows is not None
        }
        self._gate_rows = dict(sorted(rows.items()))
        self._gate_scan = GateScan(
            self._gate_rows, _gate_reach(self._needs), _gate_valued(self._needs)
        )
        # the rules' per-line columns that `prepare` computes ahead, in one query
        # (those reading only what every parse gives: the others the rules compute themselves)
        ahead = {
            name: value
            for needs in self._needs
            for name, value in needs.ahead.items()
            if set(ahead_expr(value).meta.root_names()) <= ALWAYS
        }
        self._ahead = [ahead_expr(value).alias(name) for name, value in sorted(ahead.items())]
        # on a long batch whose lines' shapes are known, each read only where it can match
        self._ahead_reach = [
            reached(value) if isinstance(value, str) else ANY for _, value in sorted(ahead.items())
        ]
        # On a live batch of a line or two, each gate's own regex: a rule's cheaper expression
        # for a long batch (the nonfinite gate's list pass) costs more there than the regex.
        self._small_gate_checks = {
            gate: gate_rows(Needs(frozenset(), gate)).any().alias(f"_g{i}")
            for i, gate in enumerate(self._gate_rows)
        }
        # The rules that take many sources' batches in one frame (`process_many`): not GPU
        # rules (their step reads the batch's GPU frame).
        self._batched: dict[int, BatchedRule] = {
            order: spec.rule
            for order, spec in enumerate(self.rules)
            if isinstance(spec.rule, BatchedRule) and self._gpu[order] is None
        }
        # Protocol isinstance checks are slow: the rules that decide at the end of input
        # (`finish`, per source) and those of them that decide for many sources at once.
        self._end_rules = [
            o for o, s in enumerate(self.rules) if isinstance(s.rule, EndOfInputRule)
        ]
        self._batched_ends = {
            order: cast(BatchedEnd, self.rules[order].rule)
            for order in self._end_rules
            if isinstance(self.rules[order].rule, BatchedEnd)
        }
        # what `process_many` computed ahead for the source being processed: (rule order,
        # source) -> (rows, outcome), and source -> (rows, its stats aggregates)
        self._ready: dict[tuple[int, str], tuple[int, Outcome]] = {}
        self._ready_stats: dict[str, tuple[int, dict[str, Any]]] = {}
        self._ready_fill: dict[str, pl.Series] = {}  # source -> its step filled in
        self._ready_live: dict[str, ReadyChecks] = {}  # source -> its live checks
        self._ready_group: Group | None = None  # the frames of the `process_many` call
        # On a live batch, each streak rule's first check (whether a streak can start in it)
        # joins the gate checks' select (`_live_checks`).
        self._streak_checks = {
            order: streak_starts(spec.rule)
            for order, spec in enumerate(self.rules)
            if isinstance(spec.rule, StreakRule)
        }
