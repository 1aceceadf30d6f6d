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


def _kept(tmp_path: Path, ids: list[str]) -> list[str]:
    """Which of `ids` still have a ref after a compaction and a restart."""
    Spool(tmp_path, keep_sent=CAP).close()  # compacts the journal
    spool = Spool(tmp_path, keep_sent=CAP)
    try:
        return [i for i in ids if spool.sent(i) is not None]
    finally:
        spool.close()


def test_a_digest_ref_is_not_pinned(tmp_path: Path) -> None:
    """A replay digest (a post nothing edits) ages out under the cap like any sent ref; an
    alert post of the same age stays pinned."""
    spool = Spool(tmp_path, keep_sent=CAP)
    spool.enqueue(Job("digest01", CH, POST, "replay digest", keep_open=False))
    spool.record("done", "digest01", channel=CH, ts="1.0001")
    spool.enqueue(Job("alert01", CH, POST, "FIRING"))
    spool.record("done", "alert01", channel=CH, ts="1.0002")
    for n in range(10):
        spool.enqueue(Job(f"reply{n}", CH, "reply", "still firing", parent="alert01"))
        spool.record("done", f"reply{n}", channel=CH, ts=f"2.{n:04d}")
    spool.close()
    assert _kept(tmp_path, ["digest01", "alert01"]) == ["alert01"]


def test_an_edit_that_leaves_the_incident_open_keeps_the_pin(tmp_path: Path) -> None:
    """A partly resolved incident's edit (closes=False) keeps its message pinned for the final
    resolve; the edit that closes it lets it go."""
    spool = Spool(tmp_path, keep_sent=CAP)
    spool.enqueue(Job("alert01", CH, POST, "FIRING a + b"))
    spool.record("done", "alert01", channel=CH, ts="1.0001")
    spool.enqueue(Job("partly01", CH, UPDATE, "FIRING a + b", parent="alert01", closes=False))
    spool.record("done", "partly01", channel=CH, ts="1.0001")
    for n in range(10):
        spool.enqueue(Job(f"other{n}", CH, "reply", "x", parent="elsewhere"))
        spool.record("done", f"other{n}", channel=CH, ts=f"2.{n:04d}")
    spool.close()
    assert _kept(tmp_path, ["alert01"]) == ["alert01"]
    spool = Spool(tmp_path, keep_sent=CAP)
    spool.enqueue(Job("final01", CH, UPDATE, "RESOLVED a + b", parent="alert01"))
    spool.record("done", "final01", channel=CH, ts="1.0001")
    for n in range(10):
        spool.enqueue(Job(f"more{n}", CH, "reply", "x", parent="elsewhere"))
        spool.record("done", f"more{n}", channel=CH, ts=f"3.{n:04d}")
    spool.close()
    assert _kept(tmp_path, ["alert01"]) == []
