"""Checkpoints and the state directory: resume where we were, never twice, never two owners."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from logwatch.errors import StateError
from logwatch.testing import running
from tests.support.tailkit import BUILTIN, Tail, numbered


def nan_at(seq: int, first: int, last: int) -> bytes:
    """Numbered lines with a loss, non-finite on line `seq`."""
    return "".join(
        f"seq={i} loss={'nan' if i == seq else '2.5'}\n" for i in range(first, last + 1)
    ).encode()


def test_restart_resumes_from_the_checkpoint_without_repeats(tmp_path: Path) -> None:
    """A second run reads only the new lines, even with --from-beginning, and the alert the first
    run left firing resolves in the second without firing again."""
    log = tmp_path / "a.log"
    first = Tail(tmp_path, rules=BUILTIN)
    with running(first.driver) as driver:
        log.write_bytes(nan_at(100, 1, 100))
        driver.sync()
    assert first.alerts() == [(100, "nan-loss", "firing")]
    with open(log, "ab") as out:
        out.write(nan_at(0, 101, 150))
    second = Tail(tmp_path, rules=BUILTIN, start="beginning")
    with running(second.driver) as driver:
        driver.sync()
    assert second.seqs() == list(range(101, 151))
    assert second.alerts() == [(101, "nan-loss", "resolved")]
    assert "firing since line 100" in second.sink.events[0].summary
    assert second.said("resuming at line 101 (checkpoint)") == 1


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 512,
        b"",
        b'{"version": 1, "files": [{"path": "a.log"',
        b'{"version": 1, "files": 3}',
    ],
    ids=["nuls", "empty", "truncated-json", "wrong-shape"],
)
def test_a_corrupt_checkpoint_is_reported_and_set_aside(tmp_path: Path, content: bytes) -> None:
    """A checkpoint of NULs, empty, cut short or of the wrong shape is moved aside with a
    message; tail starts as if it had none, and the next start finds a good one."""
    (tmp_path / "a.log").write_bytes(numbered(1, 20))
    state = tmp_path / "state"
    state.mkdir()
    (state / "checkpoint.json").write_bytes(content)
    tail = Tail(tmp_path)
    with running(tail.driver) as driver:
        driver.sync()
    assert tail.said("corrupt checkpoint") == 1
    assert len(list(state.glob("checkpoint.json.corrupt-*"))) == 1
    assert tail.seqs() == list(range(1, 21))
    again = Tail(tmp_path)
    with running(again.driver) as driver:
        driver.sync()
    assert again.said("corrupt checkpoint") == 0 and again.seqs() == []


def test_an_unreadable_engine_state_is_set_aside_too(tmp_path: Path) -> None:
    """Valid JSON whose engine state is malformed is treated as corrupt, not as a crash."""
    (tmp_path / "a.log").write_bytes(numbered(1, 5))
    state = tmp_path / "state"
    state.mkdir()
    bad = {"version": 1, "files": [], "sources": {"x": {"stats": 7}}}
    (state / "checkpoint.json").write_text(json.dumps(bad), encoding="utf-8")
    tail = Tail(tmp_path)
    with running(tail.driver) as driver:
        driver.sync()
    assert tail.said("corrupt checkpoint") == 1
    assert tail.seqs() == [1, 2, 3, 4, 5]


def test_a_second_driver_on_the_same_state_dir_is_refused(tmp_path: Path) -> None:
    """While one tail holds the state directory, another refuses to start and names the holder."""
    first, second = Tail(tmp_path), Tail(tmp_path)
    with first.driver, pytest.raises(StateError, match=r"another logwatch \(pid \d+\)"):
        second.driver.open()
    with second.driver:  # free again once the first has closed
        pass


def test_a_file_rewritten_in_place_while_stopped_is_read_from_the_start(tmp_path: Path) -> None:
    """Same inode, other first bytes: the checkpoint's offset is not trusted."""
    log = tmp_path / "a.log"
    log.write_bytes(numbered(1, 100))
    first = Tail(tmp_path)
    with running(first.driver) as driver:
        driver.sync()
    inode = log.stat().st_ino
    with open(log, "r+b") as out:
        out.truncate(0)
        out.write(numbered(1001, 1050))
    assert log.stat().st_ino == inode
    second = Tail(tmp_path)
    with running(second.driver) as driver:
        driver.sync()
    assert second.seqs() == list(range(1001, 1051))
    assert second.said("not the file the checkpoint knew") == 1


def test_rotation_while_stopped_resumes_the_renamed_file(tmp_path: Path) -> None:
    """Lines appended before a rename that happened while logwatch was down are read from the
    renamed file at the checkpoint's offset; the new file is read whole; nothing twice."""
    log = tmp_path / "a.log"
    log.write_bytes(numbered(1, 100))
    first = Tail(tmp_path, patterns=("*.log*",))
    with running(first.driver) as driver:
        driver.sync()
    with open(log, "ab") as out:
        out.write(numbered(101, 120))
    os.rename(log, tmp_path / "a.log.1")
    log.write_bytes(numbered(121, 150))
    second = Tail(tmp_path, patterns=("*.log*",))
    with running(second.driver) as driver:
        driver.sync()
    assert sorted(second.seqs()) == list(range(101, 151))


def test_checkpoint_holds_only_finished_lines_and_the_flushed_partial(tmp_path: Path) -> None:
    """A partial line evaluated by partial_flush is not evaluated again after a restart when its
    newline arrives; a partial line not yet evaluated is evaluated by the next run."""
    log = tmp_path / "a.log"
    first = Tail(tmp_path, partial_flush_s=5.0)
    with running(first.driver) as driver, open(log, "ab", buffering=0) as out:
        out.write(b"seq=1\nseq=2 half")
        driver.sync()
        first.clock.advance(6.0)
        driver.sync()
        out.write(b"\nseq=3 unfinished")
        driver.sync()
    assert first.rec.texts() == ["seq=1", "seq=2 half"]
    with open(log, "ab") as out:
        out.write(b"\nseq=4\n")
    second = Tail(tmp_path)
    with running(second.driver) as driver:
        driver.sync()
    assert [(line, text) for _, line, text in second.rec.seen] == [
        (3, "seq=3 unfinished"),
        (4, "seq=4"),
    ]


@pytest.mark.parametrize(
    ("field", "value"),
    [("evaluated_end", "12"), ("source", 5), ("prefix_sha", None), ("offset", True), ("line", 0)],
)
def test_a_file_entry_of_the_wrong_types_is_set_aside(
    tmp_path: Path, field: str, value: object
) -> None:
    """A checkpoint entry for the very file being followed, with a wrongly typed field, is
    corrupt: set aside with a message, never a crash on every start."""
    (tmp_path / "a.log").write_bytes(numbered(1, 5))
    first = Tail(tmp_path)
    with running(first.driver) as driver:
        driver.sync()
    checkpoint = tmp_path / "state" / "checkpoint.json"
    data = json.loads(checkpoint.read_text(encoding="utf-8"))
    data["files"][0][field] = value
    checkpoint.write_text(json.dumps(data), encoding="utf-8")
    tail = Tail(tmp_path)
    with running(tail.driver) as driver:
        driver.sync()
    assert tail.said("corrupt checkpoint") == 1
    assert tail.seqs() == [1, 2, 3, 4, 5]
