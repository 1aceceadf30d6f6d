"""Running one action's command: argv without a shell, a timeout, SIGTERM then SIGKILL."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

KILL_AFTER_TERM_S = 5.0
"""After the timeout's SIGTERM, how long the command has before SIGKILL."""
OUTPUT_TAIL_BYTES = 4096


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a command ended: exit status (None: it could not start), seconds, what it said."""

    exit_code: int | None
    seconds: float
    timed_out: bool = False
    error: str = ""  # why it could not start
    output: str = ""  # the last line it printed (stdout and stderr together)


class ProcessRunner(Protocol):
    """Runs a command and waits for it (a fake one in the tests that need no process)."""

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> RunResult:
        """Run `argv` with `env` added to logwatch's environment; at most `timeout_s`, then
        SIGTERM, then SIGKILL `KILL_AFTER_TERM_S` later."""
        ...


class SubprocessRunner:
    """The real one: its own process group (a Ctrl-C meant for logwatch does not reach it, and
    the timeout's signals reach what it started), no stdin, output kept for the last line."""

    def __init__(self, kill_after_term_s: float = KILL_AFTER_TERM_S) -> None:
        self.kill_after_term_s = kill_after_term_s

    def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> RunResult:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return RunResult(None, time.monotonic() - start, error=exc.strerror or str(exc))
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal_group(proc, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=self.kill_after_term_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                out, _ = proc.communicate()
        return RunResult(
            proc.returncode, time.monotonic() - start, timed_out=timed_out, output=_last_line(out)
        )


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # ended meanwhile
        os.killpg(proc.pid, sig)


def _last_line(out: bytes | None) -> str:
    lines = (out or b"")[-OUTPUT_TAIL_BYTES:].decode("utf-8", "replace").strip().splitlines()
    return lines[-1].strip() if lines else ""
