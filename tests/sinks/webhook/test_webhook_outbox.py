"""The webhook outbox on its own, with its poster passed in: an outage's backlog of one group
goes out as one post, and what was posted is not posted again after a reopen."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from logwatch.sinks.alertmanager.payload import Identity
from logwatch.sinks.webhook.outbox import Answer, Outbox
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
