"""Fast rotation (issue 13): a real RotatingFileHandler writer, a real `logwatch tail`, no loss."""

from __future__ import annotations

import collections
import contextlib
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from logwatch.testing import rotating
from logwatch.testing.rotating import EACH_LINE_PACK
from tests.support.paths import ROOT
from tests.support.tailkit import wait_until

WRITER = Path(rotating.__file__)
RATE, SECONDS = 2500, 2.0
BACKUPS = 40
"""Rotated files kept (at ~20 rotations a second: 2 s of them). With the handler's default of 5,
a tail that a parallel test starves of CPU for a quarter second finds the oldest unread file
already deleted; the renames it must follow by inode are the same either way."""


def follow_rotating_writer(folder: Path, pattern: str, watcher: str = "auto") -> list[int]:
    """Run `logwatch tail PATTERN` (one alert per line) while a writer subprocess logs RATE
    numbered lines/s through a 10 KiB RotatingFileHandler (BACKUPS kept) for SECONDS; the seq
    numbers of the alerts it printed."""
    (folder / "pack.toml").write_text(EACH_LINE_PACK, encoding="utf-8")
    args = [str(folder / pattern), "--format", "jsonl", "--no-builtin-rules", "--gpu", "off"]
    args += ["--watcher", watcher]
    args += ["--rules", str(folder / "pack.toml"), "--state-dir", str(folder / "state")]
    tail = subprocess.Popen(
        [sys.executable, "-m", "logwatch", "tail", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out: list[str] = []
    err: list[str] = []
    pumps = [
        threading.Thread(target=lambda: out.extend(iter(tail.stdout.readline, b"")), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err.extend(iter(tail.stderr.readline, b"")), daemon=True),  # type: ignore[union-attr]
    ]
    for pump in pumps:
        pump.start()
    try:
        wait_until(lambda: bool(err))  # "no file matches ... yet": the watch is set up
        # by its path, not `-m`: the writer needs only the standard library, and `-m` would
        # import logwatch (polars and all) first, 0.35 s of CPU on the cores the tail needs
        writer = [sys.executable, str(WRITER), str(folder / "train.log")]
        pace = ["--rate", str(RATE), "--seconds", str(SECONDS), "--backups", str(BACKUPS)]
        subprocess.run([*writer, *pace], check=True)
        total = int(RATE * SECONDS)
        # A generous hang bound, not a timing assertion: what is lost never comes.
        with contextlib.suppress(AssertionError):
            wait_until(lambda: len(out) >= total, timeout_s=20.0)
    finally:
        tail.send_signal(signal.SIGTERM)
        tail.wait(timeout=30)
        for pump in pumps:
            pump.join(timeout=10)
        tail.stdout.close()  # type: ignore[union-attr]
        tail.stderr.close()  # type: ignore[union-attr]
    return [int(json.loads(line)["labels"]["seq"]) for line in out]


@pytest.mark.parametrize(
    ("pattern", "watcher"),
    [("train.log", "inotify"), ("train.log*", "inotify"), ("train.log", "watchdog")],
)
def test_fast_rotation_loses_and_repeats_no_line(
    tmp_path: Path, pattern: str, watcher: str
) -> None:
    """Every numbered line of a writer rotating ~20 times a second is alerted on exactly once,
    whether the rotated names match the pattern or not (a renamed file is known by its inode),
    with logwatch's own inotify reader and with watchdog's observer (`--watcher`)."""
    seen = follow_rotating_writer(tmp_path, pattern, watcher)
    total = int(RATE * SECONDS)
    missing = sorted(set(range(1, total + 1)) - set(seen))
    twice = sorted(n for n, count in collections.Counter(seen).items() if count > 1)
    assert (len(missing), twice[:10]) == (0, []), f"first missing: {missing[:10]}"
