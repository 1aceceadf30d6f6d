"""`logwatch top` with stdout piped: a plain status line per source every interval, no escapes."""

from __future__ import annotations

import contextlib
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.paths import ROOT
from tests.top.tmuxkit import START_S, append, run_start, step_line


class Piped:
    """`logwatch top` with stdout and stderr on pipes; stdout lines collected as they come."""

    def __init__(self, folder: Path, *extra: str) -> None:
        args = [
            str(folder / "logs" / "*.log"),
            "--state-dir",
            str(folder / "state"),
            "--gpu",
            "off",
        ]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logwatch", "top", *args, "--interval", "0.5s", *extra],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)

    def wait_for(self, check: Callable[[list[str]], bool], timeout_s: float = 20.0) -> list[str]:
        """The lines so far, once `check` accepts them."""
        deadline = time.monotonic() + timeout_s
        while not check(self.lines):
            if time.monotonic() > deadline:
                raise AssertionError(f"never matched; output so far: {self.lines!r}")
            with contextlib.suppress(queue.Empty):
                self.lines.append(self._queue.get(timeout=0.1))
        return self.lines

    def stop(self) -> tuple[int, str]:
        """SIGTERM; the exit status and stderr."""
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


def test_piped_prints_a_status_line_per_source_every_interval(tmp_path: Path) -> None:
    """Each source's line comes again every interval, with its run, step and loss, no escape
    codes; a NaN written later shows in the next lines; SIGTERM exits 0 with a checkpoint."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text(run_start("alpha") + step_line(100, "2.5000"))
    (logs / "b.log").write_text(run_start("beta") + step_line(7, "1.2500"))
    top = Piped(tmp_path)
    try:
        lines = top.wait_for(lambda ls: sum("b.log run=beta" in line for line in ls) >= 2, START_S)
        a_line = next(line for line in lines if "a.log" in line)
        assert a_line.startswith(f"{logs / 'a.log'} run=alpha step=100 ")
        assert " loss=2.5 " in a_line and a_line.endswith(" alerts=-\n")
        append(logs / "a.log", step_line(101, "nan"))
        top.wait_for(
            lambda ls: any(
                "step=101" in x and "loss=nan" in x and "alerts=nan-loss" in x for x in ls
            )
        )
    finally:
        code, err = top.stop()
    assert code == 0, err
    assert not any("\x1b" in line for line in top.lines)
    assert (tmp_path / "state" / "checkpoint.json").exists()


def test_a_file_name_with_terminal_escapes_is_shown_escaped(tmp_path: Path) -> None:
    """A log whose name holds an OSC title sequence: the status line shows it as \\x1b / \\x07."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "evil\x1b]0;pwned\x07.log").write_text(step_line(3, "1.0"))
    top = Piped(tmp_path)
    try:
        lines = top.wait_for(lambda ls: any("step=3" in line for line in ls), START_S)
    finally:
        top.stop()
    assert any("evil\\x1b]0;pwned\\x07.log run=- step=3" in line for line in lines), lines
    assert not any("\x1b" in line or "\x07" in line for line in lines)
