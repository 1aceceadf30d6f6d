"""The name a rotated file goes by once a new file took its old path.

A follower's `source` is the path it was opened under; after `mv train.log train.log.old` and a
new `train.log`, the two files must be two sources. The old one is named after where it went:
its current path when the globs still match it, else the folder entry with its (device, inode),
else `<old path> (rotated)`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Container

from logwatch.sources.follow import Follower


def rotated_name(follower: Follower) -> str:
    """The source name for a follower whose path now names another file."""
    if follower.path != follower.source and names(follower.path, follower.key):
        return follower.path
    found = find_by_identity(os.path.dirname(follower.source) or ".", follower.key)
    if found is not None and found != follower.source:
        return found
    return f"{follower.source} (rotated)"


def names(path: str, key: tuple[int, int]) -> bool:
    """Whether `path` names the file with this (device, inode) now."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == key


def find_by_identity(folder: str, key: tuple[int, int]) -> str | None:
    """The path of a regular file in `folder` with this (device, inode), or None."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in sorted(entries, key=lambda e: e.name):
        try:
            if entry.inode() != key[1] or not entry.is_file(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_dev == key[0]:
                return os.path.join(folder, entry.name)
        except OSError:
            continue
    return None


def unseen_rotations(path: str, known: Container[tuple[int, int]], since_s: float) -> list[str]:
    """Files rotated from `path` (`train.log.1`, `train.log.2`, ...: a RotatingFileHandler's
    or logrotate's names) that are not `known` and were written since `since_s` (wall time),
    oldest first: a file created and renamed on before tail could open it (fast rotation)."""
    folder, base = os.path.split(path)
    numbered = re.compile(re.escape(base) + r"\.\d+")
    try:
        entries = [e for e in os.scandir(folder or ".") if numbered.fullmatch(e.name)]
    except OSError:
        return []
    found: list[tuple[int, str]] = []
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        fresh = st.st_mtime >= since_s and (st.st_dev, st.st_ino) not in known
        if fresh and entry.is_file(follow_symlinks=False):
            found.append((st.st_mtime_ns, os.path.join(folder, entry.name)))
    return [name for _, name in sorted(found)]
