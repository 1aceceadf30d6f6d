"""`logwatch tail` as a process, run where file modes bind it: a log it may not read at first
is picked up once it may (issue 31), from its start when new, from where it was when known."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.drivers.test_tail_cli import Tailer, alert_lines
from tests.support.process import CAN_BE_DENIED, Collected, unprivileged
from tests.support.tailkit import wait_until

pytestmark = pytest.mark.skipif(
    not CAN_BE_DENIED, reason="root reads any file, and setpriv is missing to drop that"
)

# Our first users' log format (samples/dflash/train_nan.log, lines 109 and 111).
HEALTHY = (
    "2026-11-28 14:08:48,764 INFO [train] step 1401/200000 | loss 3.1161 | acc 0.276 | "
    "lr 2.40e-05 | grad_norm 1.96 | tok/s 51449 | q_hs=24 q_hsb=[6,3,9,2,1,3]\n"
)
NAN = (
    "2026-11-28 14:08:56,538 INFO [train] step 1403/200000 | loss nan | acc 0.263 | "
    "lr 2.40e-05 | grad_norm inf | tok/s 52117 | q_hs=44 q_hsb=[3,7,9,9,8,8]\n"
)
POLL_S = 0.2
PICKED_UP_S = 10.0
"""Well past the poll interval, well short of the 30 s rescan that used to be the only retry."""


class BuiltinTail(Collected):
    """`logwatch tail 'logs/*.log'` with the built-in rules, polling every POLL_S."""

    def __init__(self, folder: Path) -> None:
        args = [str(folder / "logs" / "*.log"), "--format", "jsonl", "--gpu", "off"]
        args += ["--state-dir", str(folder / "state"), "--poll-interval", f"{POLL_S}s"]
        super().__init__(["tail", *args], prefix=unprivileged())

    def alerts(self) -> list[tuple[str, str, int]]:
        """(rule, source, line) of the alerts printed so far."""
        events = [json.loads(line) for line in list(self.out)]
        return [(e["rule"], e["source"], e["line"]) for e in events]

    def count(self, fragment: str) -> int:
        """How many stderr lines hold `fragment`."""
        return sum(fragment in line for line in list(self.err))


def appear_unreadable(path: Path, data: bytes) -> None:
    """Create `path` holding `data` with mode 000 in one step (written under a name the glob
    skips, then renamed into place), as a file written by another user appears."""
    hidden = path.with_name("." + path.name + ".tmp")
    hidden.write_bytes(data)
    hidden.chmod(0)
    os.rename(hidden, path)


def test_a_new_file_that_becomes_readable_is_read_from_its_start(tmp_path: Path) -> None:
    """A new log that appears with mode 000 already holding a NaN line is said once (what
    failed, on which file, the fix), not again while tail polls it; once made readable its NaN
    loss and grad norm alert within a few polls, and that it is readable again is said."""
    (tmp_path / "logs").mkdir()
    tail = BuiltinTail(tmp_path)
    try:
        wait_until(lambda: tail.said("waiting for one"))
        log = tmp_path / "logs" / "b.log"
        appear_unreadable(log, (HEALTHY + NAN).encode())
        wait_until(lambda: tail.said(f"{log}: cannot open (Permission denied) as user "))
        time.sleep(10 * POLL_S)  # ten polls that find it still unreadable: none says it again
        log.chmod(0o644)
        wait_until(lambda: len(tail.alerts()) >= 2, timeout_s=PICKED_UP_S)
        assert tail.alerts() == [("nan-loss", str(log), 2), ("nan-grad", str(log), 2)]
    finally:
        assert tail.stop() == 0
    assert tail.count(f"{log}: cannot open") == 1
    assert tail.count(f"fix: chmod u+r {log}") == 1
    assert tail.count(f"{log}: readable now") == 1
    assert tail.count(f"{log}: new file; following it from its first byte") == 1


def test_a_known_file_unreadable_at_restart_goes_on_from_its_checkpoint(tmp_path: Path) -> None:
    """A file followed before (checkpointed) that tail may not read when it starts again is
    read from where it was once readable: the lines written meanwhile alert, none before."""
    log = tmp_path / "a.log"
    log.write_bytes(alert_lines(1, 3))
    first = Tailer(tmp_path, "--from-beginning", prefix=unprivileged())
    wait_until(lambda: first.seqs() == [1, 2, 3])
    assert first.finish() == 0  # its last checkpoint: after line 3
    log.chmod(0)
    with open(log, "ab") as out:
        out.write(alert_lines(4, 5))
    second = Tailer(tmp_path, "--poll-interval", f"{POLL_S}s", prefix=unprivileged())
    try:
        wait_until(lambda: second.said(f"{log}: cannot open (Permission denied)"))
        log.chmod(0o644)
        wait_until(lambda: len(second.seqs()) == 2, timeout_s=PICKED_UP_S)
        assert second.seqs() == [4, 5]
        assert second.said(f"{log}: resuming at line 4 (checkpoint)")
        assert second.said(f"{log}: readable now")
    finally:
        assert second.finish() == 0


def test_a_followed_file_whose_read_permission_goes_and_comes_back_loses_nothing(
    tmp_path: Path,
) -> None:
    """Taking a followed file's permissions away mid-run (chmod 000) and giving them back
    neither loses a line written meanwhile nor reads one twice, and says nothing about it:
    the file is read through the handle opened before."""
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    tail = Tailer(tmp_path, "--poll-interval", f"{POLL_S}s", prefix=unprivileged())
    try:
        tail.ready()
        log.chmod(0)
        with open(log, "ab") as out:
            out.write(alert_lines(1, 2))
        wait_until(lambda: len(tail.seqs()) == 2)
        log.chmod(0o644)
        with open(log, "ab") as out:
            out.write(alert_lines(3, 4))
        wait_until(lambda: len(tail.seqs()) == 4)
        assert tail.seqs() == [1, 2, 3, 4]
    finally:
        assert tail.finish() == 0
    assert not tail.said("cannot open") and not tail.said("readable now")
