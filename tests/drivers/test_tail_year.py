"""The year that yearless lines (syslog, glog) take survives a restart of `tail`."""

from __future__ import annotations

from pathlib import Path

from logwatch.rules.loader import load_pack
from logwatch.sources.follow import Position
from logwatch.testing import running
from tests.support.tailkit import Tail

PACK = """
[[rule]]
id = "each-alert"
type = "match"
severity = "info"
pattern = 'ALERT (?P<seq>\\d+)'
summary = "{text}"
"""


def test_a_restart_keeps_the_year_of_the_last_dated_line(tmp_path: Path) -> None:
    """A 2024-dated line, then yearless lines; after a stop and a restart, a new yearless line
    that fires still takes 2024 (not the year the file was last written)."""
    (tmp_path / "pack.toml").write_text(PACK, encoding="utf-8")
    rules = load_pack(tmp_path / "pack.toml")
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    first = Tail(tmp_path, rules=rules)
    with running(first.driver) as driver:
        with open(log, "ab") as out:
            out.write(b"2024-11-27 23:59:58,000 INFO run start\n")
            out.write(b"Nov 28 00:00:01 host trainer: ALERT 1\n")
        driver.sync()
    assert [e.ts.year for e in first.sink.events if e.ts] == [2024]
    with open(log, "ab") as out:
        out.write(b"I1128 00:00:02.000000 123 train.py:9] ALERT 2\n")
    second = Tail(tmp_path, rules=rules)
    with running(second.driver) as driver:
        driver.sync()
    assert second.said("resuming at line 3") == 1
    [event] = second.sink.events
    assert event.labels["seq"] == "2"
    assert event.ts is not None and event.ts.year == 2024
    assert (event.ts.month, event.ts.day) == (11, 28)


def test_a_checkpoint_entry_without_the_newer_fields_still_loads() -> None:
    """An older checkpoint's file entry (no year, no generation, no evaluated_end) is read,
    the missing fields taking their defaults."""
    old = {
        "source": "a.log",
        "path": "/logs/a.log",
        "dev": 1,
        "ino": 2,
        "prefix_len": 0,
        "prefix_sha": "x",
        "offset": 10,
        "line": 3,
    }
    pos = Position.from_json(old)
    assert (pos.year, pos.generation, pos.evaluated_end) == (None, 0, None)
    assert Position.from_json(pos.to_json()) == pos
    assert Position.from_json({**old, "year": 2024}).year == 2024


def test_catch_up_keeps_each_files_year_to_itself_and_carries_it_live(tmp_path: Path) -> None:
    """Two histories caught up together: the yearless line of the second file takes its own
    file's year, not the first file's 2024; the first file's yearless line written live after
    the catch-up takes 2024 (its last dated line), not its modification year."""
    import os
    from datetime import datetime

    (tmp_path / "pack.toml").write_text(PACK, encoding="utf-8")
    rules = load_pack(tmp_path / "pack.toml")
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(
        b"2024-11-27 23:59:58,000 INFO run start\nNov 28 00:00:01 host trainer: ALERT 1\n"
    )
    second.write_bytes(b"Nov 28 00:00:02 host trainer: ALERT 2\n")
    written = datetime(2025, 6, 1).timestamp()
    for log in (first, second):
        os.utime(log, (written, written))
    tail = Tail(tmp_path, rules=rules, start="beginning")
    with running(tail.driver) as driver:
        driver.sync()
        with open(first, "ab") as out:
            out.write(b"Nov 28 00:00:03 host trainer: ALERT 3\n")
        driver.sync()
    years = {e.labels["seq"]: e.ts.year for e in tail.sink.events if e.ts is not None}
    assert years == {"1": 2024, "2": 2025, "3": 2024}
