"""Progress on stderr for long batch work, only when stderr is a terminal (a pipe or a CI log
gets nothing): `replay`'s bar per large file with throughput and time left, and `logwatch
test`'s count of tests run. rich draws them (imported here, when one is shown)."""

from __future__ import annotations

import os
import sys
from typing import Any

from logwatch.redact import visible

REPLAY_MIN_BYTES = 64 << 20
"""Files smaller than this replay in about a second: no bar."""


def _console(console: Any) -> Any:
    """The given console, else one on stderr; None when it is not a terminal."""
    if console is None:
        if not _maybe_terminal(sys.stderr):
            return None  # what rich would say, without importing it (0.05 s of a replay)
        from rich.console import Console

        console = Console(file=sys.stderr)
    return console if console.is_terminal else None


def _maybe_terminal(stream: Any) -> bool:
    """Whether rich's `Console.is_terminal` may take `stream` for a terminal: a tty, or the
    environment says so (`TTY_COMPATIBLE=1`, a non-empty `FORCE_COLOR`); False only where it
    surely would not."""
    if os.environ.get("TTY_COMPATIBLE") == "1" or os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


class ReplayProgress:
    """`replay`'s `progress(source, done_bytes, total_bytes)`: a bar per file of at least
    `min_bytes`, with bytes read, throughput (MB/s) and time left."""

    def __init__(self, *, min_bytes: int = REPLAY_MIN_BYTES, console: Any = None) -> None:
        self.min_bytes, self._console = min_bytes, console
        self.progress: Any = None
        self.task: Any = None
        self.source = ""

    def __call__(self, source: str, done: int, total: int) -> None:
        if total < self.min_bytes:
            return
        if self.progress is None:
            console = _console(self._console)
            if console is None:
                self.min_bytes = sys.maxsize  # not a terminal: never again
                return
            self.progress = _replay_bar(console)
            self.progress.start()
        if source != self.source:
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task(visible(source), total=total)
            self.source = source
        self.progress.update(self.task, completed=done)

    def close(self) -> None:
        """End the bar (idempotent)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def _replay_bar(console: Any) -> Any:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


class RuleTestProgress:
    """`logwatch test`'s `progress(done, total, name)`: `test 3/19 <name>`, a bar and the time
    left, while the tests run."""

    def __init__(self, *, console: Any = None) -> None:
        self._console = console
        self.progress: Any = None
        self.task: Any = None
        self.off = False

    def __call__(self, done: int, total: int, name: str) -> None:
        if self.off:
            return
        if self.progress is None:
            console = _console(self._console)
            if console is None:
                self.off = True
                return
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("tests"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                TextColumn("{task.description}"),
                console=console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task("", total=total)
        self.progress.update(self.task, completed=done, description=visible(name))

    def close(self) -> None:
        """End the bar (idempotent)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
