"""The engine: rules over frames, alert lifecycles, per-source state. Shared by replay and tail."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import Any, cast

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.engine.batch import _last_of
from logwatch.engine.evaluate import _taken
from logwatch.engine.many import _Many
from logwatch.engine.state import (
    _STATE_FIELDS,
    _STATS_FIELDS,
    SourceState,
    SourceStats,
    Step,
    _unreported,
    masked_rule_states,
)
from logwatch.parse import SCHEMA
from logwatch.rules.base import EndOfInputRule, Part, WallClockRule
from logwatch.statecheck import (
    LIST,
    OBJECT,
    STR,
    counts,
    fields,
    kind_of,
    like,
    optional,
)


class Engine(_Many):
    """Runs rules over parsed frames of any number of sources, one batch at a time.

    Rules declare the columns they read: `columns` is what replay parses for every block
    (`every_column` what a live driver parses for its small batches); a rule behind a gate (a
    literal outside of which it cannot move while quiet) gets its columns computed on a batch
    only when its gate matches there or it is not quiet.
    `stats=False`: keep only line and run counts (`replay --format jsonl` shows no summary).
    `on_error` hears of a rule that raised (it is off for that source from then on);
    `on_warning` of lines read otherwise than written (`DataWarning`), once per source and kind."""

    def active_alerts(self, source: str | None = None) -> list[AlertEvent]:
        """Alerts firing now (the events that fired them), in firing order."""
        states = [self.sources[source]] if source in self.sources else []
        if source is None:
            states = list(self.sources.values())
        return [event for state in states for event in state.alerts]

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

    def finish(
        self,
        source: str,
        last: pl.DataFrame | None = None,
        *,
        computed: Iterable[str] = (),
    ) -> list[AlertEvent]:
        """A source's input has ended (replay, at the end of a file): rules that were waiting
        for more lines decide now; `last`: its last non-blank lines (`kept_last`; None: not
        kept, the rules that read them decide without); `computed`: the columns `last` has
        computed already (else every column the rules read is computed from its text)."""
        done = frozenset(computed)
        state = self.state_of(source)
        events: list[AlertEvent] = []
        for order in self._end_rules:
            spec = self.rules[order]
            rule = cast(EndOfInputRule, spec.rule)
            count = self._needs[order].last_lines
            if spec.id not in state.rule_states and not count:
                continue
            ready = self._ready.pop((order, source), None)
            if ready is not None:  # `finish_many` decided it with many sources' last lines
                step: Step = partial(_taken, ready[1])
            else:
                lines = _last_of(last, count, self._needs[order].columns - done)
                step = partial(rule.finish, last=lines)
            for transition in self._guarded(spec, source, state, step):
                given = {"source": source, "line": 0, "step": state.last_step, "text": ""}
                row = pl.DataFrame([given], schema=SCHEMA).row(0, named=True)
                event = self._event(spec, source, row, transition, state)
                if event is not None:
                    events.append(event)
        return events

    def finish_many(
        self,
        sources: Sequence[str],
        lasts: Sequence[pl.DataFrame | None],
        *,
        computed: Iterable[str] = (),
    ) -> list[list[AlertEvent]]:
        """Each source's events at the end of its input, as `finish(sources[i], lasts[i],
        computed=computed)` called for each in order gives them, the rules that can decide
        for many sources (`BatchedEnd`) deciding for all at once."""
        done = frozenset(computed)
        seen = Counter(sources)  # (`list.count` of each: quadratic in a group's files)
        once = [source for source in sources if seen[source] == 1]
        try:
            if len(once) > 1:
                self._ready_ends(sources, lasts, done, frozenset(once))
            return [
                self.finish(source, last, computed=done)
                for source, last in zip(sources, lasts, strict=True)
            ]
        finally:
            self._ready.clear()

    def _ready_ends(
        self,
        sources: Sequence[str],
        lasts: Sequence[pl.DataFrame | None],
        done: frozenset[str],
        once: frozenset[str],
    ) -> None:
        """The batched end rules' decisions for the sources in `once`, for their turns."""
        for order, rule in self._batched_ends.items():
            spec = self.rules[order]
            needs = self._needs[order]
            chosen = [(s, last) for s, last in zip(sources, lasts, strict=True) if s in once]
            kept = [
                None if last is None or not needs.last_lines else last.tail(needs.last_lines)
                for _, last in chosen
            ]
            found = [frame for frame in kept if frame is not None and frame.height]
            lines = _last_of(pl.concat(found) if found else None, 1 << 62, needs.columns - done)
            parts, begin = [], 0
            for (source, _), frame in zip(chosen, kept, strict=True):
                end = begin + (frame.height if frame is not None else 0)
                parts.append(Part(begin, end, self._rule_state(spec, self.state_of(source))))
                begin = end
            try:
                outcomes = rule.finish_many(lines, parts)
            except Exception:  # each source's own step raises it again, as its error
                continue
            for (source, _), outcome in zip(chosen, outcomes, strict=True):
                if outcome is not None:
                    self._ready[order, source] = (0, outcome)

    def export_state(self, source: str) -> dict[str, Any]:
        """One source's state as JSON-able data (rule states, last step, firing alerts, stats)."""
        state = self.state_of(source)
        stats = {name: getattr(state.stats, name) for name in SourceStats.__slots__}
        stats["fired"] = dict(state.stats.fired)
        return {
            "rule_states": masked_rule_states(state),  # a rule may keep a line (classify)
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
