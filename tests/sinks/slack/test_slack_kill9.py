"""`kill -9` of `logwatch tail` right after an alert: the Slack message still goes out, once."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from logwatch.testing import FakeSlack
from tests.conftest import ROOT
from tests.tailkit import wait_until

TOKEN = "plain-bot-token-SECRET-7781"
TRIALS = 3


class Tail:
    """`python -m logwatch tail DIR/*.log` with a Slack config, stdout and stderr collected."""

    def __init__(self, folder: Path, fake: FakeSlack, group_wait: str) -> None:
        config = folder / f"logwatch-{group_wait}.toml"
        config.write_text(
            f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\ntimeout = "2s"\n'
            f'[alerts]\ngroup_wait = "{group_wait}"\n',
            encoding="utf-8",
        )
        args = [str(folder / "*.log"), "--format", "jsonl", "--gpu", "off"]
        args += ["--config", str(config), "--state-dir", str(folder / "state")]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logwatch", "tail", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "SLACK_BOT_TOKEN": TOKEN},
        )
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self._pumps = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.out), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self.err), daemon=True),
        ]
        for pump in self._pumps:
            pump.start()
        wait_until(lambda: bool(self.err))  # its first status line: files scanned

    @staticmethod
    def _pump(stream: object, into: list[bytes]) -> None:
        into.extend(iter(stream.readline, b""))  # type: ignore[attr-defined]

    def finish(self, sig: int) -> None:
        """Signal it, wait, close the pipes."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        for pump in self._pumps:
            pump.join(timeout=10)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()


def test_kill_9_after_an_alert_still_posts_it_once(tmp_path: Path) -> None:
    """With group_wait 10s, each of three runs is killed -9 just after printing a new alert (its
    group still waiting); a run with group_wait 0s on the same state posts each alert once."""
    with FakeSlack(token=TOKEN, rate_per_s=None) as fake:
        for trial in range(TRIALS):
            tail = Tail(tmp_path, fake, "10s")
            (tmp_path / f"run{trial}.log").write_bytes(b"step 1 | loss nan\n")
            wait_until(lambda: any(f"run{trial}.log".encode() in line for line in tail.out))  # noqa: B023
            time.sleep(0.2)  # well inside the old 1 s window between emit and saved state
            tail.finish(signal.SIGKILL)
        assert fake.posts() == []  # nothing was due yet
        tail = Tail(tmp_path, fake, "0s")
        with contextlib.suppress(AssertionError):  # a lost alert never comes: see below
            wait_until(lambda: len(fake.posts()) >= TRIALS, timeout_s=20.0)
        time.sleep(0.5)  # a duplicate would come right behind
        tail.finish(signal.SIGTERM)
        posts = [str(p["blocks"]) for p in fake.posts()]
    # One rule: alerts waiting together are one group, one message; each run's alert in one.
    runs = [f"run{t}.log" for t in range(TRIALS)]
    posted = sorted(run for run in runs for text in posts if run in text)
    assert posted == runs
