"""Duplicate guard vs. clocks: a post whose answer was lost is found in Slack whatever Slack's clock
says about ours (issue 31). Slack has no idempotency key on chat.postMessage, so a retry after a
timeout posts twice unless the lookup finds the first one (python-slack-sdk#1013, see
research/alerting.md); the lookup's window must be on Slack's clock, which gives every `ts`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.spool import Job, Spool
from logwatch.sinks.slack.transport import BotTransport, SlackTime
from logwatch.testing import FakeSlack, Fault
from tests.support.tailkit import wait_until

FAST = DeliveryPolicy(pace_s=0.05, backoff_base_s=0.05, backoff_cap_s=0.2)
CH = "C0ALERTS01"
LATE = Fault(delay_s=1.0)  # Slack stores the post, then answers after the client's timeout
BEHIND, AHEAD = -300.0, 300.0


def job(n: int, kind: str = "post", parent: str | None = None) -> Job:
    text = f"alert {n}"
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    return Job(f"job{n:03d}", CH, kind, text, blocks, parent=parent)


def deliver(fake: FakeSlack, state: Path, *jobs: Job) -> DeliveryWorker:
    """Spool the jobs in a fresh process-like worker, drain them, close; the worker's stats."""
    spool = Spool(state)
    transport = BotTransport(fake.token, fake.base_url, 0.3)
    w = DeliveryWorker(spool, transport, dead_letter=state / DEAD_LETTER, policy=FAST)
    for one in jobs:
        spool.enqueue(one)
    try:
        assert w.drain(10)
    finally:
        w.close()
        spool.close()
    return w


@pytest.fixture(params=[BEHIND, AHEAD, -3 * 86400.0], ids=["behind-5m", "ahead-5m", "behind-3d"])
def skewed(request: pytest.FixtureRequest) -> Iterator[FakeSlack]:
    with FakeSlack(rate_per_s=None, clock_offset_s=request.param) as server:
        yield server


def test_first_post_of_a_process_lost_is_found_on_slacks_clock(
    skewed: FakeSlack, tmp_path: Path
) -> None:
    """The very first post's answer is lost (no Slack time seen yet): Slack's clock is asked
    (auth.test's Date) and the lookup finds the stored post; one message each."""
    skewed.fail("chat.postMessage", LATE)
    w = deliver(skewed, tmp_path, job(1), job(2))
    assert [m["text"] for m in skewed.posts(CH)] == ["alert 1", "alert 2"]
    assert w.stats.reconciled == 1 and len(skewed.seen("auth.test")) == 1


def test_later_post_lost_is_found_from_the_ts_slack_returned(
    skewed: FakeSlack, tmp_path: Path
) -> None:
    """A post lost after an earlier one landed: Slack's time comes from that answer; no extra
    request, no second message."""
    skewed.fail("chat.postMessage", Fault(), LATE)
    w = deliver(skewed, tmp_path, job(1), job(2), job(3))
    assert [m["text"] for m in skewed.posts(CH)] == ["alert 1", "alert 2", "alert 3"]
    assert w.stats.reconciled == 1 and skewed.seen("auth.test") == []


def test_thread_reply_lost_is_found_with_slack_behind(tmp_path: Path) -> None:
    """A thread reply whose answer was lost is found among the thread's replies on Slack's clock."""
    with FakeSlack(rate_per_s=None, clock_offset_s=BEHIND) as fake:
        fake.fail("chat.postMessage", Fault(), LATE)
        w = deliver(fake, tmp_path, job(1), job(2, "reply", parent="job001"))
        parent, reply = fake.posts(CH)
    assert reply["text"] == "alert 2" and reply["thread_ts"] == parent["ts"]
    assert w.stats.reconciled == 1


def test_in_doubt_post_after_a_restart_is_found_with_slack_behind(tmp_path: Path) -> None:
    """A post whose answer was lost before a restart is found by the next process (which has
    seen no Slack time yet), not posted again."""
    with FakeSlack(rate_per_s=None, clock_offset_s=BEHIND) as fake:
        fake.fail("chat.postMessage", Fault(delay_s=5.0))
        spool = Spool(tmp_path)
        transport = BotTransport(fake.token, fake.base_url, 0.3)
        w = DeliveryWorker(spool, transport, dead_letter=tmp_path / DEAD_LETTER, policy=FAST)
        spool.enqueue(job(1))
        wait_until(lambda: bool(fake.posts(CH)))
        w.close()  # stored, but the process ends before the answer: the job is in doubt
        spool.close()
        assert [m["text"] for m in fake.posts(CH)] == ["alert 1"]
        again = deliver(fake, tmp_path)
        assert [m["text"] for m in fake.posts(CH)] == ["alert 1"]
    assert again.stats.reconciled == 1


def test_a_post_slack_never_stored_is_posted_once_with_slack_behind(tmp_path: Path) -> None:
    """Negative: a 5xx that stored nothing is looked up, not found, and posted exactly once; no
    other message in the window is taken for it."""
    with FakeSlack(rate_per_s=None, clock_offset_s=BEHIND) as fake:
        fake.fail("chat.postMessage", Fault(), Fault(502))
        w = deliver(fake, tmp_path, job(1), job(2))
        assert [m["text"] for m in fake.posts(CH)] == ["alert 1", "alert 2"]
    assert w.stats.reconciled == 0 and w.stats.delivered == 2


@pytest.mark.parametrize(
    ("headers", "offset_s"),
    [
        ({"Date": "Sat, 28 Nov 2026 13:55:00 GMT"}, -300.0),
        ({"date": "Sat, 28 Nov 2026 14:05:00 GMT"}, 300.0),
        ({"Date": ["Sat, 28 Nov 2026 14:00:00 GMT"]}, 0.0),
        ({"Date": "yesterday"}, None),
        ({"Date": ""}, None),
        ({}, None),
    ],
)
def test_slack_time_reads_the_date_header(
    headers: dict[str, object], offset_s: float | None
) -> None:
    """The Date header (any case, a list too) gives Slack's clock; an unreadable one leaves it
    unknown rather than guessed."""
    host_now = 1_795_874_400.0  # 2026-11-28 14:00:00 UTC
    slack = SlackTime(now=lambda: host_now)
    slack.saw_headers(headers)
    assert slack.offset_s == offset_s


def test_slack_time_prefers_the_latest_ts_and_maps_host_times() -> None:
    """A new message's ts (microseconds) updates the offset; host times map onto Slack's clock."""
    slack = SlackTime(now=lambda: 1000.0)
    assert slack.to_slack(990.0) is None
    slack.saw_headers({"Date": "Thu, 01 Jan 1970 00:11:40 GMT"})  # 700 s
    slack.saw_ts("699.5")
    assert slack.offset_s == -300.5 and slack.to_slack(990.0) == 689.5
    for bad in ("not-a-ts", "", "nan", "inf"):
        slack.saw_ts(bad)
    assert slack.offset_s == -300.5
