"""The inotify watcher: the same hints as watchdog's (written, created, structural), one call
per file for all the events one read returned, folders under a recursive root, a clean stop."""

from __future__ import annotations

import os
import shutil
import struct
import sys
import threading
from pathlib import Path

import pytest

from logwatch.sources.inotify import (
    IN_CREATE,
    IN_ISDIR,
    IN_MODIFY,
    InotifyWatcher,
    default_watcher,
    watcher_named,
)
from logwatch.sources.watch import WatchdogWatcher
from tests.support.tailkit import wait_until

Call = tuple[bool, str | None, str | None]


class Heard:
    """Records `on_event` calls (from the watcher's thread)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def __call__(
        self, structural: bool, created: str | None = None, changed: str | None = None
    ) -> None:
        with self._lock:
            self.calls.append((structural, created, changed))

    def changed(self) -> set[str]:
        with self._lock:
            return {c[2] for c in self.calls if c[2] is not None}

    def created(self) -> set[str]:
        with self._lock:
            return {c[1] for c in self.calls if c[1] is not None}

    def structural(self) -> int:
        with self._lock:
            return sum(c[0] for c in self.calls)


@pytest.fixture
def heard() -> Heard:
    return Heard()


def test_writes_creations_and_deletions_are_heard(tmp_path: Path, heard: Heard) -> None:
    """A new file is named as created (structural), a write as changed, a deletion is
    structural."""
    watcher = InotifyWatcher(heard)
    try:
        watcher.watch({str(tmp_path): False})
        log = tmp_path / "a.log"
        log.write_text("one\n")
        wait_until(lambda: str(log) in heard.created(), 5)
        with log.open("a") as out:
            out.write("two\n")
        wait_until(lambda: str(log) in heard.changed(), 5)
        before = heard.structural()
        log.unlink()
        wait_until(lambda: heard.structural() > before, 5)
    finally:
        watcher.stop()


def test_one_read_of_many_events_calls_once_per_file(tmp_path: Path, heard: Heard) -> None:
    """A read holding 30 writes to three files and a folder's creation calls `on_event` once
    per written file and once for the structural change, not once per event."""
    watcher = InotifyWatcher(heard)
    watcher.stop()  # only `_deliver` is exercised: no thread reads meanwhile
    watcher._paths[1] = str(tmp_path)

    def event(mask: int, name: str) -> bytes:
        raw = name.encode() + b"\0" * (16 - len(name))
        return struct.pack("iIII", 1, mask, 0, len(raw)) + raw

    raw = b"".join(event(IN_MODIFY, f"r{i % 3}.log") for i in range(30))
    raw += event(IN_CREATE | IN_ISDIR, "sub") + event(IN_MODIFY, "r0.log")
    watcher._deliver(raw)
    changed = [c for c in heard.calls if c[2] is not None]
    assert sorted(c[2] for c in changed) == [str(tmp_path / f"r{i}.log") for i in range(3)]
    assert heard.calls.count((True, None, None)) == 1
    assert len(heard.calls) == 4


def test_a_recursive_root_hears_a_new_folder_s_files(tmp_path: Path, heard: Heard) -> None:
    """Under a recursive root, a folder made later is watched too: a file written in it is
    heard of."""
    watcher = InotifyWatcher(heard)
    try:
        watcher.watch({str(tmp_path): True})
        sub = tmp_path / "run7"
        sub.mkdir()
        wait_until(lambda: heard.structural() > 0, 5)
        wait_until(lambda: len(watcher._paths) == 2, 5)
        log = sub / "rank0.log"
        log.write_text("x\n")
        with log.open("a") as out:
            out.write("y\n")
        wait_until(lambda: str(log) in heard.changed() | heard.created(), 5)
    finally:
        watcher.stop()


def test_a_root_removed_and_made_again_is_watched_again(tmp_path: Path, heard: Heard) -> None:
    """The same roots asked for again after one was removed and made anew: its new folder's
    writes are heard (its old watch ended with it)."""
    root = tmp_path / "logs"
    root.mkdir()
    watcher = InotifyWatcher(heard)
    try:
        watcher.watch({str(root): False})
        shutil.rmtree(root)
        wait_until(lambda: not watcher._paths, 5)
        root.mkdir()
        watcher.watch({str(root): False})
        (root / "a.log").write_text("x\n")
        wait_until(lambda: str(root / "a.log") in heard.created(), 5)
    finally:
        watcher.stop()


def test_stop_is_idempotent_and_ends_the_thread(tmp_path: Path, heard: Heard) -> None:
    """Stopping twice is harmless; the thread ends; a watcher made after reuses no closed
    descriptor of the first (its events still come)."""
    first = InotifyWatcher(heard)
    first.watch({str(tmp_path): False})
    assert first.is_alive()
    first.stop()
    second = InotifyWatcher(heard)
    try:
        first.stop()
        assert not first.is_alive() and second.is_alive()
        second.watch({str(tmp_path): False})
        (tmp_path / "b.log").write_text("x\n")
        wait_until(lambda: str(tmp_path / "b.log") in heard.created(), 5)
    finally:
        second.stop()


def test_a_root_that_is_gone_is_skipped(tmp_path: Path, heard: Heard) -> None:
    """A root that is gone is skipped (the rescan polls what events miss), the others are
    watched: a file made there, then deleted, is heard of each time."""
    watcher = InotifyWatcher(heard)
    try:
        watcher.watch({str(tmp_path / "gone"): False, str(tmp_path): False})
        assert list(watcher._paths.values()) == [str(tmp_path)]
        (tmp_path / "x").write_text("")
        wait_until(lambda: str(tmp_path / "x") in heard.created(), 5)
        made = heard.structural()
        os.remove(tmp_path / "x")
        wait_until(lambda: heard.structural() > made, 5)
    finally:
        watcher.stop()


def test_the_watcher_option_names_each_watcher_and_refuses_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`tail --watcher`: auto and inotify are logwatch's reader on Linux, watchdog is watchdog's
    observer; inotify off Linux and an unknown name are one line that names the choices."""
    assert watcher_named("auto") is default_watcher
    assert watcher_named("inotify") is InotifyWatcher
    assert watcher_named("watchdog") is WatchdogWatcher
    with pytest.raises(ValueError, match=r"unknown file-event watcher 'fsevents' .*auto, inotify"):
        watcher_named("fsevents")
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(ValueError, match="--watcher inotify needs Linux, not darwin; use"):
        watcher_named("inotify")
    assert watcher_named("auto") is default_watcher
