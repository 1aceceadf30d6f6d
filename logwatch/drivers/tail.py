"""The tail driver: follow live logs through the same engine as replay, losing and repeating nothing.

One thread runs rounds. A round asks its `FileSet` what changed (new files are resumed from the
checkpoint, caught up, or followed from their first byte), lets every follower read what is new,
runs the batches through the engine, ticks wall-clock rules, runs the plugins' rounds and ticks
the sink. A due checkpoint is written between rounds once no line has arrived for a moment, so
its fsync never sits between a line and its alert. Watchdog events only end the wait between
rounds early; the wait is the safety poll, so a lost event costs one poll interval. While lines
keep arriving, rounds are spaced out (`tail_pace`): a round that read lines is followed by a
hold that file events do not end, growing up to `max_batch_delay`, so that a busy node's lines
reach the rules in batches; the first line after a quiet spell is read at once. Garbage is
collected between rounds (`gc_rounds`), not inside one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

from logwatch.alerts import Sink
from logwatch.clock import Clock, SystemClock
from logwatch.drivers.checkpoint import StateDir
from logwatch.drivers.checkpoint_record import Checkpoint
from logwatch.drivers.delta import SourceTexts
from logwatch.drivers.gc_rounds import RoundCollector
from logwatch.drivers.plugins import TailPlugin
from logwatch.drivers.tail_options import Status, TailOptions
from logwatch.drivers.tail_pace import Pacer
from logwatch.drivers.tail_rounds import TailRounds
from logwatch.drivers.warmup import warm_up
from logwatch.engine import Engine
from logwatch.sources.fileset import FileSet
from logwatch.sources.inotify import default_watcher, watcher_named
from logwatch.sources.watch import WatcherFactory

QUIET_BEFORE_CHECKPOINT_S = 0.05
"""How long no line may arrive before a due checkpoint is written between rounds."""

CHECKPOINT_SHARE = 0.01
"""Checkpoints are spaced so that writing them takes at most this share of the time: one that
took 30 ms (200 busy files exported, redacted and serialized) is followed by the next 3 s
later, not 1 s (`TailOptions.checkpoint_interval_s` is the floor, `CHECKPOINT_MAX_S` the
ceiling). Alerts are journaled as they are sent whatever the spacing, so a crash repeats none;
it only re-reads the lines since the last checkpoint."""

CHECKPOINT_MAX_S = 10.0
"""The longest time between checkpoints while something changed, however costly they are."""


class TailDriver(TailRounds):
    """Follows files matching `patterns`, feeding `engine`, emitting alerts to `sink` (one sink;
    `drivers.fanout.FanOut` puts several behind it), with `plugins` joined to every round.

    `open()` (or `with`) takes the state directory, restores the checkpoint and catches up;
    `run()` loops until `stop()`; `close()` writes the last checkpoint. `sync()` waits until
    everything written before it was processed (tests, benchmarks)."""

    def __init__(
        self,
        patterns: Sequence[str],
        engine: Engine,
        sink: Sink,
        *,
        plugins: Sequence[TailPlugin] = (),
        clock: Clock | None = None,
        state_dir: Path | None = None,
        options: TailOptions | None = None,
        watcher_factory: WatcherFactory | None = default_watcher,
        status: Status = lambda message: None,
    ) -> None:
        options = options or TailOptions()
        if watcher_factory is default_watcher:  # not chosen by the caller: `--watcher`'s
            watcher_factory = watcher_named(options.watcher)
        state = (
            StateDir(state_dir, status, retry_s=options.checkpoint_interval_s)
            if state_dir is not None
            else None
        )
        self._wake, self._cv = threading.Event(), threading.Condition()
        self._hurry = threading.Event()  # ends a hold: stop() and sync()
        self.pacer = Pacer(options.max_batch_delay_s)
        self.next_hold_s = 0.0  # the hold after the last round (`tail_pace`)
        self._hold_cpu_s = 0.0  # the process's CPU time during the last hold
        files = FileSet(
            patterns,
            follow=options.follow,
            poll_interval_s=options.poll_interval_s,
            rotate_wait_s=options.rotate_wait_s,
            watcher_factory=watcher_factory,
            wake=self._wake.set,
            status=status,
        )
        super().__init__(
            engine,
            sink,
            files,
            plugins=plugins,
            clock=clock or SystemClock(),
            options=options,
            state=state,
            status=status,
        )
        self._started = self._finished = 0
        self._more = self._stopping = self._opened = self._syncing = False
        self._last_checkpoint = float("-inf")
        self._due_since: float | None = None  # when the due checkpoint fell due
        # The time from one checkpoint to the next: the interval, or more for a costly one
        self.checkpoint_every_s = options.checkpoint_interval_s
        self._texts = SourceTexts()  # each source's state as the last checkpoint held it

    # --- life cycle ----------------------------------------------------------------------

    def __enter__(self) -> TailDriver:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(checkpoint=exc[0] is None)

    def claim(self) -> None:
        """Take the state directory (its lock) now, before anything is said: StateError when
        another logwatch watches the same files. `open()` does it too, when not done yet."""
        if self.state is not None:
            self.state.open()

    def open(self) -> None:
        """Take the state directory, restore the checkpoint, catch up, start watching."""
        if self.state is not None:
            self.state.open()
            self._restore()
        self._opened = True
        try:
            self.files.start()
            now = self.clock.monotonic()
            history = [self._add(path, now, initial=True) for path in self.files.rescan(now)]
            self._catch_up([follower for follower in history if follower is not None])
            if self.options.warm_up:
                warm_up(self.engine, self.columns)
            if not self.files.followers:
                patterns = " ".join(self.files.patterns)
                self.status(f"no file matches {patterns} yet; waiting for one")
            self._checkpoint()
            for plugin in self.plugins:
                notices = list(plugin.start_events())
                self._dirty |= bool(notices)  # what was said must reach the next checkpoint
                self._send(notices)
        except BaseException:
            self.close(checkpoint=False)
            raise

    def close(self, *, checkpoint: bool = True) -> None:
        """Write the last checkpoint, close files, stop watching, close the sink, then the
        plugins; idempotent."""
        if not self._opened:
            return
        self._opened = False
        try:
            if checkpoint:
                self._checkpoint()
            self.files.close()
            if self.state is not None:
                self.state.close()
            self.sink.close()
        finally:
            for plugin in self.plugins:
                plugin.close()  # e.g. the GPU sampler's thread: stopped even when a step failed

    def run(self) -> None:
        """Follow until `stop()`; a round that finds more to read starts the next one at once."""
        if not self._opened:
            self.open()
        with RoundCollector() as collector:  # garbage collected between rounds, not in them
            while not self._stopping:
                more = self._run_round()
                collector.between_rounds()
                hold = self._pace(more)
                if self.files.finished:
                    self._stopping = True  # standard input ended: nothing left to follow
                elif hold > 0:
                    self._hold(hold)
                elif self._checkpoint_when_quiet(more) and not more:
                    self._wake.wait(self.options.poll_interval_s)

    def _run_round(self) -> bool:
        """One round of `run()`, counted for `sync()`; True when a file has more to read."""
        self._wake.clear()
        self._hurry.clear()
        with self._cv:
            self._started += 1
            round_id = self._started
            synced, self._syncing = self._syncing, False
        more = self._round()
        if synced and not more and self._checkpoint_due():
            self._checkpoint()  # a sync() covers the checkpoint its round makes due
        with self._cv:
            self._finished, self._more = round_id, more
            self._cv.notify_all()
        return more

    def _pace(self, more: bool) -> float:
        """The hold before the next round, after the one that just ended (`tail_pace`)."""
        ended = self.clock.monotonic()
        # What the round cost, and the hold before it (its checkpoint, the file events, polars'
        # pool winding down): the process's CPU time from one round to the next
        cost, self._hold_cpu_s = self.round_cpu_s + self._hold_cpu_s, 0.0
        self.next_hold_s = self.pacer.after_round(
            self.round_started, ended, self.round_lines, more, cost_s=cost
        )
        return self.next_hold_s

    def _hold(self, seconds: float) -> None:
        """Wait `seconds` (real time) before the next round while lines keep arriving: file
        events do not end the wait, `stop()` and `sync()` do. A due checkpoint is written
        meanwhile: no line waits on its fsync that would not wait anyway."""
        until, cpu = time.monotonic() + seconds, time.process_time()
        if self._checkpoint_due():
            self._checkpoint()
        if not self._stopping:  # a stop() whose wake-up the round's clear() took is seen here
            self._hurry.wait(max(0.0, until - time.monotonic()))
        self._hold_cpu_s = time.process_time() - cpu

    def _checkpoint_when_quiet(self, more: bool) -> bool:
        """Checkpoint when one is due and no line is waiting: a line that arrives meanwhile
        (the NaN right after a step line) is read first, its alerts printed, and the checkpoint
        (an fsync) follows; one overdue by a whole interval is written anyway. False when the
        next round should start now."""
        if not self._checkpoint_due():
            return True
        now = self.clock.monotonic()
        if self._due_since is None:
            self._due_since = now  # due from now: after a quiet spell, not overdue at once
        overdue = now - self._due_since >= self.checkpoint_every_s
        if not overdue and (more or self._wake.wait(QUIET_BEFORE_CHECKPOINT_S)):
            return False
        self._checkpoint()
        return True

    def stop(self) -> None:
        """Ask `run()` to return after its current round. Safe from a signal handler: the
        signal may have interrupted this very thread inside the wake event's own lock (in its
        `wait`), so the event is set from another thread, which takes that lock once it is
        free; setting it here would wait for that lock forever."""
        self._stopping = True
        threading.Thread(target=self._wake_all, name="logwatch-stop", daemon=True).start()

    def _wake_all(self) -> None:
        self._hurry.set()
        self._wake.set()

    def sync(self, timeout_s: float = 30.0) -> None:
        """Wait until a round that began after this call finished with nothing left to read."""
        with self._cv:
            want = self._started + 1
            self._syncing = True
            self.files.read_all_next()
            self._hurry.set()
            self._wake.set()
            done = self._cv.wait_for(
                lambda: (self._finished >= want and not self._more) or self._stopping, timeout_s
            )
        if not done:
            raise TimeoutError(f"tail driver did not catch up within {timeout_s}s")

    def wake(self, structural: bool = False) -> None:
        """Start the next round now; `structural`: files may have come or gone, rescan first."""
        self.files.on_event(structural)

    # --- a round by hand (`tail_rounds` runs it) -------------------------------------------

    def poll_once(self) -> bool:
        """One round over every file, rescanned (not only those with events: a caller stepping
        rounds by hand has written before it), then the checkpoint if one is due; True when
        some file has more to read right away."""
        self.files.read_all_next()
        more = self._round()
        self._pace(more)  # what `run()` would hold next (`next_hold_s`)
        if self._checkpoint_due():
            self._checkpoint()
        return more

    def _checkpoint_due(self) -> bool:
        return self._dirty and self._since_checkpoint() >= self.checkpoint_every_s

    def _since_checkpoint(self) -> float:
        return self.clock.monotonic() - self._last_checkpoint

    # --- checkpoints -----------------------------------------------------------------------

    def _restore(self) -> None:
        assert self.state is not None
        self._replayed = self.state.emitted()
        checkpoint = self.state.load()
        if checkpoint is None:
            return
        try:
            for source, data in checkpoint.sources.items():
                self.engine.import_state(source, data)
        except ValueError as exc:
            self.engine.sources.clear()
            self.state.set_aside(self.state.path / "checkpoint.json", str(exc))
            return
        self._saved = {(pos.dev, pos.ino): pos for pos in checkpoint.files}
        plugins = {plugin.name: plugin for plugin in self.plugins}
        for name, data in checkpoint.extras.items():
            plugin = plugins.get(name)
            try:
                if plugin is not None:
                    plugin.import_state(data)
            except ValueError as exc:
                self.status(
                    f"checkpoint: the saved {name} state is unusable ({exc}); starting it afresh"
                )

    def _spacing(self, took_s: float) -> float:
        """The time to the next checkpoint after one that took `took_s` (driver's clock)."""
        interval = self.options.checkpoint_interval_s
        return max(interval, min(CHECKPOINT_MAX_S, took_s / CHECKPOINT_SHARE))

    def _checkpoint(self) -> None:
        self._last_checkpoint, self._dirty = self.clock.monotonic(), False
        self._due_since = None
        if self.state is None:
            return
        followers = [f for f in self.files.followers.values() if f.checkpointed]
        files = [f.position() for f in followers]
        names = [f.source for f in followers]
        sources, texts = self._texts.export(names, self.touched, self.engine.export_state)
        self.touched.clear()
        extras = {p.name: state for p in self.plugins if (state := p.export_state()) is not None}
        if not self.state.save(Checkpoint(files, sources, extras, source_texts=texts)):
            self._dirty = True  # kept in memory: the next round that is due tries again
        self.checkpoint_every_s = self._spacing(self.clock.monotonic() - self._last_checkpoint)
        for key in self._replayed:  # still needed until every re-read line is behind us
            self.state.record_emitted(key)


__all__ = ["TailDriver"]
