"""The client's share of `replay --jobs/--dask`: merging the files' results (labels in file
order, stats, the fleet verdict), without the replay work itself.

    python bench/bench_merge.py RUN_DIR

Replays every file of RUN_DIR once, in this process, as the workers would (one task per file,
`replay_task`), keeps the results in memory, then times `replay_parallel` fed from them (a
runner that hands them over in a shuffled order, as a cluster's completions come), and reports
the merge's wall time and peak RSS per file.
"""

from __future__ import annotations

import random
import resource
import sys
import time
from collections.abc import Iterator, Sequence

from logwatch.cli.options import config_and_rules
from logwatch.drivers.parallel import (
    DEFAULT_OPTIONS,
    FileOutcome,
    Task,
    replay_parallel,
    replay_task,
)
from logwatch.sources.expand import expand_inputs


class Replayed:
    """A runner that hands over results computed beforehand, in a shuffled order."""

    def __init__(self, results: dict[str, list[FileOutcome]]) -> None:
        self.results = results

    def run(self, tasks: Sequence[Task]) -> Iterator[tuple[int, list[FileOutcome]]]:
        order = list(tasks)
        random.Random(0).shuffle(order)
        for task in order:
            yield task.index, [o for path in task.paths for o in self.results[path]]


def main() -> None:
    """Replay, then time the merge alone."""
    _, specs = config_and_rules(None, (), False)
    files = expand_inputs([sys.argv[1]]).files
    results: dict[str, list[FileOutcome]] = {}
    start = time.perf_counter()
    for i, path in enumerate(files):
        _, outcomes = replay_task(Task(i, (path,), tuple(specs), DEFAULT_OPTIONS, None))
        results[path] = outcomes
    work = time.perf_counter() - start
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    result = replay_parallel(files, specs, Replayed(results), workers=2, task_files=1)
    merge = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{len(files)} files, {len(result.events)} events; replay work {work:.2f} s")
    print(
        f"merge {merge:.2f} s ({merge / len(files) * 1000:.2f} ms per file); peak RSS {rss:.0f} MB"
    )
    print(f"(peak RSS before the merge {rss_before:.0f} MB)")


if __name__ == "__main__":
    main()
