"""`logwatch top` in a real terminal: a tmux server of its own (unique socket, no user config),
keys by `send-keys`, the screen by `capture-pane`, every wait a poll with a deadline."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from tests.support.paths import ROOT

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
START_S = 60.0
"""How long logwatch may take to draw its first frame (imports, catch-up) on a loaded machine."""


class TmuxTop:
    """`logwatch top ARGS` in a detached tmux session; its exit status and stderr kept in files."""

    def __init__(
        self,
        folder: Path,
        args: Sequence[str],
        *,
        width: int = 120,
        height: int = 40,
        env: Mapping[str, str] | None = None,
        after: str = "",
    ) -> None:
        self.folder = folder
        self.socket = f"lwtop-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.rc_file, self.err_file = folder / "top.rc", folder / "top.err"
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "logwatch", "top", *args])
        script = f"cd {shlex.quote(str(ROOT))} && {command} 2>{shlex.quote(str(self.err_file))}"
        script += f"; echo $? > {shlex.quote(str(self.rc_file))}{after}"
        extra = [f"-e{k}={v}" for k, v in (env or {}).items()]
        self._tmux(
            "new-session", "-d", "-s", "top", "-x", str(width), "-y", str(height), *extra,
            "sh", "-c", script,
        )  # fmt: skip

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout

    def screen(self, *, escapes: bool = False) -> str:
        """What the pane shows now (`escapes`: with its SGR colour codes)."""
        return self._tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "top")

    def pane_pid(self) -> str:
        """The pid of the pane's shell (logwatch is its child)."""
        return self._tmux("display-message", "-p", "-t", "top", "#{pane_pid}").strip()

    def keys(self, *keys: str) -> None:
        """Type keys (tmux key names: `Enter`, `Up`, or literal text)."""
        self._tmux("send-keys", "-t", "top", *keys)

    def resize(self, width: int, height: int) -> None:
        """Resize the window, as a user's terminal would be."""
        self._tmux("resize-window", "-t", "top", "-x", str(width), "-y", str(height))

    def wait_for(
        self, check: Callable[[str], bool], timeout_s: float = 20.0, *, escapes: bool = False
    ) -> str:
        """The first screen `check` accepts; AssertionError with the last screen otherwise."""
        deadline = time.monotonic() + timeout_s
        while True:
            shown = self.screen(escapes=escapes)
            if check(shown):
                return shown
            if time.monotonic() > deadline:
                err = self.err_file.read_text() if self.err_file.exists() else ""
                raise AssertionError(f"screen never matched; last screen:\n{shown}\nstderr:\n{err}")
            time.sleep(0.05)

    def wait_exit(self, timeout_s: float = 30.0) -> int:
        """logwatch's exit status, once it has one."""
        deadline = time.monotonic() + timeout_s
        while not (self.rc_file.exists() and self.rc_file.read_text().strip()):
            if time.monotonic() > deadline:
                raise AssertionError(f"logwatch top did not exit; screen:\n{self.screen()}")
            time.sleep(0.05)
        return int(self.rc_file.read_text())

    def close(self) -> None:
        """End the tmux server (and whatever still runs in it)."""
        self._tmux("kill-server")


def step_line(step: int, loss: str, *, ts: str = "2026-11-28 14:02:07,199") -> str:
    """A DFlash training line."""
    return (
        f"{ts} INFO [train] step {step}/200000 | loss {loss} | acc 0.242 | lr 2.40e-05 | "
        f"grad_norm 1.23 | tok/s 48292 | q_hs=19 q_hsb=[1,2,2,6,3,5]\n"
    )


def run_start(run_id: str, pid: int = 40211) -> str:
    """The line that names a run."""
    return f"2026-11-28 14:02:03,118 INFO [train] run start: run_id={run_id} pid={pid} gpus=8\n"


def append(path: Path, text: str) -> None:
    """Append text as a training script does (one write, flushed)."""
    with path.open("a", encoding="utf-8") as f:
        f.write(text)
