"""`replay --jobs N`: many files on spawned processes give the output of one process, byte for
byte (events in the same order, the same verdict, the same stats)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.cli.options import config_and_rules
from logwatch.drivers.parallel import (
    TASK_FILES,
    WORKER_GC_THRESHOLD,
    Task,
    TaskResult,
    batches,
    replay_parallel,
    replay_task,
)
from logwatch.drivers.replay import ReplayResult, replay
from logwatch.drivers.window import Window, parse_bound
from logwatch.sources.expand import expand_inputs
from tests.support.paths import load_bench

ROOT = Path(__file__).resolve().parents[2]


gen = load_bench("gen_fleet")


def in_process(*args: str) -> str:
    """The CLI in this process (small inputs replay here by default)."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.stderr
    return result.stdout


def spawned(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it (`python -m logwatch`), so its processes spawn cleanly."""
    command = [sys.executable, "-m", "logwatch", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize(
    ("fmt", "jobs"), [("json", "2"), ("text", "2"), ("json", "1")]
)  # apart: among the suite's longest, split for xdist
@pytest.mark.parametrize("layout", ["torchrun", "slurm-default"])
def test_jobs_2_is_byte_identical_to_one_process(
    tmp_path: Path, layout: str, fmt: str, jobs: str
) -> None:
    """16 ranks (torchrun: 34 files, untimed tracebacks placed by their file's times; SLURM: a
    file per node, ranks from `[defaultL]:`): `--jobs 2` (and `--jobs 1`: tasks through the
    grouped path too) prints the JSON document (events in order, stats, the fleet object with
    the verdict) and the text of one process, byte for byte; the text begins with the verdict
    naming the culprit."""
    fleet = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4, layout=layout))
    root = str(fleet.root)
    expected = in_process("replay", "--format", fmt, root)
    done = spawned("replay", "--format", fmt, "--jobs", jobs, root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    if fmt == "text":
        assert f"rank {fleet.culprit_rank} ({fleet.culprit_host})" in expected.splitlines()[0]


class InThisProcess:
    """A runner that runs the tasks here, last first (the client must put them in order)."""

    def run(self, tasks: Sequence[Task]) -> Iterator[TaskResult]:
        for task in reversed(tasks):
            yield replay_task(task)


def _same(got: ReplayResult, expected: ReplayResult) -> None:
    assert json.dumps(got.to_json()) == json.dumps(expected.to_json())
    assert got.fleet is not None and expected.fleet is not None
    assert got.fleet.records.equals(expected.fleet.records)
    assert [e.to_json() for e in got.fleet.verdicts] == [
        e.to_json() for e in expected.fleet.verdicts
    ]


class Fleet:
    """The 16-rank torchrun fleet (34 files) the in-process tests split into tasks, and what
    `replay` in one process gives for it: computed once, read by each test."""

    SINCE = "2026-12-07 02:00:34"

    def __init__(self, folder: Path) -> None:
        self.run = gen.generate(folder / "run", gen.FleetSpec(ranks=16, steps=4))
        _, self.specs = config_and_rules(None, (), False)
        self.files = expand_inputs([str(self.run.root)]).files
        self.whole = replay(self.files, self.specs)
        self.windowed = replay(self.files, self.specs, window=self.window())

    def window(self) -> Window:
        """`--since` (a new one each time: a window keeps state)."""
        return Window(parse_bound(self.SINCE), None)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    """The module's fleet and its replays in one process."""
    return Fleet(tmp_path_factory.mktemp("fleet"))


@pytest.mark.parametrize("task_files", [1, 5, 64])
def test_tasks_of_grouped_files_merge_to_the_replay_of_one_process(
    fleet: Fleet, task_files: int
) -> None:
    """Tasks of 1, 5 or 64 files, each replayed through the grouped path (a parse and a fleet
    tap per group), their records and writers sent as one frame per task, merged out of order:
    the events, stats, fleet records and verdict of `replay` in one process; with a `--since`
    window too (each file's tap then sees its own cut frame)."""
    got = replay_parallel(
        fleet.files, fleet.specs, InThisProcess(), workers=2, task_files=task_files
    )
    _same(got, fleet.whole)
    windowed = replay_parallel(
        fleet.files,
        fleet.specs,
        InThisProcess(),
        workers=2,
        task_files=task_files,
        window=fleet.window(),
    )
    _same(windowed, fleet.windowed)


def test_a_file_given_twice_counts_once_as_in_one_process(fleet: Fleet) -> None:
    """Two files given again after the others: their fleet lines count once, in their first
    place, as a replay in one process has them, whether the second time is in the same task
    (then the whole output is the same) or in another (whose engine starts afresh, so the
    file's alerts fire again there)."""
    files, specs = fleet.files, fleet.specs
    twice = [*files, files[3], files[0]]
    expected = replay(twice, specs)
    _same(replay_parallel(twice, specs, InThisProcess(), workers=2, task_files=64), expected)
    # tasks of up to 5 files: the first task holds files 0-3, the last the two given again
    tasks = batches(twice, workers=2, max_files=5)
    assert {files[0], files[3]} <= set(tasks[0]) and {files[0], files[3]} <= set(tasks[-1])
    apart = replay_parallel(twice, specs, InThisProcess(), workers=2, task_files=5)
    assert apart.fleet is not None and expected.fleet is not None
    assert apart.fleet.records.equals(expected.fleet.records)
    assert apart.fleet.verdicts == expected.fleet.verdicts


def test_batches_keep_file_order_small_files_together_a_large_one_alone(tmp_path: Path) -> None:
    """Tasks are runs of consecutive files: small ones share a task (at most `max_files`), a
    file larger than a task's share is a task of its own; every file is in exactly one."""
    sizes = [10, 10, 10, 3 << 20, 10, 10, 10, 10]
    paths = []
    for i, size in enumerate(sizes):
        path = tmp_path / f"{i}.log"
        path.write_bytes(b"x" * size)
        paths.append(str(path))
    tasks = batches(paths, workers=2, max_files=3)
    assert [len(task) for task in tasks] == [3, 1, 3, 1]
    assert [p for task in tasks for p in task] == paths


def test_batches_give_each_worker_as_many_tasks_of_about_the_same_size(tmp_path: Path) -> None:
    """17 files of 1 MB on 2 workers: an even number of tasks of 2 or 3 files (greedy cuts
    at a share gave 9, the last one a worker ran alone); 4 353 small files: tasks of at most
    `TASK_FILES` files each, as many per worker."""
    paths = []
    for i in range(17):
        path = tmp_path / f"{i}.log"
        with path.open("wb") as sink:
            sink.truncate(1 << 20)
        paths.append(str(path))
    tasks = batches(paths, workers=2)
    assert len(tasks) % 2 == 0
    assert {len(task) for task in tasks} <= {2, 3}
    assert [p for task in tasks for p in task] == paths
    (tmp_path / "tiny.log").write_bytes(b"x" * 4000)
    small = [str(tmp_path / "tiny.log")] * 4353
    tasks = batches(small, workers=2)
    assert len(tasks) % 2 == 0
    assert max(len(task) for task in tasks) - min(len(task) for task in tasks) <= 1
    assert max(len(task) for task in tasks) <= TASK_FILES


def test_jobs_1_with_export_replays_here_and_exports_every_line(tmp_path: Path) -> None:
    """`--jobs 1 --export`: the one process is this one, so the export gets every file's
    lines (a pool of one would have run the files where the export cannot see them)."""
    import polars as pl

    fleet = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4))
    out = tmp_path / "x.parquet"
    result = CliRunner().invoke(
        cli, ["replay", "--jobs", "1", "--format", "jsonl", "--export", str(out), str(fleet.root)]
    )
    assert result.exit_code == 0, result.stderr
    files = [p for p in fleet.root.rglob("*") if p.is_file()]
    lines = sum(len(p.read_bytes().splitlines()) for p in files)
    frame = pl.read_parquet(out)
    assert frame.height == lines
    assert frame.get_column("source").n_unique() == len(files)


def test_jobs_with_export_is_refused_in_one_line(tmp_path: Path) -> None:
    """`--export` needs every line in this process: with `--jobs 2` it is a usage error (exit
    2), not a silent replay on one core."""
    fleet = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4))
    result = CliRunner().invoke(
        cli, ["replay", "--jobs", "2", "--export", str(tmp_path / "x.parquet"), str(fleet.root)]
    )
    assert result.exit_code == 2
    assert (
        "--export, --export-metrics and --actions dry-run see every line in this process"
        in result.stderr
    )


def test_a_replay_process_collects_cycles_less_often_after_its_imports_frozen() -> None:
    """A fresh interpreter started as `LocalRunner` starts its processes: its cycle collector
    runs once per `WORKER_GC_THRESHOLD` new objects (CPython's default: 700), and what it
    imported is out of the collector's passes."""
    code = (
        "import gc; from logwatch.drivers.parallel import worker_started; "
        "worker_started(); print(gc.get_threshold()[0], gc.get_freeze_count() > 1000)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == [str(WORKER_GC_THRESHOLD), "True"]
