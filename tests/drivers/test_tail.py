"""`logwatch tail` following real files with a real watchdog observer: every line exactly once."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from logwatch.sources.framing import TRUNCATION_MARKER
from logwatch.sources.watch import fs_type
from logwatch.testing import UnavailableWatcher, running
from tests.support.tailkit import Tail, numbered, wait_until


def test_steady_appends_are_delivered_once_in_order(tmp_path: Path) -> None:
    """Lines appended in several writes reach the engine once each, in file order."""
    tail = Tail(tmp_path)
    with running(tail.driver) as driver, open(tmp_path / "a.log", "ab", buffering=0) as out:
        for first in range(1, 601, 200):
            out.write(numbered(first, first + 199))
            driver.sync()
    assert tail.seqs() == list(range(1, 601))
    assert [line for _, line, _ in tail.rec.seen] == list(range(1, 601))


def test_file_events_wake_the_reader_before_the_safety_poll(tmp_path: Path) -> None:
    """With a 60 s safety poll, inotify events alone deliver appends and a new matching file."""
    tail = Tail(tmp_path, poll_interval_s=60.0)
    (tmp_path / "a.log").write_bytes(b"")
    with running(tail.driver):
        with open(tmp_path / "a.log", "ab") as out:
            out.write(numbered(1, 10))
        wait_until(lambda: len(tail.seqs()) == 10)
        (tmp_path / "b.log").write_bytes(numbered(11, 20))
        wait_until(lambda: len(tail.seqs()) == 20)
    assert sorted(tail.seqs()) == list(range(1, 21))


def test_new_file_matching_the_glob_is_read_from_its_first_byte(tmp_path: Path) -> None:
    """A file created after start is read from byte 0; a file the glob misses is ignored."""
    tail = Tail(tmp_path)
    with running(tail.driver) as driver:
        (tmp_path / "new.log").write_bytes(numbered(1, 50))
        (tmp_path / "other.txt").write_bytes(numbered(900, 910))
        driver.sync()
    assert tail.seqs() == list(range(1, 51))
    assert tail.said("new.log: new file") == 1


def test_rename_rotation_drains_the_old_handle_then_reads_the_new_file(tmp_path: Path) -> None:
    """After `mv a.log a.log.1`, lines the writer still appends to the old handle and the new
    a.log's lines all arrive once; the old file is closed after rotate_wait of quiet."""
    tail = Tail(tmp_path, rotate_wait_s=5.0)
    log = tmp_path / "a.log"
    with running(tail.driver) as driver, open(log, "ab", buffering=0) as old:
        old.write(numbered(1, 100))
        driver.sync()
        os.rename(log, tmp_path / "a.log.1")
        old.write(numbered(101, 150))
        with open(log, "ab", buffering=0) as new:
            new.write(numbered(151, 200))
            driver.sync()
            old.write(numbered(201, 220))
            driver.sync()
            tail.clock.advance(6.0)
            driver.sync()
            assert len(driver.files.followers) == 1
    assert sorted(tail.seqs()) == list(range(1, 221))
    assert tail.said("old file read to its end") == 1


def test_rotated_name_matched_by_the_glob_is_not_read_twice(tmp_path: Path) -> None:
    """With a glob that matches `a.log.1` too, the renamed file is known by its inode."""
    tail = Tail(tmp_path, patterns=("*.log*",))
    log = tmp_path / "a.log"
    with running(tail.driver) as driver:
        for round_no in range(3):
            first = round_no * 100 + 1
            with open(log, "ab") as out:
                out.write(numbered(first, first + 99))
            driver.sync()
            os.rename(log, tmp_path / f"a.log.{round_no + 1}")
            driver.sync()
    assert sorted(tail.seqs()) == list(range(1, 301))
    assert tail.said("renamed to") == 3


def test_copytruncate_reads_the_truncated_file_from_the_start(tmp_path: Path) -> None:
    """cp a.log a.log.1 && truncate a.log: the writer's next lines are read from byte 0, once."""
    tail = Tail(tmp_path)
    log = tmp_path / "a.log"
    with running(tail.driver) as driver, open(log, "ab", buffering=0) as out:
        out.write(numbered(1, 100))
        driver.sync()
        shutil.copy(log, tmp_path / "a.log.1")
        os.truncate(log, 0)
        out.write(numbered(101, 150))
        driver.sync()
    assert tail.seqs() == list(range(1, 151))
    assert tail.said("truncated") == 1


def test_truncation_then_regrowth_past_the_offset_is_detected(tmp_path: Path) -> None:
    """A file truncated and rewritten beyond the old offset between two polls is read from 0
    (its first bytes changed), so nothing of the new content is skipped."""
    tail = Tail(tmp_path)
    log = tmp_path / "a.log"
    log.write_bytes(numbered(1, 100))
    with tail.driver as driver:  # rounds only when this test calls poll_once
        driver.poll_once()
        with open(log, "wb") as out:
            out.write(numbered(101, 400))
        driver.poll_once()
    assert tail.seqs() == list(range(1, 401))
    assert tail.said("first bytes changed") == 1


def test_deleted_file_is_read_to_the_end_while_the_writer_holds_it(tmp_path: Path) -> None:
    """`rm a.log` with unread lines and a writer still appending: every line arrives."""
    tail = Tail(tmp_path, rotate_wait_s=5.0)
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    with running(tail.driver) as driver, open(log, "ab", buffering=0) as out:
        driver.sync()
        out.write(numbered(1, 100))
        os.remove(log)
        out.write(numbered(101, 200))
        driver.sync()
        tail.clock.advance(6.0)
        driver.sync()
        assert driver.files.followers == {}
    assert tail.seqs() == list(range(1, 201))
    assert tail.said("a.log: deleted") == 1


def test_partial_line_is_evaluated_after_quiet_and_not_counted_again(tmp_path: Path) -> None:
    """An unterminated last line waits for partial_flush, is evaluated once as line 2, and its
    late newline adds no line; a line that changed before its newline is re-evaluated as line 4."""
    tail = Tail(tmp_path, partial_flush_s=5.0)
    log = tmp_path / "a.log"
    with running(tail.driver) as driver, open(log, "ab", buffering=0) as out:
        out.write(b"seq=1\nseq=2 loss=0.51")
        driver.sync()
        assert tail.seqs() == [1]
        tail.clock.advance(4.0)
        driver.sync()
        assert tail.seqs() == [1]
        tail.clock.advance(1.5)
        driver.sync()
        out.write(b"\nseq=3\nseq=4 loss=0.")
        driver.sync()
        tail.clock.advance(6.0)
        driver.sync()
        out.write(b"5\nseq=5\n")
        driver.sync()
    assert [(line, text) for _, line, text in tail.rec.seen] == [
        (1, "seq=1"),
        (2, "seq=2 loss=0.51"),
        (3, "seq=3"),
        (4, "seq=4 loss=0."),
        (4, "seq=4 loss=0.5"),
        (5, "seq=5"),
    ]


def test_progress_bar_yields_its_latest_state_without_flooding(tmp_path: Path) -> None:
    """1000 `\\r` redraws over 10 s become at most one record per second for that line, each its
    latest state, then the final state; the next line keeps its number."""
    tail = Tail(tmp_path, progress_interval_s=1.0)
    with running(tail.driver) as driver, open(tmp_path / "a.log", "ab", buffering=0) as out:
        out.write(b"seq=1\n")
        for burst in range(10):
            out.write(b"".join(b"\rtrain %4d/1000" % (burst * 100 + i) for i in range(1, 101)))
            driver.sync()
            tail.clock.advance(1.0)
        out.write(b" done\nseq=3\n")
        driver.sync()
    bar = [(line, text) for _, line, text in tail.rec.seen if "train" in text]
    assert 5 <= len(bar) <= 11
    assert {line for line, _ in bar} == {2}
    assert bar[-1] == (2, "train 1000/1000 done")
    assert all("\r" not in text and text.startswith("train") for _, text in bar)
    assert tail.seqs() == [1, 3] and tail.rec.seen[-1][1] == 3


def test_a_50mb_line_is_truncated_and_following_goes_on(tmp_path: Path) -> None:
    """A 50 MB line arrives truncated with the marker; the lines after it, and later appends,
    still arrive once each."""
    tail = Tail(tmp_path)
    with running(tail.driver) as driver, open(tmp_path / "a.log", "ab", buffering=0) as out:
        out.write(b"x" * (50 << 20))
        out.write(b"\n" + numbered(1, 10))
        driver.sync()
        out.write(numbered(11, 20))
        driver.sync()
    first = tail.rec.seen[0][2]
    assert first.startswith("x" * 1000)
    assert first.endswith(TRUNCATION_MARKER.format(dropped=(50 << 20) - (1 << 20)))
    assert tail.seqs() == list(range(1, 21))


def test_invalid_utf8_nuls_and_crlf_are_delivered_cleanly(tmp_path: Path) -> None:
    """Bad UTF-8 and NULs become U+FFFD, CRLF loses its CR, and every line still arrives."""
    tail = Tail(tmp_path)
    data = b"seq=1 bad \xff\xfe\nseq=2 nul \x00\x00\x00\r\nseq=3 ok\r\n"
    with running(tail.driver) as driver:
        (tmp_path / "a.log").write_bytes(data)
        driver.sync()
    assert tail.rec.texts() == [
        "seq=1 bad \ufffd\ufffd",
        "seq=2 nul \ufffd\ufffd\ufffd",
        "seq=3 ok",
    ]


def test_a_dead_observer_is_restarted_and_said_so(tmp_path: Path) -> None:
    """When the watchdog observer thread dies, the next round restarts it (and says so), and
    events wake the reader again without waiting for the 60 s safety poll."""
    tail = Tail(tmp_path, poll_interval_s=60.0)
    (tmp_path / "a.log").write_bytes(b"")
    with running(tail.driver) as driver:
        assert driver.files.watcher is not None
        driver.files.watcher.stop()
        driver.sync()
        assert tail.said("watcher thread died; restarted it") == 1
        with open(tmp_path / "a.log", "ab") as out:
            out.write(numbered(1, 5))
        wait_until(lambda: len(tail.seqs()) == 5)
    assert tail.seqs() == [1, 2, 3, 4, 5]


def test_without_inotify_it_warns_and_polls(tmp_path: Path) -> None:
    """When inotify is out of watches, tail says it polls instead, and lines still arrive."""
    tail = Tail(tmp_path, watcher_factory=UnavailableWatcher())
    with running(tail.driver) as driver:
        (tmp_path / "a.log").write_bytes(numbered(1, 30))
        driver.sync()
    assert tail.said("file events unavailable") == 1
    assert tail.said("polling every 1s") == 1
    assert tail.seqs() == list(range(1, 31))


def test_network_file_systems_are_recognised_for_polling(tmp_path: Path) -> None:
    """The mount table decides the file-system type of a path (longest mount prefix wins)."""
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "rootfs / ext4 rw 0 0\nserver:/export /mnt/runs nfs4 rw 0 0\n", encoding="utf-8"
    )
    assert fs_type("/mnt/runs/job1/train.log", str(mounts)) == "nfs4"
    assert fs_type("/mnt/runsX/train.log", str(mounts)) == "ext4"


def test_a_latest_symlink_in_the_glob_is_one_file(tmp_path: Path) -> None:
    """`current.log -> run5.log` both matching the glob: the file is followed once, said once,
    and no endless 'renamed' messages alternate between the two names."""
    (tmp_path / "run5.log").write_bytes(numbered(1, 10))
    (tmp_path / "current.log").symlink_to(tmp_path / "run5.log")
    tail = Tail(tmp_path)
    with running(tail.driver) as driver, open(tmp_path / "run5.log", "ab", buffering=0) as out:
        for first in (11, 21, 31):
            out.write(numbered(first, first + 9))
            for _ in range(3):  # safety polls, each re-expanding the glob
                tail.clock.advance(1.5)
                driver.wake(structural=True)
                driver.sync()
    assert tail.seqs() == list(range(1, 41))
    assert tail.said("one file under 2 names; following it once as") == 1
    assert tail.said("renamed") == 0
