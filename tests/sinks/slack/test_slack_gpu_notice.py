"""`logwatch-gpu-unavailable` (this host has no NVML) is a host notice: said on stderr at every
start, alerted once per state directory, and kept out of Slack unless the config asks."""

from __future__ import annotations

import ctypes.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logwatch.testing import FakeSlack
from tests.support.slackhelp import PACE

ROOT = Path(__file__).resolve().parents[3]
GPU_UNAVAILABLE = "logwatch-gpu-unavailable"

pytestmark = pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this host has a real NVML library"
)


def _tail(folder: Path, fake: FakeSlack, *, notify: bool) -> tuple[list[dict], str]:
    """One `logwatch tail --format jsonl` over folder/*.log without NVML, Slack configured,
    stopped with SIGTERM once it follows; (its JSON events, its stderr)."""
    config = folder / "logwatch.toml"
    config.write_text(
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\npace = "{PACE}"\n\n'
        '[alerts]\ngroup_wait = "0s"\n\n'
        f'[gpu]\nmode = "auto"\nnotify_unavailable = {"true" if notify else "false"}\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    env["SLACK_BOT_TOKEN"] = fake.token
    args = ["--format", "jsonl", "--config", str(config), "--state-dir", str(folder / "state")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "logwatch.cli", "tail", str(folder / "*.log"), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    err, deadline = "", time.monotonic() + 60
    while "a.log: " not in err and proc.poll() is None and time.monotonic() < deadline:
        err += proc.stderr.readline()
    time.sleep(1.5)  # a few rounds: Slack is ticked, the notice would go out
    proc.send_signal(signal.SIGTERM)
    out, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0, err + rest
    return [json.loads(line) for line in out.splitlines()], err + rest


def _slack_texts(fake: FakeSlack) -> list[str]:
    return [str(m["text"]) for m in fake.posts()]


def test_the_notice_alerts_once_per_state_dir_and_not_in_slack(tmp_path: Path) -> None:
    """Three starts over one state dir: stderr says it each time, stdout alerts it the first
    time only, Slack never hears of it (notify_unavailable defaults to false)."""
    (tmp_path / "a.log").write_text("step 1 | loss 2.0\n")
    with FakeSlack(rate_per_s=None) as fake:
        runs = [_tail(tmp_path, fake, notify=False) for _ in range(3)]
        texts = _slack_texts(fake)
    alerts = [[e["rule"] for e in events if e["rule"] == GPU_UNAVAILABLE] for events, _ in runs]
    assert alerts == [[GPU_UNAVAILABLE], [], []]
    for _, err in runs:
        assert (
            sum(line.startswith("logwatch: GPUs: NVML unavailable: ") for line in err.splitlines())
            == 1
        )
    assert not any(GPU_UNAVAILABLE in text for text in texts)


def test_notify_unavailable_true_sends_it_to_slack_once(tmp_path: Path) -> None:
    """`[gpu] notify_unavailable = true`: the notice is posted to Slack, once over two starts."""
    (tmp_path / "a.log").write_text("step 1 | loss 2.0\n")
    with FakeSlack(rate_per_s=None) as fake:
        for _ in range(2):
            _tail(tmp_path, fake, notify=True)
        deadline = time.monotonic() + 30
        while not _slack_texts(fake) and time.monotonic() < deadline:
            time.sleep(0.05)
        texts = _slack_texts(fake)
    assert sum(GPU_UNAVAILABLE in text for text in texts) == 1
