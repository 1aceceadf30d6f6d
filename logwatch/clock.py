"""Time as a dependency: the real clock here, a fake one in `logwatch.testing`."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Protocol


class Clock(Protocol):
    """Wall and monotonic time, and sleeping."""

    def now(self) -> datetime:
        """Local wall-clock time, naive (as training logs write it)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes back."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)
