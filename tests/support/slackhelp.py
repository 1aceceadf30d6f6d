"""Helpers shared by the Slack tests: alert events, a list outbox, and settings."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

from logwatch.alerts import AlertEvent, Severity
from logwatch.sinks.slack.spool import Job
from logwatch.testing import FakeSlack
from tests.support.paths import ROOT
from tests.support.tailkit import wait_until

TOKEN = "plain-bot-token-SECRET-7781"

PACE = "50ms"
"""`[slack] pace` of the tests' `logwatch tail` processes: a channel's requests 50 ms apart, not
the default 1 s, so a test that posts and edits several messages does not wait seconds for each.
tests/sinks/slack/test_slack_tail.py keeps the default (its process posts and edits 7 times)."""

T0 = datetime(2026, 11, 28, 14, 0, 0)


def alert(
    rule: str = "nan-loss",
    source: str = "run/train.log",
    status: str = "firing",
    *,
    line: int = 10,
    at_s: float = 0.0,
    severity: Severity = Severity.CRITICAL,
    text: str = "step=1200 loss=nan",
) -> AlertEvent:
    """An alert event as the engine would emit it."""
    return AlertEvent(
        rule=rule,
        severity=severity,
        status=status,
        source=source,
        line=line,
        ts=T0 + timedelta(seconds=at_s),
        step=1200,
        value=float("nan"),
        summary=f"{rule} {status} in {source}",
        fix="roll back",
        text=text,
    )


class ListOutbox:
    """Collects jobs in order (the lifecycle tests look at what would be sent)."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def enqueue(self, job: Job) -> None:
        self.jobs.append(job)

    def kinds(self) -> list[str]:
        return [j.kind for j in self.jobs]


def slack_config(fake: object, *, webhook: bool = False, timeout_s: float = 2.0, **alerts: float):  # type: ignore[no-untyped-def]
    """A Config pointing at a FakeSlack (bot mode, or webhook mode)."""
    from logwatch.config import AlertsConfig, Config, SlackConfig

    slack = SlackConfig(
        channel="C0ALERTS01",
        base_url=fake.base_url,  # type: ignore[attr-defined]
        timeout_s=timeout_s,
        token=fake.token,  # type: ignore[attr-defined]
        webhook_url=fake.webhook_url if webhook else None,  # type: ignore[attr-defined]
    )
    return Config(slack=slack, alerts=AlertsConfig(**alerts))


class SlackTail:
    """`python -m logwatch tail DIR/*.log` with a Slack config, stdout and stderr collected."""

    def __init__(
        self, folder: Path, fake: FakeSlack, group_wait: str, *, timeout: str = "2s"
    ) -> None:
        config = folder / f"logwatch-{group_wait}.toml"
        config.write_text(
            f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\ntimeout = "{timeout}"\n'
            f'pace = "{PACE}"\n'
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

    def finish(self, sig: int, wait_s: float = 30.0) -> int:
        """Signal it, wait (at most `wait_s`: a hang fails the test), close the pipes; its exit
        status."""
        self.proc.send_signal(sig)
        self.proc.wait(timeout=wait_s)
        for pump in self._pumps:
            pump.join(timeout=10)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        self.proc.stderr.close()
        return self.proc.returncode
