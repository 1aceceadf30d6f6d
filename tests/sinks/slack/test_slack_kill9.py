"""`kill -9` of `logwatch tail` right after an alert: the Slack message still goes out, once."""

from __future__ import annotations

import contextlib
import signal
import time
from pathlib import Path

from logwatch.testing import FakeSlack
from tests.support.slackhelp import TOKEN, SlackTail
from tests.support.tailkit import wait_until

TRIALS = 3


def test_kill_9_after_an_alert_still_posts_it_once(tmp_path: Path) -> None:
    """With group_wait 1h, each of three runs is killed -9 just after printing a new alert (its
    group still waiting); a run with group_wait 0s on the same state posts each alert once."""
    with FakeSlack(token=TOKEN, rate_per_s=None) as fake:
        for trial in range(TRIALS):
            # 1h, not seconds: the group's wait starts at the first run's alert, and three starts
            # of tail on a loaded machine can take longer than a short wait
            tail = SlackTail(tmp_path, fake, "1h")
            (tmp_path / f"run{trial}.log").write_bytes(b"step 1 | loss nan\n")
            wait_until(lambda: any(f"run{trial}.log".encode() in line for line in tail.out))  # noqa: B023
            time.sleep(0.2)  # well inside the old 1 s window between emit and saved state
            tail.finish(signal.SIGKILL)
        assert fake.posts() == []  # nothing was due yet
        tail = SlackTail(tmp_path, fake, "0s")
        # One rule: alerts waiting together are one group, one message; each run's alert in one.
        runs = [f"run{t}.log" for t in range(TRIALS)]

        def posted() -> list[str]:
            posts = [str(p["blocks"]) for p in fake.posts()]
            return sorted(run for run in runs for text in posts if run in text)

        with contextlib.suppress(AssertionError):  # a lost alert never comes: see below
            wait_until(lambda: posted() == runs, timeout_s=20.0)
        time.sleep(0.5)  # a duplicate would come right behind
        tail.finish(signal.SIGTERM)
    assert posted() == runs
