"""Live alerts over real files: which source an alert belongs to, and why it ended."""

from __future__ import annotations

import os
from pathlib import Path

from logwatch.alerts import EndReason
from logwatch.testing import running
from tests.tailkit import BUILTIN, Tail

NAN = b"2026-11-28 14:09:09,201 INFO [train] step 1403/200000 | loss nan | grad_norm 1.2\n"


def test_a_truncation_ends_the_files_alerts_as_restarted(tmp_path: Path) -> None:
    """`truncate -s0` while nan-loss fires: the alert ends with reason restarted (not left
    firing, not recovered), and lines after it are a new run."""
    tail = Tail(tmp_path, rules=BUILTIN)
    log = tmp_path / "a.log"
    with running(tail.driver) as driver, open(log, "ab", buffering=0) as out:
        out.write(NAN)
        driver.sync()
        os.truncate(log, 0)
        out.write(b"seq=1 no loss here\n")
        driver.sync()
    nan = [e for e in tail.sink.events if e.rule == "nan-loss"]
    assert [(e.status, e.reason, e.line) for e in nan] == [
        ("firing", None, 1),
        ("resolved", EndReason.RESTARTED, 1),
    ]
    assert "truncated" in nan[1].summary
