"""The replay driver: whole files through the engine in large blocks, for post-mortems."""

from __future__ import annotations

import bz2
import io
import lzma
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.engine import Engine, ErrorHandler, SourceStats
from logwatch.errors import InputError
from logwatch.parse import parse_lines
from logwatch.rules.loader import RuleSpec
from logwatch.sources.reader import (
    DEFAULT_BLOCK_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    ByteStream,
    DecompressStream,
    GzipStream,
    LineBlock,
    Utf16Stream,
    read_blocks,
)
from logwatch.sources.sniff import HEAD_BYTES, sniff

T = TypeVar("T")
U = TypeVar("U")

Progress = Callable[[str, int, int], None]
"""Called as (source, bytes done, bytes total) after each block."""


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How replay reads files."""

    block_bytes: int = DEFAULT_BLOCK_BYTES
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    workers: int = min(2, os.cpu_count() or 1)  # threads parsing blocks in parallel


STDIN = "-"


def check_readable(paths: Sequence[str]) -> None:
    """Fail early, with the fix, on a path that is missing, a folder or unreadable."""
    if list(paths).count(STDIN) > 1:
        raise InputError("-: standard input can be read only once (give '-' one time)")
    for path in paths:
        if path == STDIN:
            continue
        p = Path(path)
        if not p.exists():
            raise InputError(f"{path}: no such file (check the path, or quote a glob)")
        if p.is_dir():
            raise InputError(
                f"{path}: is a directory (give the log files in it, e.g. '{path}/*.log')"
            )
        if not os.access(p, os.R_OK):
            raise InputError(f"{path}: permission denied (run as a user who can read it)")


def open_log(path: str) -> tuple[ByteStream, int, int]:
    """The log as a byte stream (standard input for '-'; gzip, bzip2 and xz decompressed and
    UTF-16 transcoded to UTF-8 on the fly), its size on disk (0 when unknown or not the size of
    the text) and the year its timestamps without one belong to (from its mtime)."""
    if path == STDIN:
        stdin = _Prefixed(sys.stdin.buffer, HEAD_BYTES)
        return _decoded(path, stdin, stdin.head), 0, datetime.now().year
    try:
        raw = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except OSError as exc:
        raise InputError(f"{path}: cannot open: {exc.strerror}") from None
    info = os.fstat(raw.fileno())
    year = datetime.fromtimestamp(info.st_mtime).year
    try:
        stream = _decoded(path, raw, raw.peek(HEAD_BYTES))
    except BaseException:
        raw.close()
        raise
    return stream, info.st_size if stream is raw else 0, year


def _decoded(path: str, raw: ByteStream, head: bytes) -> ByteStream:
    """`raw` read through whatever its first bytes call for."""
    kind = sniff(head)
    if kind == "zstd":
        source = "FILE" if path == STDIN else path
        raise InputError(
            f"{path}: zstd-compressed; decompress it: `zstd -dc {source} | logwatch replay -`"
        )
    if kind is None:
        return raw
    decoders: dict[str, Callable[[ByteStream], ByteStream]] = {
        "gzip": GzipStream,
        "bzip2": lambda r: DecompressStream(r, bz2.BZ2Decompressor),
        "xz": lambda r: DecompressStream(r, lzma.LZMADecompressor),
        "utf-16": Utf16Stream,
    }
    return decoders[kind](raw)


class _Prefixed:
    """A stream whose first `size` bytes were read ahead (`head`) to see what it holds; pipes
    cannot seek back, and a pipe's first read may hold fewer bytes than asked."""

    def __init__(self, raw: ByteStream, size: int) -> None:
        self.raw = raw
        head = b""
        while len(head) < size and (more := raw.read(size - len(head))):
            head += more
        self.head, self._unread = head, head

    def read(self, size: int = -1, /) -> bytes:
        """The read-ahead bytes first, then the rest of the stream."""
        if not self._unread:
            return self.raw.read(size)
        out = self._unread if size < 0 else self._unread[:size]
        self._unread = self._unread[len(out) :]
        return out


def replay_file(
    path: str,
    engine: Engine,
    *,
    options: ReplayOptions = ReplayOptions(),
    progress: Progress | None = None,
) -> Iterator[AlertEvent]:
    """Yield the alert events of one file, in file order."""
    stream, total, year = open_log(path)
    try:
        engine.state_of(path)
        blocks = read_blocks(
            stream, block_bytes=options.block_bytes, max_line_bytes=options.max_line_bytes
        )

        def parse(block: LineBlock) -> tuple[pl.DataFrame, int]:
            frame = parse_lines(
                block.text, source=path, first_line=block.first_line, default_year=year
            )
            return frame, block.end_offset

        for frame, end_offset in _ordered_map(parse, _prefetch(blocks), workers=options.workers):
            yield from engine.process(frame)
            if progress is not None:
                progress(path, end_offset, total)
    except EOFError as exc:
        raise InputError(
            f"{path}: damaged compressed data ({exc}); the lines before the damage were checked, "
            "the rest cannot be read"
        ) from None
    except OSError as exc:
        raise InputError(f"{path}: read failed: {exc.strerror or exc}") from None
    finally:
        raw: object = stream
        while isinstance(raw, GzipStream | DecompressStream | Utf16Stream | _Prefixed):
            raw = raw.raw
        if raw is not sys.stdin.buffer and isinstance(raw, io.IOBase):
            raw.close()


def _ordered_map(
    fn: Callable[[T], U], items: Iterator[T], *, workers: int, depth: int = 3
) -> Iterator[U]:
    """`map(fn, items)` on `workers` threads, results in input order, `depth` items ahead.

    Parsing is polars work that releases the GIL: blocks parse in parallel on the machine's
    cores while the engine, which must see blocks in order, works on the current one.
    """
    if workers <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="logwatch-parse") as pool:
        pending: deque[Future[U]] = deque()
        try:
            try:
                for item in items:
                    pending.append(pool.submit(fn, item))
                    if len(pending) > depth:
                        yield pending.popleft().result()
            except Exception:
                # What was read before a read error still goes through, in order, first.
                while pending:
                    yield pending.popleft().result()
                raise
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _prefetch(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Run a producer on a worker thread, `depth` items ahead of the consumer.

    Reading and parsing the next block overlaps with the engine's work on this one (polars
    releases the GIL), which keeps both cores of a small machine busy.
    """
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="logwatch-read") as pool:
        pending: deque[Future[T | None]] = deque()
        sentinel = None

        def step() -> T | None:
            return next(items, sentinel)

        for _ in range(depth):
            pending.append(pool.submit(step))
        while pending:
            item = pending.popleft().result()
            if item is None:
                break
            pending.append(pool.submit(step))
            yield item
        for future in pending:
            future.cancel()


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Everything replay found: the events in order, and per-source stats."""

    events: list[AlertEvent]
    stats: dict[str, SourceStats]


def replay(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    *,
    options: ReplayOptions = ReplayOptions(),
    progress: Progress | None = None,
    on_event: Callable[[AlertEvent], None] | None = None,
    on_error: ErrorHandler | None = None,
) -> ReplayResult:
    """Replay files one after another through one engine; each file is its own source."""
    check_readable(paths)
    engine = Engine(rules, on_error=on_error)
    events: list[AlertEvent] = []
    for path in paths:
        for event in replay_file(path, engine, options=options, progress=progress):
            events.append(event)
            if on_event is not None:
                on_event(event)
    return ReplayResult(events, {source: state.stats for source, state in engine.sources.items()})
