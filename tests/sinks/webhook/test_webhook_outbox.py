"""The webhook outbox on its own, with its poster passed in: an outage's backlog of one group
goes out as one post, and what was posted is not posted again after a reopen."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

from logwatch.sinks.alertmanager.payload import Identity
from logwatch.sinks.webhook.outbox import Answer, Outbox, http_poster
from logwatch.sinks.webhook.payload import GroupAlert, group_payload
from logwatch.webhook_config import WebhookConfig
from tests.support.slackhelp import T0, alert
from tests.support.tailkit import wait_until

CONFIG = WebhookConfig(url="http://127.0.0.1:9/hook")
IDENTITY = Identity(host="node-1")


class Poster:
    """Answers `retry` until `up` is set, then `ok`; keeps what it accepted."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.accepted: list[dict[str, object]] = []

    def __call__(self, body: bytes) -> Answer:
        if not self.up.is_set():
            return Answer("retry", "connection refused")
        self.accepted.append(json.loads(body))
        return Answer("ok")


def payload(source: str, line: int) -> dict[str, object]:
    event = alert(source=source, line=line)
    return dict(group_payload(event.rule, [GroupAlert(event, T0, None)], IDENTITY))


def test_a_backlog_of_one_group_is_one_post_and_not_posted_again(tmp_path: Path) -> None:
    """Three ranks' NaN alerts queued during an outage arrive as one payload with three alerts;
    reopened, the outbox has nothing left to post."""
    poster, said = Poster(), []
    outbox = Outbox(tmp_path, CONFIG, poster=poster, report=said.append, backoff_cap_s=0.1)
    for rank in range(3):
        outbox.enqueue(f"job{rank}", payload(f"rank{rank}.log", 10))
    wait_until(lambda: bool(said))
    poster.up.set()
    assert outbox.drain(20)
    outbox.close()
    (body,) = poster.accepted
    assert [a["labels"]["source"] for a in body["alerts"]] == [
        "rank0.log",
        "rank1.log",
        "rank2.log",
    ]  # type: ignore[index]
    assert body["status"] == "firing" and body["commonLabels"]["alertname"] == "nan-loss"  # type: ignore[index]
    again = Outbox(tmp_path, CONFIG, poster=poster, report=said.append)
    assert again.pending_count() == 0
    again.close()
    assert len(poster.accepted) == 1


def test_an_alert_that_fires_and_resolves_while_waiting_is_posted_firing_then_resolved(
    tmp_path: Path,
) -> None:
    """A firing and its resolve that wait together (the first post failed; or the delivery
    thread was slow to wake, as on a loaded machine) are two posts, in order: folded into one
    post of the latest state, the receiver would see a resolve of an alert it never saw fire
    (a PagerDuty bridge ignores it: the NaN never pages). Other ranks' alerts still join the
    firing's post."""
    poster, said = Poster(), []
    outbox = Outbox(tmp_path, CONFIG, poster=poster, report=said.append, backoff_cap_s=0.1)
    nan = alert(source="rank0.log")
    outbox.enqueue("fire0", dict(group_payload(nan.rule, [GroupAlert(nan, T0, None)], IDENTITY)))
    outbox.enqueue("fire1", payload("rank1.log", 10))
    back = alert(source="rank0.log", status="resolved")
    outbox.enqueue("end0", dict(group_payload(back.rule, [GroupAlert(back, T0, T0)], IDENTITY)))
    wait_until(lambda: bool(said))
    poster.up.set()
    assert outbox.drain(20)
    outbox.close()
    posts = [[(a["labels"]["source"], a["status"]) for a in b["alerts"]] for b in poster.accepted]  # type: ignore[union-attr]
    assert posts == [
        [("rank0.log", "firing"), ("rank1.log", "firing")],
        [("rank0.log", "resolved")],
    ]
    assert [b["status"] for b in poster.accepted] == ["firing", "resolved"]


def test_a_garbled_answer_is_retried_not_the_end_of_delivery() -> None:
    """A receiver (or a proxy) that answers with no HTTP status line: the post is retried later
    (`http.client` raises BadStatusLine, which is no OSError; uncaught, it ended the delivery
    thread and every later alert stayed in the journal until a restart)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(65536)
                conn.sendall(b"garbage\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        post = http_poster(WebhookConfig(url=f"http://127.0.0.1:{port}/hook", timeout_s=10))
        got = post(b"{}")
        thread.join(10)
    assert got.verdict == "retry" and "garbage" in got.why
