"""Replay of many small files: their lines parsed together, a group of files at a time, then
fed to the engine file by file in order, exactly as `replay_file` feeds them one by one.

A parse costs a few milliseconds whatever its size (tens of polars calls), and so does reading
the last lines of a file for the rules that decide at its end: with thousands of rank logs of a
few kB each (a fleet's post-mortem) those fixed costs were most of the time. Parsing is row by
row (no line's columns depend on another's but a yearless timestamp's year, which `parse_block`
keeps per file with its `segments`), so a group's block, cut back into its files, gives each file
the frame it would have had alone.
"""

from __future__ import annotations

import itertools
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol, cast

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.drivers.ahead import ordered_map
from logwatch.drivers.lineinfo import TAPPED_COLUMNS, Tapped, tapped
from logwatch.drivers.ranks import SourceTap
from logwatch.drivers.window import Window
from logwatch.engine import Engine, Prepared, kept_last
from logwatch.parse import SCHEMA, complete, parse_block
from logwatch.sources.framing import read_blocks
from logwatch.sources.streams import STDIN, close_stream, open_log

GROUP_BYTES = 12 << 20
GROUP_FILES = 512
"""A group holds at most this many bytes (on disk; and no more than a block,
`ReplayOptions.block_bytes`) and files: enough that a parse's and the engine's fixed costs are
shared by many files, as a large file's block shares them, few enough that the next group
parses while the engine reads this one. (2 048 rank logs of ~5 kB: 3.0 ms of CPU per file in
groups of 64, 1.7 ms in groups of 256 or 640; 50 DFlash files of 1 MB: 4.1 CPU s in groups of
2 MB, 3.3 s in groups of 12 MB. Once each file's own steps cost less, branch `fleet5`: the
2 048 ranks' tasks 4.3-4.6 CPU s in groups and tasks of 256, 3.7-3.9 s of 512.)"""

SMALL_FILE_BYTES = 1 << 20
"""Files up to this size on disk are parsed together with their neighbours in the list (the
default of `ReplayOptions.small_file_bytes`)."""


@dataclass(frozen=True, slots=True)
class ManyOptions:
    """What the grouped path needs of `ReplayOptions` (and of `replay_file`'s arguments)."""

    block_bytes: int
    max_line_bytes: int
    workers: int
    metrics: bool
    stats: bool
    shapes: bool
    small_file_bytes: int  # files up to this size are parsed with their neighbours (0: none)


@dataclass(frozen=True, slots=True)
class _File:
    """One file of a parsed group: its frame (None: not read here, `replay_file` reads it:
    a compressed file, or one whose reading failed and will fail there again, in order), its
    size on disk."""

    path: str
    frame: pl.DataFrame | None
    size: int
    prepared: Prepared | None = None  # `Engine.prepare` of `frame`, done on a parse thread
    last: pl.DataFrame | None = None  # its last lines for `Engine.finish` (`Ends`), if asked
    tapped: Tapped | None = None  # what its fleet tap takes of `frame` (`SourceTap.take`)


@dataclass(frozen=True, slots=True)
class Ends:
    """What `Engine.finish` reads of each file: its last `lines` non-blank lines (`kept_last`)
    with the columns `wanted` computed (those the parse did not)."""

    lines: int
    wanted: frozenset[str]


def small(path: str, limit: int) -> int | None:
    """The size of `path` when it is a regular file of at most `limit` bytes."""
    if path == STDIN:
        return None
    try:
        info = os.stat(path)
    except OSError:
        return None  # `replay_file` says what is wrong with it
    return info.st_size if stat.S_ISREG(info.st_mode) and info.st_size <= limit else None


def groups(
    paths: Sequence[str], small_bytes: int, group_bytes: int
) -> Iterator[tuple[list[str], bool]]:
    """`paths` in order as runs, each with whether it is parsed together: a small file (up to
    `small_bytes`) goes with the small files next to it (up to `group_bytes` on disk), any
    other alone."""
    group: list[str] = []
    size = 0
    for path in paths:
        bytes_on_disk = small(path, small_bytes) if small_bytes > 0 else None
        if bytes_on_disk is None:
            if group:
                yield group, True
                group, size = [], 0
            yield [path], False
            continue
        if group and (size + bytes_on_disk > group_bytes or len(group) >= GROUP_FILES):
            yield group, True
            group, size = [], 0
        group.append(path)
        size += bytes_on_disk
    if group:
        yield group, True


def parse_group(
    paths: Sequence[str],
    options: ManyOptions,
    columns: frozenset[str] | None,
    prepare: PrepareMany | None = None,
    ends: Ends | None = None,
    taps: bool = False,
) -> list[_File]:
    """Read and parse a group of small files as one block; each file's frame (and what
    `prepare` makes of it, its last lines as `ends` says, what its fleet tap takes when
    `taps`), in order."""
    read: list[tuple[str, list[pl.Series], int, int]] = []  # path, texts, year, size
    out: list[_File] = []
    placeholder = pl.DataFrame(schema=SCHEMA)  # read: its frame comes from the parse below
    for path in paths:
        try:
            stream, total, year = open_log(path)
        except Exception:
            out.append(_File(path, None, 0))
            continue
        try:
            if total == 0 and os.path.getsize(path) > 0:  # compressed: may be large once read
                out.append(_File(path, None, 0))
                continue
            blocks = read_blocks(
                stream, block_bytes=options.block_bytes, max_line_bytes=options.max_line_bytes
            )
            texts = [block.text for block in blocks]
        except (OSError, EOFError):
            out.append(_File(path, None, 0))
            continue
        finally:
            close_stream(stream)
        read.append((path, texts, year, total))
        out.append(_File(path, placeholder, total))
    parsed = iter(_parsed(read, options, columns, ends, taps, prepare))
    files = []
    for file in out:
        if file.frame is not None:
            frame, ready, last, found = next(parsed)
            file = _File(file.path, frame, file.size, ready, last, found)
        files.append(file)
    return files


def _parsed(
    read: list[tuple[str, list[pl.Series], int, int]],
    options: ManyOptions,
    columns: frozenset[str] | None,
    ends: Ends | None = None,
    taps: bool = False,
    prepare: PrepareMany | None = None,
) -> list[tuple[pl.DataFrame, Prepared | None, pl.DataFrame | None, Tapped | None]]:
    """Each read file's frame, what `prepare` makes of it (with its lines' shapes,
    `ParsedBlock.shapes`: for the whole group at once), its last lines (`ends`) and what its
    tap takes (`taps`), from one `parse_block` over all their lines."""
    counts = [sum(text.len() for text in texts) for _, texts, _, _ in read]
    if not any(counts):
        return [(pl.DataFrame(schema=SCHEMA), None, None, None) for _ in read]
    texts = [text for _, file_texts, _, _ in read for text in file_texts]
    # one chunk, as `catchup.parsed_together` makes it (a polars 2.1 panic on many chunks)
    text = pl.concat(texts, rechunk=True) if len(texts) > 1 else texts[0]
    block = parse_block(
        text,
        source="",
        first_line=1,
        default_year=read[0][2],
        metrics=options.metrics,
        columns=columns,
        shapes=options.shapes,
        segments=[(n, year) for (_, _, year, _), n in zip(read, counts, strict=True)],
    )
    # each row's file, its path and its line number: a few polars calls, whatever the files
    number = file_of_rows(counts)
    starts = pl.Series(counts, dtype=pl.Int64).cum_sum() - pl.Series(counts, dtype=pl.Int64)
    frame = block.frame.with_columns(
        pl.Series([path for path, _, _, _ in read], dtype=pl.String)
        .gather(number)
        .cast(SCHEMA["source"])
        .alias("source"),
        (pl.int_range(1, number.len() + 1, eager=True) - starts.gather(number))
        .cast(SCHEMA["line"])
        .alias("line"),
    )
    shapes = block.shapes
    lasts = _group_lasts(frame, number, counts, ends)
    found = tapped(frame, number) if taps else []
    cuts = list(itertools.accumulate(counts, initial=0))
    frames = [frame.slice(begin, n) for begin, n in zip(cuts, counts, strict=False)]
    ready = [None] * len(frames) if prepare is None else prepare(frame, frames, shapes=shapes)
    return [
        (piece, prepared, last, found[i] if i < len(found) else None)
        for i, (piece, prepared, last) in enumerate(zip(frames, ready, lasts, strict=True))
    ]


def file_of_rows(counts: list[int]) -> pl.Series:
    """Each row's file (0, 1, ...) for files of `counts` rows one after another."""
    sizes = pl.Series(counts, dtype=pl.UInt32)
    files = pl.Series(range(len(counts)), dtype=pl.UInt32).filter(sizes > 0)
    repeated = pl.lit(files).repeat_by(pl.lit(sizes.filter(sizes > 0))).explode()
    return pl.select(repeated.alias("_file")).to_series()


def _group_lasts(
    frame: pl.DataFrame, number: pl.Series, counts: list[int], ends: Ends | None
) -> list[pl.DataFrame | None]:
    """Each file's last `ends.lines` non-blank lines, as `kept_last` keeps them, in one query
    over the group's frame (files of `counts` lines one after another), their `ends.wanted`
    columns computed in one parse: None for a file without lines, or when not asked."""
    if ends is None or not ends.lines:
        return [None] * len(counts)
    kept = (
        frame.with_columns(number.alias("_file"))
        .filter(pl.col("text").str.strip_chars() != "")
        # pl.len() is UInt32: `len - lines` would wrap for a file of fewer lines
        .filter(pl.int_range(pl.len()).over("_file") + ends.lines >= pl.len().over("_file"))
    )
    sizes = dict(kept.group_by("_file").len().iter_rows())
    kept = kept.select(list(SCHEMA))
    if ends.wanted:
        kept = complete(kept, ends.wanted)
    out: list[pl.DataFrame | None] = []
    offset = 0
    for i, n in enumerate(counts):
        size = sizes.get(i, 0)
        out.append(kept.slice(offset, size) if n else None)
        offset += size
    return out


class Prepare(Protocol):
    """`Engine.prepare` for one parsed frame (and its lines' shapes)."""

    def __call__(
        self, frame: pl.DataFrame, *, shapes: pl.Series | None = None
    ) -> Prepared | None: ...


class PrepareMany(Protocol):
    """`Engine.prepare_many` for a parse group's frame, cut into its files' frames."""

    def __call__(
        self,
        whole: pl.DataFrame,
        frames: Sequence[pl.DataFrame],
        *,
        shapes: pl.Series | None = None,
    ) -> list[Prepared | None]: ...


Progress = Callable[[str, int, int], None]
FrameHook = Callable[[pl.DataFrame], None]
ReplayOne = Callable[[str], Iterator[AlertEvent]]


def parsed_columns(
    engine_columns: frozenset[str], on_frame: FrameHook | None, frame_columns: frozenset[str] | None
) -> frozenset[str] | None:
    """The columns a replay parses: those its engine reads, and with a frame hook those the
    hook reads too (`frame_columns`; None: every `SCHEMA` column, the result's None)."""
    if on_frame is None:
        return engine_columns
    return None if frame_columns is None else engine_columns | frame_columns


def replay_group(
    files: Sequence[_File],
    engine: Engine,
    *,
    options: ManyOptions,
    columns: frozenset[str] | None,
    replay_one: ReplayOne,
    progress: Progress | None = None,
    window: Window | None = None,
    on_frame: FrameHook | None = None,
    tap: Callable[[str], SourceTap] | None = None,
) -> Iterator[AlertEvent]:
    """The alert events of a parsed group, file after file in order, as `replay_file` gives
    them; a file the group did not read goes to `replay_one` in its turn. The last lines that
    the rules deciding at a file's end read are completed for the whole group at once. `tap`,
    called as a file's turn comes, gives the tap that takes its frame as the engine gets it
    (the fleet's ranks and times), tapped for the whole group in one pass."""
    done = frozenset(SCHEMA) if columns is None else columns
    frames = [
        None if f.frame is None else f.frame if window is None else window.select(f.frame)
        for f in files
    ]
    taps: list[Tapped | None] = [None] * len(frames)
    if tap is not None:  # tapped on the parse thread, unless a window cut the frames since
        taps = [f.tapped for f in files] if window is None else _tapped(frames)
    if window is None and engine.last_lines:  # computed on the parse thread (`Ends`)
        lasts: list[pl.DataFrame | None] = [file.last for file in files]
        wanted = engine.end_columns - done
    else:
        lasts, wanted = _lasts(engine, frames, done)
    evaluated = _Found(engine, files, frames, columns, (lasts, done | wanted))
    for index, (file, frame, found) in enumerate(zip(files, frames, taps, strict=True)):
        if frame is None:
            yield from replay_one(file.path)
            continue
        events, ended = evaluated.events(index)
        source_tap = tap(file.path) if tap is not None else None
        rates = None
        if frame.height:
            if options.stats:
                # its median skips the nulls natively (`drop_nulls` is a query per file)
                rates = frame.get_column("throughput")
            if on_frame is not None:
                on_frame(frame)
            if source_tap is not None and found is not None:
                source_tap.take(found)
            yield from events
        if progress is not None:
            progress(file.path, file.size, file.size)
        yield from ended
        if rates is not None:
            stats = engine.state_of(file.path).stats
            stats.throughput_median = rates.median()  # type: ignore[assignment]  # Float64: a float or None


def _tapped(frames: Sequence[pl.DataFrame | None]) -> list[Tapped | None]:
    """What each file's tap takes of its frame (`SourceTap.take`), in one pass for the group:
    as many polars calls for 64 files as for one."""
    present = [(i, frame) for i, frame in enumerate(frames) if frame is not None and frame.height]
    out: list[Tapped | None] = [None] * len(frames)
    if not present:
        return out
    lines = pl.concat([frame.select(TAPPED_COLUMNS) for _, frame in present], rechunk=True)
    files = [
        pl.repeat(k, frame.height, dtype=pl.UInt32, eager=True)
        for k, (_, frame) in enumerate(present)
    ]
    for (i, _), found in zip(present, tapped(lines, pl.concat(files)), strict=True):
        out[i] = found
    return out


class _Found:
    """The engine's events of a group's files, a run of them (the files up to the next one the
    group did not read) at a time: their batches in one `Engine.process_many` call, then
    their ends (`ends`: each file's last lines, and the columns computed in them) in one
    `Engine.finish_many` call."""

    def __init__(
        self,
        engine: Engine,
        files: Sequence[_File],
        frames: Sequence[pl.DataFrame | None],
        columns: frozenset[str] | None,
        ends: tuple[Sequence[pl.DataFrame | None], frozenset[str]],
    ) -> None:
        self._engine, self._files, self._frames, self._columns = engine, files, frames, columns
        self._ends = ends
        self._events: dict[int, tuple[list[AlertEvent], list[AlertEvent]]] = {}
        self._end = 0  # the files before it are in a run evaluated already

    def events(self, index: int) -> tuple[list[AlertEvent], list[AlertEvent]]:
        """File `index`'s events: its frame's, then its end's (a source from its first line
        on, as `replay_file` makes it)."""
        if index >= self._end:
            run = []
            for at in range(index, len(self._files)):
                if self._frames[at] is None:
                    break
                self._engine.state_of(self._files[at].path)
                self._end = at + 1
                run.append(at)
            lined = [at for at in run if cast(pl.DataFrame, self._frames[at]).height]
            found = self._engine.process_many(
                [cast(pl.DataFrame, self._frames[at]) for at in lined],
                self._columns,
                [self._files[at].prepared for at in lined],
            )
            by_file = dict(zip(lined, found, strict=True))
            lasts, computed = self._ends
            ended = self._engine.finish_many(
                [self._files[at].path for at in run], [lasts[at] for at in run], computed=computed
            )
            for at, end in zip(run, ended, strict=True):
                self._events[at] = (by_file.get(at, []), end)
        return self._events.pop(index)


def _lasts(
    engine: Engine, frames: Sequence[pl.DataFrame | None], done: frozenset[str]
) -> tuple[list[pl.DataFrame | None], frozenset[str]]:
    """Each file's last lines as `Engine.finish` reads them (`kept_last`), with the columns
    its rules read that the parse did not compute (returned too) computed in one parse for
    every file: a file's last lines are its frame's own, whatever the rules do before."""
    wanted = engine.end_columns - done
    lasts: list[pl.DataFrame | None] = [
        kept_last(None, frame, engine.last_lines)
        if frame is not None and frame.height and engine.last_lines
        else None
        for frame in frames
    ]
    found = [last for last in lasts if last is not None and last.height]
    if not wanted or not found:
        return lasts, wanted
    block = complete(pl.concat(found), wanted)
    out: list[pl.DataFrame | None] = []
    offset = 0
    for last in lasts:
        if last is not None and last.height:
            last = block.slice(offset, last.height)
            offset += last.height
        out.append(last)
    return out, wanted


def replay_all(
    paths: Sequence[str],
    engine: Engine,
    options: ManyOptions,
    *,
    one: ReplayOne,
    start: Callable[[str], SourceTap] | None = None,
    progress: Progress | None = None,
    window: Window | None = None,
    on_frame: FrameHook | None = None,
    frame_columns: frozenset[str] | None = None,
) -> Iterator[AlertEvent]:
    """Every file's events in order: a large file by `one` (`replay_file`, block by block),
    runs of small ones parsed a group at a time on the parse threads. `start(path)`, as a
    grouped file's turn comes, gives its tap (`one` starts its own files' taps).
    `frame_columns`: what `on_frame` reads (`parsed_columns`)."""
    stats = frozenset({"throughput"}) if options.stats else frozenset()
    # with the columns the rules deciding at a file's end read (`Engine.end_columns`): their
    # last lines are a good part of a small file's, and a second parse of them (and of the
    # group's lines for a batched rule that reads one) cost more than the column in this one
    wanted = engine.columns | stats | engine.end_columns
    columns = parsed_columns(wanted, on_frame, frame_columns)
    small = min(options.small_file_bytes, options.block_bytes)
    runs = list(groups(paths, small, min(GROUP_BYTES, options.block_bytes)))
    # as `replay_file`: what no engine state changes is computed on the parse threads
    prepare = partial(engine.prepare_many, computed=columns) if window is None else None
    # and so are the last lines the end-of-input rules read (a window's cut is the driver's)
    done = frozenset(SCHEMA) if columns is None else columns
    ends = Ends(engine.last_lines, engine.end_columns - done) if window is None else None
    taps = start is not None and window is None
    parse = partial(
        parse_group, options=options, columns=columns, prepare=prepare, ends=ends, taps=taps
    )

    def parsed(run: tuple[list[str], bool]) -> list[_File] | None:
        return parse(run[0]) if run[1] else None

    ahead = ordered_map(parsed, iter(runs), workers=options.workers)
    for (run, _), files in zip(runs, ahead, strict=True):
        if files is None:
            yield from one(run[0])
            continue
        yield from replay_group(
            files,
            engine,
            options=options,
            columns=columns,
            replay_one=one,
            progress=progress,
            window=window,
            on_frame=on_frame,
            tap=start,
        )
