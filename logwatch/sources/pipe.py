"""Standard input followed like a file (`kubectl logs -f pod | logwatch tail -`).

A reader thread blocks on the pipe and hands chunks over; the tail driver's rounds take them
without blocking, frame them like a follower's (same line numbers, same unfinished-line rules)
and stop at end of input. A pipe has no identity to resume, so it is never checkpointed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime

from logwatch.sources.follow import Follower, FollowOptions, PollResult

PIPE = "-"
"""The argument that names standard input."""
PIPE_SOURCE = "<stdin>"
"""Its source name in alerts and notes."""


class PipeSource(Follower):
    """A follower over a pipe's chunks, read by a daemon thread; `ended` once drained at EOF."""

    checkpointed = False

    def __init__(
        self, fd: int, options: FollowOptions, now: float, wake: Callable[[], None]
    ) -> None:
        self.path = self.source = PIPE_SOURCE
        self.fd, self.options, self.dev, self.ino = fd, options, -1, fd
        self.year = datetime.now().year
        self.generation, self.detached_at = 0, None
        self.ended = False
        self._chunks: list[bytes] = []
        self._lock = threading.Lock()
        self._eof = False
        self._wake = wake
        self._reset(now)
        threading.Thread(target=self._pump, name="logwatch-stdin", daemon=True).start()

    def _pump(self) -> None:
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                data = b""  # a broken pipe ends the input like EOF
            with self._lock:
                if data:
                    self._chunks.append(data)
                else:
                    self._eof = True
            self._wake()
            if not data:
                return

    def poll(self, now: float, *, flush_partial: bool = True) -> PollResult:
        """Frame what the reader thread has received; at EOF, hand out the last line too."""
        result = PollResult()
        with self._lock:
            data, eof = b"".join(self._chunks), self._eof
            self._chunks.clear()
        if data:
            self.read_offset += len(data)
            result.grew, self.last_growth = True, now
            done = self.framer.feed(data)
            self.has_cr = b"\r" in data[data.rfind(b"\n") + 1 :] or (self.has_cr and not done)
            if done:
                self._emit_complete(done, result)
        if eof:
            self.finish(result)
            self.ended = True
        elif flush_partial and self._partial_due(now):
            self._flush_partial(now, result)
        return result

    def check_path(self, stat_path: Callable[[str], os.stat_result] = os.stat) -> str | None:
        """A pipe has no path to lose."""
        return None

    def close(self) -> None:
        """Nothing to release: the reader thread ends with the input (or the process)."""
