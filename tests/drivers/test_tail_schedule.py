"""Which files a tail round reads (issue 13, 2000 files): events first, a bounded safety poll
for the rest, and rotated files that were renamed on before they could be opened."""

from __future__ import annotations

import os
from pathlib import Path

from logwatch.sources.schedule import SAFETY_POLL_FILES
from logwatch.testing import DeafWatcher, running
from tests.support.tailkit import Tail, numbered, wait_until


def test_an_append_whose_event_was_lost_is_found_by_the_safety_poll(tmp_path: Path) -> None:
    """With more quiet files than one safety slice reads, and write events lost, an append to
    the last file is still delivered once the round-robin reaches it."""
    files = [tmp_path / f"run{i:03}.log" for i in range(SAFETY_POLL_FILES + 40)]
    for file in files:
        file.write_bytes(b"")
    tail = Tail(tmp_path, watcher_factory=DeafWatcher(), poll_interval_s=0.05)
    with running(tail.driver) as driver:
        driver.sync()
        with open(files[-1], "ab") as out:
            out.write(numbered(1, 10))

        def delivered() -> bool:
            tail.clock.advance(1.0)  # one poll interval per check: the slice moves on
            return len(tail.seqs()) == 10

        wait_until(delivered)
    assert tail.seqs() == list(range(1, 11))


def test_events_deliver_appends_to_one_of_many_quiet_files(tmp_path: Path) -> None:
    """With write events working and the clock standing still (no safety poll is due), an
    append to any one of many files is read from its event alone."""
    files = [tmp_path / f"run{i:03}.log" for i in range(SAFETY_POLL_FILES * 2)]
    for file in files:
        file.write_bytes(b"")
    tail = Tail(tmp_path, poll_interval_s=60.0)
    with running(tail.driver) as driver:
        driver.sync()
        for n, file in enumerate(files[::37], start=1):
            with open(file, "ab") as out:
                out.write(numbered(n, n))
            wait_until(lambda n=n: len(tail.seqs()) == n)  # type: ignore[misc]
    assert tail.seqs() == list(range(1, len(files[::37]) + 1))


def test_a_file_rotated_on_before_it_was_opened_is_still_read(tmp_path: Path) -> None:
    """Following `train.log` (a name, not a glob): a file that was created and rotated on to
    `train.log.1` between two rounds, never seen under its first name, is read whole."""
    tail = Tail(tmp_path, patterns=("train.log",), watcher_factory=None)
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    with tail.driver as driver:  # rounds only when this test calls poll_once
        driver.poll_once()
        with open(log, "ab") as out:
            out.write(numbered(1, 10))
        os.rename(log, tmp_path / "train.log.1")
        log.write_bytes(numbered(11, 20))  # the file never seen
        os.rename(tmp_path / "train.log.1", tmp_path / "train.log.2")
        os.rename(log, tmp_path / "train.log.1")
        log.write_bytes(numbered(21, 30))
        driver.poll_once()
        driver.poll_once()
    assert sorted(tail.seqs()) == list(range(1, 31))
    assert tail.said("train.log.1: rotated before it could be opened") == 1
