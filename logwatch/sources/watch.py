"""File-system events as wake-up hints: a watchdog observer behind a small protocol.

Events never carry data here: they only wake the tail driver earlier than its safety poll. The
handler cannot raise (an exception would end watchdog's observer thread silently), and the driver
restarts an observer whose thread died.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from logwatch.redact import stderr_line


class OnEvent(Protocol):
    """Called from the watcher's thread: `structural` when the event may change which files
    exist; `created` names a file that was just created or renamed into place, `changed` one
    that was written to or had its mode changed."""

    def __call__(
        self, structural: bool, created: str | None = None, changed: str | None = None
    ) -> None: ...


NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs"}
    | {"fuse.sshfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone", "fuse.juicefs"}
)
"""File systems where inotify sees no remote writes: followed by polling only."""


class Watcher(Protocol):
    """Something that calls `on_event` when watched directories change."""

    def watch(self, dirs: Mapping[str, bool]) -> None:
        """Watch exactly these directories (path -> recursive); OSError if it cannot."""
        ...

    def is_alive(self) -> bool:
        """Whether events still flow (the observer thread runs)."""
        ...

    def stop(self) -> None:
        """Stop watching and join threads."""
        ...


WatcherFactory = Callable[[OnEvent], Watcher]


class WatchdogWatcher:
    """The real watcher: watchdog's native observer (inotify on Linux)."""

    def __init__(self, on_event: OnEvent) -> None:
        from watchdog.observers import Observer  # a thread per watch: only when tailing

        _no_move_pairing_delay()
        self._handler = _Handler(on_event)
        self._observer: Any = Observer()
        self._observer.start()
        self._dirs: dict[str, bool] = {}

    def watch(self, dirs: Mapping[str, bool]) -> None:
        if dict(dirs) == self._dirs:
            return
        from watchdog import events as ev

        wanted = [ev.FileModifiedEvent, ev.FileCreatedEvent, ev.FileMovedEvent]
        wanted += [ev.FileDeletedEvent, ev.DirCreatedEvent, ev.DirMovedEvent, ev.DirDeletedEvent]
        # chmod (IN_ATTRIB): a file or folder that could not be read may be readable now.
        wanted += [ev.FileAttribEvent, ev.DirAttribEvent]
        self._observer.unschedule_all()
        self._dirs = {}
        for path, recursive in sorted(dirs.items()):
            self._observer.schedule(self._handler, path, recursive=recursive, event_filter=wanted)
            self._dirs[path] = recursive

    def is_alive(self) -> bool:
        return bool(self._observer.is_alive())

    def stop(self) -> None:
        self._observer.stop()
        if self._observer.is_alive():
            self._observer.join()


class _Handler:
    """watchdog calls `dispatch`; it only wakes the driver and can never raise."""

    _STRUCTURAL = frozenset({"created", "moved", "deleted"})
    _NAMING = frozenset({"created", "moved"})
    _CHANGING = frozenset({"modified", "attrib"})  # attrib: a chmod may make a file readable

    def __init__(self, on_event: OnEvent) -> None:
        self._on_event = on_event

    def dispatch(self, event: Any) -> None:
        # A raising handler would end watchdog's observer thread without a word.
        with contextlib.suppress(Exception):
            kind = event.event_type
            created = event.dest_path if kind == "moved" else event.src_path
            file = not event.is_directory
            self._on_event(
                kind in self._STRUCTURAL or event.is_directory,
                os.fsdecode(created) if kind in self._NAMING and file else None,
                os.fsdecode(event.src_path) if kind in self._CHANGING and file else None,
            )


def _no_move_pairing_delay() -> None:
    """Stop watchdog holding each rename's first half for up to 0.5 s to pair it: its queue is
    FIFO, so every later event (the new `train.log` of a rotation) waits behind it, and a file
    rotated 20 times a second is created, renamed and deleted before we hear of it. We use events
    only as hints (the rescan finds renames by inode), so unpaired halves cost nothing."""
    try:
        from watchdog.observers import inotify_move_event_grouper as grouper

        grouper.InotifyMoveEventGrouper.delay = 0.0
    except (ImportError, AttributeError) as exc:  # another watchdog: say so, never silently
        if not _said_pairing:
            _said_pairing.append(True)
            stderr_line(
                f"logwatch: this watchdog has no move-event pairing delay to switch off ({exc}); "
                "fast log rotation may be seen up to 0.5 s late (pin watchdog 7.x to avoid it)"
            )


_said_pairing: list[bool] = []  # said once per process


def fs_type(path: str, mounts_file: str = "/proc/self/mounts") -> str | None:
    """The file-system type of the mount holding `path` (Linux), or None if unknown."""
    try:
        with open(mounts_file, encoding="utf-8", errors="replace") as mounts:
            entries = [line.split() for line in mounts]
    except OSError:
        return None
    real = os.path.realpath(path)
    best, kind = -1, None
    for entry in entries:
        if len(entry) < 3:
            continue
        mount = entry[1].replace("\\040", " ")
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > best:
            best, kind = len(mount), entry[2]
    return kind


_MAGIC = frozenset("*?[")


def is_glob(pattern: str) -> bool:
    """Whether a path argument is a glob pattern."""
    return any(ch in _MAGIC for ch in pattern)


def may_match(path: str, pattern: str) -> bool:
    """Whether `pattern` (a path, or a glob without `**`) expands to `path` when it exists."""
    got, want = Path(os.path.abspath(path)).parts, Path(os.path.abspath(pattern)).parts
    if "**" in want or len(got) != len(want):
        return False
    for name, part in zip(got, want, strict=True):
        if name.startswith(".") and not part.startswith("."):
            return False  # glob's `*` skips hidden names; fnmatch's would not
        if not fnmatch.fnmatchcase(name, part):
            return False
    return True


def watch_roots(patterns: Iterable[str]) -> list[tuple[str, bool]]:
    """The nearest existing directory above each pattern, and whether to watch it recursively."""
    roots = []
    for pattern in patterns:
        parts = Path(os.path.abspath(pattern)).parts
        fixed = next((i for i, part in enumerate(parts) if is_glob(part)), len(parts) - 1)
        recursive = fixed < len(parts) - 1
        base = Path(*parts[: max(fixed, 1)])
        while not base.is_dir() and base != base.parent:
            base, recursive = base.parent, False
        roots.append((str(base), recursive))
    return roots
