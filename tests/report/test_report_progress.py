"""`report`'s progress on a terminal: a bar per file for a few files, one bar that counts
the files of a fleet."""

from __future__ import annotations

from logwatch.cli.report import BARS, _Progress


def _bars(files: int) -> list[str]:
    """The bars' descriptions after every file was read in two blocks."""
    with _Progress(enabled=True, files=files) as progress:
        for n in range(files):
            progress.read(f"node-{n:03d}/stdout.log", 500, 1000)
            progress.read(f"node-{n:03d}/stdout.log", 1000, 1000)
        return [task.description for task in progress.bar.tasks]


def test_a_fleet_shares_one_bar_that_counts_its_files() -> None:
    """4 353 rank logs: one bar, 'reading 4353 of 4353 files', with every byte counted once."""
    with _Progress(enabled=True, files=4353) as progress:
        for n in range(4353):
            progress.read(f"r{n}.log", 500, 1000)
            progress.read(f"r{n}.log", 1000, 1000)
        (task,) = progress.bar.tasks
        assert task.description == "reading 4353 of 4353 files"
        assert task.completed == 4353 * 1000


def test_a_few_files_get_a_bar_each() -> None:
    """Up to `BARS` files: a bar per file, named."""
    assert _bars(BARS) == [f"reading node-{n:03d}/stdout.log" for n in range(BARS)]
    assert _bars(BARS + 1) == [f"reading {BARS + 1} of {BARS + 1} files"]
