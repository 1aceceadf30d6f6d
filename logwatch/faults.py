"""Errors that repeat, said in a few lines: when they start, at most once per `every_s` while
they last (`slack: still failing, 12 times in 3m00s; ...`) and when they end.

A sink that stays down or a file that stays unreadable is retried every few seconds; saying each
retry floods stderr and hides everything else, saying nothing is a silent fallback. One
`RepeatedFaults` per reporter keeps one episode per key (`slack`, a path) on an injected clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from logwatch.durations import format_duration

SUMMARY_EVERY_S = 60.0
"""How often, at most, a fault that lasts is summarised."""


@dataclass(frozen=True, slots=True)
class Episode:
    """One fault from its first failure: how many failures, since when (the clock's seconds)."""

    key: str
    started_s: float
    failures: int
    summarised_s: float

    def lasted(self, now_s: float) -> str:
        """How long it has lasted, as `3m00s`."""
        return format_duration(max(now_s - self.started_s, 0.0))


class RepeatedFaults:
    """Episodes of failure per key, said when they start, summarised at most once per
    `every_s` while they last, and said when they end. Thread-safe (the Slack channels each
    have a thread)."""

    def __init__(
        self,
        report: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = SUMMARY_EVERY_S,
    ) -> None:
        self.report, self.clock, self.every_s = report, clock, every_s
        self._episodes: dict[str, Episode] = {}
        self._lock = threading.Lock()

    def failed(self, key: str, message: str, *, detail: str = "") -> bool:
        """A failure of `key`: the first one of an episode says `message`; later ones are
        counted, and summarised (with `detail`, e.g. the latest reason) once `every_s` has
        passed since the last line. True when this failure started the episode."""
        now = self.clock()
        with self._lock:
            episode = self._episodes.get(key)
            if episode is None:
                self._episodes[key] = Episode(key, now, 1, now)
                said: str | None = message
            else:
                due = now - episode.summarised_s >= self.every_s
                episode = Episode(
                    key,
                    episode.started_s,
                    episode.failures + 1,
                    now if due else episode.summarised_s,
                )
                self._episodes[key] = episode
                said = None
                if due:
                    tail = f"; {detail}" if detail else ""
                    lasted = episode.lasted(now)
                    said = f"{key}: still failing, {episode.failures} times in {lasted}{tail}"
        if said is not None:
            self.report(said)
        return episode is None

    def recovered(self, key: str, message: Callable[[Episode, float], str]) -> Episode | None:
        """`key` works again: when it was failing, say `message(episode, now)` and end the
        episode (returned); None when it was not failing."""
        now = self.clock()
        with self._lock:
            episode = self._episodes.pop(key, None)
        if episode is not None:
            self.report(message(episode, now))
        return episode

    def failing(self, key: str) -> Episode | None:
        """The episode of `key` while it lasts, else None."""
        with self._lock:
            return self._episodes.get(key)

    def forget(self, key: str) -> None:
        """End the episode of `key` without a word (the caller says it its own way)."""
        with self._lock:
            self._episodes.pop(key, None)
