"""`logwatch tail --config` with a [slack] table: the live driver's alerts reach (fake) Slack once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from logwatch.sinks.slack.delivery import DeliveryPolicy
from logwatch.sinks.slack.sink import open_slack_sink
from logwatch.testing import FakeClock, FakeSlack, running
from tests.support.paths import NAN_LOG
from tests.support.slackhelp import slack_config
from tests.support.tailkit import BUILTIN, Tail, wait_until

ROOT = Path(__file__).resolve().parents[3]


def tail(folder: Path, fake: FakeSlack, err: Path) -> subprocess.Popen[bytes]:
    config = folder / "logwatch.toml"
    config.write_text(
        f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\n\n[alerts]\ngroup_wait = "0s"\n'
        '\n[gpu]\nmode = "off"\n'  # the config's [gpu] table reaches tail: no GPU alert here
    )
    args = [str(folder / "*.log"), "--config", str(config), "--state-dir", str(folder / "state")]
    env = {**os.environ, "SLACK_BOT_TOKEN": fake.token}
    with err.open("wb") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "logwatch.cli", "tail", "--from-beginning", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def test_tail_posts_each_episode_once_and_resolves_by_update(tmp_path: Path) -> None:
    """Three firings in a NaN log give three messages, two edited to RESOLVED; a restart posts nothing new.
    The one `tail` process test at the default `[slack] pace` (1 s): the others set 50 ms."""
    shutil.copy(NAN_LOG, tmp_path / "train.log")
    with FakeSlack(rate_per_s=None) as fake:
        proc = tail(tmp_path, fake, tmp_path / "err1")
        wait_until(lambda: len(fake.seen("chat.update")) == 2 and len(fake.posts()) == 5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        top = [m for m in fake.posts() if m["thread_ts"] is None]
        assert sorted(m["text"].split()[:3][2] for m in top) == ["nan-grad", "nan-loss", "nan-loss"]
        assert sum(m["text"].startswith("✅ RESOLVED") for m in top) == 2
        again = tail(tmp_path, fake, tmp_path / "err2")
        wait_until(lambda: "logwatch:" in (tmp_path / "err2").read_text())
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0
        assert len(fake.seen("chat.postMessage")) == 5


def test_the_driver_ticks_slack_so_a_group_goes_out_without_a_thread(tmp_path: Path) -> None:
    """SlackSink has no timer thread: a group waiting group_wait goes out when the driver's rounds
    tick it past that wait, not before."""
    clock = FakeClock()
    with FakeSlack(rate_per_s=None) as fake:
        config = slack_config(fake, group_wait_s=10.0)
        slack = open_slack_sink(
            config, tmp_path / "slack", clock=clock, policy=DeliveryPolicy(pace_s=0.0)
        )
        tail = Tail(tmp_path, rules=BUILTIN, clock=clock, extra_sinks=[slack])
        with running(tail.driver) as driver:
            (tmp_path / "a.log").write_bytes(b"step 1 | loss nan\n")
            driver.sync()
            slack.worker.drain(5)
            assert fake.posts() == []
            clock.advance(11)
            driver.sync()
            slack.worker.drain(5)
            wait_until(lambda: len(fake.posts()) == 1)
        assert fake.posts()[0]["text"].startswith("🔴 FIRING nan-loss")
