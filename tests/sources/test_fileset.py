"""FileSet: which files a tail follows, on real files, with the real watchdog where it matters."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from logwatch.sources.fileset import FileSet
from logwatch.sources.watch import WatchdogWatcher, may_match
from logwatch.testing import DeafWatcher, UnavailableWatcher
from tests.support.tailkit import wait_until


def fileset(folder: Path, pattern: str = "*.log", **kw: object) -> tuple[FileSet, list[str]]:
    """A FileSet over folder/pattern without a watcher, and the list its notes go to."""
    said: list[str] = []
    kw.setdefault("watcher_factory", None)
    files = FileSet([str(folder / pattern)], status=said.append, **kw)  # type: ignore[arg-type]
    return files, said


def test_expand_keeps_regular_files_and_says_once_what_it_skips(tmp_path: Path) -> None:
    """Regular matches come back sorted; a matching directory or FIFO is skipped, said once."""
    (tmp_path / "b.log").write_bytes(b"")
    (tmp_path / "a.log").write_bytes(b"")
    (tmp_path / "dir.log").mkdir()
    os.mkfifo(tmp_path / "pipe.log")
    files, said = fileset(tmp_path)
    assert files.expand() == [str(tmp_path / "a.log"), str(tmp_path / "b.log")]
    files.expand()
    assert sorted(said) == [
        f"skipping {tmp_path / 'dir.log'}: not a regular file (a directory)",
        f"skipping {tmp_path / 'pipe.log'}: not a regular file (a FIFO)",
    ]


def test_rescan_names_new_files_once_and_a_link_is_the_same_file(tmp_path: Path) -> None:
    """A file and a `latest.log` link to it are one file, under its real name, noted once; once
    opened it is no longer new."""
    (tmp_path / "run5.log").write_bytes(b"x\n")
    os.symlink(tmp_path / "run5.log", tmp_path / "latest.log")
    files, said = fileset(tmp_path)
    assert files.rescan(0.0) == [str(tmp_path / "run5.log")]
    follower = files.open(str(tmp_path / "run5.log"), 0.0)
    assert follower is not None and list(files.followers) == [follower.key]
    assert files.rescan(1.0) == []
    assert [m for m in said if "one file under 2 names" in m] == [
        f"{tmp_path / 'run5.log'}, {tmp_path / 'latest.log'}: one file under 2 names; "
        f"following it once as {tmp_path / 'run5.log'}"
    ]
    files.close()
    assert files.followers == {}


def test_a_renamed_file_keeps_its_follower_under_the_new_name(tmp_path: Path) -> None:
    """A followed file renamed within the glob is the same follower, with its path updated."""
    (tmp_path / "a.log").write_bytes(b"x\n")
    files, said = fileset(tmp_path)
    [path] = files.rescan(0.0)
    follower = files.open(path, 0.0)
    assert follower is not None
    os.rename(tmp_path / "a.log", tmp_path / "b.log")
    assert files.rescan(1.0) == []
    assert follower.path == str(tmp_path / "b.log")
    assert said == [f"{tmp_path / 'a.log'}: renamed to {tmp_path / 'b.log'}; still following it"]
    files.close()


def test_a_deleted_file_expires_after_rotate_wait(tmp_path: Path) -> None:
    """A deleted file is said once and asks for a rescan; it expires rotate_wait_s after."""
    (tmp_path / "a.log").write_bytes(b"x\n")
    files, said = fileset(tmp_path, rotate_wait_s=5.0)
    follower = files.open(str(tmp_path / "a.log"), 0.0)
    assert follower is not None
    files.rescan(0.0)
    os.remove(tmp_path / "a.log")
    assert not files.expired(follower, 1.0)
    assert files.rescan_due and follower.detached_at == 1.0
    assert not files.expired(follower, 5.0)
    assert files.expired(follower, 6.5)
    assert [m for m in said if "deleted" in m] == [
        f"{tmp_path / 'a.log'}: deleted; reading the old file to its end"
    ]
    files.drop(follower)
    assert files.followers == {}


def test_changes_rescans_only_when_due(tmp_path: Path) -> None:
    """Without a due rescan, a new file waits for the poll interval; a structural event asks at
    once and wakes the driver."""
    woken = threading.Event()
    files, _ = fileset(tmp_path, poll_interval_s=10.0, wake=woken.set)
    assert files.changes(0.0) == []
    assert files.rescan_due  # the first rescan's follow-up (a file made before the watch)
    assert files.changes(0.5) == []
    (tmp_path / "a.log").write_bytes(b"")
    assert files.changes(1.0) == []
    files.on_event(False)
    assert woken.is_set() and files.changes(2.0) == []
    files.on_event(True)
    assert files.changes(3.0) == [str(tmp_path / "a.log")]
    assert files.changes(12.0) == []
    assert files.changes(13.0) == [str(tmp_path / "a.log")]  # not opened yet: still new


def test_the_real_watcher_wakes_on_a_new_file(tmp_path: Path) -> None:
    """With watchdog, creating a matching file wakes the driver and makes a rescan due."""
    woken = threading.Event()
    files, _ = fileset(tmp_path, watcher_factory=WatchdogWatcher, wake=woken.set)
    files.start()
    try:
        files.rescan(0.0)
        assert files.rescan_due  # the first rescan's follow-up (a file made before the watch)
        files.rescan(0.05)
        assert not files.rescan_due
        (tmp_path / "a.log").write_bytes(b"x\n")
        wait_until(lambda: woken.is_set() and files.rescan_due)
        assert files.changes(0.1) == [str(tmp_path / "a.log")]
    finally:
        files.close()
    assert files.watcher is None


def test_a_dead_watcher_is_restarted_and_said_so(tmp_path: Path) -> None:
    """A watcher whose thread died is replaced on the next round, which also rescans."""
    files, said = fileset(tmp_path, watcher_factory=WatchdogWatcher)
    files.start()
    try:
        first = files.watcher
        assert first is not None
        files.rescan(0.0)
        first.stop()
        files.changes(0.1)
        assert files.watcher is not None and files.watcher is not first
        assert files.watcher.is_alive()
        assert said == ["the file-event watcher thread died; restarted it"]
    finally:
        files.close()


def test_without_inotify_it_says_it_polls(tmp_path: Path) -> None:
    """When no watcher can be made, the set says it polls, and rescans still find files."""
    files, said = fileset(tmp_path, watcher_factory=UnavailableWatcher(), poll_interval_s=2.0)
    files.start()
    (tmp_path / "a.log").write_bytes(b"")
    assert files.watcher is None
    assert files.changes(0.0) == [str(tmp_path / "a.log")]
    assert len(said) == 1 and "file events unavailable" in said[0]
    assert "polling every 2s instead" in said[0]


def test_a_path_that_cannot_be_stat_ed_keeps_its_follower_as_it_is(tmp_path: Path) -> None:
    """stat() failing with EACCES (a folder chmod 000 for a while; injected, since root ignores
    permission bits) neither detaches nor closes the follower, past rotate_wait."""
    path = str(tmp_path / "a.log")
    (tmp_path / "a.log").write_bytes(b"x\n")
    denied = threading.Event()

    def stat(name: str) -> os.stat_result:
        if denied.is_set() and name == path:
            raise PermissionError(13, "Permission denied", name)
        return os.stat(name)

    files, said = fileset(tmp_path, rotate_wait_s=5.0, stat=stat)
    follower = files.open(files.rescan(0.0)[0], 0.0)
    assert follower is not None
    denied.set()
    assert [files.expired(follower, now) for now in (1.0, 10.0, 20.0)] == [False] * 3
    assert follower.detached_at is None and list(files.followers) == [follower.key]
    assert said == [f"{path}: cannot be stat()ed (Permission denied); still reading the open file"]
    denied.clear()
    assert files.expired(follower, 30.0) is False and files.rescan(30.0) == []


def test_a_created_name_is_held_only_when_a_pattern_can_expand_to_it(tmp_path: Path) -> None:
    """`may_match` follows glob's rules per path part: no `/` in `*`, no hidden names."""
    log = str(tmp_path / "train.log")
    assert may_match(log, log) and may_match(log + ".3", str(tmp_path / "train.log*"))
    assert not may_match(log + ".3", log)
    assert not may_match(str(tmp_path / "sub" / "a.log"), str(tmp_path / "*.log"))
    assert not may_match(str(tmp_path / ".a.log"), str(tmp_path / "*.log"))


def test_a_file_made_between_the_first_match_and_the_watch_is_found_next_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first rescan matches the patterns, then sets the watch: a file made in between gives
    no event, and the next round still finds it (not at the rare rescan, 30 s on)."""
    files = FileSet(
        [str(tmp_path / "*.log")],
        status=lambda _: None,
        watcher_factory=DeafWatcher(),
        poll_interval_s=1.0,
    )
    files.start()
    real = files.matcher.by_file

    def match_then_create() -> Any:
        found = real()
        (tmp_path / "late.log").write_text("step 1 | loss nan\n", encoding="utf-8")
        return found

    monkeypatch.setattr(files.matcher, "by_file", match_then_create)
    try:
        assert files.rescan(0.0) == []
        monkeypatch.setattr(files.matcher, "by_file", real)
        assert files.changes(0.5) == [str(tmp_path / "late.log")]
    finally:
        files.close()
