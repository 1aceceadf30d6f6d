"""A damaged spool: cut or undecodable lines are kept aside and said; wrong-typed jobs are
dead-lettered; either way the channel goes on delivering the jobs after them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.spool import Job, Spool
from logwatch.sinks.slack.transport import BotTransport
from logwatch.testing import FakeSlack

CH = "C0ALERTS01"
FAST = DeliveryPolicy(pace_s=0.05, backoff_base_s=0.05, backoff_cap_s=0.2)


def job_line(n: int, **fields: Any) -> bytes:
    """A journal `job` record for job n, with some fields overridden."""
    body = {"type": "section", "text": {"type": "mrkdwn", "text": f"alert {n}"}}
    job = {**asdict(Job(f"job{n:03d}", CH, "post", f"alert {n}", [body])), **fields}
    return json.dumps({"op": "job", "id": job["id"], "job": job}).encode() + b"\n"


def deliver(fake_slack: FakeSlack, state: Path) -> list[str]:
    """Open the spool, drain it through the real transport, close; what was reported."""
    reports: list[str] = []
    spool = Spool(state, report=reports.append)
    worker = DeliveryWorker(
        spool,
        BotTransport(fake_slack.token, fake_slack.base_url, 2.0),
        dead_letter=state / DEAD_LETTER,
        policy=FAST,
        report=reports.append,
    )
    try:
        assert worker.drain(10), "the channel stopped delivering"
    finally:
        worker.close()
        spool.close()
    return reports


def test_cut_and_undecodable_lines_are_kept_aside_and_said(
    fake_slack: FakeSlack, tmp_path: Path
) -> None:
    """A line cut mid-way, random bytes and a cut last line: one stderr line, kept aside, rest sent."""
    cut = job_line(2)[:30]
    garbage = b"\x8f\xff\x00\x1bgarbage\xc3(\n"
    tail = job_line(4)[:25]  # a crash mid-append: no newline
    journal = job_line(1) + cut + b"\n" + garbage + job_line(3) + tail
    (tmp_path / "slack-spool.jsonl").write_bytes(journal)
    reports = deliver(fake_slack, tmp_path)
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 1", "alert 3"]
    (said,) = reports
    assert said.startswith(f"{tmp_path / 'slack-spool.jsonl'}:2: ")
    assert "3 damaged records" in said and "cut short" in said
    assert "the last record was cut short" in said and "cannot be recovered" in said
    (aside,) = tmp_path.glob("slack-spool.jsonl.corrupt-*")
    assert str(aside) in said
    assert aside.read_bytes() == cut + b"\n" + garbage + tail + b"\n"


@pytest.mark.parametrize(
    ("fields", "attempted", "why"),
    [
        ({"parent": ["not", "a", "ref"]}, False, "parent"),
        ({"created_s": "yesterday"}, True, "created_s"),
        ({"blocks": "not a list"}, False, "blocks"),
        ({"kind": "explode"}, False, "kind"),
    ],
)
def test_a_wrong_typed_job_is_dead_lettered_and_the_channel_goes_on(
    fake_slack: FakeSlack, tmp_path: Path, fields: dict[str, Any], attempted: bool, why: str
) -> None:
    """A job whose fields have the wrong type goes to the dead-letter file; later jobs are posted."""
    attempt = b'{"op": "attempt", "id": "job001"}\n' if attempted else b""
    journal = job_line(1, **fields) + attempt + job_line(2) + job_line(3)
    (tmp_path / "slack-spool.jsonl").write_bytes(journal)
    reports = deliver(fake_slack, tmp_path)
    assert [m["text"] for m in fake_slack.posts(CH)] == ["alert 2", "alert 3"]
    (dead,) = (tmp_path / DEAD_LETTER).read_text().splitlines()
    assert json.loads(dead)["job"]["id"] == "job001" and json.loads(dead)["error"] == "bad_job"
    (said,) = reports
    assert "job001" in said and why in said and str(tmp_path / DEAD_LETTER) in said
