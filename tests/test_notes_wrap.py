"""stderr notes on a terminal wrap at word boundaries to its width, continuation lines under the
text after `logwatch: ` (as the timeline wraps); in a pipe they stay one line each (grep)."""

from __future__ import annotations

import io
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from logwatch.redact import wrapped_note
from tests.support.paths import ROOT

NOTE = (
    "logwatch: /data/runs/2026-11-28/node07/rank3/train.log: cannot open (Permission denied); "
    "fix: chmod u+r /data/runs/2026-11-28/node07/rank3/train.log; retrying every 1s"
)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_note_wraps_at_words_on_a_terminal_and_not_in_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At 60 columns: no row wider than 60 but a path longer than the room, no word split,
    rows after the first indented by 10; the words are the note's. A pipe gets one line."""
    monkeypatch.setenv("COLUMNS", "60")
    shown = wrapped_note(NOTE, Tty())
    assert shown.splitlines() == [
        "logwatch: /data/runs/2026-11-28/node07/rank3/train.log:",
        "          cannot open (Permission denied); fix: chmod u+r",
        "          /data/runs/2026-11-28/node07/rank3/train.log;",
        "          retrying every 1s",
    ]
    assert shown.split() == NOTE.split()
    assert wrapped_note(NOTE, io.StringIO()) == NOTE


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_replay_notes_wrap_in_a_real_terminal(tmp_path: Path) -> None:
    """`logwatch replay` of a binary file in an 80-column tmux pane: its note is shown in rows
    of at most 80 columns (a path longer than that on a row of its own) that break between
    words, indented under `logwatch: `."""
    model = tmp_path / "model.bin"
    rng = random.Random(7)
    model.write_bytes(b"\x00" * 8192 + bytes(rng.randrange(256) for _ in range(120_000)))
    socket = f"lwwrap-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "rc"
    command = f"{shlex.quote(sys.executable)} -m logwatch replay {model} >/dev/null"
    script = f"cd {shlex.quote(str(ROOT))} && {command}; echo $? > {done}; sleep 30"

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", socket, "-f", "/dev/null", *args], capture_output=True, text=True
        ).stdout

    tmux("new-session", "-d", "-s", "w", "-x", "80", "-y", "20", "sh", "-c", script)
    try:
        deadline = time.monotonic() + 60
        while not (done.exists() and done.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        screen = tmux("capture-pane", "-p", "-J", "-t", "w")
    finally:
        tmux("kill-server")
    rows = [row.rstrip() for row in screen.splitlines() if row.strip()]
    assert rows[0].startswith("logwatch:") and len(rows) > 2, rows  # a long path goes under it
    assert all(len(row) <= 80 or len(row.split()) == 1 for row in rows)  # a word is whole
    assert all(row.startswith(" " * 10) and row[10] != " " for row in rows[1:])
    assert " ".join(rows).split()[-3:] == ["log", "you", "meant"]
