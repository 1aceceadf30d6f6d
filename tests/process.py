"""A `logwatch` command in a subprocess, its stdout and stderr lines collected as they come."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO

from tests.conftest import ROOT


class Collected:
    """`python -m logwatch ARGS` (from the repository root, with `env` added to this
    environment); `out` and `err` hold the lines printed so far."""

    def __init__(self, args: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logwatch", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._pumps = [
            threading.Thread(target=_pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=_pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()

    def said(self, fragment: str) -> bool:
        """Whether some stderr line holds `fragment`."""
        return any(fragment in line for line in list(self.err))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` (unless it has exited), wait for the exit status, close the pipes."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=30)
        for pump in self._pumps:
            pump.join(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return code

    def kill(self) -> None:
        """SIGKILL: no clean stop, no last checkpoint or post."""
        self.stop(signal.SIGKILL)


def _pump(stream: IO[bytes] | None, into: list[str]) -> None:
    assert stream is not None
    for raw in iter(stream.readline, b""):
        into.append(raw.decode("utf-8", "replace"))
