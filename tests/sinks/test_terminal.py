"""What a person sees of tail's text output: fitted to the terminal (tmux), NO_COLOR, which
alerts are silenced, arrival times for lines without a timestamp."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from logwatch.sinks.slack.silences import SilenceStore
from tests.drivers.test_tail_cli import PACK
from tests.support.paths import ROOT
from tests.support.tailkit import wait_until

NAN = b"2026-11-28 14:02:07,199 INFO step 5 | loss nan | lr 1e-4\n"
FIX_WORDS = [
    "resume",
    "from",
    "the",
    "last",
    "checkpoint",
    "before",
    "this",
    "step",
    "with",
    "a",
    "lower",
    "learning",
    "rate",
]


def tail_args(folder: Path, *extra: str) -> list[str]:
    """`logwatch tail folder/*.log` in text format, built-in rules plus `each-line`."""
    pack = folder / "pack.toml"
    pack.write_text(PACK, encoding="utf-8")
    args = [sys.executable, "-m", "logwatch.cli", "tail", str(folder / "*.log"), "--gpu", "off"]
    return [*args, "--rules", str(pack), "--state-dir", str(folder / "state"), *extra]


def run_on_pty(args: list[str], env: dict[str, str], seconds: float) -> str:
    """Run `args` with stdout on a pseudo-terminal for `seconds`; what it printed there."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=slave, stderr=subprocess.DEVNULL)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            os.set_blocking(master, False)
            try:
                out += os.read(master, 65536)
            except BlockingIOError:
                time.sleep(0.05)
            except OSError:  # EIO: the process has exited and closed the terminal
                break
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        os.close(master)
    return out.decode("utf-8", "replace")


@pytest.mark.parametrize(("no_color", "coloured"), [(None, True), ("", True), ("1", False)])
def test_no_color_turns_colour_off_even_on_a_terminal(
    tmp_path: Path, no_color: str | None, coloured: bool
) -> None:
    """On a TTY the timeline is coloured, unless NO_COLOR is set and non-empty."""
    (tmp_path / "a.log").write_bytes(NAN)
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    if no_color is not None:
        env["NO_COLOR"] = no_color
    args = [sys.executable, "-m", "logwatch.cli", "replay", str(tmp_path / "a.log")]
    out = run_on_pty(args, env, 60.0)  # a bound: it ends when replay exits and closes the terminal
    assert "nan-loss" in out
    assert ("\x1b[" in out) is coloured


def test_tail_marks_silenced_alerts_and_arrival_times(tmp_path: Path) -> None:
    """A silenced alert's row ends in `(silenced)`; a line without a timestamp and no timed
    line before it shows when it arrived, marked as such; one after a timed line takes that
    line's time, as in replay (`labels.ts_from_line`)."""
    (tmp_path / "a.log").write_bytes(b"")
    SilenceStore(tmp_path / "state").add("nan-loss", "*", 3600, "known", datetime.now())
    err = tmp_path / "tail.err"
    with err.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            tail_args(tmp_path), cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    assert proc.stdout is not None
    rows: list[str] = []
    pump = threading.Thread(target=lambda: rows.extend(iter(proc.stdout.readline, "")))  # type: ignore[union-attr]
    pump.start()
    try:
        wait_until(lambda: "following it" in err.read_text(), timeout_s=60)
        with open(tmp_path / "a.log", "ab") as log:
            log.write(b"seq=0 ALERT\n")
        wait_until(lambda: len(rows) >= 1)
        with open(tmp_path / "a.log", "ab") as log:
            log.write(NAN + b"seq=1 ALERT\n")
        wait_until(lambda: len(rows) >= 4)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        pump.join(timeout=10)
        proc.stdout.close()
    first_row, nan_row, _fix, seq_row = rows
    assert re.match(r"\d\d:\d\d:\d\d \(arrived\)   INFO  each-line", first_row), first_row
    assert nan_row.startswith("2026-11-28 14:02:07  CRIT  nan-loss")
    assert nan_row.rstrip("\n").endswith("(silenced)")
    assert seq_row.startswith("2026-11-28 14:02:07  INFO  each-line"), seq_row
    assert "(silenced)" not in seq_row


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_tail_fits_an_80_column_terminal(tmp_path: Path) -> None:
    """In an 80-column tmux pane no row is wider than the pane and the fix wraps at word
    boundaries (each word of it whole on some line)."""
    (tmp_path / "a.log").write_bytes(b"")
    err = tmp_path / "tail.err"
    command = " ".join(f"'{a}'" for a in tail_args(tmp_path)) + f" 2>'{err}'"
    # A tmux server of this test's own (socket name), without the user's config
    tmux = ["tmux", "-L", f"lw-{os.getpid()}-{uuid.uuid4().hex[:8]}", "-f", "/dev/null"]
    subprocess.run(
        [
            *tmux,
            "new-session",
            "-d",
            "-s",
            "tail",
            "-x",
            "80",
            "-y",
            "24",
            "-c",
            str(ROOT),
            command,
        ],
        check=True,
    )
    try:
        wait_until(lambda: err.exists() and "following it" in err.read_text(), timeout_s=60)
        with open(tmp_path / "a.log", "ab") as log:
            log.write(NAN)

        def pane() -> list[str]:
            done = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "tail"], capture_output=True, text=True
            )
            return done.stdout.splitlines()

        wait_until(lambda: any("checkpoint before" in line for line in pane()))
        lines = pane()
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
    text = [line for line in lines if line.strip()]
    assert max(len(line) for line in text) <= 80
    assert len([line for line in text if line.startswith(" ")]) >= 2  # summary/fix continued
    words = {w.strip(",.;") for line in text for w in line.split()}
    assert set(FIX_WORDS) <= words
