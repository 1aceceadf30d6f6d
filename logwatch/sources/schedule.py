"""Which followed files a tail round reads: the ones with news, and a bounded slice of the rest.

With file events working, a round reads the files whose events arrived, the files that need
watching every round (just opened, rotated away or deleted, holding an unfinished line, read only
in part, or outside the watched folders), and a safety slice of at most `SAFETY_POLL_FILES` others
per poll interval, round-robin: a lost event is still found, later the more files there are, and
the cost at rest stays the same for 50 files or 5000. Without events (no inotify, a network file
system) every round reads every file, as a poll must.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Protocol, TypeVar

FileKey = tuple[int, int]
SAFETY_POLL_FILES = 64
"""At most this many quiet files are read per poll interval to catch events that were lost."""


class Named(Protocol):
    """A followed file, as far as scheduling cares: its current path."""

    path: str


F = TypeVar("F", bound=Named)


class PollSchedule:
    """Remembers which files have news (`touch`, from the watcher's thread) and which must be
    read every round (`hot`); `pick` names the files for one round."""

    def __init__(self, poll_interval_s: float) -> None:
        self.poll_interval_s = poll_interval_s
        self.everything = True  # the next round reads every file (start, sync, lost events)
        self._touched: set[str] = set()
        self._lock = threading.Lock()
        self._hot: set[FileKey] = set()
        self._always: set[FileKey] = set()  # files whose events are not seen
        self._by_path: dict[str, FileKey] | None = None
        self._cursor = 0
        self._last_slice = float("-inf")

    def touch(self, path: str) -> None:
        """An event named `path` (any thread)."""
        with self._lock:
            self._touched.add(os.path.abspath(path))

    def hot(self, key: FileKey) -> None:
        """Read this file next round."""
        self._hot.add(key)

    def added(self, key: FileKey, *, seen: bool) -> None:
        """A file is followed (or its folders' watch changed); `seen`: its writes raise
        events, else it is read every round."""
        self._hot.add(key)
        if seen:
            self._always.discard(key)
        else:
            self._always.add(key)
        self.renamed()

    def polled(self, key: FileKey, keep_hot: bool) -> None:
        """After a file was read: whether it must be read again next round."""
        if keep_hot:
            self._hot.add(key)
        else:
            self._hot.discard(key)

    def forget(self, key: FileKey) -> None:
        """The file is no longer followed."""
        self._hot.discard(key)
        self._always.discard(key)
        self.renamed()

    def renamed(self) -> None:
        """Files came, went or changed names: map event paths afresh."""
        self._by_path = None

    def pick(self, followers: Mapping[FileKey, F], now: float) -> tuple[list[F], set[str]]:
        """The followers to read this round, in their order, and the event paths that name no
        followed file (a new file, or one not seen yet under that name)."""
        with self._lock:
            touched, self._touched = self._touched, set()
        if self.everything:
            self.everything, self._last_slice = False, now
            return list(followers.values()), set()
        by_path = self._paths(followers)
        keys = {by_path[p] for p in touched if p in by_path}
        unknown = {p for p in touched if p not in by_path}
        keys |= self._hot | self._always
        if now - self._last_slice >= self.poll_interval_s:
            self._last_slice = now
            keys |= self._safety_slice(list(followers))
        return [f for k, f in followers.items() if k in keys], unknown

    def _paths(self, followers: Mapping[FileKey, F]) -> dict[str, FileKey]:
        if self._by_path is None:
            self._by_path = {os.path.abspath(f.path): key for key, f in followers.items()}
        return self._by_path

    def _safety_slice(self, keys: list[FileKey]) -> set[FileKey]:
        if len(keys) <= SAFETY_POLL_FILES:
            return set(keys)
        start = self._cursor % len(keys)
        picked = keys[start : start + SAFETY_POLL_FILES]
        picked += keys[: SAFETY_POLL_FILES - len(picked)]
        self._cursor = start + SAFETY_POLL_FILES
        return set(picked)
