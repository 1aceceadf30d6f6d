"""The state directory of `logwatch tail`: a lock, the checkpoint, and the emitted-alert journal.

The checkpoint (files' identities and offsets plus the engine's per-source state) is replaced
atomically: written to a temporary file, fsynced, renamed over the old one, directory fsynced. It
only ever covers lines the engine finished. Alerts emitted after the last checkpoint are named in
an append-only journal, so that lines read again after a crash never emit an alert twice; the
journal is emptied once a checkpoint covers them.

A write that fails (full disk, read-only file system, no file descriptors left, the directory
removed) never stops tail: it is said once, the state stays in memory, and the next checkpoint
tries again (making the directory again). Only a directory that is unsafe to use is refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from logwatch.drivers.checkpoint_record import Checkpoint
from logwatch.drivers.delta import DeltaTracker, apply_deltas
from logwatch.drivers.statesafe import RealStateFS, StateFS, secure_state_dir, write_failure
from logwatch.errors import StateError
from logwatch.statekey import MARK

CHECKPOINT = "checkpoint.json"
JOURNAL = "emitted.log"
DELTA = "checkpoint.delta"
LOCK = "lock"


class StateDir:
    """Owns one state directory for the life of a tail driver (see the module docstring)."""

    def __init__(
        self,
        path: Path,
        status: Callable[[str], None],
        *,
        fs: StateFS | None = None,
        retry_s: float = 1.0,
    ) -> None:
        self.path, self.status, self.fs, self.retry_s = path, status, fs or RealStateFS(), retry_s
        self._lock_fd: int | None = None
        self._journal_fd: int | None = None
        self._delta_fd: int | None = None
        self._delta, self._seq = DeltaTracker(), 0
        self._last: Checkpoint | None = None  # the last one saved, for compaction at close
        self._failing: str | None = None  # why the last write failed, until one works

    def open(self) -> None:
        """Check the directory (StateError if unsafe), take its lock (StateError if another
        logwatch holds it); when it cannot be written, say so and run in memory."""
        secure_state_dir(self.path)
        try:
            self._take()
        except OSError as exc:
            self._failed(LOCK, exc)

    def _take(self) -> None:
        """Make the directory, take the lock, open the journal (whichever is not done yet)."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        private = os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        if self._lock_fd is None:
            fd = os.open(self.path / LOCK, os.O_RDWR | private, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                what = (
                    "already watches the same files (this state directory is theirs)"
                    if (self.path / MARK).is_file()
                    else "is using this state directory"
                )
                raise StateError(
                    f"{self.path}: another logwatch (pid {holder}) {what}; stop it, or give "
                    "this one its own --state-dir"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._lock_fd = fd
        for old in (self._journal_fd, self._delta_fd):
            if old is not None:
                os.close(old)  # reopened: the directory may have been made again
        self._journal_fd = self._delta_fd = None
        self._journal_fd = os.open(self.path / JOURNAL, os.O_WRONLY | os.O_APPEND | private, 0o600)
        self._delta_fd = os.open(self.path / DELTA, os.O_WRONLY | os.O_APPEND | private, 0o600)
        self._delta.invalidate()  # a new delta file: the next save is a full one

    def _failed(self, name: str, exc: OSError) -> None:
        cause = os.strerror(exc.errno) if exc.errno else str(exc)  # once per cause, not per file
        if cause != self._failing:
            self._failing = cause
            self.status(write_failure(self.path, name, exc, self.retry_s))

    def _worked(self) -> None:
        if self._failing is not None:
            self._failing = None
            self.status(f"state dir {self.path}: writes work again; checkpoint saved")

    def close(self) -> None:
        """Fold the delta into checkpoint.json (one file after a clean stop, and one a person
        can read or edit), then release the journal and the lock."""
        if self._last is not None and self._delta.delta_bytes and self._failing is None:
            with contextlib.suppress(OSError):
                self._save_full(self._last)
        for fd in (self._journal_fd, self._delta_fd, self._lock_fd):
            if fd is not None:
                os.close(fd)
        self._journal_fd = self._delta_fd = self._lock_fd = None

    def load(self) -> Checkpoint | None:
        """The saved checkpoint; a corrupt one is reported, set aside, and None returned."""
        file = self.path / CHECKPOINT
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"{file}: cannot read the checkpoint: {exc.strerror}") from None
        try:
            base = json.loads(raw.decode("utf-8"))
            with contextlib.suppress(FileNotFoundError):
                base = apply_deltas(base, (self.path / DELTA).read_bytes())
            checkpoint = Checkpoint.from_json(base)
            self._seq = base["seq"] if isinstance(base.get("seq"), int) else 0
            return checkpoint
        except (ValueError, UnicodeDecodeError) as exc:
            self.set_aside(file, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return None

    def set_aside(self, file: Path, why: str) -> None:
        """Rename a corrupt state file out of the way and say so on the status stream."""
        aside = file.with_name(f"{file.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
        try:
            os.replace(file, aside)
        except OSError as exc:
            self.status(
                f"{file}: corrupt checkpoint ({why}); cannot move it aside ({exc.strerror}), "
                "starting without it (the next checkpoint replaces it)"
            )
            return
        self.status(
            f"{file}: corrupt checkpoint ({why}); moved to {aside} (nothing to do unless you want "
            "to look at it), starting without it as on a first start"
        )

    def save(self, checkpoint: Checkpoint) -> bool:
        """Record the checkpoint durably (a delta line of what changed, or the whole of it
        replaced atomically), then empty the journal it covers; False (said once) when that
        failed: the caller keeps its state and tries again."""
        try:
            if self._failing is not None:
                self._take()
            record = self._delta.record(checkpoint, self._seq + 1)
            if record is None or self._delta_fd is None:
                self._save_full(checkpoint)
            else:
                line = f"{record}\n".encode()
                if os.fstat(self._delta_fd).st_nlink == 0:  # the directory was removed
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), DELTA)
                self._delta.invalidate()  # until the line is durable
                self.fs.append(self._delta_fd, line)
                os.fsync(self._delta_fd)
                self._seq += 1
                self._delta.saved(checkpoint, len(line), full=False)
            if self._journal_fd is not None:
                self.fs.truncate(self._journal_fd)
        except OSError as exc:
            self._failed(CHECKPOINT, exc)
            return False
        except StateError as exc:  # the lock went to another logwatch meanwhile
            if str(exc) != self._failing:
                self._failing = str(exc)
                self.status(str(exc))
            return False
        self._last = checkpoint
        self._worked()
        return True

    def _save_full(self, checkpoint: Checkpoint) -> None:
        raw = self._delta.full(checkpoint, self._seq + 1).encode()
        self.fs.replace(self.path / CHECKPOINT, raw)
        self._seq += 1
        if self._delta_fd is not None:
            self.fs.truncate(self._delta_fd)  # its lines are numbered below the new base
        self._delta.saved(checkpoint, len(raw), full=True)

    def emitted(self) -> set[str]:
        """Keys of alerts emitted after the last checkpoint (a crash left them)."""
        with contextlib.suppress(FileNotFoundError):
            raw = (self.path / JOURNAL).read_bytes()
            return {line for line in raw.decode("utf-8", "replace").splitlines() if line}
        return set()

    def record_emitted(self, key: str) -> None:
        """Append one alert key to the journal (one write: whole, even if killed)."""
        if self._journal_fd is None or self._failing is not None:
            return  # nowhere to write: the next checkpoint that works covers this alert
        try:
            self.fs.append(self._journal_fd, (key + "\n").encode())
        except OSError as exc:
            self._failed(JOURNAL, exc)
