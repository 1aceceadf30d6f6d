"""`replay --jobs N`: many files on spawned processes give the output of one process, byte for
byte (events in the same order, the same verdict, the same stats)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from logwatch.cli import cli
from logwatch.drivers.parallel import batches
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
    "fmt", ["json", "text"]
)  # apart: among the suite's longest, split for xdist
@pytest.mark.parametrize("layout", ["torchrun", "slurm-default"])
def test_jobs_2_is_byte_identical_to_one_process(tmp_path: Path, layout: str, fmt: str) -> None:
    """16 ranks (torchrun: 34 files, untimed tracebacks placed by their file's times; SLURM: a
    file per node, ranks from `[defaultL]:`): `--jobs 2` prints the JSON document (events in
    order, stats, the fleet object with the verdict) and the text of one process, byte for
    byte; the text begins with the verdict naming the culprit."""
    fleet = gen.generate(tmp_path / "run", gen.FleetSpec(ranks=16, steps=4, layout=layout))
    root = str(fleet.root)
    expected = in_process("replay", "--format", fmt, root)
    done = spawned("replay", "--format", fmt, "--jobs", "2", root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    if fmt == "text":
        assert f"rank {fleet.culprit_rank} ({fleet.culprit_host})" in expected.splitlines()[0]


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
