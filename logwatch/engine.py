"""The engine: rules over frames, alert lifecycles, per-source state. Shared by replay and tail."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import Any, TypeVar, cast

import polars as pl

from logwatch.alerts import FIRING, RESOLVED, AlertEvent
from logwatch.gpu.frames import DroppedPair, read_telemetry_rows
from logwatch.lifecycle import Lifecycle
from logwatch.parse import ALWAYS, SCHEMA, complete, shapes_giving
from logwatch.redact import MASK, redact
from logwatch.rules.gpu import GpuRule, HoldRule, LogGpuRows, log_gpu_metrics, log_gpu_rows
from logwatch.rules.loader import RuleSpec
from logwatch.rules.log import (
    EndOfInputRule,
    Needs,
    Override,
    StreakRule,
    Transition,
    WallClockRule,
    ahead_expr,
    gate_rows,
    streak_starts,
)
from logwatch.rules.reach import ANY, reached
from logwatch.rules.scan import GateScan, ShapeRows
from logwatch.shapes import PLAIN_PAIRS_SHAPES
from logwatch.statecheck import (
    INT,
    LIST,
    NUMBER,
    OBJECT,
    STR,
    TIME,
    counts,
    fields,
    kind_of,
    like,
    optional,
)
from logwatch.template import fill

ErrorHandler = Callable[[str, str, Exception], None]
"""Called as (rule id, source, exception) when a rule raises; the engine goes on without it."""

_T = TypeVar("_T")

Step = Callable[[dict[str, Any]], tuple[list[Transition], dict[str, Any]]]
"""One rule step on its state: (transitions, new state)."""


@dataclass(frozen=True, slots=True)
class DataWarning:
    """Something in a source's lines the rules could not read as written, and what was made of
    it (a snapshot value no GPU column holds: read as missing). Said once per source and kind."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


WarningHandler = Callable[[DataWarning], None]
"""Called with each data warning, in line order, once per source and kind."""


@dataclass(slots=True)
class SourceStats:
    """What a post-mortem summary says about one source."""

    lines: int = 0
    steps_seen: int = 0
    first_step: int | None = None
    last_step: int | None = None
    last_loss: float | None = None
    q_hs_min: int | None = None
    q_hs_max: int | None = None
    runs: int = 0
    fired: Counter[str] = field(default_factory=Counter)
    first_ts: str | None = None  # ISO 8601, as the checkpoint stores it
    last_ts: str | None = None
    throughput_median: float | None = None  # set by replay (the median of every step's value)

    def count(self, frame: pl.DataFrame) -> None:
        """Fold only the line and run counts of a batch (the engine's own bookkeeping)."""
        self.lines += frame.height
        self.runs += int(frame.get_column("run_start").sum())

    def update(self, frame: pl.DataFrame) -> None:
        """Fold one parsed batch into the stats (vectorized aggregates)."""
        agg = frame.select(_STATS_AGG).row(0, named=True)
        self.lines += agg["n"]
        self.steps_seen += agg["steps"]
        if self.first_step is None:
            self.first_step = agg["first_step"]
        if agg["last_step"] is not None:
            self.last_step = agg["last_step"]
        if agg["last_loss"] is not None:
            self.last_loss = agg["last_loss"]
        self.q_hs_min = _fold(min, self.q_hs_min, agg["q_min"])
        self.q_hs_max = _fold(max, self.q_hs_max, agg["q_max"])
        self.runs += agg["runs"]
        if self.first_ts is None and agg["first_ts"] is not None:
            self.first_ts = agg["first_ts"].isoformat()
        if agg["last_ts"] is not None:
            self.last_ts = agg["last_ts"].isoformat()


_STATS_AGG = (
    pl.len().alias("n"),
    pl.col("step").count().alias("steps"),
    pl.col("step").drop_nulls().first().alias("first_step"),
    pl.col("step").drop_nulls().last().alias("last_step"),
    pl.col("loss").drop_nulls().last().alias("last_loss"),
    pl.col("q_hs").min().alias("q_min"),
    pl.col("q_hs").max().alias("q_max"),
    pl.col("run_start").sum().alias("runs"),
    pl.col("ts").drop_nulls().first().alias("first_ts"),
    pl.col("ts").drop_nulls().last().alias("last_ts"),
)
"""`SourceStats.update`'s aggregates, built once (building them costs more than a small batch)."""


def _fold(fn: Callable[[int, int], int], old: int | None, new: int | None) -> int | None:
    if old is None:
        return new
    return old if new is None else fn(old, new)


@dataclass(slots=True)
class SourceState:
    """Everything the engine carries for one source between batches."""

    rule_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_step: int | None = None
    alerts: Lifecycle = field(default_factory=lambda: Lifecycle(_summary))
    stats: SourceStats = field(default_factory=SourceStats)
    run_id: str | None = None  # what the current run's `run start:` line calls it


_RUN_ID = re.compile(r"\brun[_ -]?(?:id|name)\s*[=:]\s*['\"]?([\w.:/@+-]{1,80})")


def run_id(text: str) -> str | None:
    """The run id a `run start:` line announces (`run_id=slammed4`, `run_name: exp-3`), or None;
    redacted like all log text (`[REDACTED]` for a token-shaped one)."""
    found = _RUN_ID.search(text)
    if found is None:
        return None
    value = redact(found[1])
    # A secret can reach past the id's characters (a registered one with a `=` or a space):
    # an id that the whole line's redaction does not keep as it is goes whole.
    return value if value in redact(text) else MASK


STATS_COLUMNS = frozenset({"step", "loss", "q_hs", "run_start", "ts"})
"""What `SourceStats.update` reads."""


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
    )


_FILLED = frozenset({"step"})
"""Columns the engine fills in on lines without a value of their own (`_filled_step`): a rule
that moves on a value of one may move on any line."""


def _gate_reach(needs: Sequence[_Needs]) -> dict[str, frozenset[int]]:
    """Each gate -> the shapes on whose lines it may match and move a rule behind it: those its
    regex reaches (`reach.reached`), less, for a rule that moves only on lines with a value
    (`Needs.valued`), the shapes that give it none."""
    found: dict[str, frozenset[int]] = {}
    for rule in needs:
        if rule.gate is None:
            continue
        shapes = reached(rule.gate)
        if rule.valued and not rule.valued & _FILLED:
            shapes &= shapes_giving(rule.valued)
        found[rule.gate] = found.get(rule.gate, frozenset()) | shapes
    return found


class Engine:
    """Runs rules over parsed frames of any number of sources, one batch at a time.

    Rules declare the columns they read: `columns` is what replay parses for every block
    (`every_column` what a live driver parses for its small batches); a rule behind a gate (a
    literal outside of which it cannot move while quiet) gets its columns computed on a batch
    only when its gate matches there or it is not quiet.
    `stats=False`: keep only line and run counts (`replay --format jsonl` shows no summary).
    `on_error` hears of a rule that raised (it is off for that source from then on);
    `on_warning` of lines read otherwise than written (`DataWarning`), once per source and kind."""

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
        self._on_error = on_error
        self._failed: set[tuple[str, str]] = set()
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
        self._gate_scan = GateScan(self._gate_rows, _gate_reach(self._needs))
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
        # On a live batch, each streak rule's first check (whether a streak can start in it)
        # joins the gate checks' select (`_live_checks`).
        self._streak_checks = {
            order: streak_starts(spec.rule)
            for order, spec in enumerate(self.rules)
            if isinstance(spec.rule, StreakRule)
        }

    def state_of(self, source: str) -> SourceState:
        """The state of one source, created on first use."""
        return self.sources.setdefault(source, SourceState())

    def active_alerts(self, source: str | None = None) -> list[AlertEvent]:
        """Alerts firing now (the events that fired them), in firing order."""
        states = [self.sources[source]] if source in self.sources else []
        if source is None:
            states = list(self.sources.values())
        return [event for state in states for event in state.alerts]

    def prepare(
        self,
        frame: pl.DataFrame,
        computed: Iterable[str] | None = None,
        *,
        shapes: pl.Series | None = None,
    ) -> Prepared | None:
        """What `process` can use of a parsed batch that no engine state changes, computed
        ahead (replay does it on its parse threads): the lines each rule gate selects, the last
        step its lines say (when `computed`, the columns its parse computed, lacks the step),
        the rules' `Needs.ahead` columns, and the GPU rows of its snapshot lines (with each GPU
        hold rule's scored rows), or the error reading them raised (raised again, as the GPU
        rules' error, when they read them). `shapes`: each line's shape, where the parse
        knows it (`ParsedBlock.shapes`): gates and `ahead` columns are read only on the lines
        where they can match, and the GPU rows of plain-pairs lines are cut by position
        (`gpu.frames.telemetry_rows`)."""
        if frame.is_empty():
            return None
        plain_pairs = None if shapes is None else shapes.is_in(PLAIN_PAIRS_SHAPES).fill_null(False)
        lines = ShapeRows(frame, shapes)
        hits = self._gate_scan.hits(frame, lines=lines)
        stepped = computed is not None and "step" not in computed
        last_step = last_step_of(frame) if stepped else None
        ahead = None
        if self._ahead:
            ahead = lines.columns(list(zip(self._ahead, self._ahead_reach, strict=True)))
        ready = partial(Prepared, frame, hits, stepped=stepped, last_step=last_step, ahead=ahead)
        if not self._log_gpu or _LazyGpuFrame(frame).empty():
            return ready(None, None)
        try:
            found = read_telemetry_rows(frame, self._gpu_metrics, plain_pairs=plain_pairs)
            rows = LogGpuRows(found.rows, self._gpu_metrics, found.dropped)
        except Exception as exc:  # the rules that read these rows report it, in order
            return ready(None, exc)
        for rule in self._log_holds:
            try:
                rows.scored(rule)
            except Exception:  # not kept: the rule's own step raises it again, as its error
                continue
        return ready(rows, None)

    def process(
        self,
        frame: pl.DataFrame,
        computed: Iterable[str] | None = None,
        prepared: Prepared | None = None,
    ) -> list[AlertEvent]:
        """Evaluate every rule on a batch of one source's lines (in file order); `computed`:
        the columns its parse computed (None: all), the others are computed when a rule needs
        them; `prepared`: what `prepare` gave for this very frame."""
        if frame.is_empty():
            return []
        if prepared is not None and prepared.frame is not frame:
            prepared = None  # computed for another frame
        done = frozenset(SCHEMA) if computed is None else frozenset(computed) | ALWAYS
        if self._stats:
            frame = _with(frame, STATS_COLUMNS, done)
            done |= STATS_COLUMNS
        source = frame.get_column("source")[0]
        state = self.state_of(source)
        if self._stats:
            state.stats.update(frame)
        else:
            state.stats.count(frame)
        events: list[AlertEvent] = []
        segments = _split_runs(frame, has_history=state.stats.lines > frame.height)
        if len(segments) > 1:
            prepared = None  # computed for the whole batch's rows
        for segment, restarted_at in segments:
            if restarted_at is not None:
                events.extend(self._restart(source, state, segment, restarted_at))
            if segment.item(0, "run_start"):
                state.run_id = masked(run_id(segment.item(0, "text")))
            events.extend(self._evaluate(source, state, segment, done, prepared))
        return events

    def _restart(
        self, source: str, state: SourceState, segment: pl.DataFrame, line: int
    ) -> list[AlertEvent]:
        """A new run began in the same source: close what the old run left firing, reset state."""
        first = segment.row(0, named=True)
        return self.restart(
            source, line=line, ts=first["ts"], why=f"the run restarted at line {line}"
        )

    def restart(self, source: str, *, line: int, ts: datetime | None, why: str) -> list[AlertEvent]:
        """A source starts over (a new run, a truncated file): end what fires (reason
        `restarted`), reset its rules; its stats go on."""
        state = self.state_of(source)
        ended = state.alerts.end_all(line=line, ts=ts, why=why)
        state.rule_states.clear()
        state.last_step = None
        return ended

    def rename_source(self, old: str, new: str) -> None:
        """`old`'s state is `new`'s from now on (a rotated file), its firing alerts included
        (`Lifecycle.move`: they go on, nothing is emitted)."""
        state = self.sources.pop(old, None)
        if state is None:
            return
        self.sources[new] = state
        self._failed |= {(rule, new) for rule, source in self._failed if source == old}
        self._warned |= {(new, kind) for source, kind in self._warned if source == old}
        state.alerts.move(new)

    def _evaluate(
        self,
        source: str,
        state: SourceState,
        frame: pl.DataFrame,
        done: frozenset[str],
        prepared: Prepared | None = None,
    ) -> list[AlertEvent]:
        # Rules and events see the step forward-filled from the lines before. When no loaded
        # rule reads it, the step is parsed only for the batch's last lines (the one carried)
        # and, for a batch with events, in full.
        prior = state.last_step
        if "step" in done:
            if not _step_filled(frame):
                frame = _filled_step(frame, prior)
            last_step = frame.get_column("step")[-1]
        elif prepared is not None and prepared.stepped:
            last_step = prepared.last_step
        else:
            last_step = last_step_of(frame)
        if last_step is not None:
            state.last_step = last_step
        # Transitions are collected first and turned into events in line order, so the firing
        # order the lifecycle keeps (what a restart ends, in that order) is the same for any cut.
        found: list[tuple[int, int, RuleSpec, Transition]] = []
        # The quiet gated rules; their gates (gate -> whether a line of the batch matches it)
        # are checked together, in one pass over the text.
        quiet = {
            order
            for order, spec in enumerate(self.rules)
            if (needs := self._needs[order]).gate is not None
            and needs.quiet is not None
            and needs.quiet(self._rule_state(spec, state))
        }
        hits = dict(prepared.hits) if prepared is not None else {}
        opened = {gate: not lines.is_empty() for gate, lines in hits.items()}
        gates = {cast(str, self._needs[order].gate) for order in quiet} - opened.keys()
        live = _LiveChecks({})
        if frame.height <= _SMALL_BATCH:
            checks = {gate: self._small_gate_checks[gate] for gate in sorted(gates)}
            live = self._live_checks(frame, source, state, done, checks)
            opened |= live.opened
        elif gates:
            scanned = self._gate_scan.hits(frame, gates)
            opened |= {gate: not lines.is_empty() for gate, lines in scanned.items()}
        warn = partial(self._warn_dropped, source, frame)
        gpu_frame = _LazyGpuFrame(frame, prepared, self._gpu_metrics, live.gpu_empty, warn)
        for order, spec in enumerate(self.rules):
            needs = self._needs[order]
            if order in quiet and not opened[cast(str, needs.gate)]:
                continue  # the rule cannot move on this batch (exact): nothing to compute
            if order in live.calm:
                # no streak carried in and none starts here: what its step returns (exact)
                state.rule_states[spec.id] = self._rule_state(spec, state)
                continue
            missing = needs.columns - done
            if missing and order in quiet and self._gpu[order] is None:
                lines = hits.get(cast(str, needs.gate))
                gated = self._gated(order, source, state, frame, missing, prior, lines)
                if gated is not None:
                    found.extend((line, order, spec, t) for line, t in gated)
                    continue
            if missing:
                frame = complete(frame, missing)
                if "step" in missing:
                    frame = _filled_step(frame, prior)
                done |= missing
                gpu_frame = _LazyGpuFrame(frame, prepared, self._gpu_metrics, said=warn)
            seen = frame  # with the columns computed ahead for this rule
            ahead = prepared.ahead if prepared is not None else live.ahead
            if needs.ahead and ahead is not None:
                given = [name for name in needs.ahead if name in ahead.columns]
                seen = frame.hstack(ahead.select(given).get_columns())
            step = _log_step(spec, self._gpu[order], seen, gpu_frame)
            for transition in self._guarded(spec, source, state, step):
                line = transition.fields.get("line", frame.item(transition.row, "line"))
                found.append((line, order, spec, transition))
        found.sort(key=lambda item: (item[0], item[1]))
        shown = {name for _, order, _, _ in found for name in self._needs[order].shown}
        if found:
            shown.add("step")  # every event says its step
        # what the summaries of this batch's events show (a rule's own columns, computed on its
        # gated rows only, are shown where its summary says them)
        rows = _EventRows(frame, shown - done, prior, [t.row for *_, t in found])
        events = [self._event(spec, source, rows.row(t.row), t, state) for _, _, spec, t in found]
        return [event for event in events if event is not None]

    def _live_checks(
        self,
        frame: pl.DataFrame,
        source: str,
        state: SourceState,
        done: frozenset[str],
        gates: Mapping[str, pl.Expr],
    ) -> _LiveChecks:
        """On a small (live) batch, in one select: whether each of `gates` opens, which quiet
        streak rules no line of the batch can start a streak in (the first check their step
        makes, each its own select), whether the batch has GPU snapshot keys (the GPU rules'
        first check), and the rules' `Needs.ahead` columns (what `prepare` computes for a long
        batch; each rule would run its own query for its column). A select that raises (a
        streak expression that fails on this batch) leaves the streaks, the GPU check and the
        columns to the rules' steps, where errors are reported rule by rule."""
        streaks = {
            order: check
            for order, check in self._streak_checks.items()
            if self._needs[order].columns <= done
            and (self.rules[order].id, source) not in self._failed
            and cast(StreakRule, self.rules[order].rule).quiet(
                self._rule_state(self.rules[order], state)
            )
        }
        exprs = [*gates.values(), *(c.alias(f"_s{o}") for o, c in streaks.items())]
        if self._log_gpu:
            exprs.append(_gpu_keys_present(frame).alias("_gpu"))
        if not exprs and not self._ahead:
            return _LiveChecks({})
        try:
            # the checks are aggregates: polars repeats them along the per-line columns
            selected = frame.select(*exprs, *self._ahead)
        except Exception:
            return _LiveChecks(_opened(frame, gates))
        found = selected.row(0)[: len(exprs)]
        ahead = selected.select(selected.columns[len(exprs) :]) if self._ahead else None
        opened = {gate: bool(hit) for gate, hit in zip(gates, found, strict=False)}
        calm = {o for o, hit in zip(streaks, found[len(gates) :], strict=False) if not hit}
        gpu_empty = not found[-1] if self._log_gpu else None
        return _LiveChecks(opened, frozenset(calm), gpu_empty, ahead)

    def _warn_dropped(
        self, source: str, frame: pl.DataFrame, dropped: Sequence[DroppedPair]
    ) -> None:
        """Say each snapshot pair of `frame` the GPU rows left out, once per source and kind."""
        for pair in dropped:
            if (source, pair.kind) in self._warned:
                continue
            self._warned.add((source, pair.kind))
            if self._on_warning is not None:
                line = int(frame.item(pair.row, "line"))
                self._on_warning(DataWarning(source, line, pair.message))

    def _rule_state(self, spec: RuleSpec, state: SourceState) -> dict[str, Any]:
        """A rule's state as its step receives it (`_guarded`)."""
        return state.rule_states.get(spec.id) or spec.rule.initial_state()

    def _gated(
        self,
        order: int,
        source: str,
        state: SourceState,
        frame: pl.DataFrame,
        missing: frozenset[str],
        prior: int | None,
        hits: pl.Series | None = None,
    ) -> list[tuple[int, Transition]] | None:
        """A quiet gated rule's step over a batch its gate opens, with its `missing` columns
        computed only from each gate line on, until the rule is quiet again (the lines between
        cannot move a quiet rule, as a batch without a gate line cannot): (line, transition)
        with rows of `frame`. None where the gate opens on too many lines to gain by this."""
        spec, needs = self.rules[order], self._needs[order]
        if hits is None:  # the rows of its gate's lines
            hits = frame.select(cast(pl.Expr, needs.rows).fill_null(False)).to_series().arg_true()
        if hits.len() * _GATED_ROWS > frame.height:
            return None
        found: list[tuple[int, Transition]] = []
        end = 0
        for hit in hits.to_list():
            if hit < end:
                continue  # evaluated with the rows before it
            start, size = hit, _GATED_ROWS
            while True:
                piece = complete(frame.slice(start, size), missing)
                if "step" in missing:
                    piece = _filled_step(piece, _step_before(frame, start, prior))
                step = partial(spec.rule.evaluate, piece)
                for transition in self._guarded(spec, source, state, step):
                    moved = replace(transition, row=transition.row + start)
                    found.append((moved.fields.get("line", frame.item(moved.row, "line")), moved))
                end = start + piece.height
                rule_state = self._rule_state(spec, state)
                if end >= frame.height or (spec.id, source) in self._failed:
                    break
                if cast(Callable[..., bool], needs.quiet)(rule_state):
                    break
                start, size = end, size * 4
            if end >= frame.height:
                break
        return found

    def _event(
        self,
        spec: RuleSpec,
        source: str,
        row: dict[str, Any],
        transition: Transition,
        state: SourceState,
    ) -> AlertEvent | None:
        if transition.fields:  # summary-only values: they fill placeholders, not identity
            row = {**row, **transition.fields}
        if transition.override is not None:
            spec = _overridden(spec, transition.override)
        event = AlertEvent(
            rule=spec.id,
            severity=spec.severity,
            status=transition.status,
            source=source,
            line=row["line"],
            ts=row["ts"],
            step=row["step"],
            value=transition.value,
            summary="",
            fix=spec.fix,
            text=redact(row["text"]),
            labels=masked(dict(transition.labels)),
            run=state.run_id,
            runbook_url=spec.runbook_url,
        )
        emitted = state.alerts.step(event, spec, row)
        if emitted is not None and emitted.status == FIRING:
            state.stats.fired[spec.id] += 1
        return emitted

    # --- live drivers only: wall-clock rules and per-source checkpoints (replay uses neither) ---

    def tick(self, source: str, now: datetime, *, arrived: bool, line: int) -> list[AlertEvent]:
        """Advance the wall-clock rules of one source; `arrived`: lines came since the last tick."""
        state = self.state_of(source)
        row: dict[str, Any] | None = None  # built only when a rule transitions (ticks are hot)
        events: list[AlertEvent] = []
        for spec in self.wallclock_rules:
            clock_rule = cast(WallClockRule, spec.rule)
            step = partial(clock_rule.tick, now_s=now.timestamp(), arrived=arrived)
            transitions = self._guarded(spec, source, state, step)
            for transition in transitions:
                if row is None:
                    given = {"source": source, "line": line, "ts": now, "step": state.last_step}
                    row = pl.DataFrame([{**given, "text": ""}], schema=SCHEMA).row(0, named=True)
                event = self._event(spec, source, row, transition, state)
                if event is not None:
                    events.append(event)
        return events

    def finish(self, source: str, last: pl.DataFrame | None = None) -> list[AlertEvent]:
        """A source's input has ended (replay, at the end of a file): rules that were waiting
        for more lines decide now; `last`: its last non-blank lines (`kept_last`; None: not
        kept, the rules that read them decide without)."""
        state = self.state_of(source)
        events: list[AlertEvent] = []
        for order, spec in enumerate(self.rules):
            if not isinstance(spec.rule, EndOfInputRule):
                continue
            count = self._needs[order].last_lines
            if spec.id not in state.rule_states and not count:
                continue
            lines = _last_of(last, count, self._needs[order].columns)
            step = partial(spec.rule.finish, last=lines)
            for transition in self._guarded(spec, source, state, step):
                given = {"source": source, "line": 0, "step": state.last_step, "text": ""}
                row = pl.DataFrame([given], schema=SCHEMA).row(0, named=True)
                event = self._event(spec, source, row, transition, state)
                if event is not None:
                    events.append(event)
        return events

    def _guarded(
        self, spec: RuleSpec, source: str, state: SourceState, step: Step
    ) -> list[Transition]:
        """Run one rule step on its state; a rule that raises is reported once and switched off
        for that source, so the reader and the other rules keep working."""
        if (spec.id, source) in self._failed:
            return []
        rule_state = self._rule_state(spec, state)
        try:
            transitions, state.rule_states[spec.id] = step(rule_state)
        except Exception as exc:
            self._failed.add((spec.id, source))
            if self._on_error is None:
                raise
            self._on_error(spec.id, source, exc)
            return []
        return transitions

    def export_state(self, source: str) -> dict[str, Any]:
        """One source's state as JSON-able data (rule states, last step, firing alerts, stats)."""
        state = self.state_of(source)
        stats = {name: getattr(state.stats, name) for name in SourceStats.__slots__}
        stats["fired"] = dict(state.stats.fired)
        return {
            "rule_states": masked(state.rule_states),  # a rule may keep a line (classify)
            "last_step": state.last_step,
            "active": state.alerts.export_json(),
            "stats": stats,
            "run_id": state.run_id,
        }

    def import_state(self, source: str, data: Mapping[str, Any]) -> None:
        """Restore what `export_state` saved; ValueError (and no change) on malformed data:
        every field is checked against its schema here, none fails at its first use."""
        what = f"engine state of {source}"
        fields(data, _STATE_FIELDS, what, optional_fields={"run_id": optional(STR)})
        # every stat is optional: a checkpoint older than one of them lacks it
        stats = fields(data["stats"], {}, f"{what}: stats", optional_fields=_STATS_FIELDS)
        rule_states = data["rule_states"]
        fresh = {spec.id: spec.rule.initial_state() for spec in self.rules}
        for rule_id, rule_state in rule_states.items():
            kind_of(rule_state, OBJECT, f"{what}: rule {rule_id}")
            if rule_id in fresh:
                like(rule_state, fresh[rule_id], f"{what}: rule {rule_id}")
        try:
            fired = Counter(counts(stats.get("fired", {}), f"{what}: stats.fired"))
            known = {name: stats[name] for name in _STATS_FIELDS if name in stats}
            known.pop("fired", None)
            restored = SourceState(
                rule_states={str(k): dict(v) for k, v in rule_states.items()},
                last_step=data["last_step"],
                stats=SourceStats(**known, fired=fired),
                run_id=data.get("run_id"),
            )
            restored.alerts.import_json(kind_of(data["active"], LIST, f"{what}: active"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed {what}: {exc!r}") from None
        self.sources[source] = restored

    def rehearse(
        self, frames: Iterable[pl.DataFrame], columns: Iterable[str] | None = None
    ) -> None:
        """Evaluate `frames` (`process`, parsed for `columns`), then forget their sources: their
        events, states and rule errors (none is reported). A live driver runs this once over a
        few typical lines so that its first alert does not pay polars' one-time costs."""
        sources: set[str] = set()
        on_error, self._on_error = self._on_error, _unreported
        on_warning, self._on_warning = self._on_warning, None
        try:
            for frame in frames:
                if frame.height:
                    sources.add(frame.get_column("source")[0])
                    self.process(frame, columns)
        finally:
            self._on_error, self._on_warning = on_error, on_warning
            for source in sources:
                self.sources.pop(source, None)
            self._failed = {failed for failed in self._failed if failed[1] not in sources}
            self._warned = {warned for warned in self._warned if warned[0] not in sources}

    def run_all(self, frames: Iterable[pl.DataFrame]) -> list[AlertEvent]:
        """Evaluate a sequence of batches; convenience for tests and small inputs."""
        return [event for frame in frames for event in self.process(frame)]


_STATS_FIELDS = {
    "lines": INT,
    "steps_seen": INT,
    "first_step": optional(INT),
    "last_step": optional(INT),
    "last_loss": optional(NUMBER),
    "q_hs_min": optional(INT),
    "q_hs_max": optional(INT),
    "runs": INT,
    "fired": OBJECT,
    "first_ts": optional(TIME),
    "last_ts": optional(TIME),
    "throughput_median": optional(NUMBER),
}
"""A checkpoint's `SourceStats`: what `import_state` accepts (`export_state` writes them all)."""
_STATE_FIELDS = {"rule_states": OBJECT, "last_step": optional(INT), "active": LIST, "stats": OBJECT}


def kept_last(kept: pl.DataFrame | None, frame: pl.DataFrame, count: int) -> pl.DataFrame:
    """The last `count` non-blank lines of what was kept and the batch `frame` after it (the
    rows of `frame`'s end are looked at, more only while too few of them are non-blank): what
    a driver keeps of a source for `Engine.finish`, the same for any split into batches."""
    size = count
    while True:
        found = frame.tail(size).filter(pl.col("text").str.strip_chars() != "")
        if found.height >= count or size >= frame.height:
            break
        size *= 4
    found = found.select(list(SCHEMA))
    if kept is None or found.height >= count:
        return found.tail(count)
    return pl.concat([kept, found], how="vertical_relaxed").tail(count)


def _last_of(kept: pl.DataFrame | None, count: int, columns: frozenset[str]) -> pl.DataFrame:
    """The last `count` kept lines with `columns` computed from their text (none when 0)."""
    if kept is None or not count:
        return pl.DataFrame(schema=SCHEMA)
    return complete(kept.tail(count), columns - ALWAYS)


def masked(value: _T) -> _T:
    """`value` with every string in it (through dicts and lists) redacted as the sinks redact
    log text: what the engine keeps of a log's text (run ids, labels, rule states) goes to the
    alerts and the state directory only through here (or, for a line's text, `redact`)."""
    if isinstance(value, str):
        return cast(_T, redact(value))
    if isinstance(value, dict):
        return cast(_T, {key: masked(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_T, [masked(item) for item in value])
    return value


def _unreported(rule_id: str, source: str, exc: Exception) -> None:
    """A rule error while rehearsing: not reported (the same lines are not a user's)."""


_SMALL_BATCH = 64
"""Batches up to this many lines check each gate by its regex (`Engine._small_gate_checks`)."""
_GATED_ROWS = 64
"""Rows a quiet gated rule first reads from a gate line (then 4 times as many, ... while it
is not quiet); a batch whose gate lines are more than one in this many is read whole."""


def _step_before(frame: pl.DataFrame, row: int, prior: int | None) -> int | None:
    """The step in force at the line before `row`: the last one the batch's lines before it
    say, else `prior` (the source's step before the batch)."""
    said = last_step_of(frame.head(row)) if row else None
    return prior if said is None else said


class _EventRows:
    """The rows a batch's events read, with the columns their summaries show (`columns`, not yet
    computed) added: for a few events on a long batch, on their own rows only."""

    def __init__(
        self, frame: pl.DataFrame, columns: set[str], prior: int | None, rows: list[int]
    ) -> None:
        self._frame, self._columns, self._prior = frame, columns, prior
        self._picked: dict[int, dict[str, Any]] = {}
        if columns and len(rows) * _GATED_ROWS > frame.height:  # many: the whole batch
            self._frame = complete(frame, columns)
            if "step" in columns:
                self._frame = _filled_step(self._frame, prior)
            self._columns = set()

    def row(self, index: int) -> dict[str, Any]:
        """Row `index` of the batch, as a dict."""
        if not self._columns:
            return self._frame.row(index, named=True)
        if index not in self._picked:
            one = complete(self._frame.slice(index, 1), self._columns)
            if "step" in self._columns and one.item(0, "step") is None:
                one = _filled_step(one, _step_before(self._frame, index, self._prior))
            self._picked[index] = one.row(0, named=True)
        return self._picked[index]


def _filled_step(frame: pl.DataFrame, prior: int | None) -> pl.DataFrame:
    """The batch with its step forward-filled, from `prior` (the source's last step) first."""
    step = pl.col("step").forward_fill().fill_null(pl.lit(prior, dtype=pl.Int64))
    return frame.with_columns(step)


_TAIL_ROWS = 64


def last_step_of(frame: pl.DataFrame) -> int | None:
    """The last step a batch's lines say, parsing the step only of its last lines (64, then
    twice as many, ... until one says a step): exact, as a line's step is its own."""
    rows = _TAIL_ROWS
    while True:
        tail = frame.tail(rows)
        steps = complete(tail, {"step"}).get_column("step").drop_nulls()
        if steps.len() or rows >= frame.height:
            return int(steps[-1]) if steps.len() else None
        rows *= 4


def _with(frame: pl.DataFrame, columns: frozenset[str], done: frozenset[str]) -> pl.DataFrame:
    missing = columns - done
    return complete(frame, missing) if missing else frame


def _overridden(spec: RuleSpec, override: Override) -> RuleSpec:
    """The spec as one kind of line states it: its case's summary, fix and severity."""
    return replace(
        spec,
        summary=spec.summary if override.summary is None else override.summary,
        fix=spec.fix if override.fix is None else override.fix,
        severity=spec.severity if override.severity is None else override.severity,
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """`Engine.prepare`'s work on one parsed frame: the lines each gate selects, maybe its last
    step, its GPU rows (`telemetry_rows`), or the error reading them raised."""

    frame: pl.DataFrame
    hits: Mapping[str, pl.Series]  # gate -> the rows of the lines it selects
    gpu_rows: LogGpuRows | None
    error: Exception | None
    stepped: bool = False  # `last_step` is the last step the frame's lines say
    last_step: int | None = None
    ahead: pl.DataFrame | None = None  # the rules' `Needs.ahead` columns, one row per line


@dataclass(frozen=True, slots=True)
class _LiveChecks:
    """What `Engine._live_checks` found on a batch: whether each gate opens, the streak rules
    (by order) that cannot move on it, and whether it lacks GPU snapshot keys (None: not
    checked)."""

    opened: dict[str, bool]
    calm: frozenset[int] = frozenset()
    gpu_empty: bool | None = None
    ahead: pl.DataFrame | None = None  # the rules' `Needs.ahead` columns (as `prepare` gives)


def _gpu_keys_present(frame: pl.DataFrame) -> pl.Expr:
    """Whether some line of `frame` has `gpu/` snapshot keys (its GPU frame has rows)."""
    has_keys = (
        pl.col("gpu_keys").fill_null(0) > 0
        if "gpu_keys" in frame.columns
        else pl.col("snapshot").fill_null(False)
    )
    return has_keys.any()


def _step_filled(frame: pl.DataFrame) -> bool:
    """Whether a small batch's step needs no filling: every line says one (a live DFlash step
    line), so `_filled_step` would give the same frame."""
    step = frame.get_column("step")
    return frame.height <= _SMALL_BATCH and step.dtype == pl.Int64 and not step.null_count()


class _LazyGpuFrame:
    """The GPU rows of one log batch, read on first use (or taken from `prepared`) and shared
    by that batch's GPU rules; `empty`, when known, whether the batch has no GPU keys; `said`
    is handed the snapshot pairs the rows left out, when they are first read."""

    __slots__ = ("_empty", "_frame", "_metrics", "_prepared", "_rows", "_said")

    def __init__(
        self,
        frame: pl.DataFrame,
        prepared: Prepared | None = None,
        metrics: frozenset[str] | None = None,
        empty: bool | None = None,
        said: Callable[[Sequence[DroppedPair]], None] | None = None,
    ) -> None:
        self._frame = frame
        self._prepared = prepared
        self._metrics = metrics  # the snapshot metrics its rules read (None: all)
        self._rows: LogGpuRows | None = None
        self._empty: bool | None = empty
        self._said = said

    def rows(self) -> LogGpuRows:
        """The batch's GPU rows (`log_gpu_rows`), read once."""
        if self._rows is None:
            ready = self._prepared
            if ready is not None and ready.error is not None:
                raise ready.error
            if ready is not None and ready.gpu_rows is not None:
                self._rows = ready.gpu_rows
            else:
                self._rows = log_gpu_rows(self._frame, self._metrics)
            if self._rows.dropped and self._said is not None:
                self._said(self._rows.dropped)
        return self._rows

    def get(self) -> pl.DataFrame:
        """The batch's whole GPU frame (for GPU rules that are no `HoldRule`), built once."""
        return self.rows().frame()

    def empty(self) -> bool:
        """Whether the batch has no `gpu/` snapshot keys (its GPU frame would have no rows)."""
        if self._empty is None:
            self._empty = not self._frame.select(_gpu_keys_present(self._frame)).item()
        return self._empty


def _unchanged(state: dict[str, Any]) -> tuple[list[Transition], dict[str, Any]]:
    return [], state


def _log_step(
    spec: RuleSpec, gpu_rule: GpuRule | None, frame: pl.DataFrame, gpu_frame: _LazyGpuFrame
) -> Step:
    """A rule's step on a log batch: a GPU rule reads the batch's GPU frame, and an NVML-only
    one nothing (it keeps its state, as it did when it saw log frames itself)."""
    if gpu_rule is None:
        return partial(spec.rule.evaluate, frame)
    if gpu_rule.nvml_only:
        return _unchanged
    return partial(_gpu_step, gpu_rule, gpu_frame)


def _gpu_step(
    rule: GpuRule, gpu_frame: _LazyGpuFrame, state: dict[str, Any]
) -> tuple[list[Transition], dict[str, Any]]:
    # The frame is built inside the step, so a batch whose snapshot keys break it is reported as
    # that rule's error (the engine goes on), and a rule switched off never builds it. A batch
    # without GPU keys gives an empty frame, on which no GPU rule moves: skipped (most batches).
    if gpu_frame.empty():
        return [], state
    if isinstance(rule, HoldRule):  # reads only the rows of its own metrics
        return rule.evaluate_log(gpu_frame.rows(), state)
    return rule.evaluate_gpu(gpu_frame.get(), state)


def _opened(frame: pl.DataFrame, checks: Mapping[str, pl.Expr]) -> dict[str, bool]:
    """Whether some line of `frame` matches each gate (gate -> its check): one select."""
    if not checks:
        return {}
    found = frame.select(checks.values()).row(0)
    return {gate: bool(hit) for gate, hit in zip(checks, found, strict=True)}


def _split_runs(frame: pl.DataFrame, *, has_history: bool) -> list[tuple[pl.DataFrame, int | None]]:
    """Cut a batch where a new run starts; each cut after the source's first line restarts state."""
    run_start = frame.get_column("run_start")
    if not run_start.any():  # a native check; `arg_true` is a query
        return [(frame, None)]
    starts = run_start.arg_true().to_list()
    bounds = sorted({0, *starts})
    pieces = []
    for i, begin in enumerate(bounds):
        end = bounds[i + 1] if i + 1 < len(bounds) else frame.height
        piece = frame.slice(begin, end - begin)
        is_restart = begin in starts and (begin > 0 or has_history)
        pieces.append((piece, int(piece.get_column("line")[0]) if is_restart else None))
    return pieces


def format_value(value: Any) -> str:
    """A value as summaries show it."""
    if value is None:
        return "?"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


class LabelText(str):
    """`{labels}` in a summary renders every label (`{labels.gpu}` is one of them)."""

    def __new__(cls, labels: Mapping[str, str]) -> LabelText:
        return super().__new__(cls, ", ".join(f"{k}={v}" for k, v in labels.items()))


def render_summary(
    event: AlertEvent,
    spec: RuleSpec,
    row: Mapping[str, Any],
    *,
    value_format: Callable[[Any], str] = format_value,
) -> str:
    """The rule's summary template (or its resolved one) filled from the event and its row; a
    placeholder with no value shows `?`, or leaves out the `[?...]` clause it is in."""
    fields: dict[str, Any] = {name: _shown(value) for name, value in row.items()}
    fields.update({name: _shown(value) for name, value in spec.params.items()})
    fields.update(
        rule=spec.id,
        severity=spec.severity.label,
        source=event.source,
        line=str(event.line),
        step=_shown(event.step),
        value=None if event.value is None else value_format(event.value),
        labels=LabelText(event.labels),
        message=log_message(str(row.get("text") or "")),
    )
    template = spec.resolved_summary if event.status == RESOLVED else spec.summary
    return fill(template, fields, event.labels)


def _shown(value: Any) -> str | None:
    return None if value is None else format_value(value)


_LOG_PREFIX = re.compile(
    r"^\s*(?:\[[^\]]{1,40}\]:?\s*)*"  # [rank3]: [titan] ...
    r"(?:\[?\d{4}[-/]\d{2}[-/]\d{2}[ T][\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?\]?\s*)?"  # a timestamp
    r"(?:[-|:]\s*)?(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b\s*)?"  # a level
    r"(?:[-|:]\s*)?(?:\[[\w.:-]{1,40}\]\s*)?"  # a logger tag: [telemetry]
)


def log_message(text: str, limit: int = 300) -> str:
    """A log line without its timestamp / level / logger prefix, cut to `limit` characters."""
    message = _LOG_PREFIX.sub("", text, count=1).strip() or text.strip()
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _summary(event: AlertEvent, spec: RuleSpec, row: Mapping[str, Any]) -> str:
    """The engine's summaries: the rule's template, redacted."""
    return redact(render_summary(event, spec, row))
