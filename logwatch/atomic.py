"""Atomic, durable, private file writes: every state file logwatch replaces goes through here."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import BinaryIO, Literal, TextIO

from logwatch.errors import SpoolLockedError

PRIVATE = 0o600  # state files hold alert text, which can hold what a training script printed


def write_atomic(path: Path, data: bytes, *, mode: int = PRIVATE) -> None:
    """Replace `path` with `data` all at once: readers see the old file or the new one, never a
    mix, and after a crash the new one is there only if it was complete.

    The bytes go to `<name>.tmp` beside it (opened without following a symlink planted there),
    are fsynced, renamed over `path`, and the folder is fsynced so the rename survives a crash."""
    temp = path.with_name(path.name + ".tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(temp, flags, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def open_private(path: Path, mode: Literal["a", "a+"] = "a") -> TextIO:
    """Open a state file for appending ("a") or reading and appending ("a+"), created 0600 and
    never through a symlink planted in its place (a link would send alert text elsewhere)."""
    access = os.O_RDWR if mode == "a+" else os.O_WRONLY
    flags = access | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    fd = os.open(path, flags, PRIVATE)
    if mode == "a+":
        return open(fd, "a+", encoding="utf-8")
    return open(fd, "a", encoding="utf-8")


def open_private_bytes(path: Path) -> BinaryIO:
    """`open_private` for appending raw bytes (a copy of damaged records, kept as they were)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    return open(os.open(path, flags, PRIVATE), "ab")


def take_delivery_lock(path: Path, what: str) -> TextIO:
    """The lock file at `path`, held (flock) for the caller's lifetime with this pid in it, so
    that two processes never deliver `what` (Slack alerts, a webhook's alerts) from one state
    directory; SpoolLockedError naming the holder's pid when another process holds it."""
    stream = open_private(path, "a+")
    try:
        fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        stream.seek(0)
        holder = stream.read().strip() or "?"
        stream.close()
        raise SpoolLockedError(
            f"{path.parent}: another logwatch (pid {holder}) is delivering {what} from this "
            "state directory; stop it or give this one its own --state-dir"
        ) from None
    stream.truncate(0)
    stream.write(str(os.getpid()))
    stream.flush()
    return stream
