"""`logwatch top` wired: the tail driver on its own thread (same engine, files, checkpoints and
rules as `tail`), the view on the main thread, keys on a reader thread.

The view redraws when something changed (a batch, an alert, a key, a resize, the clock's second
for the ages), at most `max_fps` times a second. Without a terminal it prints one plain status
line per source every interval instead. SIGTERM, SIGINT, SIGHUP and `q` all end the same way:
the driver finishes its round and writes its checkpoint, the terminal gets its mode back."""

from __future__ import annotations

import glob
import io
import os
import shutil
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, TextIO, runtime_checkable

from logwatch.alerts import AlertEvent
from logwatch.drivers.plugins import TailPlugin
from logwatch.drivers.runner import check_patterns, tail_driver
from logwatch.drivers.tail import TailDriver
from logwatch.drivers.tail_options import TailOptions
from logwatch.errors import LogwatchError
from logwatch.gpu.link import GpuLink
from logwatch.rules.loader import RuleSpec
from logwatch.sinks.base import Sink
from logwatch.sinks.slack.silences import SilenceStore
from logwatch.top.gpus import gpu_rows
from logwatch.top.plugin import SourceRow, TopPlugin
from logwatch.top.view import (
    AGE_STEP_S,
    GpuRow,
    Screen,
    display_names,
    plain_lines,
    render,
    safe,
    seconds_shown,
    shown_rows,
)

SILENCE_S = 3600.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@dataclass(frozen=True, slots=True)
class TopOptions:
    """How often the view refreshes its ages (and the plain mode prints), and its redraw cap."""

    interval_s: float = 1.0
    max_fps: float = 4.0


@runtime_checkable
class Backlogged(Protocol):
    """A sink that can say how much it has not delivered yet (Slack's spool)."""

    def backlog(self) -> int:
        """Messages waiting."""
        ...


class Notes(io.StringIO):
    """Status lines: on stderr until the view starts, then kept for its message line (stderr
    writes, e.g. a background worker's report, land here too while the view owns the screen)."""

    def __init__(self, stderr: TextIO) -> None:
        super().__init__()
        self.stderr, self.lines, self.held = stderr, deque[str](maxlen=20), False

    def say(self, message: str) -> None:
        """One status line (already made terminal-safe by its caller or by the view)."""
        if self.held:
            self.lines.append(message)
        else:
            print(f"logwatch: {message}", file=self.stderr, flush=True)

    def write(self, text: str) -> int:
        """Keep each non-blank line written."""
        for line in text.splitlines():
            if line.strip():
                self.lines.append(line.removeprefix("logwatch: "))
        return len(text)

    def last(self) -> str:
        """The latest line, or ''."""
        return self.lines[-1] if self.lines else ""


def run_top(
    patterns: Sequence[str],
    rules: Sequence[RuleSpec],
    plugin: TopPlugin,
    sinks: Sequence[Sink],
    *,
    state_dir: Path,
    options: TailOptions,
    top: TopOptions,
    gpu: GpuLink | None,
    footer: Sequence[str],
    stdout: TextIO,
    stdin: TextIO,
    notes: Notes,
    startup: Sequence[str] = (),
) -> None:
    """The `logwatch top` command: follow and show until q / SIGTERM / SIGINT, then checkpoint.
    `sinks` are every sink alerts go to, `plugin` (the view's facts) among them."""
    plugins: list[TailPlugin] = [plugin, *([gpu] if gpu is not None else [])]
    try:
        check_patterns(patterns)
        driver = tail_driver(
            patterns,
            rules,
            sinks,
            state_dir=state_dir,
            options=options,
            status=notes.say,
            plugins=plugins,
        )
        driver.claim()  # a second watch of the same files is refused before anything is said
    except LogwatchError:
        if gpu is not None:
            gpu.close()
        raise
    loop = TopLoop(driver, plugin, gpu, sinks, SilenceStore(state_dir, report=notes.say), footer)
    stop = loop.stop
    previous = {sig: signal.signal(sig, lambda n, f: stop()) for sig in STOP_SIGNALS}
    try:
        for line in startup:
            notes.say(line)
        driver.open()  # catch-up and a held state directory are said before the view starts
        runner = loop.runner = DriverThread(driver, plugin)
        try:
            if stdout.isatty():
                loop.interactive(stdout, stdin, notes, top)
            else:
                loop.plain(stdout, top)
        finally:
            driver.stop()
            runner.join()
            driver.close(checkpoint=runner.error is None)
        if runner.error is not None:
            raise runner.error
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class DriverThread:
    """`driver.run()` on a thread; what it raised is kept for the main thread."""

    def __init__(self, driver: TailDriver, plugin: TopPlugin) -> None:
        self.driver, self.plugin = driver, plugin
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="logwatch-top-driver", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.driver.run()
        except BaseException as exc:  # handed to the main thread, which restores the terminal first
            self.error = exc
        finally:
            self.plugin.changed.set()

    def join(self) -> None:
        self.thread.join()


class TopLoop:
    """The view's state (selection, filter, help) and its two loops: full-screen and plain."""

    def __init__(
        self,
        driver: TailDriver,
        plugin: TopPlugin,
        gpu: GpuLink | None,
        sinks: Sequence[Sink],
        silences: SilenceStore,
        footer: Sequence[str],
    ) -> None:
        self.driver, self.plugin, self.gpu, self.sinks = driver, plugin, gpu, list(sinks)
        self.silences, self.footer = silences, tuple(footer)
        self.stopping = False
        self.stdout_fd = 1
        self.runner: DriverThread | None = None
        self.keys: deque[str] = deque()
        self._pending: Callable[[], None] | None = None  # what `y` does to a question asked
        self.state = Screen(width=80, height=24, now_s=0, rows=())
        self._gpu_cache: tuple[int, tuple[GpuRow, ...]] = (-1, ())
        sampler = gpu.started.sampler if gpu is not None else None
        self._slow_tick = 60.0 if sampler is None else min(60.0, sampler.interval_s)

    def stop(self) -> None:
        """End the loop (safe from a signal handler: the wake-up happens on another thread)."""
        self.stopping = True
        self.driver.stop()
        threading.Thread(target=self.plugin.changed.set, daemon=True).start()

    def alive(self) -> bool:
        """Neither stopped nor left without a driver."""
        runner = self.runner
        return not self.stopping and (runner is None or runner.thread.is_alive())

    # --- plain --------------------------------------------------------------------------------

    def plain(self, stdout: TextIO, top: TopOptions) -> None:
        """One status line per source every interval (no escape codes)."""
        next_at = time.monotonic()
        while self.alive():
            wait = next_at - time.monotonic()
            if wait > 0:
                self.plugin.changed.wait(wait)
                self.plugin.changed.clear()
                continue
            next_at += top.interval_s
            lines = plain_lines(self.plugin.rows(), time.time())
            try:
                stdout.write("".join(line + "\n" for line in lines))
                stdout.flush()
            except BrokenPipeError:
                return  # `logwatch top ... | head`: the reader left

    # --- full screen ----------------------------------------------------------------------------

    def interactive(self, stdout: TextIO, stdin: TextIO, notes: Notes, top: TopOptions) -> None:
        """The live view until q or a stop signal; the terminal restored however it ends."""
        from rich.console import Console
        from rich.live import Live

        from logwatch.top.keys import KeyReader, cbreak

        console = Console(file=stdout, highlight=False)
        self.stdout_fd = stdout.fileno()
        fd = stdin.fileno() if stdin.isatty() else None
        reader = KeyReader(fd, self._on_key) if fd is not None else None
        winch = signal.signal(signal.SIGWINCH, lambda n, f: self._wake())
        saved_stderr, sys.stderr = sys.stderr, notes
        notes.held = True
        try:
            with ExitStack() as stack:
                if fd is not None:
                    stack.enter_context(cbreak(fd))
                live = stack.enter_context(Live(console=console, screen=True, auto_refresh=False))
                if reader is not None:
                    reader.start()
                self._draw_loop(live, notes, top)
        finally:
            if reader is not None:
                reader.close()
            sys.stderr = saved_stderr
            notes.held = False
            signal.signal(signal.SIGWINCH, winch)
            for line in notes.lines:  # what was said while the view owned the screen
                notes.say(line)

    def _draw_loop(self, live: Any, notes: Notes, top: TopOptions) -> None:
        last_draw, drawn = float("-inf"), None
        while self.alive():
            # Nothing changed: wake only when an age on screen would (every 5 s while one is
            # under a minute, else at the minute, or per GPU sample), so a quiet view costs next
            # to nothing.
            tick = self._slow_tick
            if drawn is None:
                tick = top.interval_s
            elif seconds_shown(drawn):
                tick = max(top.interval_s, AGE_STEP_S)
            if self.plugin.changed.wait(tick - time.time() % tick + 0.01):
                self.plugin.changed.clear()
            while self.keys:
                self._key(self.keys.popleft())
            if not self.alive():
                return
            pause = last_draw + 1.0 / top.max_fps - time.monotonic()
            if pause > 0:
                time.sleep(pause)  # a burst of changes becomes one redraw
            screen = self._screen(notes)
            if screen != drawn:
                live.console.size = (screen.width, screen.height)  # not $COLUMNS: the pane's
                live.update(render(screen), refresh=True)
                last_draw, drawn = time.monotonic(), screen

    def _wake(self) -> None:
        threading.Thread(target=self.plugin.changed.set, daemon=True).start()

    def _on_key(self, key: str) -> None:
        self.keys.append(key)
        self.plugin.changed.set()

    def _screen(self, notes: Notes) -> Screen:
        size = self._size()
        now = time.time()
        rows = tuple(self.plugin.rows())
        firing = self.plugin.firing()
        followed = {r.source for r in rows}
        gpu_line, gpus = self._gpus(rows)
        message = self.state.message or notes.last()
        self.state = replace(
            self.state,
            width=size.columns,
            height=size.lines,
            now_s=int(now),
            rows=rows,
            gpu_line=gpu_line,
            gpus=gpus,
            recent=tuple(self.plugin.recent()),
            other_firing=tuple(e for e in firing if e.source not in followed),
            silenced=self._silenced(firing, datetime.fromtimestamp(now)),
            footer=(*self.footer, self._backlog()),
        )
        return replace(self.state, message=message)

    def _size(self) -> os.terminal_size:
        """The terminal's size now (not $COLUMNS / $LINES: a resize must show at once)."""
        try:
            return os.get_terminal_size(self.stdout_fd)
        except (OSError, ValueError):
            return shutil.get_terminal_size()

    def _gpus(self, rows: Sequence[Any]) -> tuple[str | None, tuple[GpuRow, ...]]:
        if self.gpu is None:
            return "GPUs: off (--gpu off or [gpu] mode)", ()
        status = self.gpu.started.status
        if status is None or not status.available:
            return (status.line() if status is not None else "GPUs: off"), ()
        samples = self.gpu.latest()
        stamp = hash(tuple(s.ts for s in samples))
        if stamp != self._gpu_cache[0]:  # /proc is walked once per GPU sample, not per frame
            runs = {r.source: r.run or Path(r.source).name for r in rows}
            self._gpu_cache = (stamp, gpu_rows(samples, self.gpu.run_pids(), runs))
        return None, self._gpu_cache[1]

    def _silenced(self, firing: Sequence[Any], now: datetime) -> frozenset[str]:
        try:
            active = [s for s in self.silences.all() if s.active(now)]
        except LogwatchError:
            return frozenset()  # the store says so itself, once, when the sink asks
        return frozenset(
            e.fingerprint for e in firing if any(s.matches(e.rule, e.source) for s in active)
        )

    def _backlog(self) -> str:
        waiting = [sink.backlog() for sink in self.sinks if isinstance(sink, Backlogged)]
        keys = "q quit · / filter · j/k select · Enter alert · s silence · u unsilence · ? help"
        return keys if not waiting else f"Slack backlog: {sum(waiting)} · {keys}"

    # --- keys -------------------------------------------------------------------------------

    def _key(self, key: str) -> None:
        state = self.state
        if self._pending is not None:
            self._answer(key)
        elif state.help or state.detail:
            self._set(help=False, detail=False)
        elif state.filtering:
            self.state = _filter_key(state, key)
        elif key == "q":
            self.stop()
        else:
            action = self._actions().get(key)
            if action is not None:
                action()

    def _actions(self) -> dict[str, Callable[[], None]]:
        return {
            "/": lambda: self._set(filtering=True, message=""),
            "?": lambda: self._set(help=True),
            "s": self._ask_silence,
            "u": self._unsilence,
            "enter": self._details,
            "j": lambda: self._move(1),
            "down": lambda: self._move(1),
            "k": lambda: self._move(-1),
            "up": lambda: self._move(-1),
            "escape": lambda: self._set(message=""),
        }

    def _set(self, **changes: Any) -> None:
        self.state = replace(self.state, **changes)

    def _move(self, delta: int) -> None:
        count = len(shown_rows(self.state))
        self._set(selected=max(0, min(count - 1, self.state.selected + delta)))

    def _selected(self) -> SourceRow | None:
        rows = shown_rows(self.state)
        if not rows:
            self._set(message="no source selected")
            return None
        return rows[min(self.state.selected, len(rows) - 1)]

    def _details(self) -> None:
        row = self._selected()
        if row is not None and not row.alerts:
            self._set(message=f"nothing firing on {self._name(row.source)}")
        elif row is not None:
            self._set(detail=True, message="")

    def _ask_silence(self) -> None:
        """`s`: ask before muting the selected source's first unsilenced firing alert."""
        row = self._selected()
        if row is None:
            return
        loud = [e for e in row.alerts if e.fingerprint not in self.state.silenced]
        if not loud:
            self._set(message=f"nothing firing unsilenced on {self._name(row.source)}")
            return
        event = loud[0]
        question = f"silence {safe(event.rule)} on {self._name(event.source)} for 1h? y/n"
        self._pending = lambda: self._silence(event)
        self._set(asking=question, message="")

    def _answer(self, key: str) -> None:
        action, self._pending = self._pending, None
        self._set(asking="")
        if key in ("y", "Y") and action is not None:
            action()
        else:
            self._set(message="not silenced")

    def _silence(self, event: AlertEvent) -> None:
        try:
            silence = self.silences.add(
                event.rule,
                glob.escape(event.source),
                SILENCE_S,
                "from logwatch top",
                datetime.now(),
            )
        except LogwatchError as exc:
            self._set(message=str(exc))
            return
        name = self._name(event.source)
        self._set(
            message=f"silenced {safe(event.rule)} on {name} for 1h ({silence.id}); u lifts it",
            silenced=self.state.silenced | {event.fingerprint},
        )

    def _unsilence(self) -> None:
        """`u`: end the silences that mute the selected source's firing alerts."""
        row = self._selected()
        if row is None:
            return
        now = datetime.now()
        try:
            muting = [
                s
                for s in self.silences.all()
                if s.active(now) and any(s.matches(e.rule, e.source) for e in row.alerts)
            ]
            for silence in muting:
                self.silences.expire(silence.id, now)
        except LogwatchError as exc:
            self._set(message=str(exc))
            return
        name = self._name(row.source)
        if not muting:
            self._set(message=f"no silence mutes {name}")
            return
        lifted = ", ".join(f"{safe(s.rule)} ({s.id})" for s in muting)
        self._set(message=f"silence lifted on {name}: {lifted}", silenced=frozenset())

    def _name(self, source: str) -> str:
        return display_names(self.state.rows).get(source) or safe(source)


def _filter_key(state: Screen, key: str) -> Screen:
    """The filter line's keys: text, Backspace, Enter keeps it, Escape clears it."""
    if key == "enter":
        return replace(state, filtering=False, selected=0)
    if key == "escape":
        return replace(state, filtering=False, filter_text="", selected=0)
    if key == "backspace":
        return replace(state, filter_text=state.filter_text[:-1], selected=0)
    if len(key) == 1 and key.isprintable():
        return replace(state, filter_text=state.filter_text + key, selected=0)
    return state
