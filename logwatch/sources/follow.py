"""One followed file: its open handle, identity, offset, line number and unfinished last line.

A follower never trusts events: each poll compares the open handle with what it read before
(size below the offset, or first bytes changed: the file was truncated, read again from 0) and
reads to the end. Whole lines go out in batches numbered like `wc -l`; an unfinished last line is
held until its newline comes, or until the file stops growing for `partial_flush_s` (a `\\r`
progress bar: every `progress_interval_s`), then evaluated as it stands. When its newline comes
later, the line is evaluated again only if it changed, under the same line number.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from logwatch.sources.framing import (
    DEFAULT_MAX_LINE_BYTES,
    TRUNCATION_MARKER,
    LineFramer,
    count_newlines,
    lines_to_series,
)

PREFIX_BYTES = 1024
"""Identity = (device, inode) + a hash of up to this many first bytes, growing with the file."""


@dataclass(frozen=True, slots=True)
class FollowOptions:
    """How followers read and frame."""

    partial_flush_s: float = 5.0
    progress_interval_s: float = 1.0
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    read_bytes: int = 1 << 20
    poll_budget_bytes: int = 32 << 20


@dataclass(frozen=True, slots=True)
class Position:
    """Where a file was left: what a checkpoint stores for it.

    `offset` is the start of line `line`; `evaluated_end`, when set, is how far that unfinished
    line was already evaluated (a partial flush); `year`, the year yearless lines take (that of
    the last dated line before, else the file's modification year when it was opened). Entries
    of older checkpoints lack the fields that have defaults here."""

    source: str
    path: str
    dev: int
    ino: int
    prefix_len: int
    prefix_sha: str
    offset: int
    line: int
    evaluated_end: int | None = None
    generation: int = 0
    year: int | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON object for the checkpoint."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: Any) -> Position:
        """Parse a checkpoint entry; ValueError if it is malformed."""
        try:
            optional = {name: data[name] for name in _OPTIONAL if name in data}
            pos = cls(**{name: data[name] for name in _REQUIRED}, **optional)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed file entry: {exc!r}") from None
        ints = (pos.dev, pos.ino, pos.prefix_len, pos.offset, pos.line, pos.generation)
        counts = all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 62 for v in ints
        )
        counts = counts and pos.prefix_len <= PREFIX_BYTES  # else a read of exabytes at resume
        texts = all(isinstance(v, str) for v in (pos.source, pos.path, pos.prefix_sha))
        end = pos.evaluated_end
        end_ok = end is None or (isinstance(end, int) and not isinstance(end, bool) and end >= 0)
        year_ok = pos.year is None or (
            isinstance(pos.year, int) and not isinstance(pos.year, bool) and 1 <= pos.year <= 9999
        )
        if not (counts and texts and end_ok and year_ok) or pos.line < 1:
            raise ValueError(f"malformed file entry for {pos.path!r}")
        return pos


_OPTIONAL = ("evaluated_end", "generation", "year")
_REQUIRED = tuple(name for name in Position.__slots__ if name not in _OPTIONAL)


@dataclass(frozen=True, slots=True)
class Batch:
    """Lines to evaluate: their text and the number of the first one."""

    text: pl.Series
    first_line: int


@dataclass(slots=True)
class PollResult:
    """What one poll found."""

    batches: list[Batch] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    grew: bool = False
    more: bool = False  # the budget ran out before the end of the file
    lines: int = 0
    truncated_at: int | None = None  # batches from this index on are the file's new content


def sha(data: bytes) -> str:
    """Short content hash for identities."""
    return hashlib.sha256(data).hexdigest()[:32]


def collapse_redraws(line: bytes) -> bytes:
    """The part of a `\\r`-redrawn line that can still matter: its last visible segment and any
    blank tail (so that later bytes append to it as they would to the whole)."""
    cut = line.rfind(b"\r")
    if cut < 0:
        return line
    tail = line[cut + 1 :]
    if tail.strip():
        return b"\r" + tail
    visible = [seg for seg in line[:cut].split(b"\r") if seg.strip()]
    return b"\r" + (visible[-1] if visible else b"") + b"\r" + tail


class Follower:
    """Reads one file from an open handle; see the module docstring."""

    checkpointed = True  # False for a pipe: nothing to resume it by

    def __init__(self, path: str, source: str, fd: int, options: FollowOptions, now: float) -> None:
        st = os.fstat(fd)
        self.path, self.source, self.fd, self.options = path, source, fd, options
        self.dev, self.ino = st.st_dev, st.st_ino
        # Lines without a year take this: the mtime's year until a dated line is read (tail).
        self.year = datetime.fromtimestamp(st.st_mtime).year
        self.generation = 0
        self.detached_at: float | None = None  # the path stopped naming this file
        self._reset(now)

    @classmethod
    def open(cls, path: str, source: str, options: FollowOptions, now: float) -> Follower:
        """Open `path` for reading; OSError if it cannot be opened."""
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(f"{path}: not a regular file")
            return cls(path, source, fd, options, now)
        except BaseException:
            os.close(fd)
            raise

    def _reset(self, now: float) -> None:
        self.prefix = b""
        self.read_offset = 0
        self.line = 1
        self.line_start = 0
        self.framer = LineFramer(self.options.max_line_bytes)
        self.flushed: bytes | None = None  # the unfinished line as evaluated so far
        self.has_cr = False
        self.last_growth = now
        self.last_flush = now

    @property
    def key(self) -> tuple[int, int]:
        """(device, inode) of the open file."""
        return (self.dev, self.ino)

    @property
    def gen_id(self) -> str:
        """Names this file's current content generation (bumped by each truncation)."""
        return f"{self.dev}:{self.ino}:{self.generation}"

    def position(self) -> Position:
        """Where this file stands, counting only lines already handed out."""
        pending_start = self.read_offset - self.framer.pending_bytes
        continuing = self.flushed is not None
        return Position(
            source=self.source,
            path=self.path,
            dev=self.dev,
            ino=self.ino,
            prefix_len=len(self.prefix),
            prefix_sha=sha(self.prefix),
            offset=self.line_start if continuing else pending_start,
            line=self.line - 1 if continuing else self.line,
            evaluated_end=pending_start if continuing else None,
            generation=self.generation,
            year=self.year,
        )

    def matches(self, pos: Position) -> bool:
        """Whether `pos` describes this very file: same inode and same first bytes."""
        if (pos.dev, pos.ino) != self.key:
            return False
        head = os.pread(self.fd, pos.prefix_len, 0)
        return len(head) == pos.prefix_len and sha(head) == pos.prefix_sha

    def resume(self, pos: Position) -> None:
        """Continue from a checkpointed position (the caller checked `matches`)."""
        self.generation = pos.generation
        if pos.year is not None:  # else an older checkpoint's: the modification year stays
            self.year = pos.year
        self.prefix = os.pread(self.fd, PREFIX_BYTES, 0)
        self.read_offset = self.line_start = pos.offset
        self.line = pos.line
        if pos.evaluated_end is not None and pos.evaluated_end >= pos.offset:
            size = min(pos.evaluated_end - pos.offset, self.options.max_line_bytes)
            done = os.pread(self.fd, size, pos.evaluated_end - size)
            self.flushed = collapse_redraws(done)
            dropped = pos.evaluated_end - pos.offset - size
            self.framer.continue_line(len(self.flushed), dropped)
            self.read_offset = pos.evaluated_end
            self.line += 1

    def skip_to_end(self) -> None:
        """Start after the last whole line (history skipped), numbering lines as they are."""
        size = os.fstat(self.fd).st_size
        newlines, last_nl, offset = 0, -1, 0
        while offset < size:
            chunk = os.pread(self.fd, 8 << 20, offset)
            if not chunk:
                break
            newlines += count_newlines(chunk)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                last_nl = offset + cut
            offset += len(chunk)
        self.prefix = os.pread(self.fd, PREFIX_BYTES, 0)
        self.read_offset = self.line_start = last_nl + 1
        self.line = newlines + 1

    def close(self) -> None:
        """Release the handle."""
        os.close(self.fd)

    def check_path(self, stat_path: Callable[[str], os.stat_result] = os.stat) -> str | None:
        """Why the path no longer names the open file ('deleted' / 'replaced'), or None;
        OSError when it cannot be stat()ed for another reason (EACCES: it may come back)."""
        try:
            st = stat_path(self.path)
        except FileNotFoundError:
            return "deleted"
        if (st.st_dev, st.st_ino) != self.key:
            return "replaced by a new file"
        if os.fstat(self.fd).st_nlink == 0:
            return "deleted"
        return None

    def poll(self, now: float, *, flush_partial: bool = True) -> PollResult:
        """Check for truncation, read what is new (up to the budget), frame it into batches."""
        result = PollResult()
        self._check_truncation(now, result)
        complete = self._read(now, result)
        if complete:
            self._emit_complete(complete, result)
        if flush_partial and self._partial_due(now):
            self._flush_partial(now, result)
        return result

    def finish(self, result: PollResult) -> None:
        """The file is done (closed after rotation or deletion): hand out its unfinished line."""
        start = self.read_offset - self.framer.pending_bytes
        if self.framer.pending_bytes:
            self._emit_partial(*self.framer.take(), start, result)

    def _check_truncation(self, now: float, result: PollResult) -> None:
        size = os.fstat(self.fd).st_size
        if size >= self.read_offset and os.pread(self.fd, len(self.prefix), 0) == self.prefix:
            return
        why = "shrank below the read offset" if size < self.read_offset else "first bytes changed"
        self.finish(result)
        result.truncated_at = len(result.batches)
        generation = self.generation + 1
        self._reset(now)
        self.generation = generation
        result.notes.append(f"{self.path}: truncated ({why}); reading it again from the start")

    def _read(self, now: float, result: PollResult) -> bytes:
        parts: list[bytes] = []
        budget = self.options.poll_budget_bytes
        while budget > 0:
            data = os.pread(self.fd, min(self.options.read_bytes, budget), self.read_offset)
            if not data:
                return b"".join(parts)
            self._grow_prefix(data, self.read_offset)
            self.read_offset += len(data)
            budget -= len(data)
            result.grew = True
            self.last_growth = now
            done = self.framer.feed(data)
            tail = data[data.rfind(b"\n") + 1 :]
            self.has_cr = (b"\r" in tail) or (self.has_cr and not done)
            if done:
                parts.append(done)
        result.more = True
        return b"".join(parts)

    def _grow_prefix(self, data: bytes, at: int) -> None:
        if len(self.prefix) < PREFIX_BYTES and at <= len(self.prefix) < at + len(data):
            self.prefix += data[len(self.prefix) - at : PREFIX_BYTES - at]

    def _emit_complete(self, complete: bytes, result: PollResult) -> None:
        if self.flushed is not None:
            cut = complete.find(b"\n") + 1
            first, complete = complete[:cut], complete[cut:]
            if first.strip(b"\r\n"):
                self._batch(self.flushed + first, self.line - 1, result)
            self.flushed = None
        if complete:
            self._batch(complete, self.line, result)
            count = complete.count(b"\n")
            self.line += count
            result.lines += count
        self.line_start = self.read_offset - self.framer.pending_bytes
        self.last_flush = self.last_growth

    def _partial_due(self, now: float) -> bool:
        if not self.framer.pending_bytes:
            return False
        if now - self.last_growth >= self.options.partial_flush_s:
            return True
        return self.has_cr and now - self.last_flush >= self.options.progress_interval_s

    def _flush_partial(self, now: float, result: PollResult) -> None:
        self.finish(result)
        self.last_flush = now

    def _emit_partial(self, content: bytes, dropped: int, start: int, result: PollResult) -> None:
        # The framer kept at most what the line has room for, so `whole` stays within the bound.
        if self.flushed is None:
            self.line_start = start
            number, whole = self.line, content
            self.line += 1
            result.lines += 1
        else:
            number, whole = self.line - 1, self.flushed + content
        marker = TRUNCATION_MARKER.format(dropped=dropped).encode() if dropped else b""
        self._batch(whole + marker + b"\n", number, result)
        self.flushed = collapse_redraws(whole)
        self.framer.continue_line(len(self.flushed), dropped)

    def _batch(self, data: bytes, first_line: int, result: PollResult) -> None:
        text = lines_to_series(data, self.options.max_line_bytes)
        result.batches.append(Batch(text, first_line))
