"""The tail driver's rounds (`drivers.tail` adds its setup, life cycle and checkpoints).

A round takes the files the `FileSet` found, lets every due follower read what is new, runs the
batches through the engine, ticks wall-clock rules, runs the plugins' rounds and ticks the sink.
A found file joins: resumed from the checkpoint, back after a while away, a new file under the
name of one still followed (rename rotation: the old one becomes its own source), under the name
of a closed one (that run is over), or history to catch up. A file gone from its name is read
to its end and retired. Alerts go to the sink through the plugins' filters, each recorded once
sent so that a restart repeats none.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

import polars as pl

from logwatch.alerts import AlertEvent, Sink
from logwatch.clock import Clock
from logwatch.drivers.catchup import catch_up, parsed_together
from logwatch.drivers.checkpoint import StateDir
from logwatch.drivers.placing import live_placement
from logwatch.drivers.plugins import TailPlugin, parse_columns, plugin_view
from logwatch.drivers.startup import still_firing_line
from logwatch.drivers.tail_options import StartMode, Status, TailOptions
from logwatch.engine import Engine
from logwatch.parse import parse_block
from logwatch.rules.log import StallRule
from logwatch.sources.fileset import FileSet
from logwatch.sources.follow import Batch, Follower, PollResult, Position
from logwatch.sources.rotated import rotated_name
from logwatch.words import counted

SHARED_LINES = 20_000
"""A round's files are read, then parsed together, this many lines at a time at most (a file
with more in one read is parsed alone): what a round holds unparsed stays bounded however many
files have a backlog."""

CLOSED_KEPT = 256
"""How many closed files' positions are kept in case the same file comes back."""


class TailRounds:
    """What one round of a tail does and the state it keeps between rounds: the followed files,
    which of them wall-clock rules tick, and what a checkpoint restored."""

    def __init__(
        self,
        engine: Engine,
        sink: Sink,
        files: FileSet,
        *,
        plugins: Sequence[TailPlugin],
        clock: Clock,
        options: TailOptions,
        state: StateDir | None,
        status: Status,
    ) -> None:
        # first: every event is placed (rank, host, line time) before another plugin sees it
        self.placement = live_placement(
            options.layout,
            options.gpus_per_node,
            engine.rules,
            lambda: ((f.source, f.checkpointed) for f in files.followers.values()),
        )
        self.engine, self.sink = engine, sink
        self.plugins: list[TailPlugin] = [self.placement, *plugins]
        # What batches are parsed for: the rules' columns and the plugins' (None: all).
        self.columns = parse_columns(engine.every_column, self.plugins)
        # A plugin is shown only the columns it says it reads (None: all): one that reads
        # another fails loudly in its tests instead of reading nulls.
        self._views = {
            id(p): None if p.columns is None else plugin_view(p.columns) for p in self.plugins
        }
        self.files, self.clock, self.options = files, clock, options
        self.state, self.status = state, status
        self._saved: dict[tuple[int, int], Position] | None = None
        self._replayed: set[str] = set()  # alerts a crashed run emitted past its checkpoint
        self._closed: dict[tuple[int, int], Position] = {}  # retired files, should they return
        self._arrived: set[str] = set()
        # Sources that received lines while followed: the ones wall-clock rules tick (a file
        # quiet since it was caught up has nothing for them; 2000 such files cost no ticks).
        self._live: dict[str, Follower] = {}
        self._last_line: dict[str, int] = {}
        self._wallclock = bool(engine.wallclock_rules)
        self._dirty = True  # something a checkpoint would record changed since the last one
        # The sources whose engine state may have changed since the last checkpoint: only
        # these are exported again (`delta.SourceTexts`); every engine call on a source adds it.
        self.touched: set[str] = set()
        self._last_tick = float("-inf")
        # When the last round started, how many lines it read and the process's CPU time it
        # took (`drivers.tail_pace`)
        self.round_started, self.round_lines, self.round_cpu_s = float("-inf"), 0, 0.0

    # --- one round -----------------------------------------------------------------------

    def _round(self) -> bool:
        """One round (`_read_and_run`), its CPU time (all threads: polars' pool too) kept."""
        cpu = time.process_time()
        try:
            return self._read_and_run()
        finally:
            self.round_cpu_s = time.process_time() - cpu

    def _read_and_run(self) -> bool:
        now = self.round_started = self.clock.monotonic()
        for path in self.files.changes(now):
            self._add(path, now, initial=False)
        more = False
        polled: list[tuple[Follower, PollResult]] = []
        lines = 0
        self.round_lines = 0
        for follower in self.files.due(now):
            result = self._read(follower, now)
            if result is None:
                continue
            polled.append((follower, result))
            read = sum(batch.text.len() for batch in result.batches)
            lines += read
            self.round_lines += read
            if lines >= SHARED_LINES:  # memory: what is held unparsed stays bounded
                more |= self._handle_all(polled, now)
                polled, lines = [], 0
        more |= self._handle_all(polled, now)
        self._tick(now)
        for plugin in self.plugins:
            events = list(plugin.round(self))
            self._dirty |= bool(events)
            self._send(events)
        self.sink.tick(self.clock.now())
        return more

    def _read(self, follower: Follower, now: float) -> PollResult | None:
        try:
            return follower.poll(now)
        except OSError as exc:
            self.status(f"{follower.path}: read failed ({exc.strerror}); stopped following it")
            self._drop(follower)
            return None

    def _handle_all(self, polled: list[tuple[Follower, PollResult]], now: float) -> bool:
        """Evaluate what the files read, file by file in order, their lines parsed together."""
        frames = self._parsed(polled)
        ready = self._evaluated(polled, frames)
        if frames:  # every plugin sees the round's lines at once, before any event is sent
            self._observe(pl.concat([f for fs in frames.values() for f in fs], rechunk=True))
        more = False
        for follower, result in polled:
            found = ready.get(id(result))
            more |= self._after_read(follower, result, now, frames.get(id(result)), found)
        return more

    def _evaluated(
        self, polled: list[tuple[Follower, PollResult]], frames: dict[int, list[pl.DataFrame]]
    ) -> dict[int, list[AlertEvent]]:
        """The engine's events of the round's reads of one batch (by `id` of the poll result),
        in one `Engine.process_many` call: those of a source read once this round and not
        truncated (the others are evaluated in their turn, as each may restart its source)."""
        sources = Counter(follower.source for follower, _ in polled)
        chosen = [
            (result, frames[id(result)][0])
            for follower, result in polled
            if id(result) in frames
            and len(result.batches) == 1
            and result.truncated_at is None
            and sources[follower.source] == 1
        ]
        if len(chosen) < 2:
            return {}
        found = self.engine.process_many([frame for _, frame in chosen], self.columns)
        return {id(result): events for (result, _), events in zip(chosen, found, strict=True)}

    def _parsed(self, polled: list[tuple[Follower, PollResult]]) -> dict[int, list[pl.DataFrame]]:
        """The frames of every batch the round read, by `id` of its poll result, from one parse
        when there are several (a parse costs the same for one line or a few hundred); none
        when there is at most one (it is parsed where it is evaluated)."""
        pending = [(f, batch) for f, result in polled for batch in result.batches]
        if len(pending) < 2:
            return {}
        frames = iter(parsed_together(pending, self.columns))
        return {
            id(result): [next(frames)[1] for _ in result.batches]
            for _, result in polled
            if result.batches
        }

    def _after_read(
        self,
        follower: Follower,
        result: PollResult,
        now: float,
        frames: list[pl.DataFrame] | None = None,
        ready: list[AlertEvent] | None = None,
    ) -> bool:
        self._handle(follower, result, frames=frames, ready=ready)
        if result.grew:
            self._arrived.add(follower.source)
            self._live[follower.source] = follower
        if self.files.expired(follower, now):
            self._retire(follower)
        else:
            self.files.polled(follower, result.more)
        return result.more

    def _handle(
        self,
        follower: Follower,
        result: PollResult,
        *,
        emit: bool = True,
        frames: list[pl.DataFrame] | None = None,
        ready: list[AlertEvent] | None = None,
    ) -> None:
        """Evaluate what a poll read (`frames`: its batches parsed, and seen by the plugins,
        already; `ready`: the engine's events of its one batch, evaluated already), emit the
        events."""
        for note in result.notes:
            self.status(note)
        self._dirty |= bool(result.batches or result.notes)
        if result.batches or result.truncated_at is not None:
            self.touched.add(follower.source)
        events: list[AlertEvent] = []
        for index, batch in enumerate(result.batches):
            if index == result.truncated_at:
                events.extend(self._truncated(follower))
            if frames is None:
                events.extend(self._process(follower, batch))
            elif ready is not None:
                events.extend(ready)
            else:
                events.extend(self.engine.process(frames[index], self.columns))
        if result.truncated_at == len(result.batches):
            events.extend(self._truncated(follower))
        if result.batches:
            self._last_line[follower.source] = follower.line - 1
        if emit:
            self._emit(events, follower.gen_id)

    def _truncated(self, follower: Follower) -> list[AlertEvent]:
        """A truncated file starts over like a restarted run: its alerts end, fixed by nothing."""
        why = "the file was truncated (read again from its start)"
        self.touched.add(follower.source)
        return self.engine.restart(follower.source, line=1, ts=None, why=why)

    def _process(self, follower: Follower, batch: Batch) -> list[AlertEvent]:
        parsed = parse_block(
            batch.text,
            source=follower.source,
            first_line=batch.first_line,
            default_year=follower.year,
            columns=self.columns,
        )
        frame = parsed.frame
        if parsed.last_year is not None:
            # Lines without a year (glog, syslog) take the year of the last dated line before.
            follower.year = parsed.last_year
        return self._evaluate(follower, frame)

    def _evaluate(self, follower: Follower, frame: pl.DataFrame) -> list[AlertEvent]:
        self.touched.add(follower.source)
        self._observe(frame)
        return self.engine.process(frame, self.columns)

    def _observe(self, frame: pl.DataFrame) -> None:
        """Show every plugin a batch (one source's lines, or a round's of several)."""
        for plugin in self.plugins:
            view = self._views[id(plugin)]
            plugin.observe(frame if view is None else frame.select(view))

    def _retire(self, follower: Follower) -> None:
        result = PollResult()
        follower.finish(result)
        self._handle(follower, result)
        ended = "old file read to its end" if follower.checkpointed else "input ended"
        self.status(f"{follower.path}: {ended} ({counted(follower.line - 1, 'line')}); closed")
        if follower.checkpointed:
            self._closed[follower.key] = follower.position()
            while len(self._closed) > CLOSED_KEPT:
                del self._closed[next(iter(self._closed))]
        self._drop(follower)

    def _drop(self, follower: Follower) -> None:
        self._dirty = True
        if self._live.get(follower.source) is follower:
            del self._live[follower.source]
        self.files.drop(follower)

    def _tick(self, now: float) -> None:
        if not self._wallclock or now - self._last_tick < self.options.poll_interval_s:
            return
        self._last_tick = now
        wall = self.clock.now()
        clocked = [spec.id for spec in self.engine.wallclock_rules]
        for source, follower in list(self._live.items()):
            line = self._last_line.get(source, 0)
            arrived = source in self._arrived
            state = self.engine.sources.get(source)
            before = None if state is None else [state.rule_states.get(i) for i in clocked]
            events = self.engine.tick(source, wall, arrived=arrived, line=line)
            # A rule step returns its state object itself when nothing changed (a quiet
            # second of a quiet file): then the checkpoint need not export the source again.
            after = None if state is None else [state.rule_states.get(i) for i in clocked]
            same = before is not None and after is not None and _same(before, after)
            if events or not same or self.engine.sources.get(source) is not state:
                self.touched.add(source)
            self._emit(events, follower.gen_id)
        self._arrived.clear()

    # --- new files -----------------------------------------------------------------------

    def _add(self, path: str, now: float, *, initial: bool) -> Follower | None:
        """Follow a file the file set found: resumed, from its end or its start; the follower
        when its history is to be caught up (by the caller, with the others)."""
        follower = self.files.open(path, now)
        if follower is None:
            return None
        self._dirty = True
        self._separate(follower)
        if self._resume(follower):
            return None
        self._forget_previous(follower)
        if not initial or self._saved is not None:
            self.status(f"{path}: new file; following it from its first byte")
        elif self.options.start == StartMode.END:
            follower.skip_to_end()
            self.status(f"{path}: following from its end (line {follower.line})")
        else:
            return follower
        return None

    def _separate(self, new: Follower) -> None:
        """A new file under the name of a file still followed (rename rotation): the old file
        becomes its own source (`rotated_name`), so their lines and rule states never mix."""
        for other in list(self.files.followers.values()):
            if other is not new and other.source == new.source:
                self._rename_source(other, rotated_name(other))

    def _rename_source(self, follower: Follower, name: str) -> None:
        old, follower.source = follower.source, name
        self.touched.update((old, name))
        line = self._last_line.pop(old, 0)
        self._last_line[name] = line
        if self._live.get(old) is follower:
            self._live[name] = self._live.pop(old)
        self.status(
            f"{old}: a new file took this name; the old file is now the source {name} "
            "(its firing alerts go on under that name)"
        )
        self.engine.rename_source(old, name)
        self.placement.rename(old, name)  # the old file's lines said who wrote them
        self.sink.rename_source(old, name)  # so a later resolve edits the Slack message

    def _forget_previous(self, follower: Follower) -> None:
        """A new file under a name an earlier, closed file left state under: that run is over."""
        if follower.source in self.engine.sources:
            why = f"{follower.path} is a new file"
            self.touched.add(follower.source)
            self._last_line.pop(follower.source, None)
            events = self.engine.restart(follower.source, line=1, ts=None, why=why)
            self._emit(events, follower.gen_id)

    def _resume(self, follower: Follower) -> bool:
        saved = (self._saved or {}).pop(follower.key, None)
        if saved is None:
            return self._reattach(follower)
        size = os.fstat(follower.fd).st_size
        if follower.matches(saved) and size >= (saved.evaluated_end or saved.offset):
            follower.source = saved.source
            follower.resume(saved)
            self._keep_ticking(follower)
            self.status(f"{follower.path}: resuming at line {saved.line} (checkpoint)")
            firing = self.engine.active_alerts(follower.source)
            if firing:  # said at once: it may not fire again (nor resolve) for a long while
                self.status(f"{follower.path}: {still_firing_line(firing, self.clock.now())}")
            return True
        self.status(
            f"{follower.path}: not the file the checkpoint knew (same inode, other content); "
            "reading it from the start"
        )
        self.engine.sources.pop(follower.source, None)
        self.touched.add(follower.source)
        return False

    def _reattach(self, follower: Follower) -> bool:
        """A file closed because its path named nothing for rotate_wait (its folder renamed or
        unreadable a while) is back, same inode, same first bytes, not shorter: go on from where
        it was instead of reading it again."""
        pos = self._closed.pop(follower.key, None)
        if pos is None or not follower.matches(pos):
            return False
        if os.fstat(follower.fd).st_size < (pos.evaluated_end or pos.offset):
            return False
        follower.source = pos.source
        follower.resume(pos)
        self._keep_ticking(follower)
        self.status(f"{follower.path}: the same file is back; continuing at line {pos.line}")
        return True

    def _keep_ticking(self, follower: Follower) -> None:
        """A resumed or caught-up file whose wall-clock rules had started goes on being ticked:
        a run that stalled while tail was down still fires log-stalled, and a history that ends
        in a traceback fires run-crashed once it stays quiet."""
        state = self.engine.sources.get(follower.source)
        if state is None:
            return
        for spec in self.engine.wallclock_rules:
            saved = state.rule_states.get(spec.id)
            if saved is not None and saved != spec.rule.initial_state():
                self._live[follower.source] = follower

    def _catch_up(self, followers: list[Follower]) -> None:
        """Run the files' history through the engine silently (parsed many files at a time),
        then emit, file by file, what is still firing."""
        found = catch_up(followers, self.clock.monotonic(), self._evaluate, columns=self.columns)
        for follower in followers:
            events = found[id(follower)]
            self._last_line[follower.source] = follower.line - 1
            self._keep_ticking(follower)  # a history ending in a traceback: run-crashed decides
            if self.options.start == StartMode.CATCH_UP:
                events = sorted(self.engine.active_alerts(follower.source), key=lambda e: e.line)
            self.status(
                f"{follower.path}: caught up on {counted(follower.line - 1, 'line')} of history "
                f"({counted(len(events), 'alert event')} to report); following it"
            )
            self._emit(events, follower.gen_id)

    # --- alerts ---------------------------------------------------------------------------

    def _emit(self, events: Iterable[AlertEvent], gen_id: str) -> None:
        for event in events:
            self._dirty = True
            key = f"{gen_id}|{event.source}|{event.line}|{event.fingerprint}|{event.status}"
            if key in self._replayed:
                continue  # emitted before a crash; its line was read again
            self._send([event])
            # Recorded once the sinks took it: a kill -9 between the two shows this one alert
            # again after the restart (the Slack and Alertmanager sinks know it by fingerprint
            # and repeat nothing); recorded before, it was lost for good.
            if self.state is not None:
                self.state.record_emitted(key)

    def send(self, events: Iterable[AlertEvent]) -> None:
        """Hand events that do not come from a followed file to the sink (through the plugins'
        filters)."""
        self._send(events)

    def _send(self, events: Iterable[AlertEvent]) -> None:
        for raw in events:
            event = self._filtered(raw)
            if event is not None:
                self.sink.emit(event)

    def _filtered(self, event: AlertEvent) -> AlertEvent | None:
        """The event after each plugin's filter, in order; None once one drops it."""
        for plugin in self.plugins:
            kept = plugin.filter(event)
            if kept is None:
                return None
            event = kept
        return event

    def stalled_since(self, source: str) -> datetime | None:
        """Since when `source` has had no lines, while a `stalled` rule says it is stalled."""
        return self.stall_states().get(source)

    def stall_states(self) -> dict[str, datetime | None]:
        """For each source that has received lines while followed: since when it is stalled
        (per a `stalled` rule), or None while it is not."""
        stall_ids = [spec.id for spec in self.engine.rules if isinstance(spec.rule, StallRule)]
        out: dict[str, datetime | None] = {}
        for source, state in self.engine.sources.items():
            for rule_id in stall_ids:
                rule_state = state.rule_states.get(rule_id)
                if rule_state and rule_state.get("last_s") is not None:
                    stalled = rule_state["stalled"]
                    out[source] = datetime.fromtimestamp(rule_state["last_s"]) if stalled else None
        return out


def _same(before: Sequence[object], after: Sequence[object]) -> bool:
    """Whether each rule state after a step is the very object it was before."""
    return all(a is b for a, b in zip(before, after, strict=True))
