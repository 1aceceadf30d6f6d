"""`--jobs N`'s balance, measured in CPU seconds (what a loaded machine does not distort much):
the tasks of `replay_parallel` on N spawned processes, each task's CPU time and the process
that ran it; the busiest process's sum is what the run's wall time would be on N idle cores
(plus the client's start), the sum of all what one process would take.

    python bench/bench_jobs_makespan.py RUN_DIR [--jobs 2]

Prints per process its tasks and CPU seconds, then the CPU-bound speed-up sum / max."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from logwatch.api import load_config_and_rules
from logwatch.drivers.parallel import (
    Task,
    TaskResult,
    batches,
    replay_parallel,
    replay_task,
    worker_started,
)
from logwatch.sources.expand import expand_inputs

_CPU: dict[int, tuple[int, float]] = {}


def timed_task(task: Task) -> tuple[TaskResult, int, float]:
    """A task's result, the process that ran it and its CPU seconds."""
    start = time.process_time()
    result = replay_task(task)
    return result, os.getpid(), time.process_time() - start


class TimedRunner:
    """`LocalRunner` (spawned processes, one polars thread each) that keeps each task's CPU."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs

    def run(self, tasks: list[Task]):  # type: ignore[no-untyped-def]  # a bench's runner
        context = multiprocessing.get_context("spawn")
        os.environ["POLARS_MAX_THREADS"] = "1"
        # as `LocalRunner` starts its processes
        with ProcessPoolExecutor(
            max_workers=self.jobs, mp_context=context, initializer=worker_started
        ) as pool:
            futures = [pool.submit(timed_task, task) for task in tasks]
            for future in as_completed(futures):
                result, pid, cpu = future.result()
                _CPU[result.index] = (pid, cpu)
                yield result


def main() -> None:
    """Run the tasks, print the balance."""
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    opts = parser.parse_args()
    _, specs = load_config_and_rules(None, [], builtin=True)
    files = expand_inputs([str(opts.run_dir)]).files
    sizes = [sum(os.stat(p).st_size for p in t) / 1e6 for t in batches(files, opts.jobs)]
    start = time.perf_counter()
    replay_parallel(files, specs, TimedRunner(opts.jobs), workers=opts.jobs)
    wall = time.perf_counter() - start
    per: dict[int, list[float]] = {}
    for pid, cpu in _CPU.values():
        per.setdefault(pid, []).append(cpu)
    print(f"{len(sizes)} tasks of {min(sizes):.1f}-{max(sizes):.1f} MB; wall {wall:.1f} s; "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for pid, cpus in per.items():
        print(f"process {pid}: {len(cpus)} tasks, {sum(cpus):.1f} CPU s")
    total, busiest = sum(sum(c) for c in per.values()), max(sum(c) for c in per.values())
    print(
        f"tasks' CPU {total:.1f} s, busiest process {busiest:.1f} s: "
        f"{total / busiest:.2f}x on {opts.jobs} idle cores (before start-up and merge)"
    )


if __name__ == "__main__":
    main()
