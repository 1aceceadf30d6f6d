"""Late resolves (issue 13): a firing alert's message ref outlives compactions and restarts."""

from __future__ import annotations

from pathlib import Path

from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.spool import POST, UPDATE, Job, Spool
from logwatch.sinks.slack.transport import BotTransport
from logwatch.testing import FakeSlack

TOKEN = "plain-bot-token-SECRET-7781"
CH = "C0ALERTS01"
FAST = DeliveryPolicy(pace_s=0.05, backoff_base_s=0.05, backoff_cap_s=0.2)
CAP = 3  # sent refs kept on compaction besides the pinned ones (5000 by default)


def deliver(fake: FakeSlack, state: Path, job: Job) -> None:
    """One process's life: open the spool (compacting it), send `job`, close."""
    spool = Spool(state, keep_sent=CAP)
    worker = DeliveryWorker(
        spool,
        BotTransport(fake.token, fake.base_url, 2.0),
        dead_letter=state / DEAD_LETTER,
        policy=FAST,
    )
    try:
        spool.enqueue(job)
        assert worker.drain(10)
    finally:
        worker.close()
        spool.close()


def test_a_resolve_after_many_later_posts_and_restarts_edits_the_original(tmp_path: Path) -> None:
    """A message whose alert still fires keeps its ref through compactions that keep only CAP
    refs and through restarts: the late resolve is a chat.update of it, not a new post."""
    with FakeSlack(token=TOKEN, rate_per_s=None) as fake:
        deliver(fake, tmp_path, Job("firing01", CH, POST, "FIRING nan-loss"))
        for run in range(3):  # three restarts, each after 10 later messages (as spool records)
            spool = Spool(tmp_path, keep_sent=CAP)
            for n in range(10):
                other = Job(f"other{run}{n}", CH, POST, "FIRING other")
                spool.enqueue(other)
                spool.record("done", other.id, channel=CH, ts=f"9.{run}{n:04d}")
            spool.close()
        deliver(
            fake, tmp_path, Job("resolve01", CH, UPDATE, "RESOLVED nan-loss", parent="firing01")
        )
        texts = [m["text"] for m in fake.posts(CH)]
        updates = fake.seen("chat.update")
    assert texts == ["RESOLVED nan-loss"]
    assert [u.status for u in updates] == [200]


def test_refs_of_resolved_messages_age_out(tmp_path: Path) -> None:
    """Once its message was edited to resolved, a ref is no longer pinned: the cap applies."""
    spool = Spool(tmp_path, keep_sent=CAP)
    for n in range(10):
        spool.enqueue(Job(f"post{n}", CH, POST, "FIRING"))
        spool.record("done", f"post{n}", channel=CH, ts=f"1.{n:04d}")
        spool.enqueue(Job(f"edit{n}", CH, UPDATE, "RESOLVED", parent=f"post{n}"))
        spool.record("done", f"edit{n}", channel=CH, ts=f"1.{n:04d}")
    spool.close()
    Spool(tmp_path, keep_sent=CAP).close()  # compacts the journal (memory still has all refs)
    spool = Spool(tmp_path, keep_sent=CAP)
    try:
        kept = [n for n in range(10) if spool.sent(f"post{n}") is not None]
    finally:
        spool.close()
    assert kept and 0 not in kept  # the newest CAP refs (edits count too), no pin
