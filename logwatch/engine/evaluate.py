"""Rule evaluation: each rule's step on a batch of one source's lines (quiet gated rules only
where their gate opens), transitions into alert events in line order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, cast

import polars as pl

from logwatch.alerts import FIRING, AlertEvent
from logwatch.engine.batch import (
    _SMALL_BATCH,
    Prepared,
    _EventRows,
    _filled_step,
    _LiveChecks,
    _opened,
    _overridden,
    _Pieces,
    _run_bounds,
    _split_runs,
    _step_filled,
    _with,
    last_step_of,
    with_columns_of,
)
from logwatch.engine.gated import _Stepping
from logwatch.engine.gpu_rows import _gpu_keys_present, _LazyGpuFrame, _log_step
from logwatch.engine.plan import _Needs
from logwatch.engine.state import (
    STATS_COLUMNS,
    DataWarning,
    SourceState,
    masked,
    run_id,
)
from logwatch.gpu.log_rows import DroppedPair, read_telemetry_rows
from logwatch.parse import ALWAYS, SCHEMA, complete, completed_columns
from logwatch.parse.shapes import PLAIN_PAIRS_SHAPES
from logwatch.redact import redact
from logwatch.rules.base import Outcome, Transition
from logwatch.rules.gpu import LogGpuRows
from logwatch.rules.loader import RuleSpec
from logwatch.rules.log import StreakRule
from logwatch.rules.scan import ShapeRows


class _Evaluator(_Stepping):
    """Rule evaluation over parsed batches of any number of sources (`Engine`)."""

    def state_of(self, source: str) -> SourceState:
        """The state of one source, created on first use."""
        state = self.sources.get(source)
        if state is None:  # (not `setdefault`: it would build a state to drop at every call)
            state = self.sources[source] = SourceState()
        return state

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
        (`gpu.log_rows.telemetry_rows`)."""
        if frame.is_empty():
            return None
        plain_pairs = None if shapes is None else shapes.is_in(PLAIN_PAIRS_SHAPES).fill_null(False)
        lines = ShapeRows(frame, shapes)
        hits = self._gate_scan.hits(frame, lines=lines)
        stepped = computed is not None and "step" not in computed
        last_step, run_steps = None, None
        if stepped:
            runs = _run_bounds(frame)
            if runs is None or len(runs) == 1:
                last_step = last_step_of(frame)
            else:  # `process` evaluates it run by run: each run's own last step
                run_steps = {b: last_step_of(frame.slice(b, e - b)) for b, e in runs}
        ahead = None
        if self._ahead:
            ahead = lines.columns(list(zip(self._ahead, self._ahead_reach, strict=True)))
        ready = partial(
            Prepared,
            frame,
            hits,
            stepped=stepped,
            last_step=last_step,
            ahead=ahead,
            run_steps=run_steps,
            shapes=shapes,
        )
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
            aggs = self._ready_stats.pop(source, None)
            if aggs is not None and aggs[0] == frame.height:  # `process_many` computed them
                state.stats.fold(aggs[1])
            else:
                state.stats.update(frame)
        else:
            state.stats.count(frame)
        events: list[AlertEvent] = []
        segments = _split_runs(frame, has_history=state.stats.lines > frame.height)
        readies: list[Prepared | None] = [prepared] * len(segments)
        if prepared is not None and len(segments) > 1:  # computed for the whole batch's rows
            readies = list(prepared.split([(segment, begin) for segment, _, begin in segments]))
        for (segment, restarted_at, _), ready in zip(segments, readies, strict=True):
            if restarted_at is not None:
                events.extend(self._restart(source, state, segment, restarted_at))
            if segment.item(0, "run_start"):
                state.run_id = run_id(segment.item(0, "text"))  # redacted there
            events.extend(self._evaluate(source, state, segment, done, ready))
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
                frame = self._filled(source, frame, prior)
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
            and needs.quiet(self._seen_state(spec, state))
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
        empty = live.gpu_empty
        checked = self._ready_live.get(source) if empty is None else None
        if checked is not None and checked.rows == frame.height and checked.gpu is not None:
            empty = not checked.gpu  # `process_many` checked a long batch's GPU keys too
        gpu_frame = _LazyGpuFrame(frame, prepared, self._gpu_metrics, empty, warn)
        pieces: _Pieces | None = None  # of `frame` as it is, for the `piecewise` rules
        # the log rules read from their gate lines on: the quiet ones whose gates open, and
        # those not quiet as the batch begins (from its first row on, until they are)
        piecewise = {
            order
            for order, needs in enumerate(self._needs)
            if needs.gate is not None
            and needs.quiet is not None
            and self._gpu[order] is None
            and (order not in quiet or opened[needs.gate])
        }
        for order, spec in enumerate(self.rules):
            needs = self._needs[order]
            if order in quiet and not opened[cast(str, needs.gate)]:
                continue  # the rule cannot move on this batch (exact): nothing to compute
            if order in live.calm:
                # no streak carried in and none starts here: what its step returns (exact)
                state.rule_states[spec.id] = self._rule_state(spec, state)
                continue
            ready = self._ready.pop((order, source), None)
            if ready is not None and ready[0] == frame.height:
                # `process_many` stepped it on this source's lines, with many sources' (exact)
                taken = partial(_taken, ready[1])
                for transition in self._guarded(spec, source, state, taken):
                    line = transition.fields.get("line", frame.item(transition.row, "line"))
                    found.append((line, order, spec, transition))
                continue
            missing = needs.columns - done
            if missing and order in piecewise:
                lines = hits.get(cast(str, needs.gate))
                if pieces is None:
                    lacking = frozenset().union(*(self._needs[o].columns for o in piecewise))
                    shared = len(piecewise) > 1
                    pieces = _Pieces(frame, lacking - done, prepared, shared=shared)
                from_start = order not in quiet
                gated = self._gated(
                    order, source, state, frame, missing, prior, lines, pieces, from_start
                )
                if gated is not None:
                    found.extend((line, order, spec, t) for line, t in gated)
                    continue
            if missing:
                frame = self._completed(source, frame, missing, prepared)
                pieces = None  # of the frame before
                if "step" in missing:
                    frame = _filled_step(frame, prior)
                done |= missing
                gpu_frame = _LazyGpuFrame(frame, prepared, self._gpu_metrics, said=warn)
            seen = frame  # with the columns computed ahead for this rule
            ahead = live.ahead if prepared is None or prepared.ahead is None else prepared.ahead
            if needs.ahead and ahead is not None:
                given = [name for name in needs.ahead if name in ahead.columns]
                seen = frame.hstack([ahead.get_column(name) for name in given])  # no query
            picked = _pattern_lines(needs, order in quiet, hits, frame.height)
            if picked is not None:  # its gate's lines alone: no other line can move it
                seen = frame.gather(picked)
            step = _log_step(spec, self._gpu[order], seen, gpu_frame)
            for transition in self._guarded(spec, source, state, step):
                if picked is not None:
                    transition = replace(transition, row=picked[transition.row])
                line = transition.fields.get("line", frame.item(transition.row, "line"))
                found.append((line, order, spec, transition))
        found.sort(key=lambda item: (item[0], item[1]))
        shown = {name for _, order, _, _ in found for name in self._needs[order].shown}
        if found:
            shown.add("step")  # every event says its step
        # what the summaries of this batch's events show (a rule's own columns, computed on its
        # gated rows only, are shown where its summary says them)
        group = partial(self._group_columns, source) if self._ready_group is not None else None
        shapes = None if prepared is None else prepared.shapes_of(0, frame.height)
        rows = _EventRows(frame, shown - done, prior, [t.row for *_, t in found], group, shapes)
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
                self._seen_state(self.rules[order], state)
            )
        }
        if not gates and not streaks and not self._log_gpu and not self._ahead:
            return _LiveChecks({})  # nothing to check
        ready = self._ready_live.pop(source, None)
        if ready is not None and ready.rows == frame.height:  # `process_many` checked them
            return ready.checks(gates, streaks)
        # (built only here: an expression costs more to build than the group's check per file)
        exprs = [*gates.values(), *(c.alias(f"_s{o}") for o, c in streaks.items())]
        if self._log_gpu:
            exprs.append(_gpu_keys_present(frame).alias("_gpu"))
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

    def _group_columns(
        self, source: str, columns: frozenset[str], rows: int
    ) -> pl.DataFrame | None:
        """`source`'s batch with `columns` completed, cut from its `process_many` group's
        frame completed once for all its sources (`GroupColumns`)."""
        group = self._ready_group
        begin, height = group.rows.get(source, (0, -1)) if group is not None else (0, -1)
        if group is None or height != rows:
            return None
        key = completed_columns(columns)
        if key not in group.completed:
            completed = complete(group.frame, columns)
            group.completed[key] = completed.select(n for n in SCHEMA if n in key)
        return group.completed[key].slice(begin, height)

    def _completed(
        self, source: str, frame: pl.DataFrame, missing: frozenset[str], ready: Prepared | None
    ) -> pl.DataFrame:
        """`frame` with `missing` completed (cut from its `process_many` group's, if any)."""
        given = self._group_columns(source, missing, frame.height) if self._ready_group else None
        if given is not None:
            return with_columns_of(frame, given, missing)
        return complete(frame, missing, shapes=ready.shapes_of(0, frame.height) if ready else None)

    def _filled(self, source: str, frame: pl.DataFrame, prior: int | None) -> pl.DataFrame:
        """`_filled_step`, or the step `process_many` filled in for this source's batch."""
        ready = self._ready_fill.pop(source, None)
        if ready is None or ready.len() != frame.height:
            return _filled_step(frame, prior)
        filled = frame.clone()
        filled.replace_column(filled.get_column_index("step"), ready)
        return filled

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


def _taken(outcome: Outcome, state: dict[str, Any]) -> Outcome:
    """A step whose outcome `process_many` computed (`state` is the one it stepped from)."""
    return outcome


def _pattern_lines(
    needs: _Needs, quiet: bool, hits: Mapping[str, pl.Series], height: int
) -> pl.Series | None:
    """The rows of a batch that a quiet rule moving only on its pattern's lines reads
    (`Needs.pattern`): its gate's lines as the scan found them (on the shapes its pattern
    reaches); None: the whole batch (no such rule, no scan, or every line)."""
    if not quiet or needs.pattern is None or needs.ahead or needs.gate is None:
        return None
    lines = hits.get(needs.gate)
    if lines is None or lines.is_empty() or lines.len() >= height:
        return None
    return lines
