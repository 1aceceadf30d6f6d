"""The set of files a tail follows: globs expanded, one follower per file, the watcher kept alive.

A `FileSet` owns the followers (keyed by device and inode, so a `latest.log` link and its target
are one file), re-expands the patterns when due (at least every poll interval, at once after a
create / move / delete event), notices renames, deletions and non-regular matches, and runs the
file-event watcher: restarted when its thread dies, replaced by polling when inotify is out of
watches, skipped on network file systems. The tail driver asks it each round what changed; what
is read from the files, and when, is the driver's business.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from logwatch.sources.descriptors import DescriptorBudget, inotify_note, open_descriptors
from logwatch.sources.follow import Follower, FollowOptions
from logwatch.sources.inotify import default_watcher
from logwatch.sources.matching import Matcher
from logwatch.sources.pipe import PIPE, PipeSource
from logwatch.sources.rotated import unseen_rotations
from logwatch.sources.schedule import PollSchedule
from logwatch.sources.sniff import UTF16_BOMS, utf16_note
from logwatch.sources.watch import (
    NETWORK_FS,
    Watcher,
    WatcherFactory,
    fs_type,
    is_glob,
    may_match,
    watch_roots,
)

FileKey = tuple[int, int]
"""(st_dev, st_ino): which file a follower reads, whatever its names."""
SEEN_KEPT = 4096
"""How many files followed are remembered, so that a rotated name is never read twice."""
RESCAN_EVERY_S = 30.0
"""With file events, how often the patterns are matched again anyway (lost create events)."""


class FileSet:
    """The regular files `patterns` match, each followed once; `rescan` says which are new."""

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        follow: FollowOptions | None = None,
        poll_interval_s: float = 1.0,
        rotate_wait_s: float = 5.0,
        watcher_factory: WatcherFactory | None = default_watcher,
        wake: Callable[[], None] = lambda: None,
        status: Callable[[str], None] = lambda message: None,
        stdin: int = 0,
        stat: Callable[[str], os.stat_result] = os.stat,
        descriptors: Callable[[], tuple[int, int] | None] = open_descriptors,
    ) -> None:
        self.patterns = list(patterns)
        # injected: tests give a limit and a count of descriptors in use
        self.budget = DescriptorBudget(status, descriptors=descriptors)
        self._stat = stat  # injected: tests make it fail as EACCES would (root ignores modes)
        self.follow = follow or FollowOptions()
        self.poll_interval_s, self.rotate_wait_s = poll_interval_s, rotate_wait_s
        self.status, self._wake = status, wake
        self.followers: dict[FileKey, Follower] = {}
        self.watcher: Watcher | None = None
        self.rescan_due = True
        self._watcher_factory = watcher_factory
        self._last_rescan = float("-inf")
        self._said: set[tuple[str, object]] = set()  # one-time notes: (kind, path or key)
        self._now = 0.0  # the driver's clock at the last rescan or open
        self.matcher = Matcher(
            self.patterns,
            poll_interval_s=poll_interval_s,
            status=status,
            first=self._first,
            clock=lambda: self._now,
        )
        self._stdin = stdin
        self._pipe: PipeSource | None = None  # standard input, when "-" is a pattern
        # Files opened from their create event, oldest first: (path, fd). Holding the fd at
        # once is what keeps a fast-rotating file readable after it was renamed past the
        # pattern or deleted, before the driver's next round gets to it.
        self._held: list[tuple[str, int]] = []
        self._held_lock = threading.Lock()
        self.schedule = PollSchedule(poll_interval_s)
        self._seen: dict[FileKey, None] = {}  # every file followed, newest last (bounded)
        self._since_s = time.time()  # rotated files written before this are history
        self._unwatched = False  # some folder is on a network file system: no events there
        self._roots: list[tuple[str, bool]] = []  # watched folders (real paths), recursive

    # --- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Follow standard input when asked to; start the file-event watcher (or say why there
        is none and poll)."""
        if PIPE in self.patterns and self._pipe is None:
            self._pipe = PipeSource(self._stdin, self.follow, 0.0, self._wake)
            self.followers[self._pipe.key] = self._pipe
            self.schedule.added(self._pipe.key, seen=False)
        if self._watcher_factory is None:
            return
        try:
            self.watcher = self._watcher_factory(self.on_event)
        except OSError as exc:
            self._fall_back(exc)

    def close(self) -> None:
        """Close every follower and stop watching; idempotent."""
        for follower in self.followers.values():
            follower.close()
        self.followers.clear()
        with self._held_lock:
            held, self._held = self._held, []
        for _, fd in held:
            os.close(fd)
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None

    def on_event(
        self, structural: bool, created: str | None = None, changed: str | None = None
    ) -> None:
        """A file event (from the watcher's thread): hold a created file that the patterns
        match open, note a written one for the next round, rescan next round when files may
        have come or gone, end the driver's wait."""
        if created is not None and any(may_match(created, p) for p in self.patterns):
            self._hold(created)
        if changed is not None:
            self.schedule.touch(changed)
        if structural:
            self.rescan_due = True
        self._wake()

    def read_all_next(self) -> None:
        """The next round reads every file and rescans (sync, a restarted watcher)."""
        self.schedule.everything = self.rescan_due = True

    def due(self, now: float) -> list[Follower]:
        """The followers this round reads: every one when polling; with file events, those
        with news and a bounded safety slice (`PollSchedule`)."""
        if not self._evented():
            return list(self.followers.values())
        due, unknown = self.schedule.pick(self.followers, now)
        if any(may_match(path, p) for path in unknown for p in self.patterns):
            self.rescan_due = True  # written under a name not followed: rescan next round
            self._wake()
        return due

    def polled(self, follower: Follower, more: bool) -> None:
        """After a round read `follower`: read it again next round while it has more, holds an
        unfinished line or is no longer under its name."""
        pending = follower.framer.pending_bytes > 0
        self.schedule.polled(follower.key, more or pending or follower.detached_at is not None)

    def _evented(self) -> bool:
        """Whether file events cover every followed folder (else every round reads all)."""
        return self.watcher is not None and not self._unwatched

    def _hold(self, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return  # gone already, or unreadable: the rescan says why
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError:
            regular = False
        if not regular:
            os.close(fd)
            return
        with self._held_lock:
            self._held.append((path, fd))

    # --- what changed --------------------------------------------------------------------

    def changes(self, now: float) -> list[str]:
        """Once per round: keep the watcher alive, rescan when due (every poll interval when
        polling or while a file is away from its name, else rarely: events say when); the new
        files' paths."""
        self._supervise_watcher()
        away = any(f.detached_at is not None for f in self.followers.values())
        # A blocked path gets no event when it becomes readable (chmod raises IN_ATTRIB, which
        # a watcher may not deliver): it is tried again every poll interval.
        polled = away or self.matcher.blocked or self.budget.waiting or not self._evented()
        every = self.poll_interval_s if polled else RESCAN_EVERY_S
        if self.rescan_due or now - self._last_rescan >= every:
            return self.rescan(now)
        return []

    def rescan(self, now: float) -> list[str]:
        """Match the patterns again: known files get their current name back (a rename is said),
        a detached one that is there again is attached; the paths of files not followed yet."""
        first = self._last_rescan == float("-inf")
        self.rescan_due, self._last_rescan, self._now = False, now, now
        held = self._adopt_held()
        new = self._missed_rotations(held)
        new += [path for path, _ in held.values()]
        matched = self.matcher.by_file()
        self.matcher.forget_gone(matched)
        for key, paths in matched.items():
            follower = self.followers.get(key)
            if follower is None:
                if key not in held and not self.matcher.compressed(key, paths[0]):
                    new.append(paths[0])
                continue
            if follower.path not in paths:  # several names (a `latest.log` link) is no rename
                self.status(f"{follower.path}: renamed to {paths[0]}; still following it")
                follower.path = paths[0]
                self.schedule.renamed()
            follower.detached_at = None
        for key in self.followers.keys() - matched.keys():
            self.schedule.hot(key)  # gone from the patterns: its next read says why
        self._watch()
        # A file made between the match above and the first watch gives no event: match once
        # more next round, or it would wait for the rare rescan (RESCAN_EVERY_S)
        self.rescan_due = first
        already_open = {path for path, _ in held.values()}
        return self.budget.share(new, already_open, len(self.followers), now)

    def _missed_rotations(self, held: dict[FileKey, tuple[str, int]]) -> list[str]:
        """Files rotated from a named (not globbed) path before they could be opened: their
        create event came after they were renamed on. Read now, oldest first, before the
        newer files."""
        missed: list[str] = []
        for pattern in self.patterns:
            if pattern == PIPE or is_glob(pattern):
                continue
            for path in unseen_rotations(pattern, _Known(self._seen, held), self._since_s):
                self.status(
                    f"{path}: rotated before it could be opened; reading it from its first byte"
                )
                missed.append(path)
        return missed

    def _adopt_held(self) -> dict[FileKey, tuple[str, int]]:
        """The held files not followed yet, by identity, oldest first; the fds of files already
        followed (a rename into the glob of a file we read) or held twice are closed."""
        with self._held_lock:
            held, self._held = self._held, []
        keep: dict[FileKey, tuple[str, int]] = {}
        for path, fd in held:
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            if key in self.followers or key in keep or self.matcher.compressed(key, path):
                os.close(fd)
            else:
                keep[key] = (path, fd)
        with self._held_lock:
            self._held[:0] = keep.values()  # `open` takes them by path, in this order
        return keep

    def open(self, path: str, now: float) -> Follower | None:
        """Start following `path` (from its first byte); None, said, when it cannot be opened."""
        self._now = now
        try:
            follower = self._open_held(path, now)
            if follower is None:
                if not self.budget.may_open():  # said by the rescan, for all such files at once
                    self.budget.skipped(path)
                    return None
                follower = Follower.open(path, path, self.follow, now)
        except OSError as exc:
            if not self.budget.refused(path, exc):
                self.matcher.cannot(path, exc)
            return None
        self.matcher.can_again(path)
        if follower.key in self.followers:  # the name moved on to a file already followed
            follower.close()
            return None
        self.followers[follower.key] = follower
        self._seen[follower.key] = None
        while len(self._seen) > SEEN_KEPT:
            del self._seen[next(iter(self._seen))]
        self.schedule.added(follower.key, seen=self._has_events(path))
        return follower

    def _has_events(self, path: str) -> bool:
        """Whether the folder really holding `path` is watched (a link into another folder
        is not: its writes raise no event here)."""
        folder = os.path.dirname(os.path.realpath(path))
        return any(
            folder == root or (recursive and folder.startswith(root.rstrip("/") + "/"))
            for root, recursive in self._roots
        )

    def _open_held(self, path: str, now: float) -> Follower | None:
        """The oldest held file first created under `path`, as a follower; None if none."""
        with self._held_lock:
            index = next((i for i, (p, _) in enumerate(self._held) if p == path), None)
            if index is None:
                return None
            _, fd = self._held.pop(index)
        try:
            return Follower(path, path, fd, self.follow, now)
        except BaseException:
            os.close(fd)
            raise

    def drop(self, follower: Follower) -> None:
        """Stop following a file."""
        follower.close()
        self.followers.pop(follower.key, None)
        self.schedule.forget(follower.key)

    def expired(self, follower: Follower, now: float) -> bool:
        """After a poll: whether the file is gone from its path (rotated, deleted) long enough,
        with no growth, that its follower should read to the end and close (a pipe: ended)."""
        if isinstance(follower, PipeSource):
            return follower.ended
        self._check_encoding(follower)
        if follower.detached_at is None:
            try:
                why = follower.check_path(self._stat)
            except OSError as exc:  # e.g. its folder chmod 000 for a while: keep it as it is
                if self._first("stat", follower.key):
                    self.status(
                        f"{follower.path}: cannot be stat()ed ({exc.strerror}); "
                        "still reading the open file"
                    )
                return False
            if why is not None:
                follower.detached_at = now
                self.rescan_due = True
                self.status(f"{follower.path}: {why}; reading the old file to its end")
            return False
        return now - max(follower.detached_at, follower.last_growth) >= self.rotate_wait_s

    def expand(self) -> list[str]:
        """The regular files the patterns match now, each once, sorted (`Matcher.expand`)."""
        return self.matcher.expand()

    def _check_encoding(self, follower: Follower) -> None:
        """Say once per file that a UTF-16 one is followed as bytes (its lines will not match)."""
        if follower.prefix[:2] in UTF16_BOMS and self._first("utf16", follower.key):
            self.status(utf16_note(follower.path))

    def _first(self, kind: str, what: object) -> bool:
        """True the first time (kind, what) is asked about: notes said once per file."""
        if (kind, what) in self._said:
            return False
        self._said.add((kind, what))
        return True

    # --- the watcher ---------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """Standard input was all there was to follow, and it has ended."""
        return self.patterns == [PIPE] and self._pipe is not None and not self.followers

    def _supervise_watcher(self) -> None:
        if self.watcher is None or self.watcher.is_alive():
            return
        self.status("the file-event watcher thread died; restarted it")
        self.watcher.stop()
        self.watcher = None
        self.start()
        self.read_all_next()  # what was written meanwhile raised no event

    def _watch(self) -> None:
        if self.watcher is None:
            return
        dirs: dict[str, bool] = {}
        self._unwatched = False
        for directory, recursive in watch_roots(p for p in self.patterns if p != PIPE):
            kind = fs_type(directory)
            if kind in NETWORK_FS:
                self._unwatched = True
                if self._first("network", directory):
                    self.status(
                        f"{directory} is on {kind}: file events do not see remote writes; "
                        f"polling it every {self.poll_interval_s:g}s"
                    )
                continue
            if not os.access(directory, os.R_OK):  # watchdog skips it without a word (EACCES)
                self._unwatched = True
                said = {os.path.abspath(path) for path in self.matcher.blocked}  # "cannot list" it
                if directory not in said and self._first("unwatchable", directory):
                    self.status(
                        f"{directory}: not readable, so no file events from it; polling it every "
                        f"{self.poll_interval_s:g}s (watched once it is readable)"
                    )
                continue
            dirs[directory] = dirs.get(directory, False) or recursive
        roots = [(os.path.realpath(d), recursive) for d, recursive in sorted(dirs.items())]
        if roots != self._roots:
            self._roots = roots
            for follower in self.followers.values():  # which of them events now cover
                if not isinstance(follower, PipeSource):
                    self.schedule.added(follower.key, seen=self._has_events(follower.path))
        try:
            self.watcher.watch(dirs)
        except OSError as exc:
            self.watcher.stop()
            self.watcher = None
            self._fall_back(exc)

    def _fall_back(self, exc: OSError) -> None:
        self._watcher_factory = None
        self.status(inotify_note(exc, self.poll_interval_s, self.budget.descriptors()))


class _Known:
    """Files followed before, held now, or followed now: not a missed rotation."""

    def __init__(self, *groups: Mapping[FileKey, object]) -> None:
        self._groups = groups

    def __contains__(self, key: object) -> bool:
        return any(key in group for group in self._groups)
