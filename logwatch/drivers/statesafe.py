"""Checks on a state directory before anything in it is read or written, and the file-system seam
its writes go through.

The state holds alert text, so the directory is private (0700, files 0600). A root-run tail that
follows a symlink planted in it would overwrite another user's file (`lock`, `*.tmp`) or read
silences from anywhere (`silences.json` muting every alert), so a directory holding a symlink, or
owned by another user, is refused rather than repaired.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Protocol

from logwatch.atomic import write_atomic
from logwatch.errors import StateError

_OWN = "give --state-dir a directory of your own"


def secure_state_dir(path: Path) -> None:
    """Create `path` 0700, or check it: StateError when it, or anything in it, is a symlink or
    belongs to another user; modes of what is ours are tightened to 0700 / 0600."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return  # cannot even create it: the writes report that, and tail runs in memory
    _check(path, path, st)
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(root, name)
            try:
                _check(path, entry, os.lstat(entry))
            except FileNotFoundError:
                continue  # gone meanwhile: nothing to guard


def _check(top: Path, entry: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise StateError(
            f"{entry}: is a symlink in the state directory {top}; refusing it (a planted link "
            f"redirects writes and silences); remove it, or {_OWN}"
        )
    uid = os.geteuid()
    if st.st_uid != uid:
        raise StateError(
            f"{entry}: owned by uid {st.st_uid}, not by this user (uid {uid}); refusing the "
            f"state directory {top}; {_OWN}"
        )
    want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
    if stat.S_IMODE(st.st_mode) & ~want:
        os.chmod(entry, stat.S_IMODE(st.st_mode) & want, follow_symlinks=False)


class StateFS(Protocol):
    """The writes a state directory makes (a seam: tests inject failing ones)."""

    def replace(self, path: Path, data: bytes) -> None:
        """Replace `path` atomically, durably, privately."""

    def append(self, fd: int, data: bytes) -> None:
        """Append `data` to an open journal in one write."""

    def truncate(self, fd: int) -> None:
        """Empty an open journal."""


class RealStateFS:
    """The real file system."""

    def replace(self, path: Path, data: bytes) -> None:
        """Replace `path` atomically, durably, privately."""
        write_atomic(path, data)

    def append(self, fd: int, data: bytes) -> None:
        """Append `data` to an open journal in one write."""
        os.write(fd, data)

    def truncate(self, fd: int) -> None:
        """Empty an open journal."""
        os.ftruncate(fd, 0)


_FIXES = {
    errno.ENOSPC: "free space or give --state-dir",
    errno.EDQUOT: "free space (quota) or give --state-dir",
    errno.EROFS: "make the file system writable or give --state-dir",
    errno.EMFILE: "raise the open-file limit (ulimit -n) or follow fewer files",
    errno.ENFILE: "raise the system's open-file limit or follow fewer files",
    errno.ENOENT: "it was removed: it is made again on retry, or give --state-dir",
    errno.EACCES: "make it writable or give --state-dir",
}


def write_failure(path: Path, name: str, exc: OSError, retry_s: float) -> str:
    """The one line that says a state write failed, what still works, and the fix."""
    fix = _FIXES.get(exc.errno or 0, "fix it or give --state-dir")
    return (
        f"state dir {path}: cannot write {name} ({exc.strerror or exc}); alerts still print, "
        f"state kept in memory and retried every {retry_s:g}s; {fix}"
    )
