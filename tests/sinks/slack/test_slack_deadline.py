"""A Slack server that answers a byte at a time: requests give up at their deadline, close is prompt."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from logwatch.sinks.slack.delivery import DeliveryPolicy
from logwatch.sinks.slack.sink import open_slack_sink
from logwatch.sinks.slack.spool import Job, Spool
from logwatch.sinks.slack.transport import BotTransport, Transient, WebhookTransport
from logwatch.testing import FakeClock, FakeSlack, Fault
from tests.support.slackhelp import T0, TOKEN, SlackTail, alert, slack_config
from tests.support.tailkit import wait_until

HANG_S = 15.0  # a hang check, not a timing assertion: the old code needed minutes


def finishes(fn: object, limit_s: float = HANG_S) -> list[BaseException]:
    """Run fn on a thread; fail the test if it is still running after limit_s. Its exceptions."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fn()  # type: ignore[operator]
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"still running after {limit_s:g}s"
    return raised


@pytest.mark.parametrize("mode", ["bot", "webhook"])
def test_trickled_answer_gives_up_at_the_deadline(mode: str) -> None:
    """One byte a second never trips a per-read timeout; the 1 s deadline ends the request."""
    job = Job("job001", "C0ALERTS01", "post", "alert", [])
    with FakeSlack(rate_per_s=None) as fake:
        fake.fail("webhook" if mode == "webhook" else "chat.postMessage", Fault(trickle_s=0.5))
        if mode == "webhook":
            transport: BotTransport | WebhookTransport = WebhookTransport(fake.webhook_url, 1.0)
        else:
            transport = BotTransport(fake.token, fake.base_url, 1.0)
        (raised,) = finishes(lambda: transport.send(job, None))
        transport.close()
    assert isinstance(raised, Transient) and raised.in_doubt
    assert "deadline" in str(raised)


def test_close_with_a_trickling_server_is_prompt_and_keeps_the_job(tmp_path: Path) -> None:
    """SlackSink.close returns in seconds mid-request; the job stays spooled for the next start."""
    with FakeSlack(rate_per_s=None) as fake:
        fake.trickle_s = 1.0
        config = slack_config(fake, timeout_s=60.0, group_wait_s=0.0)
        sink = open_slack_sink(
            config,
            tmp_path,
            clock=FakeClock(T0),
            policy=DeliveryPolicy(pace_s=0.05),
            report=lambda _: None,
            tick_s=None,
        )
        sink.drain_s = 0.5
        sink.emit(alert())
        assert not finishes(sink.close)
        assert fake.seen("chat.postMessage")
    spool = Spool(tmp_path)
    try:
        assert spool.pending_count() == 1
    finally:
        spool.close()


def test_sigterm_of_tail_under_a_trickling_server_exits_promptly_and_posts_once(
    tmp_path: Path,
) -> None:
    """`logwatch tail` mid-request to a server answering a byte a second (60 s request timeout)
    exits on SIGTERM within the hang check, without a traceback; the next start, against a
    healthy server, finds the message the cut-off request posted and does not post it again."""
    with FakeSlack(token=TOKEN, rate_per_s=None) as fake:
        fake.trickle_s = 1.0
        tail = SlackTail(tmp_path, fake, "0s", timeout="60s")
        (tmp_path / "run0.log").write_bytes(b"step 1 | loss nan\n")
        wait_until(lambda: fake.seen("chat.postMessage"), timeout_s=20.0)
        status = tail.finish(signal.SIGTERM, wait_s=HANG_S)
        err = b"".join(tail.err).decode()
        assert status in (0, -signal.SIGTERM, 128 + signal.SIGTERM), err
        assert "Traceback" not in err and TOKEN not in err
        fake.trickle_s = 0.0
        again = SlackTail(tmp_path, fake, "0s")
        time.sleep(2.0)  # a duplicate post would come in this time
        again.finish(signal.SIGTERM)
        posts = [str(p["blocks"]) for p in fake.posts()]
    assert len([p for p in posts if "run0.log" in p]) == 1
