"""An unterminated line that keeps growing: memory stays bounded by `--max-line-bytes`."""

from __future__ import annotations

import time
from pathlib import Path

from tests.drivers.test_tail_cli import Tailer
from tests.support.tailkit import wait_until

MIB = 1 << 20


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")


def test_a_150_mib_line_without_newline_keeps_memory_bounded(tmp_path: Path) -> None:
    """150 MiB appended without a newline, in 5 MiB chunks with partial flushes between them:
    the peak RSS of tail stays under 300 MiB, and once the newline comes the line has alerted
    once and the next line alerts too."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    tail = Tailer(tmp_path, "--partial-flush", "50ms", "--poll-interval", "50ms")
    tail.ready()
    chunk = b"x" * (5 * MIB)
    with open(log, "ab", buffering=0) as out:
        out.write(b"seq=1 ALERT ")
        for _ in range(30):
            out.write(chunk)
            time.sleep(0.12)  # longer than --partial-flush: the line is flushed as it grows
        out.write(b"\nseq=2 ALERT\n")
        wait_until(lambda: 2 in tail.seqs(), timeout_s=120)
    peak = _peak_rss_mib(tail.proc.pid)
    assert tail.finish() == 0, "".join(tail.err)
    assert tail.seqs() == [1, 2]
    assert peak < 300, f"peak RSS {peak:.0f} MiB"


def test_a_line_flushed_in_parts_keeps_only_max_line_bytes_and_counts_the_rest(
    tmp_path: Path,
) -> None:
    """A line flushed three times as it grows, then ended: every evaluation is at most
    `max_line_bytes` plus the marker, and the last one counts every byte dropped."""
    from logwatch.sources.follow import Follower, FollowOptions

    log = tmp_path / "a.log"
    log.write_bytes(b"")
    options = FollowOptions(max_line_bytes=100, partial_flush_s=1.0)
    follower = Follower.open(str(log), "a", options, now=0.0)
    texts: list[str] = []
    now = 0.0
    for part in (b"a" * 60, b"b" * 60, b"c" * 60, b"d\n"):
        with open(log, "ab") as out:
            out.write(part)
        now += 2.0
        for at in (now - 1.5, now):  # reads the new bytes, then flushes them (no newline)
            texts += [t for batch in follower.poll(at).batches for t in batch.text.to_list()]
    follower.close()
    assert all(len(t.split(" …[")[0]) <= 100 for t in texts), [len(t) for t in texts]
    assert texts[-1] == "a" * 60 + "b" * 40 + " …[logwatch: line truncated, 81 bytes dropped]"
