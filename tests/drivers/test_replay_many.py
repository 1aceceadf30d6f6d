"""Replay of many small files parsed together (`drivers.replay_many`): the same events, in the
same order, and the same per-file stats as replaying each file on its own."""

from __future__ import annotations

import gzip
import os
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from logwatch.api import load_rules
from logwatch.drivers.replay import ReplayOptions, ReplayResult, replay
from logwatch.drivers.replay_many import groups
from logwatch.drivers.window import Window, parse_bound

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "samples").glob("*/*.log"))
SYSLOG = (
    "Dec 31 23:59:58 node-7 trainer[311]: step 10/100 | loss 2.1 | grad_norm 1.0\n"
    "Dec 31 23:59:59 node-7 trainer[311]: step 11/100 | loss nan | grad_norm nan\n"
)


def _fleet(folder: Path) -> list[str]:
    """Every sample log as its own file, with the cases a group must keep apart: a gzip copy, an
    empty file, a last line without its newline, yearless lines in files of different years,
    a traceback followed by blank lines, a file of blank lines, and a file too big to be
    grouped between the small ones."""
    paths = []
    for i, sample in enumerate(SAMPLES):
        copy = folder / f"{i:02d}-{sample.name}"
        shutil.copyfile(sample, copy)
        paths.append(copy)
    gz = folder / "restarted.log.gz"
    gz.write_bytes(gzip.compress((ROOT / "samples/dflash/train_restarted.log").read_bytes()))
    empty = folder / "empty.log"
    empty.write_text("")
    cut = folder / "cut.log"
    cut.write_text((ROOT / "samples/dflash/train_nan.log").read_text().rstrip("\n"))
    old, new = folder / "syslog-2024.log", folder / "syslog-2025.log"
    old.write_text(SYSLOG)
    new.write_text(SYSLOG)
    os.utime(old, (datetime(2024, 6, 1).timestamp(),) * 2)
    os.utime(new, (datetime(2025, 6, 1).timestamp(),) * 2)
    blanks = folder / "crash-then-blanks.log"  # the lines read at its end are not blank
    blanks.write_text((ROOT / "samples/trainers/crash.log").read_text() + "\n  \n\n")
    (folder / "blank.log").write_text("\n \n\n")
    big = folder / "big.log"
    big.write_text((ROOT / "samples/dflash/train_healthy.log").read_text() * 3)
    order = [*paths[:3], gz, empty, big, cut, old, *paths[3:], blanks, folder / "blank.log", new]
    return [str(p) for p in order]


def _same(a: ReplayResult, b: ReplayResult) -> None:
    assert [e.to_json() for e in a.events] == [e.to_json() for e in b.events]
    assert a.to_json() == b.to_json()
    assert list(a.stats) == list(b.stats)  # the summary's order: the files' order


@pytest.mark.parametrize("workers", [1, 2])  # apart: the longest test here, split for xdist
def test_many_small_files_give_what_each_file_gives_alone(tmp_path: Path, workers: int) -> None:
    """Grouped (the default), every file's events come in file order with the same fields and
    stats as with each file parsed alone, with one parse thread and with two."""
    paths = _fleet(tmp_path)
    rules = load_rules()
    big = len((ROOT / "samples/dflash/train_healthy.log").read_bytes()) * 3
    alone = replay(paths, rules, options=ReplayOptions(workers=workers, small_file_bytes=0))
    grouped = replay(paths, rules, options=ReplayOptions(workers=workers, small_file_bytes=big - 1))
    _same(alone, grouped)
    assert len(alone.events) > 50
    years = {e.source: e.ts.year for e in alone.events if "syslog" in e.source and e.ts}
    assert years == {paths[7]: 2024, paths[-1]: 2025}


def test_many_small_files_with_a_window_and_a_frame_hook(tmp_path: Path) -> None:
    """--since and a frame hook (exports, reports) see each file's own frame, grouped or not."""
    paths = _fleet(tmp_path)
    rules = load_rules()
    seen: dict[int, list[pl.DataFrame]] = {0: [], 1 << 20: []}
    results = [
        replay(
            paths,
            rules,
            options=ReplayOptions(small_file_bytes=limit),
            window=Window(parse_bound("1400", "--since"), None),  # it keeps state: one each
            on_frame=seen[limit].append,
        )
        for limit in seen
    ]
    _same(*results)
    # the same rows (a last line without its newline may come as a block of its own, alone)
    alone, grouped = (pl.concat(frames) for frames in seen.values())
    assert alone.height > 100
    assert alone.equals(grouped)


def test_small_files_are_grouped_in_order_and_big_ones_go_alone(tmp_path: Path) -> None:
    """Runs of small files up to the group size, a big file or standard input alone, in order."""
    sizes = {"a": 10, "b": 10, "c": 100, "d": 10, "e": 10, "f": 10}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x\n" * (size // 2))
    paths = [str(tmp_path / name) for name in sizes]
    found = list(groups([*paths, "-"], small_bytes=50, group_bytes=25))
    assert found == [
        (paths[0:2], True),
        ([paths[2]], False),
        (paths[3:5], True),
        ([paths[5]], True),
        (["-"], False),
    ]
    assert list(groups(paths, small_bytes=0, group_bytes=25)) == [([p], False) for p in paths]
