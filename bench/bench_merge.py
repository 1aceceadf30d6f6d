"""The client's share of `replay --jobs/--dask`: merging the files' results (labels in file
order, stats, the fleet verdict), without the replay work itself.

    python bench/bench_merge.py RUN_DIR [--files 100000]

Replays every file of RUN_DIR once, in this process, as the workers would (`replay_task`, tasks
of up to 64 files), writes each task's result pickled to a file, as it would come from a worker,
then times `replay_parallel` fed from them (a runner that reads and unpickles them in a shuffled
order, as a cluster's completions come), and reports the merge's wall and CPU time and the peak
RSS it added. `--files N`: N simulated per-file results, the run's results again and again
under other folders (`sim-K/...`: other paths, the same hosts and ranks).
"""

from __future__ import annotations

import argparse
import gc
import pickle
import random
import resource
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import polars as pl

from logwatch.cli.options import config_and_rules
from logwatch.drivers.layout import path_identity
from logwatch.drivers.parallel import (
    DEFAULT_OPTIONS,
    FileOutcome,
    Task,
    TaskResult,
    batches,
    replay_parallel,
    replay_task,
)
from logwatch.drivers.ranks import SourceTap
from logwatch.drivers.replay_many import file_of_rows
from logwatch.sources.expand import expand_inputs


class Replayed:
    """A runner that hands over results computed beforehand (pickled in `spool`, at `where`:
    task index to offset and size), in a shuffled order."""

    def __init__(self, spool: Path, where: dict[int, tuple[int, int]]) -> None:
        self.spool = spool
        self.where = where

    def run(self, tasks: Sequence[Task]) -> Iterator[TaskResult]:
        order = list(tasks)
        random.Random(0).shuffle(order)
        with self.spool.open("rb") as stream:
            for task in order:
                offset, size = self.where[task.index]
                stream.seek(offset)
                result: TaskResult = pickle.loads(stream.read(size))
                yield result


def renamed(outcome: FileOutcome, path: str) -> FileOutcome:
    """`outcome` as the result of the same file at `path`."""
    old = outcome.tap
    tap = SourceTap(path, path_identity(path))
    tap.facts = dict(old.facts)
    tap._timed_lines, tap._timed_ts = list(old._timed_lines), list(old._timed_ts)
    events = [replace(event, source=path) for event in outcome.events]
    return replace(outcome, path=path, events=events, tap=tap)


Real = dict[str, tuple[FileOutcome, pl.DataFrame, pl.DataFrame]]


def simulated(batch: Sequence[str], origin: dict[str, str], real: Real, index: int) -> TaskResult:
    """The result of a task of simulated files, each a real file's under another path."""
    originals = [origin[path] for path in batch]
    outcomes = [renamed(real[o][0], path) for o, path in zip(originals, batch, strict=True)]
    new_name = dict(zip(originals, batch, strict=True))

    def rows(frames: list[pl.DataFrame]) -> pl.DataFrame:
        joined = pl.concat(frames).with_columns(pl.col("source").replace(new_name))
        return joined.hstack([file_of_rows([f.height for f in frames]).alias("_tap")])

    records = rows([real[o][1] for o in originals])
    return TaskResult(index, outcomes, records, rows([real[o][2] for o in originals]))


def _rss_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 1e6


def _watch_rss(peak: list[float], running: threading.Event) -> None:
    """The highest RSS seen while `running` is set (sampled every 20 ms)."""
    while running.is_set():
        peak[0] = max(peak[0], _rss_mb())
        time.sleep(0.02)


def main() -> None:
    """Replay, then time the merge alone."""
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--files", type=int, default=0, help="simulate so many per-file results")
    opts = parser.parse_args()
    _, specs = config_and_rules(None, (), False)
    files = expand_inputs([opts.run_dir]).files
    real: Real = {}
    start = time.perf_counter()
    for i, batch in enumerate(batches(files, workers=1)):
        done = replay_task(Task(i, batch, tuple(specs), DEFAULT_OPTIONS, None))
        for place, outcome in enumerate(done.outcomes):
            mine = pl.col("_tap") == place
            records = done.records.filter(mine).drop("_tap")
            real[outcome.path] = (outcome, records, done.writers.filter(mine).drop("_tap"))
    work = time.perf_counter() - start
    origin = {path: path for path in files}
    if opts.files:
        root = Path(opts.run_dir)
        copies = -(-opts.files // len(files))
        origin = {
            str(root / f"sim-{k}" / Path(path).relative_to(root)): path
            for k in range(copies)
            for path in files
        }
        files = list(origin)
    spool = Path(tempfile.mkdtemp(prefix="bench-merge-")) / "results.pickle"
    where: dict[int, tuple[int, int]] = {}
    with spool.open("wb") as stream:
        for i, batch in enumerate(batches(files, workers=2)):
            data = pickle.dumps(simulated(batch, origin, real, i))
            where[i] = (stream.tell(), len(data))
            stream.write(data)
    results = real
    del results
    gc.collect()
    rss_before = _rss_mb()
    peak = [rss_before]
    merging = threading.Event()
    watch = threading.Thread(target=_watch_rss, args=(peak, merging), daemon=True)
    merging.set()
    watch.start()
    cpu = time.process_time()
    start = time.perf_counter()
    result = replay_parallel(files, specs, Replayed(spool, where), workers=2, check_here=False)
    merge = time.perf_counter() - start
    cpu = time.process_time() - cpu
    merging.clear()
    watch.join()
    rss = max(peak[0], _rss_mb())
    print(f"{len(files)} files, {len(result.events)} events; replay work {work:.2f} s")
    print(
        f"merge {merge:.2f} s wall, {cpu:.2f} s CPU ({cpu / len(files) * 1000:.3f} ms CPU per "
        f"file); RSS at most {rss:.0f} MB while merging ({rss_before:.0f} MB before); "
        f"{spool.stat().st_size / 1e6:.0f} MB of results pickled"
    )
    spool.unlink()


if __name__ == "__main__":
    main()
