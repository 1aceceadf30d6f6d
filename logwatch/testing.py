"""Fakes for what a test machine lacks (a clock under control, a GPU, Slack itself).

Shipped with the package so that users' own tests can use them too.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta


class FakeClock:
    """A clock that moves only when told to; `sleep` advances it instantly."""

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime(2026, 11, 28, 14, 0, 0)
        self._elapsed = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        with self._lock:
            return self._elapsed

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        with self._lock:
            self._elapsed += max(seconds, 0.0)
