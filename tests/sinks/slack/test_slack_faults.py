"""Slack failing, said in logwatch's words: one line when delivery starts failing, one when it
delivers again; never slack_sdk's raw HTML, never a line per retry (real slack-sdk over HTTP
against the loopback FakeSlack)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.spool import Job, Spool
from logwatch.sinks.slack.transport import BotTransport, WebhookTransport
from logwatch.testing import FakeClock, FakeSlack, Fault
from tests.support.paths import ROOT
from tests.support.tailkit import wait_until

FAST = DeliveryPolicy(pace_s=0.05, backoff_base_s=0.05, backoff_cap_s=0.2)
HTML = (
    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1>"
    "</center><hr><center>nginx</center></body></html>"
)


def job(n: int) -> Job:
    text = f"alert {n}"
    return Job(
        f"job{n:03d}",
        "C0ALERTS01",
        "post",
        text,
        [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
    )


def deliver(transport: BotTransport | WebhookTransport, state: Path, jobs: int) -> list[str]:
    """Deliver `jobs` jobs on a clock that stands still; what the worker said."""
    said: list[str] = []
    spool = Spool(state, report=said.append)
    clock = FakeClock()
    worker = DeliveryWorker(
        spool,
        transport,
        dead_letter=state / DEAD_LETTER,
        policy=FAST,
        report=said.append,
        clock=clock.monotonic,
    )
    for n in range(jobs):
        spool.enqueue(job(n))
    try:
        assert worker.drain(20)
    finally:
        worker.close()
        spool.close()
    return said


@pytest.mark.parametrize(
    ("faults", "said"),
    [
        ([Fault(502, body=HTML)] * 3, "Slack answered HTTP 502 (bad gateway)"),
        (
            [Fault(503, body="<html>down</html>")] * 2,
            "Slack answered HTTP 503 (service unavailable)",
        ),
        ([Fault(500)], "Slack answered HTTP 500 (internal server error)"),
        ([Fault(504)] * 4, "Slack answered HTTP 504 (gateway timeout)"),
        ([Fault(drop=True)] * 2, "the connection to Slack broke (RemoteDisconnected)"),
        ([Fault(200, error="fatal_error")], "Slack answered fatal_error"),
    ],
    ids=["502-html", "503-html", "500", "504", "dropped", "fatal_error"],
)
def test_a_failure_is_said_once_and_the_recovery_once(
    fake_slack: FakeSlack, tmp_path: Path, faults: list[Fault], said: str
) -> None:
    """However many retries fail, two lines: the failure in words (no body, no HTML) with the
    queue, then the recovery with the count of failed tries."""
    fake_slack.fail("chat.postMessage", *faults)
    transport = BotTransport(fake_slack.token, fake_slack.base_url, 2.0)
    lines = deliver(transport, tmp_path, 3)
    tries = f"{len(faults)} failed tr{'y' if len(faults) == 1 else 'ies'}"
    assert lines == [
        f"logwatch: slack: {said}; retrying, 3 alerts queued",
        f"logwatch: slack: delivering again after {tries} in 0s; 2 alerts queued",
    ]
    assert len(fake_slack.posts()) == 3


def test_a_timeout_is_said_in_seconds(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """An answer later than the timeout: `did not answer within 1s`; the message Slack stored
    meanwhile is found again (no second post), and that is the recovery."""
    fake_slack.fail("chat.postMessage", Fault(delay_s=3.0))
    transport = BotTransport(fake_slack.token, fake_slack.base_url, 1.0)
    lines = deliver(transport, tmp_path, 1)
    assert lines[0] == "logwatch: slack: Slack did not answer within 1s; retrying, 1 alert queued"
    # one failed try, or more when a loaded machine makes the lookup miss its deadline too
    assert len(lines) == 2
    assert re.fullmatch(
        r"logwatch: slack: delivering again after \d+ failed tr(y|ies) in 0s", lines[1]
    )
    assert len(fake_slack.posts()) == 1


def test_a_webhook_answering_html_is_said_the_same_way(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Webhook mode: a 502 page is the same one line, and the recovery."""
    fake_slack.fail("webhook", Fault(502, body=HTML), Fault(502, body=HTML))
    lines = deliver(WebhookTransport(fake_slack.webhook_url, 2.0), tmp_path, 2)
    assert lines == [
        "logwatch: slack: Slack answered HTTP 502 (bad gateway); retrying, 2 alerts queued",
        "logwatch: slack: delivering again after 2 failed tries in 0s; 1 alert queued",
    ]


def test_a_host_that_does_not_resolve_is_said_once(tmp_path: Path) -> None:
    """DNS failure (a `.invalid` host never resolves): one line naming DNS, however many
    retries; the alert stays queued."""
    said: list[str] = []
    spool = Spool(tmp_path, report=said.append)
    # a long deadline: without a reachable name server the lookup itself may take seconds
    transport = BotTransport("xoxb-0", "http://slack.logwatch-test.invalid/api/", 60.0)
    worker = DeliveryWorker(
        spool, transport, dead_letter=tmp_path / DEAD_LETTER, policy=FAST, report=said.append
    )
    spool.enqueue(job(1))
    wait_until(lambda: worker.stats.transient >= 3, timeout_s=120)
    worker.close()
    spool.close()
    assert len(said) == 1, said
    assert re.fullmatch(
        r"logwatch: slack: the Slack host name does not resolve \(DNS: .+\); retrying, 1 alert queued",
        said[0],
    )


def test_tail_says_a_502_outage_in_two_lines(tmp_path: Path) -> None:
    """A real `logwatch tail` while Slack answers 502 with an HTML page, twice: its stderr is the
    start-up block, one line when delivery fails and one when it delivers again; no HTML, no
    slack_sdk ERROR line, no traceback. The alert reaches Slack once."""
    (tmp_path / "train.log").write_text("step 1 | loss nan\n", encoding="utf-8")
    with FakeSlack(rate_per_s=None) as fake:
        fake.fail("chat.postMessage", Fault(502, body=HTML), Fault(502, body=HTML))
        config = tmp_path / "logwatch.toml"
        config.write_text(
            f'[slack]\nchannel = "C0ALERTS01"\nbase_url = "{fake.base_url}"\n'
            '[alerts]\ngroup_wait = "0s"\n',
            encoding="utf-8",
        )
        err = tmp_path / "stderr"
        args = [str(tmp_path / "*.log"), "--from-beginning", "--gpu", "off", "--format", "jsonl"]
        args += ["--config", str(config), "--state-dir", str(tmp_path / "state")]
        with err.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "logwatch", "tail", *args],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, "SLACK_BOT_TOKEN": fake.token},
            )
        try:
            wait_until(lambda: len(fake.posts()) == 1, timeout_s=30)
            wait_until(lambda: "delivering again" in err.read_text(encoding="utf-8"))
            time.sleep(0.3)  # anything it would say after the recovery
        finally:
            proc.terminate()
            assert proc.wait(timeout=30) == 0
        assert len(fake.seen("chat.postMessage")) == 3
    lines = err.read_text(encoding="utf-8").splitlines()
    said = [line for line in lines if "slack" in line.lower() or "html" in line.lower()]
    assert len(said) == 3, said
    assert said[0] == "logwatch: alerts to the terminal, Slack #C0ALERTS01 (bot)"
    assert (
        said[1]
        == "logwatch: slack: Slack answered HTTP 502 (bad gateway); retrying, 1 alert queued"
    )
    # the backoff's jitter makes the outage last 1 to 3 s of the real clock
    assert re.fullmatch(r"logwatch: slack: delivering again after 2 failed tries in \ds", said[2])
    assert all(line.startswith("logwatch: ") for line in lines), lines


def test_rate_limiting_is_said_once_with_the_wait_slack_asks_for(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Two 429s with Retry-After: 1: one line naming the channel and the wait, one when it
    delivers again (not a WARNING per 429)."""
    fake_slack.fail("chat.postMessage", *[Fault(429, retry_after="1", error="ratelimited")] * 2)
    transport = BotTransport(fake_slack.token, fake_slack.base_url, 2.0)
    lines = deliver(transport, tmp_path, 2)
    assert lines == [
        "logwatch: slack: Slack is rate-limiting channel C0ALERTS01 (HTTP 429); waiting 1s as it "
        "asks, 2 alerts queued",
        "logwatch: slack: delivering again after 2 failed tries in 0s; 1 alert queued",
    ]
    assert len(fake_slack.posts()) == 2
