"""Delivery to Slack through the real slack-sdk over loopback HTTP, against the fake Slack server."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from logwatch.errors import SpoolLockedError
from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.sink import SlackSink, open_slack_sink
from logwatch.sinks.slack.spool import Job, Spool
from logwatch.sinks.slack.transport import BotTransport
from logwatch.testing import FakeClock, FakeSlack, Fault
from tests.support.slackhelp import T0, alert, slack_config

FAST = DeliveryPolicy(pace_s=0.05, backoff_base_s=0.05, backoff_cap_s=0.2)
CH, CH2 = "C0ALERTS01", "C0OTHER002"


def sink(
    fake_slack: FakeSlack,
    state: Path,
    reports: list[str] | None = None,
    *,
    clock: FakeClock | None = None,
    policy: DeliveryPolicy = FAST,
    **kw: float,
) -> SlackSink:
    config = slack_config(
        fake_slack,
        webhook=bool(kw.pop("webhook", False)),
        timeout_s=kw.pop("timeout_s", 2.0),
        **{"group_wait_s": 0.0, **kw},
    )
    out = reports if reports is not None else []
    return open_slack_sink(
        config, state, clock=clock or FakeClock(T0), policy=policy, report=out.append
    )


def worker(
    fake_slack: FakeSlack,
    state: Path,
    reports: list[str],
    *,
    timeout_s: float = 2.0,
    token: str | None = None,
) -> tuple[Spool, DeliveryWorker]:
    spool = Spool(state, report=reports.append)
    transport = BotTransport(token or fake_slack.token, fake_slack.base_url, timeout_s)
    return spool, DeliveryWorker(
        spool, transport, dead_letter=state / DEAD_LETTER, policy=FAST, report=reports.append
    )


def job(n: int, channel: str = CH) -> Job:
    return Job(
        f"job{n:03d}",
        channel,
        "post",
        f"alert {n}",
        [{"type": "section", "text": {"type": "mrkdwn", "text": f"alert {n}"}}],
    )


def test_post_follow_up_in_thread_and_resolve_by_update(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Fire posts one message; a repeat_interval later one thread reply; resolve edits it to RESOLVED and replies."""
    clock = FakeClock(T0)
    s = sink(fake_slack, tmp_path, clock=clock, repeat_interval_s=3600)
    s.emit(alert())
    clock.advance(3600)
    s.tick(clock.now())
    s.emit(alert(status="resolved", at_s=4000))
    s.close()
    parent, *replies = fake_slack.posts(CH)
    assert parent["thread_ts"] is None and len(parent["edits"]) == 1
    assert parent["text"].startswith("✅ RESOLVED nan-loss") and "1h06m" in parent["text"]
    assert parent["edits"][0]["text"].startswith("🔴 FIRING nan-loss")
    assert [r["thread_ts"] for r in replies] == [parent["ts"], parent["ts"]]
    assert "still firing" in replies[0]["text"] and "resolved after" in replies[1]["text"]


def test_429_waits_retry_after_for_that_channel_only(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """A 429 with Retry-After: 3 delays that channel >= 3 s (one message); another channel is not held up."""
    fake_slack.fail("chat.postMessage", Fault(429, retry_after="3"))
    reports: list[str] = []
    spool, w = worker(fake_slack, tmp_path, reports)
    spool.enqueue(job(1, CH))
    time.sleep(0.2)
    spool.enqueue(job(2, CH2))
    assert w.drain(10)
    w.close()
    spool.close()
    first = [r for r in fake_slack.seen("chat.postMessage") if r.channel == CH]
    other = [r for r in fake_slack.seen("chat.postMessage") if r.channel == CH2]
    assert [r.status for r in first] == [429, 200]
    assert first[1].at - first[0].at >= 3.0
    assert other[0].status == 200 and other[0].at < first[1].at
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1"]


def test_ten_consecutive_429s_then_in_order(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """Ten 429s in a row: 11 POSTs for the first message, each after its Retry-After, then the rest in order.

    Retry-After is 0.3 s here (a compressed clock; Slack sends whole seconds) to keep the test short.
    """
    fake_slack.fail("chat.postMessage", *[Fault(429, retry_after="0.3")] * 10)
    spool, w = worker(fake_slack, tmp_path, [])
    for n in range(5):
        spool.enqueue(job(n))
    assert w.drain(15)
    w.close()
    spool.close()
    posts = fake_slack.seen("chat.postMessage")
    assert len(posts) == 15 and [p.status for p in posts[:11]] == [429] * 10 + [200]
    assert all(b.at - a.at >= 0.3 for a, b in itertools.pairwise(posts[:11]))
    assert [m["text"] for m in fake_slack.posts(CH)] == [f"alert {n}" for n in range(5)]
    assert w.stats.rate_limited == 10


def test_200_alerts_in_10s_no_429_nothing_lost(tmp_path: Path) -> None:
    """200 alerts in 10 s (log/fake-clock time) against a 1 msg/s fake: grouping sends 4 messages, no 429, all named.

    The lifecycle runs on a FakeClock (the 10 s of arrivals take no real time); delivery is real
    at the real pace of 1 message/s against the fake's real 1/s limit with a burst of 3.
    """
    with FakeSlack(rate_per_s=1.0, burst=3) as fake_slack:
        clock = FakeClock(T0)
        s = sink(
            fake_slack, tmp_path, clock=clock, policy=DeliveryPolicy(pace_s=1.0), group_wait_s=10.0
        )
        rules = ["nan-loss", "nan-grad", "bucket-starvation", "gpu-metrics-missing"]
        for n in range(200):
            s.emit(alert(rules[n % 4], f"node{n // 4:02d}/rank{n % 4}.log"))
            clock.advance(0.05)
        clock.advance(10)
        s.tick(clock.now())
        s.close()
        assert all(r.status == 200 for r in fake_slack.requests)
        posts = fake_slack.posts(CH)
        assert len(posts) == 4
        for n in range(200):
            (mine,) = [p for p in posts if f"FIRING {rules[n % 4]} " in p["text"]]
            assert f"`node{n // 4:02d}/rank{n % 4}.log`" in json.dumps(
                mine["blocks"], ensure_ascii=False
            )


def test_the_config_pace_is_the_workers_own(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """Without a policy given, the sink paces each channel by `[slack] pace` (1 s by default)."""
    config = slack_config(fake_slack)
    paced = replace(config, slack=replace(config.slack, pace_s=0.25))
    for cfg, want in ((config, 1.0), (paced, 0.25)):
        reports: list[str] = []
        s = open_slack_sink(cfg, tmp_path / str(want), clock=FakeClock(T0), report=reports.append)
        try:
            assert s.worker.policy == DeliveryPolicy(pace_s=want)
        finally:
            s.close()


def test_outage_with_restart_delivers_each_once_in_order(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Slack down (503, then dropped connections) while 30 alerts fire, logwatch restarted mid-outage: all 30 once, in order."""
    fake_slack.down = "503"
    first = sink(fake_slack, tmp_path)
    for n in range(30):
        first.emit(alert(f"rule-{n:02d}", "train.log"))
    time.sleep(0.5)
    first.drain_s = 0.0
    first.close()
    fake_slack.down = "drop"
    second = sink(fake_slack, tmp_path)
    time.sleep(0.5)
    fake_slack.down = None
    assert second.worker.drain(60)  # all 30, however long a loaded machine takes (close: 5 s)
    second.close()
    texts = [m["text"].split(" ")[2] for m in fake_slack.posts(CH)]
    assert texts == [f"rule-{n:02d}" for n in range(30)]
    assert sum(r.status == 503 for r in fake_slack.requests) >= 2


def test_answer_after_client_timeout_gives_one_message(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Slack stores the post but answers after the client timeout: reconciliation finds it, no second post."""
    fake_slack.fail("chat.postMessage", Fault(delay_s=1.5))
    spool, w = worker(fake_slack, tmp_path, [], timeout_s=0.5)
    spool.enqueue(job(1))
    spool.enqueue(job(2))
    assert w.drain(10)
    w.close()
    spool.close()
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1", "alert 2"]
    assert w.stats.reconciled == 1
    assert len(fake_slack.seen("conversations.history")) >= 1


def test_in_doubt_job_is_reconciled_after_restart(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """A post whose answer was lost before a restart is looked up, not re-posted, by the next process."""
    fake_slack.fail("chat.postMessage", Fault(delay_s=1.0))
    spool, w = worker(fake_slack, tmp_path, [], timeout_s=0.3)
    spool.enqueue(job(1))
    deadline = time.monotonic() + 5
    while not fake_slack.posts(CH) and time.monotonic() < deadline:
        time.sleep(0.05)
    w.close()
    spool.close()
    spool, w = worker(fake_slack, tmp_path, [])
    assert w.drain(10)
    w.close()
    spool.close()
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1"]


@pytest.mark.parametrize(
    "fault",
    [
        Fault(500),
        Fault(502, body="<html>Bad Gateway</html>"),
        Fault(504),
        Fault(200, body="upstream hiccup"),
        Fault(200, error="fatal_error"),
        Fault(drop=True),
    ],
    ids=["500", "502-html", "504", "non-json-200", "fatal_error", "dropped"],
)
def test_transient_errors_are_retried_once_delivered(
    fake_slack: FakeSlack, tmp_path: Path, fault: Fault
) -> None:
    """5xx, non-JSON bodies, ok:false fatal_error and dropped connections are retried; one message results."""
    fake_slack.fail("chat.postMessage", fault)
    spool, w = worker(fake_slack, tmp_path, [])
    spool.enqueue(job(1))
    assert w.drain(10)
    w.close()
    spool.close()
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1"]
    assert w.stats.transient == 1 and w.stats.dead == 0


@pytest.mark.parametrize(
    "code",
    ["invalid_auth", "channel_not_found", "not_in_channel", "invalid_blocks", "msg_too_long"],
)
def test_permanent_errors_go_to_dead_letter_and_delivery_continues(
    fake_slack: FakeSlack, tmp_path: Path, code: str
) -> None:
    """A permanent refusal is not retried: one request, a dead-letter entry, a clear report, the next alert still goes."""
    fake_slack.fail("chat.postMessage", Fault(200, error=code))
    reports: list[str] = []
    spool, w = worker(fake_slack, tmp_path, reports)
    spool.enqueue(job(1))
    spool.enqueue(job(2))
    assert w.drain(10)
    w.close()
    spool.close()
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 2"]
    assert len(fake_slack.seen("chat.postMessage")) == 2
    (dead,) = [json.loads(line) for line in (tmp_path / DEAD_LETTER).read_text().splitlines()]
    assert dead["error"] == code and dead["job"]["text"] == "alert 1"
    (report,) = reports
    assert code in report and "Fix:" in report and str(tmp_path / DEAD_LETTER) in report


def test_real_refusals_from_slack_conditions(tmp_path: Path) -> None:
    """A wrong token and a channel the bot is not in are refused by the fake as Slack would, and dead-lettered."""
    with FakeSlack(rate_per_s=None, not_member=(CH2,)) as fake_slack:
        reports: list[str] = []
        spool, w = worker(fake_slack, tmp_path, reports, token="xoxb-wrong-token-1234")
        spool.enqueue(job(1))
        assert w.drain(5)
        w.close()
        spool.close()
        spool, w = worker(fake_slack, tmp_path, reports)
        spool.enqueue(job(2, CH2))
        spool.enqueue(job(3, "C0NOSUCH99"))
        assert w.drain(5)
        w.close()
        spool.close()
    errors = [r.error for r in fake_slack.requests]
    assert errors[0] == "invalid_auth"
    assert sorted(errors[1:]) == [
        "channel_not_found",
        "not_in_channel",
    ]  # two channels, two threads
    assert all("wrong-token" not in r for r in reports) and len(reports) == 3


def test_webhook_mode_posts_and_resolves_with_new_message(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """Webhook mode: the firing message, then (no edits possible) a RESOLVED message naming the first-seen time; 429 honoured."""
    fake_slack.fail("webhook", Fault(429, retry_after="1"))
    s = sink(fake_slack, tmp_path, webhook=True)
    s.emit(alert())
    s.emit(alert(status="resolved", at_s=90))
    s.close()
    texts = [m["text"] for m in fake_slack.posts("webhook")]
    assert texts[0].startswith("🔴 FIRING nan-loss")
    assert (
        texts[1].startswith("✅ RESOLVED nan-loss") and "first seen 2026-11-28 14:00:00" in texts[1]
    )
    hooks = fake_slack.seen("webhook")
    assert hooks[0].status == 429 and hooks[1].at - hooks[0].at >= 1.0


def test_second_process_on_same_state_dir_is_refused(tmp_path: Path) -> None:
    """Only one process delivers from a state directory, so no alert is posted twice from one state."""
    spool = Spool(tmp_path)
    try:
        with pytest.raises(SpoolLockedError, match="another logwatch"):
            Spool(tmp_path)
    finally:
        spool.close()


def test_reconcile_without_history_scope_posts_again_not_dead_letter(tmp_path: Path) -> None:
    """A 5xx on post then a history lookup refused for missing_scope: posted again, one scope hint, nothing buried."""
    scopes = ("chat:write", "channels:read")
    with FakeSlack(rate_per_s=None, scopes=scopes) as fake_slack:
        fake_slack.fail("chat.postMessage", Fault(502), Fault(502))
        reports: list[str] = []
        spool, w = worker(fake_slack, tmp_path, reports)
        spool.enqueue(job(1))
        spool.enqueue(job(2))
        assert w.drain(10)
        w.close()
        spool.close()
        assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1", "alert 2"]
        assert [r.error for r in fake_slack.seen("conversations.history")] == ["missing_scope"]
    assert w.stats.dead == 0 and not (tmp_path / DEAD_LETTER).exists()
    outage, report, recovered = reports  # the 502s are said once, and their end once
    assert outage.startswith("logwatch: slack: Slack answered HTTP 502 (bad gateway)")
    assert recovered.startswith("logwatch: slack: delivering again after 2 failed tries")
    assert "missing_scope" in report and "channels:history" in report
    assert "groups:history" in report and "chat:write" not in report


def test_transient_reconcile_failure_keeps_the_job_in_doubt(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """A lookup that fails transiently is retried, and the stored post is still found: one message."""
    fake_slack.fail("chat.postMessage", Fault(delay_s=1.0))
    fake_slack.fail("conversations.history", Fault(503), Fault(429, retry_after="0"))
    spool, w = worker(fake_slack, tmp_path, [], timeout_s=0.4)
    spool.enqueue(job(1))
    assert w.drain(10)
    w.close()
    spool.close()
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1"]
    assert w.stats.reconciled == 1 and len(fake_slack.seen("conversations.history")) == 3


def test_ticking_survives_a_failing_tick(fake_slack: FakeSlack, tmp_path: Path) -> None:
    """A tick that fails (state file cannot be saved) is said once, never raised; later ticks
    (the driver's rounds) go on and save the state once they can."""
    blocker = tmp_path / "notify-state.json.tmp"
    blocker.mkdir()
    reports: list[str] = []
    config = slack_config(fake_slack, group_wait_s=0.0)
    clock = FakeClock(T0)
    s = open_slack_sink(
        config, tmp_path, clock=clock, policy=FAST, report=reports.append, tick_s=0.02
    )
    s.emit(alert())
    for _ in range(5):
        clock.advance(0.05)
        s.tick(clock.now())
    blocker.rmdir()
    for _ in range(5):
        clock.advance(0.05)
        s.tick(clock.now())
    s.close()
    assert (tmp_path / "notify-state.json").exists()
    failed, recovered = reports
    assert "cannot write notify-state.json (Is a directory)" in failed
    assert "alerts still print" in failed and "work again" in recovered


def test_wrong_records_in_the_spool_are_set_aside_and_good_jobs_still_go(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """JSON-valid records that are not the spool's are skipped with one line and kept aside."""
    bad = ["5", '{"op": "done", "id": "x"}', '{"op": "job", "id": "z"}']
    lines = [json.dumps({"op": "job", "id": "job001", "job": asdict(job(1))}), *bad]
    (tmp_path / "slack-spool.jsonl").write_text("\n".join(lines) + "\n")
    reports: list[str] = []
    spool, w = worker(fake_slack, tmp_path, reports)
    assert w.drain(10)
    w.close()
    spool.close()
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1"]
    (said,) = reports
    assert said.startswith(f"{tmp_path / 'slack-spool.jsonl'}:2: not a spool record (")
    assert "skipped 3 such records" in said
    (aside,) = tmp_path.glob("slack-spool.jsonl.corrupt-*")
    assert aside.read_text().splitlines() == bad and str(aside) in said


@pytest.mark.parametrize("notify", [False, True])
def test_resolve_reply_pings_only_with_notify_on_resolve(
    fake_slack: FakeSlack, tmp_path: Path, notify: bool
) -> None:
    """The resolve is an edit plus a quiet thread reply; notify_on_resolve broadcasts the reply."""
    s = sink(fake_slack, tmp_path, notify_on_resolve=notify)
    s.emit(alert())
    s.emit(alert(status="resolved", at_s=60))
    s.close()
    parent, reply = fake_slack.posts(CH)
    assert len(parent["edits"]) == 1 and reply["thread_ts"] == parent["ts"]
    assert reply["reply_broadcast"] in (
        (True, "true", "1") if notify else (False, None, "false", "0")
    )
    assert "<!" not in reply["text"] and "<@" not in reply["text"]
