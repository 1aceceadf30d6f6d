"""Live alerts over real files: which source an alert belongs to, and why it ended."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from logwatch.alerts import EndReason
from logwatch.testing import running
from tests.support.tailkit import BUILTIN, Tail

NAN = b"2026-11-28 14:09:09,201 INFO [train] step 1403/200000 | loss nan | grad_norm 1.2\n"


def _step(step: int, loss: str) -> bytes:
    return f"2026-11-28 14:09:09,201 INFO [train] step {step}/200000 | loss {loss}\n".encode()


def _write_both(old: Path, new: Path, pairs: int) -> None:
    """The old run keeps writing NaN into its (renamed) file while the new run writes finite
    losses into the fresh one, interleaved, from another thread."""
    with open(old, "ab", buffering=0) as bad, open(new, "ab", buffering=0) as good:
        for i in range(pairs):
            bad.write(_step(2000 + i, "nan"))
            good.write(_step(1 + i, "2.5"))
            time.sleep(0.002)


def _rotate_while_both_write(tmp_path: Path, moved_to: Path, patterns: tuple[str, ...]) -> Tail:
    """train.log fires nan-loss, is renamed to `moved_to`, a new train.log starts, and both
    are written at once; returns the tail after everything was read."""
    tail = Tail(tmp_path, rules=BUILTIN, patterns=patterns)
    log = tmp_path / "train.log"
    with running(tail.driver) as driver:
        log.write_bytes(NAN)
        driver.sync()
        os.rename(log, moved_to)
        writer = threading.Thread(target=_write_both, args=(moved_to, log, 300))
        writer.start()
        while writer.is_alive():
            driver.sync()
        writer.join()
        driver.sync()
    return tail


def _by_source(tail: Tail, rule: str) -> dict[str, list[tuple[str, str | None]]]:
    out: dict[str, list[tuple[str, str | None]]] = {}
    for e in tail.sink.events:
        if e.rule == rule:
            out.setdefault(e.source, []).append((e.status, e.reason))
    return out


def _lines_in_order(tail: Tail) -> dict[str, list[int]]:
    lines: dict[str, list[int]] = {}
    for source, line, _ in tail.rec.seen:
        lines.setdefault(source, []).append(line)
    return lines


def test_a_renamed_file_and_its_successor_are_two_sources(tmp_path: Path) -> None:
    """`mv train.log train.log.old` while the old run writes NaN and a new train.log is
    written: the old file becomes source train.log.old (found by inode); nan-loss fired once
    (under train.log, the name the file had then) and goes on firing under train.log.old without
    flapping or being repeated; the new train.log has its own state; each source numbers its
    own lines."""
    old = tmp_path / "train.log.old"
    tail = _rotate_while_both_write(tmp_path, old, ("train.log",))
    new_name, old_name = str(tmp_path / "train.log"), str(old)
    assert _by_source(tail, "nan-loss") == {new_name: [("firing", None)]}
    assert [e.rule for e in tail.driver.engine.active_alerts(old_name)] == ["nan-loss"]
    assert tail.driver.engine.active_alerts(new_name) == []
    lines = _lines_in_order(tail)
    # Until the new train.log is seen, the renamed file is still train.log: its first k lines
    # (line 1, and any the old run wrote before that) go by that name, the rest by the new one.
    k = len(lines[new_name]) - 300
    assert k >= 1 and lines[new_name] == [*range(1, k + 1), *range(1, 301)]
    assert lines[old_name] == list(range(k + 1, 302))
    saved = json.loads((tmp_path / "state" / "checkpoint.json").read_text())
    assert set(saved["sources"]) == {new_name, old_name}
    assert {f["path"]: f["source"] for f in saved["files"]}[new_name] == new_name


def test_a_file_moved_out_of_sight_is_named_rotated(tmp_path: Path) -> None:
    """A rotated file whose new name cannot be found (moved to another folder) is the source
    `train.log (rotated)`, with its own rule state and the alert it had."""
    (tmp_path / "archive").mkdir()
    tail = _rotate_while_both_write(tmp_path, tmp_path / "archive" / "train.log", ("train.log",))
    new_name = str(tmp_path / "train.log")
    assert _by_source(tail, "nan-loss") == {new_name: [("firing", None)]}
    rotated = tail.driver.engine.active_alerts(f"{new_name} (rotated)")
    assert [e.rule for e in rotated] == ["nan-loss"]
    assert tail.driver.engine.active_alerts(new_name) == []


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


def test_a_folder_gone_for_a_while_continues_its_files_instead_of_rereading(
    tmp_path: Path,
) -> None:
    """logs/ renamed away past rotate_wait and back (ENOENT, then the same inode, as an
    unreadable folder would be for a moment): the file goes on from its offset; nothing is read
    or fired twice."""
    logs = tmp_path / "logs"
    logs.mkdir()
    tail = Tail(tmp_path, rules=BUILTIN, patterns=("logs/*.log",), rotate_wait_s=5.0)
    log = logs / "train.log"
    with running(tail.driver) as driver:
        log.write_bytes(NAN + _step(1404, "nan"))
        driver.sync()
        os.rename(logs, tmp_path / "away")
        driver.sync()
        tail.clock.advance(6.0)
        driver.sync()
        assert driver.files.followers == {}  # closed: its path named nothing for too long
        os.rename(tmp_path / "away", logs)
        driver.sync()
        with open(log, "ab") as out:
            out.write(_step(1405, "2.5"))
        driver.sync()
    assert [(e.rule, e.status, e.line) for e in tail.sink.events] == [
        ("nan-loss", "firing", 1),
        ("nan-loss", "resolved", 3),
    ]
    assert [line for _, line, _ in tail.rec.seen] == [1, 2, 3]
    assert tail.said("continuing at line 3") == 1
