"""File events straight from Linux inotify: one thread reads them, many at a time.

The same wake-up hints as `watch.WatchdogWatcher`, at a fraction of its cost per event. A
followed log raises one IN_MODIFY per write, so a node whose ranks write 80 lines a second
raises 80 events a second. watchdog hands each one through three threads (its reader, its
emitter, its dispatcher) as Python objects: 2.7 % of a core at 8 files x 10 lines/s, 4.5 % at
200 files x 1 line/s (BENCHMARKS.md, branch `tailcpu3`). Here one thread reads the descriptor,
parses every event a read returned, and calls `on_event` once per file and read.

While events keep coming, reads are spaced `SPACING_S` apart, so that one read takes many
(the kernel also merges a file's repeated IN_MODIFY while it is unread). The first event after
a quiet spell, and the one right after it (the NaN line a trainer writes just after its step
line), are read at once: only the third read within `STREAM_S` waits, and under a stream
the driver holds its rounds far longer than the spacing anyway (`drivers.tail_pace`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import struct
import sys
import threading
import time
from collections.abc import Mapping

from logwatch.sources.watch import OnEvent, WatchdogWatcher, Watcher, WatcherFactory

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
IN_CLOEXEC = os.O_CLOEXEC
IN_NONBLOCK = os.O_NONBLOCK

MASK = (
    (IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE)
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_NAMING = IN_CREATE | IN_MOVED_TO
_CHANGING = IN_MODIFY | IN_ATTRIB  # attrib: a chmod may make a file readable
_STRUCTURAL = _NAMING | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_Q_OVERFLOW

SPACING_S = 0.05
"""While events keep coming, the next read waits this long: one read takes every event of it."""

STREAM_S = 0.1
"""Events keep coming: the last two reads came within this long of each other, and of now."""

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
_BUFFER = 1 << 16


class InotifyWatcher:
    """The watcher on Linux: inotify read by one thread (see the module docstring)."""

    def __init__(self, on_event: OnEvent) -> None:
        self._libc = _libc()
        fd = self._libc.inotify_init1(IN_CLOEXEC | IN_NONBLOCK)
        if fd < 0:
            raise _os_error()
        self._fd = fd
        self._on_event = on_event
        self._lock = threading.Lock()
        self._dirs: dict[str, bool] = {}
        self._paths: dict[int, str] = {}  # watch descriptor -> its directory
        self._recursive: dict[int, bool] = {}
        self._roots: dict[str, int | None] = {}  # each watched directory's descriptor
        try:
            self._stop_r, self._stop_w = os.pipe2(os.O_CLOEXEC)
        except OSError:
            os.close(fd)  # out of descriptors: said by the caller, nothing left open
            raise
        self._stopping = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="logwatch-inotify", daemon=True)
        self._thread.start()

    def watch(self, dirs: Mapping[str, bool]) -> None:
        """Watch exactly these directories (path -> recursive); OSError if inotify cannot."""
        with self._lock:
            roots = [self._roots.get(path) for path in dirs]
            if dict(dirs) == self._dirs and all(wd in self._paths for wd in roots):
                return  # (a root removed and made again is watched again)
            for wd in list(self._paths):
                self._libc.inotify_rm_watch(self._fd, wd)
            self._paths.clear()
            self._recursive.clear()
            self._dirs = {}
            self._roots.clear()
            for path, recursive in sorted(dirs.items()):
                self._roots[path] = self._add(path, recursive)
            self._dirs = dict(dirs)

    def _add(self, path: str, recursive: bool) -> int | None:
        """Watch `path` (and, when recursive, every folder under it): its watch descriptor;
        OSError if inotify refuses (its limits). A folder gone or unreadable is skipped (None):
        the rescan finds what it needs, the driver polls what events do not cover."""
        wd: int = self._libc.inotify_add_watch(self._fd, os.fsencode(path), MASK | IN_ONLYDIR)
        if wd < 0:
            exc = _os_error()
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                return None
            raise exc
        self._paths[wd], self._recursive[wd] = path, recursive
        if recursive:
            with contextlib.suppress(OSError):
                for entry in os.scandir(path):
                    if entry.is_dir(follow_symlinks=False):
                        self._add(entry.path, True)
        return wd

    def is_alive(self) -> bool:
        """Whether events still flow (the reading thread runs)."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop the thread and close the descriptors; idempotent. The descriptors are taken
        out under a lock before they are closed, so two stops (the driver's, after the thread
        died, and another) never close a number a new watcher has been given meanwhile."""
        with self._stopping:
            fds, self._fd, self._stop_r, self._stop_w = (
                (self._fd, self._stop_r, self._stop_w),
                -1,
                -1,
                -1,
            )
        if fds[2] >= 0:
            with contextlib.suppress(OSError):
                os.write(fds[2], b"x")
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _run(self) -> None:
        fd, stop_r = self._fd, self._stop_r
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(stop_r, select.POLLIN)
        last_read = previous_read = float("-inf")
        while True:
            if last_read - previous_read < STREAM_S and time.monotonic() - last_read < STREAM_S:
                time.sleep(SPACING_S)  # a stream: let its events gather
            ready = {fd for fd, _ in poller.poll()}
            if stop_r in ready:
                return
            try:
                raw = os.read(fd, _BUFFER)
            except BlockingIOError:
                continue
            except OSError:
                return  # the descriptor is gone: is_alive() says so, the driver restarts us
            previous_read, last_read = last_read, time.monotonic()
            # A raising callback must not end the thread without a word: is_alive() would
            # hide it; the events are hints, so one that fails to deliver costs a poll.
            with contextlib.suppress(Exception):
                self._deliver(raw)

    def _deliver(self, raw: bytes) -> None:
        """Parse one read's events and call `on_event` once per file (structural first)."""
        structural = False
        created: dict[str, None] = {}
        changed: dict[str, None] = {}
        offset = 0
        with self._lock:
            while offset + _HEADER.size <= len(raw):
                wd, mask, _, size = _HEADER.unpack_from(raw, offset)
                name = raw[offset + _HEADER.size : offset + _HEADER.size + size].rstrip(b"\0")
                offset += _HEADER.size + size
                folder = self._paths.get(wd)
                if mask & IN_IGNORED:
                    self._paths.pop(wd, None)
                    self._recursive.pop(wd, None)
                    structural = True
                    continue
                if mask & _STRUCTURAL or mask & IN_ISDIR:
                    structural = True
                if folder is None or not name:
                    continue
                path = os.path.join(folder, os.fsdecode(name))
                if mask & IN_ISDIR:
                    if mask & _NAMING and self._recursive.get(wd):
                        with contextlib.suppress(OSError):
                            self._add(path, True)  # a new folder under a recursive watch
                    continue
                if mask & _NAMING:
                    created[path] = None
                elif mask & _CHANGING:
                    changed[path] = None
        for path in created:
            self._on_event(True, path, None)
        for path in changed:
            self._on_event(False, None, path)
        if structural and not created:
            self._on_event(True)


WATCHERS = ("auto", "inotify", "watchdog")
"""`tail --watcher`: auto is inotify read here on Linux and watchdog's observer elsewhere."""


def default_watcher(on_event: OnEvent) -> Watcher:
    """The file-event watcher `tail` uses: inotify read here on Linux, watchdog's elsewhere."""
    if sys.platform.startswith("linux"):
        return InotifyWatcher(on_event)
    return WatchdogWatcher(on_event)


def watcher_named(name: str) -> WatcherFactory:
    """The watcher `tail --watcher NAME` asks for; ValueError (one line, the fix in it) for a
    name not in `WATCHERS`, or inotify off Linux."""
    if name == "auto":
        return default_watcher
    if name == "watchdog":
        return WatchdogWatcher
    if name == "inotify":
        if not sys.platform.startswith("linux"):
            raise ValueError(
                f"--watcher inotify needs Linux, not {sys.platform}; use --watcher watchdog or auto"
            )
        return InotifyWatcher
    raise ValueError(
        f"unknown file-event watcher {name!r} (expected one of: {', '.join(WATCHERS)})"
    )


def _libc() -> ctypes.CDLL:
    """The C library's inotify calls; OSError (said once, then polling) where it has none."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        raise OSError(errno.ENOSYS, "this C library has no inotify_init1")
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    return libc


def _os_error() -> OSError:
    code = ctypes.get_errno()
    return OSError(code, os.strerror(code))
