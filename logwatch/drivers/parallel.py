"""Many files on several processes (`replay --jobs N`) or a Dask cluster (`--dask`): each task
replays one file or a batch of small files with the rules the client shipped, and sends back
only its events and small per-source facts; the client labels and orders them as a replay in
one process would, so the output is byte-identical.

A task is a pure function of its paths, rules and options (no state, no side effect), so one
run again after a worker died gives the same result."""

from __future__ import annotations

import gc
import os
import pickle
import re
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Protocol, cast

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.drivers.layout import layout_pattern, path_identity
from logwatch.drivers.lineinfo import WRITER_SCHEMA, classed
from logwatch.drivers.placing import fleet_facts
from logwatch.drivers.ranks import CANDIDATE_SCHEMA, FleetFacts, SourceTap
from logwatch.drivers.replay import ReplayOptions, ReplayResult, many_options, replay_file
from logwatch.drivers.replay_many import file_of_rows, replay_all
from logwatch.drivers.verdict import analyse
from logwatch.drivers.window import Window
from logwatch.engine import DataWarning, Engine, ErrorHandler, SourceStats, WarningHandler
from logwatch.errors import ClusterError, InputError
from logwatch.rules.loader import RuleSpec
from logwatch.sources.streams import STDIN, check_readable

TASK_BYTES = 32 << 20  # a batch of small files up to about this many bytes is one task
TASK_FILES = 512  # and at most this many files (one parse group, `replay_many.GROUP_FILES`)
FILE_COST_BYTES = 32 << 10  # a file's fixed cost (open, tap, engine steps) as bytes of lines
WORKER_GC_THRESHOLD = 50_000
"""A replay process's cycle collector runs once per this many new objects (Python's default:
700). A task makes hundreds of thousands of short-lived objects (polars wrappers, rule states,
events) and few cycles: at the default, the collector's ~1 000 passes over a 2 048-rank
fleet's tasks took 0.28 of their 5.2 CPU s (gc callbacks); at this one, under 0.01 s."""
DEFAULT_OPTIONS = ReplayOptions()


class RuleFailedElsewhere(Exception):
    """A rule's exception on a worker that could not travel back as itself (its text does)."""


@dataclass(frozen=True, slots=True)
class FileOutcome:
    """One file's replay on a worker: its events (not yet labelled), its stats, its fleet
    facts (`SourceTap`, small), what went wrong on the way; `unread`: why it was not read
    (or not to its end), with the worker that tried."""

    path: str
    events: list[AlertEvent]
    stats: SourceStats | None
    tap: SourceTap
    rule_errors: list[tuple[str, str, Exception]] = field(default_factory=list)
    warnings: list[DataWarning] = field(default_factory=list)
    unread: str | None = None

    def __reduce__(self) -> tuple[Callable[..., FileOutcome], tuple[object, ...]]:
        # by its fields, as `PathIdentity`: one per file reaches the client; its stats' too
        # (unpickling their `fired` Counter as a Counter cost 25 us, a tenth of a merge)
        stats = None if self.stats is None else _stats_fields(self.stats)
        fields = (self.events, stats, self.tap, self.rule_errors, self.warnings)
        return (_outcome, (self.path, *fields, self.unread))


_STATS = tuple(name for name in SourceStats.__slots__ if name != "fired")


def _stats_fields(stats: SourceStats) -> tuple[object, ...]:
    return (dict(stats.fired), *(getattr(stats, name) for name in _STATS))


def _outcome(
    path: str,
    events: list[AlertEvent],
    stats: tuple[object, ...] | None,
    *fields: object,
) -> FileOutcome:
    """A `FileOutcome` unpickled (`FileOutcome.__reduce__`)."""
    made = None
    if stats is not None:
        made = SourceStats(**dict(zip(_STATS, stats[1:], strict=True)))  # type: ignore[arg-type]  # the fields' own values, pickled
        dict.update(made.fired, cast(dict[str, int], stats[0]))  # a Counter: a dict
    return FileOutcome(path, events, made, *fields)  # type: ignore[arg-type]  # as pickled


@dataclass(frozen=True, slots=True)
class TaskResult:
    """A task's files' outcomes, in order, and their taps' records and writers (taken out of
    the taps: one frame each for the task, `FleetFacts.keep`)."""

    index: int
    outcomes: list[FileOutcome]
    records: pl.DataFrame
    writers: pl.DataFrame


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of work: files replayed in order, and everything needed to replay them."""

    index: int
    paths: tuple[str, ...]
    rules: tuple[RuleSpec, ...]
    options: ReplayOptions
    window: Window | None


def replay_task(task: Task) -> TaskResult:
    """Replay a task's files through one engine, each its own source, small ones parsed a group
    at a time: as `replay` does them in one process."""
    errors: list[tuple[str, str, Exception]] = []
    warnings: list[DataWarning] = []
    engine = Engine(
        task.rules,
        on_error=lambda rule, source, exc: errors.append((rule, source, _portable(exc))),
        stats=task.options.stats,
        on_warning=warnings.append,
    )
    layout = layout_pattern(task.options.layout) if task.options.layout else None
    unread: dict[str, str] = {}
    for path in task.paths:
        try:
            check_readable([path])
        except InputError as exc:
            unread[path] = f"{exc} (on {where()})"
    files = _Outcomes(engine, layout, errors, warnings)

    def one(path: str) -> Iterator[AlertEvent]:
        tap = files.start(path)
        try:
            check_readable([path])  # it may have gone since the task began
            yield from replay_file(
                path, engine, options=task.options, window=task.window, tap=tap.see
            )
        except InputError as exc:  # the events read before it still go back
            files.unread = f"{exc} (on {where()})"

    readable = [path for path in task.paths if path not in unread]
    options = many_options(task.options)
    for event in replay_all(
        readable, engine, options, one=one, start=files.start, window=task.window
    ):
        files.hold(event)
    files.flush()
    done = iter(files.done)
    outcomes = [
        FileOutcome(
            path, [], None, SourceTap(path, path_identity(path, layout)), unread=unread[path]
        )
        if path in unread
        else next(done)
        for path in task.paths
    ]
    taps = [outcome.tap for outcome in outcomes]
    # classed here, on the worker: the client only joins them
    candidates = _task_rows([tap.records for tap in taps], CANDIDATE_SCHEMA)
    records = classed(candidates, keep=("_tap",))
    writers = _task_rows([tap.writers for tap in taps], WRITER_SCHEMA)
    for tap in taps:
        tap.records, tap.writers = [], []
    return TaskResult(task.index, outcomes, records, writers)


def _task_rows(frames: list[list[pl.DataFrame]], schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Each file's frames as one frame, each row's file (its place in the task) as `_tap`."""
    rows = [frame for per_file in frames for frame in per_file if frame.height]
    heights = [sum(frame.height for frame in per_file) for per_file in frames]
    joined = pl.concat(rows) if rows else pl.DataFrame(schema=schema)
    return joined.hstack([file_of_rows(heights).alias("_tap")])


class _Outcomes:
    """Each file's outcome as its turn ends (the next file's start, or the task's end): its
    events, its stats, its tap, the rule errors and data warnings said since it started."""

    def __init__(
        self,
        engine: Engine,
        layout: re.Pattern[str] | None,
        errors: list[tuple[str, str, Exception]],
        warnings: list[DataWarning],
    ) -> None:
        self._engine = engine
        self._layout = layout
        self._errors = errors
        self._warnings = warnings
        self.done: list[FileOutcome] = []
        self._tap: SourceTap | None = None
        self._events: list[AlertEvent] = []
        self.unread: str | None = None  # why the current file was not read to its end

    def start(self, path: str) -> SourceTap:
        """A file's turn: the one before it is done, this one's tap starts."""
        self.flush()
        self._tap = SourceTap(path, path_identity(path, self._layout))
        return self._tap

    def hold(self, event: AlertEvent) -> None:
        self._events.append(event)

    def flush(self) -> None:
        """The current file's outcome, with only the line times its untimed events need."""
        tap, events, unread = self._tap, self._events, self.unread
        if tap is None:
            return
        self._tap, self._events, self.unread = None, [], None
        tap.keep_times(event.line for event in events if event.ts is None)
        path = tap.source
        stats = self._engine.sources[path].stats if path in self._engine.sources else None
        errors, warnings = self._errors.copy(), self._warnings.copy()
        self._errors.clear()  # what the next file's rules say is the next file's
        self._warnings.clear()
        self.done.append(FileOutcome(path, events, stats, tap, errors, warnings, unread))


def _portable(exc: Exception) -> Exception:
    try:
        pickle.dumps(exc)
    except Exception:  # any pickling failure: keep the text, not the object
        return RuleFailedElsewhere(f"{type(exc).__name__}: {exc}")
    return exc


def where() -> str:
    """The worker this runs on: a Dask worker's address, else host and process id."""
    distributed = sys.modules.get("distributed")  # only when a Dask worker runs this
    if distributed is not None:
        try:
            return str(distributed.get_worker().address)
        except ValueError:
            pass  # not inside a Dask task
    return f"{socket.gethostname()} pid {os.getpid()}"


class Runner(Protocol):
    """Where tasks run: yields each task's result as it completes, in any order."""

    def run(self, tasks: Sequence[Task]) -> Iterator[TaskResult]: ...


def batches(
    paths: Sequence[str], workers: int, max_files: int = TASK_FILES
) -> list[tuple[str, ...]]:
    """Consecutive files in tasks of about the same work (bytes, and a fixed cost per file), as
    many as a multiple of the workers (about four each, up to `TASK_BYTES` and `max_files` a
    task; one for an input under 1 MB), so that no worker runs the last task alone; a file
    over a task's share is a task of its own."""
    sizes = [_size(path) for path in paths]
    share = min(TASK_BYTES, max(1 << 20, sum(sizes) // max(4 * workers, 1)))
    count = max(-(-sum(sizes) // share), -(-len(paths) // max_files), 1)
    if count > 1:  # (a small input stays one task)
        count = -(-count // max(workers, 1)) * max(workers, 1)
    weights = [size + FILE_COST_BYTES for size in sizes]
    each = sum(weights) / count
    out: list[tuple[str, ...]] = []
    batch: list[str] = []
    index, done = 0, 0
    for path, weight in zip(paths, weights, strict=True):
        # a file's task: the share its middle falls in (a large file's own, cut on both sides)
        at = min(int((done + weight / 2) // each), count - 1)
        large = weight >= each
        if batch and (at != index or large or len(batch) >= max_files):
            out.append(tuple(batch))
            batch = []
        batch.append(path)
        index, done = (-1 if large else at), done + weight
    if batch:
        out.append(tuple(batch))
    return out


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # unreadable: the task says so, where it runs


@dataclass(frozen=True, slots=True)
class Merge:
    """What the client does with results: as `replay` does with files, in file order."""

    on_event: Callable[[AlertEvent], None] | None = None
    on_error: ErrorHandler | None = None
    on_warning: WarningHandler | None = None
    on_unread: Callable[[str], None] | None = None


def replay_parallel(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    runner: Runner,
    *,
    workers: int,
    options: ReplayOptions = DEFAULT_OPTIONS,
    window: Window | None = None,
    merge: Merge | None = None,
    check_here: bool = True,
    task_files: int = TASK_FILES,
) -> ReplayResult:
    """`replay` with the files' work on `runner`; same events, same order, same verdict.
    `check_here`: refuse unreadable files before any work (False: they are named where they
    are read, and `ReplayResult.unread` lists them); `task_files`: at most so many per task."""
    if STDIN in paths:
        raise InputError("-: standard input cannot be replayed on other processes; replay it apart")
    if check_here:
        check_readable(paths)
    merge = merge or Merge()
    task_options = _one_thread(options)
    tasks = [
        Task(i, batch, tuple(rules), task_options, window)
        for i, batch in enumerate(batches(paths, workers, task_files))
    ]
    facts = fleet_facts(options.layout, options.gpus_per_node, rules)
    result = ReplayResult([], {}, facts)
    unread: list[str] = []
    waiting: dict[int, TaskResult] = {}
    due = 0
    for done in runner.run(tasks):
        waiting[done.index] = done
        while due in waiting:  # in file order, as soon as the files before have come
            task = waiting.pop(due)
            taps = [_take(outcome, facts, result, unread, merge) for outcome in task.outcomes]
            facts.keep(taps, task.records, task.writers)
            due += 1
    fleet = analyse(facts, skew=timedelta(seconds=options.skew_s))
    for event in fleet.verdicts:
        result.events.append(event)
        if merge.on_event is not None:
            merge.on_event(event)
    return ReplayResult(result.events, result.stats, facts, fleet, unread=tuple(unread))


def _one_thread(options: ReplayOptions) -> ReplayOptions:
    return replace(options, workers=1)


def _take(
    outcome: FileOutcome,
    facts: FleetFacts,
    result: ReplayResult,
    unread: list[str],
    merge: Merge,
) -> SourceTap:
    """One file's outcome into the run: its messages, its labelled events, its stats; its
    tap, adopted."""
    for rule, source, exc in outcome.rule_errors:
        if merge.on_error is not None:
            merge.on_error(rule, source, exc)
    for warning in outcome.warnings:
        if merge.on_warning is not None:
            merge.on_warning(warning)
    tap = facts.adopt(outcome.tap)
    for event in facts.label(tap, outcome.events):
        result.events.append(event)
        if merge.on_event is not None:
            merge.on_event(event)
    if outcome.stats is not None:
        result.stats[outcome.path] = outcome.stats
    if outcome.unread is not None:
        unread.append(outcome.unread)
        if merge.on_unread is not None:
            merge.on_unread(outcome.unread)
    return tap


class LocalRunner:
    """Tasks on `jobs` processes of this machine (spawned: polars' threads do not survive a
    fork), each with one polars thread, so `--jobs 1` keeps to one core."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(self, tasks: Sequence[Task]) -> Iterator[TaskResult]:
        """Each task's result as it completes."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")
        # polars sizes its thread pool when it is imported: the children get it in their
        # environment (they inherit it as they start; this process's pool is already made)
        before = os.environ.get("POLARS_MAX_THREADS")
        os.environ["POLARS_MAX_THREADS"] = "1"
        try:
            with ProcessPoolExecutor(
                max_workers=self.jobs, mp_context=context, initializer=worker_started
            ) as pool:
                futures = {pool.submit(replay_task, task) for task in tasks}
                try:
                    for future in as_completed(futures):
                        futures.discard(future)  # its result goes to the client, not kept here
                        yield _result_of(future)
                finally:
                    for future in futures:
                        future.cancel()
        finally:
            if before is None:
                os.environ.pop("POLARS_MAX_THREADS", None)
            else:
                os.environ["POLARS_MAX_THREADS"] = before


def worker_started() -> None:
    """A replay process's start (`LocalRunner`): its cycle collector set to run less often
    (`WORKER_GC_THRESHOLD`), what it imported kept out of the collector's passes."""
    gc.freeze()
    gc.set_threshold(WORKER_GC_THRESHOLD, *gc.get_threshold()[1:])


def _result_of(future: Future[TaskResult]) -> TaskResult:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise ClusterError(
            f"a replay process ended abruptly ({exc}); out of memory? try fewer --jobs"
        ) from None
