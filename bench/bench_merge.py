"""The client's share of `replay --jobs/--dask`: merging the files' results (labels in file
order, stats, the fleet verdict), without the replay work itself.

    python bench/bench_merge.py RUN_DIR [--files 100000]

Replays every file of RUN_DIR once, in this process, as the workers would (`replay_task`, tasks
of up to 64 files), keeps the results in memory, then times `replay_parallel` fed from them (a
runner that hands them over in a shuffled order, as a cluster's completions come), and reports
the merge's wall and CPU time and peak RSS. `--files N`: N simulated per-file results, the
run's results again and again under other folders (`sim-K/...`: other paths, the same hosts
and ranks), in tasks of 64 files.
"""

from __future__ import annotations

import argparse
import random
import resource
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
    batches,
    replay_parallel,
    replay_task,
)
from logwatch.drivers.ranks import SourceTap
from logwatch.sources.expand import expand_inputs


class Replayed:
    """A runner that hands over results computed beforehand, in a shuffled order."""

    def __init__(self, results: dict[str, FileOutcome]) -> None:
        self.results = results

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[int, list[FileOutcome]]]:
        order = list(tasks)
        random.Random(0).shuffle(order)
        for task in order:
            yield task.index, [self.results[path] for path in task.paths]


def renamed(outcome: FileOutcome, path: str) -> FileOutcome:
    """`outcome` as the result of the same file at `path`."""
    old = outcome.tap
    tap = SourceTap(path, path_identity(path))
    tap.facts = dict(old.facts)
    tap.records = [frame.with_columns(pl.lit(path).alias("source")) for frame in old.records]
    tap.writers = [frame.with_columns(pl.lit(path).alias("source")) for frame in old.writers]
    tap._timed_lines, tap._timed_ts = list(old._timed_lines), list(old._timed_ts)
    events = [replace(event, source=path) for event in outcome.events]
    return replace(outcome, path=path, events=events, tap=tap)


def main() -> None:
    """Replay, then time the merge alone."""
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--files", type=int, default=0, help="simulate so many per-file results")
    opts = parser.parse_args()
    _, specs = config_and_rules(None, (), False)
    files = expand_inputs([opts.run_dir]).files
    results: dict[str, FileOutcome] = {}
    start = time.perf_counter()
    for i, batch in enumerate(batches(files, workers=1)):
        _, outcomes = replay_task(Task(i, batch, tuple(specs), DEFAULT_OPTIONS, None))
        results.update((outcome.path, outcome) for outcome in outcomes)
    work = time.perf_counter() - start
    if opts.files:
        root = Path(opts.run_dir)
        simulated: dict[str, FileOutcome] = {}
        for n in range(opts.files):
            path = files[n % len(files)]
            copy = str(root / f"sim-{n // len(files)}" / Path(path).relative_to(root))
            simulated[copy] = renamed(results[path], copy)
        results, files = simulated, list(simulated)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu = time.process_time()
    start = time.perf_counter()
    result = replay_parallel(
        files, specs, Replayed(results), workers=2, check_here=False, task_files=64
    )
    merge = time.perf_counter() - start
    cpu = time.process_time() - cpu
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(files)} files, {len(result.events)} events; replay work {work:.2f} s")
    print(
        f"merge {merge:.2f} s wall, {cpu:.2f} s CPU ({merge / len(files) * 1000:.3f} ms per "
        f"file); peak RSS {rss:.0f} MB (before the merge {rss_before:.0f} MB)"
    )


if __name__ == "__main__":
    main()
