"""A `logwatch` command in a subprocess, its stdout and stderr lines collected as they come."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import IO

from tests.support.paths import ROOT

NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search"]
NO_DAC += ["--bounding-set=-dac_override,-dac_read_search"]
"""As root: run a command without the capabilities that let root read any file, so that file
modes bind it as they bind an ordinary user (its files are still root's)."""
CAN_BE_DENIED = os.geteuid() != 0 or shutil.which("setpriv") is not None
"""Whether `unprivileged()` gives a process that file modes can deny."""


def unprivileged() -> list[str]:
    """The prefix that runs a command as one that file modes bind: `NO_DAC` as root, else none."""
    return NO_DAC if os.geteuid() == 0 else []


class Collected:
    """`python -m logwatch ARGS` (from the repository root, with `env` added to this
    environment, after `prefix`: e.g. `unprivileged()`); `out` and `err` hold the lines
    printed so far."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "logwatch", *args],
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
