"""The tail driver: follow live logs through the same engine as replay, losing and repeating nothing.

One thread runs rounds. A round re-expands the globs when due (at least every second, at once
after a create / move / delete event), lets every follower read what is new, runs the batches
through the engine, ticks wall-clock rules, and checkpoints when due. Watchdog events only end the
wait between rounds early; the wait is the safety poll, so a lost event costs one poll interval.
"""

from __future__ import annotations

import glob
import os
import stat
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.clock import Clock, SystemClock
from logwatch.drivers.checkpoint import Checkpoint, StateDir
from logwatch.engine import Engine
from logwatch.parse import parse_lines
from logwatch.rules.log import StallRule, WallClockRule
from logwatch.sinks.base import Sink
from logwatch.sources.follow import Batch, Follower, FollowOptions, PollResult, Position
from logwatch.sources.sniff import UTF16_BOMS, file_kind, utf16_note
from logwatch.sources.watch import (
    NETWORK_FS,
    WatchdogWatcher,
    Watcher,
    WatcherFactory,
    fs_type,
    is_glob,
    watch_roots,
)

Status = Callable[[str], None]
RoundHook = Callable[["TailDriver"], Iterable[AlertEvent]]
"""Called in the driver's thread after each round's files (e.g. a GPU sampler's drained frames
through a GpuMonitor); its events go to the sinks. Its state is its own: not checkpointed."""
FrameHook = Callable[[pl.DataFrame], None]
"""Sees every parsed batch of log lines (history included) before the engine does."""
EventFilter = Callable[[AlertEvent], "AlertEvent | None"]
"""Rewrites an alert event on its way to the sinks (e.g. NVML enrichment), or drops it."""
START_MODES = ("catch-up", "beginning", "end")


class Stateful(Protocol):
    """A hook whose state goes into the checkpoint with the files' (e.g. the GPU rules')."""

    def export_state(self) -> Any:
        """JSON-able state."""
        ...

    def import_state(self, data: Any) -> None:
        """Restore what `export_state` gave; ValueError on malformed data."""
        ...


@dataclass(frozen=True, slots=True)
class TailOptions:
    """How `logwatch tail` follows files.

    `start` applies to files that exist at start-up when there is no checkpoint: `catch-up` runs
    their history silently and emits the alerts still firing at its end, `beginning` emits every
    alert of the history, `end` skips the history."""

    start: str = "catch-up"
    poll_interval_s: float = 1.0
    rotate_wait_s: float = 5.0
    checkpoint_interval_s: float = 1.0
    follow: FollowOptions = field(default_factory=FollowOptions)

    def __post_init__(self) -> None:
        if self.start not in START_MODES:
            raise ValueError(f"unknown start mode {self.start!r} (expected one of {START_MODES})")


class TailDriver:
    """Follows files matching `patterns`, feeding `engine`, emitting alerts to `sinks`.

    `open()` (or `with`) takes the state directory, restores the checkpoint and catches up;
    `run()` loops until `stop()`; `close()` writes the last checkpoint. `sync()` waits until
    everything written before it was processed (tests, benchmarks)."""

    def __init__(
        self,
        patterns: Sequence[str],
        engine: Engine,
        sinks: Sequence[Sink],
        *,
        clock: Clock | None = None,
        state_dir: Path | None = None,
        options: TailOptions | None = None,
        watcher_factory: WatcherFactory | None = WatchdogWatcher,
        status: Status = lambda message: None,
        round_hooks: Sequence[RoundHook] = (),
        frame_hooks: Sequence[FrameHook] = (),
        event_filter: EventFilter | None = None,
        stateful: Mapping[str, Stateful] | None = None,
    ) -> None:
        self.patterns, self.engine, self.sinks = list(patterns), engine, list(sinks)
        self.frame_hooks, self.event_filter = list(frame_hooks), event_filter
        self.stateful = dict(stateful or {})
        self.clock = clock or SystemClock()
        self.options = options or TailOptions()
        self.status = status
        self.round_hooks = list(round_hooks)
        self.state = StateDir(state_dir, status) if state_dir is not None else None
        self._watcher_factory = watcher_factory
        self.watcher: Watcher | None = None
        self.followers: dict[tuple[int, int], Follower] = {}
        self._saved: dict[tuple[int, int], Position] | None = None
        self._replayed: set[str] = set()  # alerts a crashed run emitted past its checkpoint
        self._arrived: set[str] = set()
        self._last_line: dict[str, int] = {}
        self._sink_failures: dict[tuple[int, str], int] = {}
        self._wallclock = any(isinstance(s.rule, WallClockRule) for s in engine.rules)
        self._wake, self._cv = threading.Event(), threading.Condition()
        self._started = self._finished = 0
        self._more = self._stopping = self._opened = False
        self._dirty = True  # something a checkpoint would record changed since the last one
        self._rescan_due = True
        self._last_rescan = self._last_checkpoint = self._last_tick = float("-inf")
        self._warned_network: set[str] = set()
        self._noted_aliases: set[tuple[int, int]] = set()
        self._skipped: set[str] = set()  # matches that are not regular files, reported once
        self._warned_utf16: set[tuple[int, int]] = set()

    # --- life cycle ----------------------------------------------------------------------

    def __enter__(self) -> TailDriver:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(checkpoint=exc[0] is None)

    def open(self) -> None:
        """Take the state directory, restore the checkpoint, catch up, start watching."""
        if self.state is not None:
            self.state.open()
            self._restore()
        self._opened = True
        try:
            self._start_watcher()
            self._rescan(self.clock.monotonic(), initial=True)
            if not self.followers:
                self.status(f"no file matches {' '.join(self.patterns)} yet; waiting for one")
            self._checkpoint()
        except BaseException:
            self.close(checkpoint=False)
            raise

    def close(self, *, checkpoint: bool = True) -> None:
        """Write the last checkpoint, close files, stop watching, close sinks; idempotent."""
        if not self._opened:
            return
        self._opened = False
        if checkpoint:
            self._checkpoint()
        for follower in self.followers.values():
            follower.close()
        self.followers.clear()
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        if self.state is not None:
            self.state.close()
        for sink in self.sinks:
            sink.close()

    def run(self) -> None:
        """Follow until `stop()`; a round that finds more to read starts the next one at once."""
        if not self._opened:
            self.open()
        while not self._stopping:
            self._wake.clear()
            with self._cv:
                self._started += 1
                round_id = self._started
            more = self.poll_once()
            with self._cv:
                self._finished, self._more = round_id, more
                self._cv.notify_all()
            if not more:
                self._wake.wait(self.options.poll_interval_s)

    def stop(self) -> None:
        """Ask `run()` to return after its current round (safe from signal handlers)."""
        self._stopping = True
        self._wake.set()

    def sync(self, timeout_s: float = 30.0) -> None:
        """Wait until a round that began after this call finished with nothing left to read."""
        with self._cv:
            want = self._started + 1
            self._rescan_due = True
            self._wake.set()
            done = self._cv.wait_for(
                lambda: (self._finished >= want and not self._more) or self._stopping, timeout_s
            )
        if not done:
            raise TimeoutError(f"tail driver did not catch up within {timeout_s}s")

    def wake(self, structural: bool = False) -> None:
        """Start the next round now (watcher events call this)."""
        if structural:
            self._rescan_due = True
        self._wake.set()

    # --- one round -----------------------------------------------------------------------

    def poll_once(self) -> bool:
        """One round; True when some file has more to read right away."""
        now = self.clock.monotonic()
        self._supervise_watcher()
        if self._rescan_due or now - self._last_rescan >= self.options.poll_interval_s:
            self._rescan(now, initial=False)
        more = False
        for follower in list(self.followers.values()):
            more |= self._poll(follower, now)
        self._tick(now)
        for hook in self.round_hooks:
            events = list(hook(self))
            self._dirty |= bool(events)
            self._send(events)
        due = now - self._last_checkpoint >= self.options.checkpoint_interval_s
        if due and self._dirty:
            self._checkpoint()
        return more

    def _poll(self, follower: Follower, now: float) -> bool:
        try:
            result = follower.poll(now)
        except OSError as exc:
            self.status(f"{follower.path}: read failed ({exc.strerror}); stopped following it")
            self._drop(follower)
            return False
        self._handle(follower, result)
        self._check_encoding(follower)
        if result.grew:
            self._arrived.add(follower.source)
        if follower.detached_at is None:
            why = follower.check_path()
            if why is not None:
                follower.detached_at = now
                self._rescan_due = True
                self.status(f"{follower.path}: {why}; reading the old file to its end")
        elif now - max(follower.detached_at, follower.last_growth) >= self.options.rotate_wait_s:
            self._retire(follower)
        return result.more

    def _handle(self, follower: Follower, result: PollResult, *, emit: bool = True) -> None:
        for note in result.notes:
            self.status(note)
        self._dirty |= bool(result.batches or result.notes)
        events: list[AlertEvent] = []
        for batch in result.batches:
            events.extend(self._process(follower, batch))
        if result.batches:
            self._last_line[follower.source] = follower.line - 1
        if emit:
            self._emit(events, follower.gen_id)

    def _process(self, follower: Follower, batch: Batch) -> list[AlertEvent]:
        frame = parse_lines(
            batch.text,
            source=follower.source,
            first_line=batch.first_line,
            default_year=follower.year,
        )
        for observe in self.frame_hooks:
            observe(frame)
        return self.engine.process(frame)

    def _retire(self, follower: Follower) -> None:
        result = PollResult()
        follower.finish(result)
        self._handle(follower, result)
        self.status(
            f"{follower.path}: old file read to its end ({follower.line - 1} lines); closed"
        )
        self._drop(follower)

    def _drop(self, follower: Follower) -> None:
        self._dirty = True
        follower.close()
        self.followers.pop(follower.key, None)

    def _tick(self, now: float) -> None:
        if not self._wallclock or now - self._last_tick < self.options.poll_interval_s:
            return
        self._last_tick = now
        wall = self.clock.now()
        by_source = {f.source: f for f in self.followers.values()}
        for source, follower in by_source.items():
            line = self._last_line.get(source, 0)
            arrived = source in self._arrived
            self._emit(self.engine.tick(source, wall, arrived=arrived, line=line), follower.gen_id)
        self._arrived.clear()

    # --- files ---------------------------------------------------------------------------

    def expand(self) -> list[str]:
        """The regular files the patterns match now, each once, sorted."""
        paths: set[str] = set()
        for pattern in self.patterns:
            matches = glob.glob(pattern, recursive=True) if is_glob(pattern) else [pattern]
            for path in matches:
                try:
                    mode = os.stat(path).st_mode
                except OSError:
                    continue
                if stat.S_ISREG(mode):
                    paths.add(path)
                elif path not in self._skipped:
                    self._skipped.add(path)
                    self.status(f"skipping {path}: not a regular file ({file_kind(mode)})")
        return sorted(paths)

    def _rescan(self, now: float, *, initial: bool) -> None:
        self._rescan_due, self._last_rescan = False, now
        for key, paths in self._matches_by_file().items():
            follower = self.followers.get(key)
            if follower is not None:
                if follower.path not in paths:  # several names (a `latest.log` link) is no rename
                    self.status(f"{follower.path}: renamed to {paths[0]}; still following it")
                    follower.path = paths[0]
                follower.detached_at = None
                continue
            self._add(paths[0], now, initial=initial)
        self._watch()

    def _matches_by_file(self) -> dict[tuple[int, int], list[str]]:
        """The matching paths grouped by the file they name (device, inode): a symlink such as
        `latest.log -> run5.log` is the same file, followed once, under its real name first."""
        by_file: dict[tuple[int, int], list[str]] = {}
        for path in self.expand():
            try:
                st = os.stat(path)
            except OSError:
                continue
            by_file.setdefault((st.st_dev, st.st_ino), []).append(path)
        for key, paths in by_file.items():
            paths.sort(key=os.path.islink)  # real files before links, otherwise sorted
            if len(paths) > 1 and key not in self._noted_aliases:
                self._noted_aliases.add(key)
                self.status(
                    f"{', '.join(paths)}: one file under {len(paths)} names; following it once as {paths[0]}"
                )
        return by_file

    def _add(self, path: str, now: float, *, initial: bool) -> None:
        try:
            follower = Follower.open(path, path, self.options.follow, now)
        except OSError as exc:
            self.status(f"{path}: cannot open ({exc.strerror}); will retry")
            return
        self.followers[follower.key] = follower
        self._dirty = True
        if self._resume(follower):
            return
        if not initial or self._saved is not None:
            self.status(f"{path}: new file; following it from its first byte")
        elif self.options.start == "end":
            follower.skip_to_end()
            self.status(f"{path}: following from its end (line {follower.line})")
        else:
            self._catch_up(follower)

    def _check_encoding(self, follower: Follower) -> None:
        """Say once per file that a UTF-16 one is followed as bytes (its lines will not match)."""
        if follower.prefix[:2] in UTF16_BOMS and follower.key not in self._warned_utf16:
            self._warned_utf16.add(follower.key)
            self.status(utf16_note(follower.path))

    def _resume(self, follower: Follower) -> bool:
        saved = (self._saved or {}).pop(follower.key, None)
        if saved is None:
            return False
        size = os.fstat(follower.fd).st_size
        if follower.matches(saved) and size >= (saved.evaluated_end or saved.offset):
            follower.source = saved.source
            follower.resume(saved)
            self.status(f"{follower.path}: resuming at line {saved.line} (checkpoint)")
            return True
        self.status(
            f"{follower.path}: not the file the checkpoint knew (same inode, other content); "
            "reading it from the start"
        )
        self.engine.sources.pop(follower.source, None)
        return False

    def _catch_up(self, follower: Follower) -> None:
        """Run a file's history through the engine silently, then emit what is still firing."""
        events: list[AlertEvent] = []
        now = self.clock.monotonic()
        while True:
            result = follower.poll(now, flush_partial=False)
            for batch in result.batches:
                events.extend(self._process(follower, batch))
            if not result.more:
                break
        self._last_line[follower.source] = follower.line - 1
        if self.options.start == "catch-up":
            events = sorted(self.engine.active_alerts(follower.source), key=lambda e: e.line)
        self.status(
            f"{follower.path}: caught up on {follower.line - 1} lines of history "
            f"({len(events)} alert events to report); following it"
        )
        self._emit(events, follower.gen_id)

    # --- alerts, checkpoints, watching ---------------------------------------------------

    def _emit(self, events: Iterable[AlertEvent], gen_id: str) -> None:
        for event in events:
            self._dirty = True
            key = f"{gen_id}|{event.source}|{event.line}|{event.fingerprint}|{event.status}"
            if key in self._replayed:
                continue  # emitted before a crash; its line was read again
            if self.state is not None:
                self.state.record_emitted(key)
            self._send([event])

    def send(self, events: Iterable[AlertEvent]) -> None:
        """Hand events that do not come from a followed file (e.g. the GPU side's) to the sinks."""
        self._send(events)

    def _send(self, events: Iterable[AlertEvent]) -> None:
        for raw in events:
            event = self.event_filter(raw) if self.event_filter is not None else raw
            if event is None:
                continue
            for sink in self.sinks:
                try:
                    sink.emit(event)
                except BrokenPipeError:
                    raise  # stdout's reader left (`logwatch tail | head`): time to stop
                except Exception as exc:
                    self._sink_failed(sink, event, exc)

    def _sink_failed(self, sink: Sink, event: AlertEvent, exc: Exception) -> None:
        """Say which alert a sink could not take, every time; a repeated error in one line."""
        reason = f"{type(exc).__name__}: {exc}"
        key = (id(sink), reason)
        self._sink_failures[key] = self._sink_failures.get(key, 0) + 1
        count = self._sink_failures[key]
        again = f" (failure {count} of this kind)" if count > 1 else ""
        self.status(
            f"sink {type(sink).__name__} did not take {event.rule} {event.status} "
            f"({event.source}:{event.line}): {reason}{again}"
        )

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
        for name, data in checkpoint.extras.items():
            hook = self.stateful.get(name)
            try:
                if hook is not None:
                    hook.import_state(data)
            except ValueError as exc:
                self.status(
                    f"checkpoint: the saved {name} state is unusable ({exc}); starting it afresh"
                )

    def _checkpoint(self) -> None:
        self._last_checkpoint, self._dirty = self.clock.monotonic(), False
        if self.state is None:
            return
        files = [f.position() for f in self.followers.values()]
        sources = {f.source: self.engine.export_state(f.source) for f in self.followers.values()}
        extras = {name: hook.export_state() for name, hook in self.stateful.items()}
        self.state.save(Checkpoint(files, sources, extras))
        for key in self._replayed:  # still needed until every re-read line is behind us
            self.state.record_emitted(key)

    def _start_watcher(self) -> None:
        if self._watcher_factory is None:
            return
        try:
            self.watcher = self._watcher_factory(self.wake)
        except OSError as exc:
            self._fall_back(exc)

    def _supervise_watcher(self) -> None:
        if self.watcher is None or self.watcher.is_alive():
            return
        self.status("the file-event watcher thread died; restarted it")
        self.watcher.stop()
        self.watcher = None
        self._start_watcher()
        self._rescan_due = True

    def _watch(self) -> None:
        if self.watcher is None:
            return
        dirs: dict[str, bool] = {}
        for directory, recursive in watch_roots(self.patterns):
            kind = fs_type(directory)
            if kind in NETWORK_FS:
                if directory not in self._warned_network:
                    self._warned_network.add(directory)
                    self.status(
                        f"{directory} is on {kind}: file events do not see remote writes; "
                        f"polling it every {self.options.poll_interval_s:g}s"
                    )
                continue
            dirs[directory] = dirs.get(directory, False) or recursive
        try:
            self.watcher.watch(dirs)
        except OSError as exc:
            self.watcher.stop()
            self.watcher = None
            self._fall_back(exc)

    def _fall_back(self, exc: OSError) -> None:
        self._watcher_factory = None
        self.status(
            f"file events unavailable ({exc.strerror or exc}); polling every "
            f"{self.options.poll_interval_s:g}s instead (raise fs.inotify.max_user_watches / "
            "max_user_instances to get events back)"
        )
