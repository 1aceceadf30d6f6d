"""Which files a tail's patterns match: the regular files there now, each once whatever its
names, compressed ones left out (said once), and what is said about a path or folder that is
there but cannot be opened, listed or searched: once per change, not per retry, with how to fix
it; rescans try it again every poll interval meanwhile (`sources.fileset`)."""

from __future__ import annotations

import glob
import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from logwatch.faults import RepeatedFaults
from logwatch.sources.access import ABSENT, access_fix, list_error
from logwatch.sources.pipe import PIPE
from logwatch.sources.schedule import FileKey
from logwatch.sources.sniff import HEAD_BYTES, MAGIC, file_kind, sniff
from logwatch.sources.watch import is_glob


class Matcher:
    """The files `patterns` match, and the paths among them that cannot be reached."""

    def __init__(
        self,
        patterns: Sequence[str],
        *,
        poll_interval_s: float,
        status: Callable[[str], None],
        first: Callable[[str, object], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.patterns = patterns
        # A path that stays blocked is summarised once a minute (`still failing, 60 times`).
        self.faults = RepeatedFaults(status, clock=clock)
        self.poll_interval_s = poll_interval_s
        self.status = status
        self._first = first  # the file set's notes said once per file
        # Paths that could not be opened (folders: listed) -> what their failure was: said once
        # per change, retried by a rescan every poll interval until they can.
        self.blocked: dict[str, tuple[object, ...]] = {}
        self.failing: set[str] = set()  # blocked paths the last `expand` could not reach
        self._compressed: set[FileKey] = set()

    def expand(self) -> list[str]:
        """The regular files the patterns match now, each once, sorted; a path or folder that
        is there but may not be reached is said (`cannot`)."""
        paths: set[str] = set()
        self.failing = set()
        for pattern in self.patterns:
            if pattern == PIPE:
                continue
            self._check_directory(pattern)
            matches = glob.glob(pattern, recursive=True) if is_glob(pattern) else [pattern]
            for path in matches:
                try:
                    mode = os.stat(path).st_mode
                except OSError as exc:
                    if exc.errno not in ABSENT:  # e.g. a folder above it it may not search
                        self.cannot(path, exc)
                    continue
                if stat.S_ISREG(mode):
                    paths.add(path)
                elif self._first("skipped", path):
                    self.status(f"skipping {path}: not a regular file ({file_kind(mode)})")
        return sorted(paths)

    def by_file(self) -> dict[FileKey, list[str]]:
        """The matching paths grouped by the file they name (device, inode): a symlink such as
        `latest.log -> run5.log` is the same file, followed once, under its real name first."""
        by_file: dict[FileKey, list[str]] = {}
        for path in self.expand():
            try:
                st = os.stat(path)
            except OSError:
                continue
            by_file.setdefault((st.st_dev, st.st_ino), []).append(path)
        for key, paths in by_file.items():
            paths.sort(key=os.path.islink)  # real files before links, otherwise sorted
            if len(paths) > 1 and self._first("alias", key):
                self.status(
                    f"{', '.join(paths)}: one file under {len(paths)} names; following it once as {paths[0]}"
                )
        return by_file

    def _check_directory(self, pattern: str) -> None:
        """Say once when the fixed directory above a glob does not exist, once per change
        when it may not be listed."""
        if not is_glob(pattern):
            return
        parts = Path(pattern).parts
        fixed = next(i for i, part in enumerate(parts) if is_glob(part))
        directory = Path(*parts[:fixed]) if fixed else Path(".")
        error = list_error(directory)
        if error is None:
            self.can_again(str(directory))
        elif error.errno not in ABSENT:
            self.cannot(str(directory), error, listing=True)
        elif self._first("no-dir", pattern):
            self.status(f"{pattern}: directory {directory} does not exist (yet); waiting for it")

    def cannot(self, path: str, exc: OSError, *, listing: bool = False) -> None:
        """Say that `path` cannot be opened (a folder: listed), why and how to fix it: once per
        change, not per retry; rescans try it again every poll interval meanwhile."""
        self.failing.add(path)
        failure = (exc.errno, *_permissions(path))
        doing = "list" if listing else "open"
        if self.blocked.get(path) != failure:
            self.faults.forget(path)  # a new failure (or new modes): said in full again
        self.blocked[path] = failure
        self.faults.failed(
            path,
            f"{path}: cannot {doing} ({exc.strerror}){access_fix(path, exc, listing=listing)}; "
            f"retrying every {self.poll_interval_s:g}s",
            detail=f"cannot {doing} ({exc.strerror})",
        )

    def can_again(self, path: str) -> None:
        """Say that a path said to be blocked can be read now."""
        if self.blocked.pop(path, None) is not None:
            self.faults.forget(path)
            self.status(f"{path}: readable now")

    def compressed(self, key: FileKey, path: str) -> bool:
        """Whether a new match is compressed (said once, remembered by inode): not followed."""
        if key in self._compressed:
            return True
        try:
            with open(path, "rb") as file:
                kind = sniff(file.read(HEAD_BYTES))
        except OSError:
            return False  # opening it will say why
        if kind not in MAGIC:
            return False
        self._compressed.add(key)
        self.status(
            f"skipping {path}: {kind}-compressed; tail follows plain text "
            "(read it with `logwatch replay`)"
        )
        return True

    def forget_gone(self, matched: dict[FileKey, list[str]]) -> None:
        """Forget the blocked paths no longer matched: said again should they come back."""
        listed = {path for paths in matched.values() for path in paths} | self.failing
        for path in self.blocked.keys() - listed:
            del self.blocked[path]
            self.faults.forget(path)


def _permissions(path: str) -> tuple[int, ...]:
    """What decides whether `path` can be opened: its file, mode and owner (empty if gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return ()
    return (st.st_dev, st.st_ino, st.st_mode, st.st_uid, st.st_gid)
