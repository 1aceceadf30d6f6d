"""Atomic, durable, private file writes: every state file logwatch replaces goes through here."""

from __future__ import annotations

import os
from pathlib import Path

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
