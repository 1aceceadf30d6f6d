"""Many files on several processes (`replay --jobs N`) or a Dask cluster (`--dask`): each task
replays one file or a batch of small files with the rules the client shipped, and sends back
only its events and small per-source facts; the client labels and orders them as a replay in
one process would, so the output is byte-identical.

A task is a pure function of its paths, rules and options (no state, no side effect), so one
run again after a worker died gives the same result."""

from __future__ import annotations

import os
import pickle
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Protocol

from logwatch.alerts import AlertEvent
from logwatch.drivers.layout import layout_pattern, path_identity
from logwatch.drivers.placing import fleet_facts
from logwatch.drivers.ranks import FleetFacts, SourceTap
from logwatch.drivers.replay import ReplayOptions, ReplayResult, replay_file
from logwatch.drivers.verdict import analyse
from logwatch.drivers.window import Window
from logwatch.engine import DataWarning, Engine, ErrorHandler, SourceStats, WarningHandler
from logwatch.errors import ClusterError, InputError
from logwatch.rules.loader import RuleSpec
from logwatch.sources.streams import STDIN, check_readable

TASK_BYTES = 32 << 20  # a batch of small files up to about this many bytes is one task
TASK_FILES = 64  # and at most this many files
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


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of work: files replayed in order, and everything needed to replay them."""

    index: int
    paths: tuple[str, ...]
    rules: tuple[RuleSpec, ...]
    options: ReplayOptions
    window: Window | None


def replay_task(task: Task) -> tuple[int, list[FileOutcome]]:
    """Replay a task's files through one engine, each its own source (as in one process)."""
    errors: list[tuple[str, str, Exception]] = []
    warnings: list[DataWarning] = []
    engine = Engine(
        task.rules,
        on_error=lambda rule, source, exc: errors.append((rule, source, _portable(exc))),
        stats=task.options.stats,
        on_warning=warnings.append,
    )
    outcomes = []
    for path in task.paths:
        outcome = _replay_one(path, task, engine)
        outcomes.append(replace(outcome, rule_errors=errors.copy(), warnings=warnings.copy()))
        errors.clear()  # what the next file's rules say is the next file's
        warnings.clear()
    return task.index, outcomes


def _replay_one(path: str, task: Task, engine: Engine) -> FileOutcome:
    options = task.options
    layout = layout_pattern(options.layout) if options.layout else None
    tap = SourceTap(path, path_identity(path, layout))
    events: list[AlertEvent] = []
    unread = None
    try:
        check_readable([path])
        events.extend(replay_file(path, engine, options=options, window=task.window, tap=tap.see))
    except InputError as exc:  # the events read before it still go back
        unread = f"{exc} (on {where()})"
    tap.keep_times(event.line for event in events if event.ts is None)
    stats = engine.sources[path].stats if path in engine.sources else None
    return FileOutcome(path, events, stats, tap, unread=unread)


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

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[int, list[FileOutcome]]]: ...


def batches(
    paths: Sequence[str], workers: int, max_files: int = TASK_FILES
) -> list[tuple[str, ...]]:
    """Consecutive files in tasks: a large file alone, small ones together, with enough tasks
    (four per worker) to keep every worker busy to the end."""
    sizes = [_size(path) for path in paths]
    target = min(TASK_BYTES, max(1 << 20, sum(sizes) // max(4 * workers, 1)))
    out: list[tuple[str, ...]] = []
    batch: list[str] = []
    held = 0
    for path, size in zip(paths, sizes, strict=True):
        if batch and (held + size > target or len(batch) >= max_files):
            out.append(tuple(batch))
            batch, held = [], 0
        batch.append(path)
        held += size
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
    waiting: dict[int, list[FileOutcome]] = {}
    due = 0
    for index, outcomes in runner.run(tasks):
        waiting[index] = outcomes
        while due in waiting:  # in file order, as soon as the files before have come
            for outcome in waiting.pop(due):
                _take(outcome, facts, result, unread, merge)
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
) -> None:
    """One file's outcome into the run: its messages, its labelled events, its stats."""
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


class LocalRunner:
    """Tasks on `jobs` processes of this machine (spawned: polars' threads do not survive a
    fork), each with one polars thread, so `--jobs 1` keeps to one core."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[int, list[FileOutcome]]]:
        """Each task's result as it completes."""
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        context = multiprocessing.get_context("spawn")
        # polars sizes its thread pool when it is imported: the children get it in their
        # environment (they inherit it as they start; this process's pool is already made)
        before = os.environ.get("POLARS_MAX_THREADS")
        os.environ["POLARS_MAX_THREADS"] = "1"
        try:
            with ProcessPoolExecutor(max_workers=self.jobs, mp_context=context) as pool:
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


def _result_of(future: Future[tuple[int, list[FileOutcome]]]) -> tuple[int, list[FileOutcome]]:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise ClusterError(
            f"a replay process ended abruptly ({exc}); out of memory? try fewer --jobs"
        ) from None
