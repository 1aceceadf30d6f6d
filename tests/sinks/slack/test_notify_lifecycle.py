"""The alert lifecycle on a FakeClock: what gets sent to Slack, when, and how often."""

from __future__ import annotations

from pathlib import Path

import pytest

from logwatch.config import AlertsConfig
from logwatch.sinks.slack.messages import BLOCKS_MAX, HEADER_MAX, SECTION_MAX, TEXT_MAX
from logwatch.sinks.slack.notifier import Notifier
from logwatch.sinks.slack.silences import SilenceStore
from logwatch.testing import FakeClock
from tests.support.slackhelp import T0, ListOutbox, alert


def make(
    tmp_path: Path,
    *,
    group_wait_s: float = 10.0,
    repeat_s: float = 3600.0,
    reports: list[str] | None = None,
    journal: bool = True,
) -> tuple[Notifier, ListOutbox, FakeClock]:
    clock = FakeClock(T0)
    outbox = ListOutbox()
    said = reports if reports is not None else []
    notifier = Notifier(
        outbox,
        channel="C0ALERTS01",
        settings=AlertsConfig(group_wait_s=group_wait_s, repeat_interval_s=repeat_s),
        clock=clock,
        silences=SilenceStore(tmp_path, report=said.append),
        state_dir=tmp_path if journal else None,
        report=said.append,
    )
    return notifier, outbox, clock


def test_fires_once_after_group_wait(tmp_path: Path) -> None:
    """A firing alert is posted once group_wait has passed, and repeats of it post nothing."""
    notifier, outbox, clock = make(tmp_path)
    notifier.emit(alert())
    assert outbox.jobs == []
    clock.advance(10)
    notifier.tick()
    for _ in range(500):
        notifier.emit(alert(line=11))
    assert outbox.kinds() == ["post"]
    assert "FIRING nan-loss" in outbox.jobs[0].text


def test_follow_up_at_most_once_per_repeat_interval(tmp_path: Path) -> None:
    """While firing, the thread gets one reminder per repeat_interval, no more."""
    notifier, outbox, clock = make(tmp_path, group_wait_s=0, repeat_s=3600)
    notifier.emit(alert())
    for _ in range(120):  # two hours in 1-minute ticks
        clock.advance(60)
        notifier.tick()
    replies = [j for j in outbox.jobs if j.kind == "reply"]
    assert len(replies) == 2
    assert all(j.parent == outbox.jobs[0].id for j in replies)
    assert "still firing" in replies[0].text


def test_resolve_edits_message_and_replies_in_thread(tmp_path: Path) -> None:
    """Resolving posts an update of the original message (RESOLVED, duration) and a thread reply."""
    notifier, outbox, clock = make(tmp_path, group_wait_s=0)
    notifier.emit(alert())
    clock.advance(125)
    notifier.emit(alert(status="resolved", at_s=125))
    post, update, reply = outbox.jobs
    assert (update.kind, update.parent) == ("update", post.id)
    assert "RESOLVED nan-loss" in update.text and "2m05s" in update.text
    assert (reply.kind, reply.parent) == ("reply", post.id)


def test_resolved_within_group_wait_sends_nothing(tmp_path: Path) -> None:
    """An alert that resolves before group_wait ends is never posted (flap suppression)."""
    notifier, outbox, clock = make(tmp_path)
    notifier.emit(alert())
    clock.advance(3)
    notifier.emit(alert(status="resolved"))
    clock.advance(30)
    notifier.tick()
    assert outbox.jobs == []


def test_grouping_across_sources(tmp_path: Path) -> None:
    """64 ranks firing the same rule within group_wait become one message naming them all."""
    notifier, outbox, clock = make(tmp_path)
    for rank in range(64):
        notifier.emit(alert(source=f"node{rank // 8}/rank{rank}.log"))
        clock.advance(0.1)
    clock.advance(10)
    notifier.tick()
    assert outbox.kinds() == ["post"]
    body = "\n".join(b["text"]["text"] for b in outbox.jobs[0].blocks if "text" in b)
    assert all(f"rank{rank}.log" in body for rank in range(64))
    assert "64 sources" in outbox.jobs[0].text


def test_huge_group_is_cut_with_more_marker_inside_limits(tmp_path: Path) -> None:
    """5000 sources and a 100 KB line still give a message within Slack's limits, with '+N more'."""
    # No state dir: the message is the point, not 5000 fsync'd journal appends (seconds of disk)
    notifier, outbox, clock = make(tmp_path, group_wait_s=0.5, journal=False)
    for i in range(5000):
        text = "Traceback: " + "x" * 100_000 if i == 0 else "loss=nan"
        notifier.emit(alert(source=f"/data/runs/llama-70b/node{i:04d}/train.log", text=text))
    clock.advance(1)
    notifier.tick()
    (job,) = outbox.jobs
    texts = [b["text"]["text"] for b in job.blocks if "text" in b]
    assert len(job.blocks) <= BLOCKS_MAX and len(job.text) <= TEXT_MAX
    assert len(job.blocks[0]["text"]["text"]) <= HEADER_MAX
    assert all(len(t) <= SECTION_MAX for t in texts)
    assert any("more_" in t for t in texts)
    assert any("truncated, full text in logwatch log" in t for t in texts)


def test_inhibition_by_nvml_disabled_on_same_source(tmp_path: Path) -> None:
    """nvml-disabled mutes gpu-metrics-missing on its source only; the other host still alerts."""
    notifier, outbox, _clock = make(tmp_path, group_wait_s=0)
    notifier.emit(alert("nvml-disabled", "hostA.log"))
    notifier.emit(alert("gpu-metrics-missing", "hostA.log"))
    notifier.emit(alert("gpu-metrics-missing", "hostB.log"))
    texts = [j.text for j in outbox.jobs]
    assert len(texts) == 2
    assert "nvml-disabled" in texts[0]
    assert "gpu-metrics-missing" in texts[1] and "hostB.log" in texts[1]
    assert (
        notifier.muted_by(alert("gpu-metrics-missing", "hostA.log")) == "inhibited by nvml-disabled"
    )


def test_inhibited_alert_goes_out_when_cause_resolves(tmp_path: Path) -> None:
    """When the inhibiting alert resolves, a target that still fires is sent on the next tick."""
    notifier, outbox, _clock = make(tmp_path, group_wait_s=0)
    notifier.emit(alert("nvml-disabled", "hostA.log"))
    notifier.emit(alert("gpu-metrics-missing", "hostA.log"))
    notifier.emit(alert("nvml-disabled", "hostA.log", status="resolved"))
    notifier.tick()
    assert [j.kind for j in outbox.jobs] == ["post", "update", "reply", "post"]
    assert "gpu-metrics-missing" in outbox.jobs[-1].text


def test_silence_mutes_then_expiry_lets_firing_alert_through(tmp_path: Path) -> None:
    """A silence added (by another process) mutes matching alerts; when it expires a still-firing one is sent."""
    notifier, outbox, clock = make(tmp_path, group_wait_s=0)
    SilenceStore(tmp_path).add("nan-*", "run/*", 7200, "known", clock.now())
    notifier.emit(alert("nan-loss", "run/train.log"))
    notifier.emit(alert("nan-loss", "other/train.log"))
    assert [j.text.split(": ")[0] for j in outbox.jobs] == [
        "🔴 FIRING nan-loss (critical) on other/train.log"
    ]
    clock.advance(7199)
    notifier.tick()
    assert len([j for j in outbox.jobs if j.kind == "post"]) == 1
    clock.advance(2)
    notifier.tick()
    posts = [j for j in outbox.jobs if j.kind == "post"]
    assert len(posts) == 2 and "run/train.log" in posts[1].text


def test_silence_expired_early_is_picked_up_without_restart(tmp_path: Path) -> None:
    """`silence expire` from another process is seen by the running notifier at its next tick."""
    notifier, outbox, clock = make(tmp_path, group_wait_s=0)
    store = SilenceStore(tmp_path)
    silence = store.add("nan-loss", "*", 7200, "known", clock.now())
    notifier.emit(alert())
    assert outbox.jobs == []
    SilenceStore(tmp_path).expire(silence.id, clock.now())
    notifier.tick()
    assert outbox.kinds() == ["post"]


def test_state_survives_restart(tmp_path: Path) -> None:
    """After a restart, a re-fired alert is not posted again and its resolve edits the first message."""
    notifier, outbox, _clock = make(tmp_path, group_wait_s=0)
    notifier.emit(alert())
    notifier.close()
    again, outbox2, _ = make(tmp_path, group_wait_s=0)
    again.emit(alert())
    again.emit(alert(status="resolved", at_s=60))
    assert [(j.kind, j.parent) for j in outbox2.jobs] == [
        ("update", outbox.jobs[0].id),
        ("reply", outbox.jobs[0].id),
    ]


@pytest.mark.parametrize("group_wait_s", [0.0, 10.0])
def test_close_sends_waiting_groups(tmp_path: Path, group_wait_s: float) -> None:
    """Shutting down does not lose an alert still waiting for its group."""
    notifier, outbox, _ = make(tmp_path, group_wait_s=group_wait_s)
    notifier.emit(alert())
    notifier.close()
    assert outbox.kinds() == ["post"]


def test_broken_silences_file_mutes_nothing_and_is_reported_once_per_change(tmp_path: Path) -> None:
    """A silences file that cannot be read lets alerts through, said once per version of the file."""
    reports: list[str] = []
    notifier, outbox, clock = make(tmp_path, group_wait_s=0, reports=reports)
    silences = tmp_path / "silences.json"
    silences.write_text('[{"id": "x"}]')
    notifier.emit(alert("nan-loss", "a.log"))
    notifier.tick()
    notifier.emit(alert("nan-loss", "b.log"))
    assert outbox.kinds() == ["post", "post"]
    (said,) = reports
    assert said.startswith(f"{silences}: cannot read silences: KeyError")
    assert said.endswith("alerts are not silenced until it is fixed")
    silences.write_text("not json at all")
    notifier.emit(alert("nan-loss", "c.log"))
    assert len(reports) == 2 and "JSONDecodeError" in reports[1]
    silences.unlink()
    SilenceStore(tmp_path).add("nan-loss", "*", 3600, "fixed", clock.now())
    notifier.emit(alert("nan-loss", "d.log"))
    assert outbox.kinds() == ["post", "post", "post"] and len(reports) == 2


@pytest.mark.parametrize("content", ["{not json", "[1]", '{"alerts": 5}', '{"firing": [5]}'])
def test_corrupt_state_file_is_set_aside_and_started_afresh(tmp_path: Path, content: str) -> None:
    """A notify-state.json that is not one is renamed aside with one line; alerts still go out."""
    state = tmp_path / "notify-state.json"
    state.write_text(content)
    reports: list[str] = []
    notifier, outbox, _ = make(tmp_path, group_wait_s=0, reports=reports)
    notifier.emit(alert())
    notifier.close()
    (aside,) = tmp_path.glob("notify-state.json.corrupt-*")
    assert aside.read_text() == content
    (said,) = reports
    assert said.startswith(f"{state}: not a logwatch notify state (") and str(aside) in said
    assert outbox.kinds() == ["post"] and "firing" in state.read_text()


def test_rules_firing_on_one_line_are_one_message(tmp_path: Path) -> None:
    """nan-loss and nan-grad on one log line post one message naming both; one edit resolves it."""
    notifier, outbox, clock = make(tmp_path)
    notifier.emit(alert("nan-loss", line=42))
    notifier.emit(alert("nan-grad", line=42))
    clock.advance(10)
    notifier.tick()
    (post,) = outbox.jobs
    assert "nan-loss + nan-grad" in post.text
    body = "\n".join(b["text"]["text"] for b in post.blocks if "text" in b)
    assert "*nan-loss*" in body and "*nan-grad*" in body
    notifier.emit(alert("nan-loss", status="resolved", line=50, at_s=60))
    assert outbox.kinds() == ["post", "update"]  # an edit: no ping, no thread reply yet
    notifier.emit(alert("nan-grad", status="resolved", line=51, at_s=70))
    assert outbox.kinds() == ["post", "update", "update", "reply"]
    assert (
        outbox.jobs[2].parent == post.id and "RESOLVED nan-loss + nan-grad" in outbox.jobs[2].text
    )


def test_partly_resolved_incident_shows_which_rules_resolved(tmp_path: Path) -> None:
    """When one rule of an incident resolves and another still fires, the message is edited to
    strike the resolved one (with its line) and list the other as still firing."""
    notifier, outbox, clock = make(tmp_path)
    notifier.emit(alert("nan-loss", line=42))
    notifier.emit(alert("nan-grad", line=42))
    clock.advance(10)
    notifier.tick()
    notifier.emit(alert("nan-grad", status="resolved", line=57, at_s=30))
    post, update = outbox.jobs
    assert (update.kind, update.parent) == ("update", post.id)
    body = "\n".join(
        e["text"]
        for b in update.blocks
        for e in [b.get("text") or {}, *b.get("elements", [])]
        if "text" in e
    )
    (grad,) = [line for line in body.splitlines() if "nan-grad" in line]
    (loss,) = [line for line in body.splitlines() if "*nan-loss*" in line]
    assert grad.startswith("• ✅ ~nan-grad ") and grad.endswith("~ resolved at line 57")
    assert "resolved" not in loss and "~" not in loss
    assert "*Still firing (1 of 2):*" in body and "1 of 2 still firing" in body
    assert update.text.startswith("🔴 FIRING nan-loss (critical)")  # the incident is still open


def test_rules_on_different_lines_stay_separate_messages(tmp_path: Path) -> None:
    """Two rules on two different lines are two incidents: two messages."""
    notifier, outbox, clock = make(tmp_path)
    notifier.emit(alert("nan-loss", line=42))
    notifier.emit(alert("nan-grad", line=43))
    clock.advance(10)
    notifier.tick()
    assert outbox.kinds() == ["post", "post"]


def test_incident_resolving_rule_by_rule_is_edited_each_time(tmp_path: Path) -> None:
    """Three rules of one line resolving one by one: each edit strikes one more and names only
    those still firing (the headline moves to one of them); the last is the RESOLVED edit."""
    notifier, outbox, clock = make(tmp_path)
    for rule in ("nan-loss", "nan-grad", "loss-spike"):
        notifier.emit(alert(rule, line=42))
    clock.advance(10)
    notifier.tick()
    notifier.emit(alert("nan-loss", status="resolved", line=50, at_s=30))
    notifier.emit(alert("nan-grad", status="resolved", line=51, at_s=40))
    assert outbox.kinds() == ["post", "update", "update"]
    first, second = outbox.jobs[1], outbox.jobs[2]
    assert first.blocks[0]["text"]["text"].startswith("🔴 FIRING nan-grad + loss-spike (critical)")
    assert second.blocks[0]["text"]["text"].startswith("🔴 FIRING loss-spike (critical)")
    assert second.blocks[1]["text"]["text"] == "*loss-spike firing in run/train.log*"
    body = second.blocks[3]["text"]["text"].splitlines()
    assert body[:2] == ["*Still firing (1 of 3):*", "• *loss-spike* `run/train.log`:42 step 1200"]
    assert body[2:] == [
        "*No longer firing (2):*",
        "• ✅ ~nan-loss run/train.log:42 step 1200~ resolved at line 50",
        "• ✅ ~nan-grad run/train.log:42 step 1200~ resolved at line 51",
    ]
    notifier.emit(alert("loss-spike", status="resolved", line=52, at_s=50))
    assert outbox.kinds() == ["post", "update", "update", "update", "reply"]
    assert outbox.jobs[3].text.startswith("✅ RESOLVED nan-loss + nan-grad + loss-spike on")
    assert "~" not in outbox.jobs[3].blocks[2]["text"]["text"]  # nothing struck once all resolved


def test_an_alert_of_the_same_line_joins_its_group_after_a_restart(tmp_path: Path) -> None:
    """The waiting group of a line is found again from saved state (and from the journal): a
    second rule on that line after a restart joins it rather than posting alone."""
    notifier, _, clock = make(tmp_path)
    notifier.emit(alert("nan-loss", line=42))
    clock.advance(1)
    notifier.tick()  # saved, still waiting (group_wait 10 s)
    again, outbox, clock = make(tmp_path)
    again.emit(alert("nan-grad", line=42))
    clock.advance(10)
    again.tick()
    (post,) = outbox.jobs
    assert "nan-loss + nan-grad" in post.text


def test_an_alert_of_a_renamed_files_line_joins_its_group(tmp_path: Path) -> None:
    """After a rotation renames the source, a rule firing on the same line under the new name
    joins the group its first rule is waiting in."""
    notifier, outbox, clock = make(tmp_path)
    notifier.emit(alert("nan-loss", line=42))
    notifier.rename_source("run/train.log", "run/train.log.1")
    notifier.emit(alert("nan-grad", source="run/train.log.1", line=42))
    clock.advance(10)
    notifier.tick()
    (post,) = outbox.jobs
    assert "nan-loss + nan-grad" in post.text


def test_a_cascade_of_thousands_is_one_group_and_a_line_mate_joins_it(tmp_path: Path) -> None:
    """2 048 ranks' timeouts inside group_wait are one message; a second rule on one rank's
    line joins that message, one resolved inside group_wait leaves it, and a later alert of
    the resolved one's line starts no group of its own line."""
    notifier, outbox, clock = make(tmp_path)
    for rank in range(2048):
        notifier.emit(alert("nccl-timeout", source=f"r{rank}.log", line=7))
    notifier.emit(alert("run-crashed", source="r139.log", line=7))
    notifier.emit(alert("nccl-timeout", source="r5.log", status="resolved", line=9))
    notifier.emit(alert("cuda-error", source="r5.log", line=7))
    clock.advance(10)
    notifier.tick()
    kinds = sorted(job.text.split(" (")[0] for job in outbox.jobs)
    assert kinds == ["🔴 FIRING cuda-error", "🔴 FIRING nccl-timeout + run-crashed"]
