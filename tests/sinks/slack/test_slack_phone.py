"""Slack messages as read on a phone: each fact once, the fix kept, the header says where."""

from __future__ import annotations

import re
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from logwatch.alerts import AlertEvent, EndReason, Severity
from logwatch.sinks.slack import messages
from logwatch.sinks.slack.delivery import DeliveryPolicy
from logwatch.sinks.slack.sink import digest_lines, open_slack_sink
from logwatch.testing import FakeClock, FakeSlack
from tests.support.slackhelp import T0, alert, slack_config


def shown(blocks: list[dict[str, Any]]) -> str:
    """Every text a reader sees in the blocks (headers, sections, context lines), joined."""
    texts = []
    for block in blocks:
        parts = [block.get("text") or {}, *block.get("elements", [])]
        texts += [p["text"] for p in parts if "text" in p]
    return "\n".join(texts)


def test_resolved_edit_keeps_the_fix() -> None:
    """The RESOLVED edit still shows the fix the firing message gave."""
    event = replace(alert(), fix="lower the learning rate")
    _, firing = messages.firing_message(Severity.CRITICAL, [event])
    _, resolved = messages.resolved_message([event], 60.0, event.ts)
    assert "*Fix:* lower the learning rate" in shown(firing)
    assert "*Fix:* lower the learning rate" in shown(resolved)


def test_each_rule_fix_is_shown_once() -> None:
    """An incident of two rules shows both fixes, a fix they share once."""
    loss = replace(alert("nan-loss"), fix="lower the learning rate")
    grad = replace(alert("nan-grad"), fix="clip gradients")
    again = replace(alert("nan-grad", source="run/other.log"), fix="clip gradients")
    _, blocks = messages.firing_message(Severity.CRITICAL, [loss, grad, again])
    text = shown(blocks)
    assert text.count("lower the learning rate") == 1 and text.count("clip gradients") == 1


def test_summary_and_duration_are_shown_once() -> None:
    """The summary appears once in the firing and the resolved message, the duration once."""
    event = alert()
    _, firing = messages.firing_message(Severity.CRITICAL, [event])
    _, resolved = messages.resolved_message([event], 125.0, event.ts)
    assert shown(firing).count(event.summary) == 1
    assert shown(resolved).count(event.summary) == 1
    assert shown(resolved).count("2m05s") == 1


def test_member_lines_keep_summaries_that_differ() -> None:
    """In a group, a member whose summary is not the headline still shows its own."""
    first, other = alert(), alert(source="run/other.log")
    _, blocks = messages.firing_message(Severity.CRITICAL, [first, other])
    assert shown(blocks).count(first.summary) == 1 and other.summary in shown(blocks)


def test_digest_counts_add_up_and_lines_show_severity_and_time() -> None:
    """The digest's firing and resolved counts add up to the events; each line has severity and time."""
    events = [
        alert(),
        alert(status="resolved", at_s=30),
        alert(at_s=60),
        alert("slow-step", severity=Severity.WARNING, at_s=90),
        alert("slow-step", status="resolved", severity=Severity.WARNING, at_s=120),
    ]
    total, *lines = digest_lines(events)
    assert total == "*3 firing + 2 resolved = 5 events*"
    counts = [re.search(r"(\d+) firing, (\d+) resolved", line) for line in lines]
    assert sum(int(m[1]) + int(m[2]) for m in counts if m) == len(events) == 5
    assert "(critical)" in lines[0] and "(warning)" in lines[1]
    assert "2026-11-28 14:00:00 to 2026-11-28 14:01:00" in lines[0]
    assert "2026-11-28 14:01:30 to 2026-11-28 14:02:00" in lines[1]


def test_digest_of_nothing_says_no_alerts() -> None:
    """No events: no lines (the digest then says `no alerts`)."""
    assert digest_lines([]) == []


def test_header_names_host_and_source_file() -> None:
    """The firing and resolved headers carry the host and the log's file name."""
    event = alert(source="/data/runs/llama/train-0412.log")
    _, firing = messages.firing_message(Severity.CRITICAL, [event], host="gpu-node-07")
    _, resolved = messages.resolved_message([event], 60.0, event.ts, host="gpu-node-07")
    for blocks in (firing, resolved):
        assert "gpu-node-07 · train-0412.log" in blocks[0]["text"]["text"]


def test_header_defaults_to_this_host() -> None:
    """Without a host given, the header names this machine (socket.gethostname())."""
    _, blocks = messages.firing_message(Severity.CRITICAL, [alert()])
    assert f"{socket.gethostname()} · train.log" in blocks[0]["text"]["text"]


def test_header_names_the_run_its_log_announced() -> None:
    """A log that says `run start: run_id=...` has its run id in the header, file name kept."""
    event = replace(alert(source="/data/runs/train.log"), run="slammed4")
    _, blocks = messages.firing_message(Severity.CRITICAL, [event], host="gpu-node-07")
    assert "gpu-node-07 · run slammed4 (train.log)" in blocks[0]["text"]["text"]


def partly(
    events: list[AlertEvent], resolved: list[tuple[AlertEvent, AlertEvent]]
) -> tuple[str, list[dict[str, Any]]]:
    """The edit a group gets while the alerts in `resolved` ((alert, its resolve) pairs) no
    longer fire."""
    ended = {e.fingerprint: r for e, r in resolved}
    return messages.firing_message(Severity.CRITICAL, events, host="gpu-node-07", ended=ended)


def test_partly_resolved_incident_lists_firing_and_struck_resolved_rules() -> None:
    """Two rules of one line, one resolved: the header and fallback name only the rule still
    firing; the body lists it under `Still firing` and the resolved one struck through."""
    loss, grad = alert("nan-loss", line=42), alert("nan-grad", line=42)
    text, blocks = partly(
        [loss, grad], [(grad, alert("nan-grad", "run/train.log", "resolved", line=57))]
    )
    assert blocks[0]["text"]["text"].startswith("🔴 FIRING nan-loss (critical) — gpu-node-07")
    assert (
        text.startswith("🔴 FIRING nan-loss (critical) on run/train.log") and "nan-grad" not in text
    )
    body = shown(blocks[1:]).splitlines()
    firing_at, resolved_at = (
        body.index("*Still firing (1 of 2):*"),
        body.index("*No longer firing (1):*"),
    )
    assert body[firing_at + 1].startswith("• *nan-loss* `run/train.log`:42")
    assert body[resolved_at + 1] == "• ✅ ~nan-grad run/train.log:42 step 1200~ resolved at line 57"
    assert firing_at < resolved_at


def test_partly_resolved_group_of_one_rule_strikes_the_sources_that_recovered() -> None:
    """One rule on three ranks, two recovered: those two are struck, the third still fires."""
    ranks = [alert(source=f"run/rank{n}.log") for n in range(3)]
    back = [(r, alert(source=r.source, status="resolved", line=90)) for r in ranks[:2]]
    _, blocks = partly(ranks, back)
    body = shown(blocks[1:])
    assert "*Still firing (1 of 3):*\n• `run/rank2.log`:10 step 1200" in body
    assert "• ✅ ~run/rank0.log:10 step 1200~ resolved at line 90" in body
    assert "• ✅ ~run/rank1.log:10 step 1200~ resolved at line 90" in body
    assert "1 of 3 still firing" in shown(blocks[-1:])


def test_member_ended_by_a_restart_is_struck_but_not_called_resolved() -> None:
    """A source whose run restarted is struck through as ended, with no ✅."""
    ranks = [alert(source=f"run/rank{n}.log") for n in range(2)]
    restart = replace(
        alert(source="run/rank0.log", status="resolved", line=77), reason=EndReason.RESTARTED
    )
    _, blocks = partly(ranks, [(ranks[0], restart)])
    (line,) = [t for t in shown(blocks).splitlines() if "rank0" in t]
    assert line == "• ⏹️ ~run/rank0.log:10 step 1200~ ended (run restarted)"


def test_tilde_in_a_file_name_cannot_end_the_strike_early() -> None:
    """A `~` in a struck file name is shown as a look-alike, so the strike spans the whole item."""
    ranks = [alert(source="~/runs/a~b.log"), alert(source="run/rank1.log")]
    _, blocks = partly(ranks, [(ranks[0], alert(source=ranks[0].source, status="resolved"))])
    (line,) = [t for t in shown(blocks).splitlines() if "a\u223cb.log" in t]
    assert line.count("~") == 2 and line.startswith("• ✅ ~\u223c/runs/a\u223cb.log:10")


def test_message_with_nothing_resolved_has_no_strike_or_lists() -> None:
    """While every alert still fires, the message names all rules and strikes nothing."""
    loss, grad = alert("nan-loss", line=42), alert("nan-grad", line=42)
    text, blocks = messages.firing_message(Severity.CRITICAL, [loss, grad], host="gpu-node-07")
    assert "FIRING nan-loss + nan-grad" in blocks[0]["text"]["text"] and "nan-grad" in text
    assert "~" not in shown(blocks) and "Still firing" not in shown(blocks)


def test_header_names_the_environment_run_when_the_log_names_none() -> None:
    """Without a `run start:` run id, the run the environment names is in the header and the
    fallback text; a log's own run id wins over it."""
    event = alert(source="/data/runs/train.log")
    text, blocks = messages.firing_message(
        Severity.CRITICAL, [event], host="gpu-node-07", env_run="4242"
    )
    assert "gpu-node-07 · run 4242 (train.log)" in blocks[0]["text"]["text"]
    assert "on /data/runs/train.log (run 4242):" in text
    own = replace(event, run="slammed4")
    _, blocks = messages.resolved_message([own], 60.0, own.ts, host="gpu-node-07", env_run="4242")
    assert "run slammed4 (train.log)" in blocks[0]["text"]["text"] and "4242" not in shown(blocks)


def test_environment_run_is_redacted() -> None:
    """A token-shaped run id from the environment never reaches the message."""
    token = "xoxp-1111-2222-3333-abcdefabcdef"
    text, blocks = messages.firing_message(Severity.CRITICAL, [alert()], env_run=token)
    assert (
        token not in text + str(blocks)
        and "run [REDACTED] (train.log)" in blocks[0]["text"]["text"]
    )


def test_long_header_cuts_the_file_name_first() -> None:
    """A long file name is cut (with …) so that host, run, the closing `)` and the resolved
    header's duration survive, within Slack's 150 characters."""
    event = replace(
        alert(source="/data/" + "llama-70b-sweep-lr3e-4-" * 8 + "rank7.log"), run="exp-9"
    )
    _, firing = messages.firing_message(Severity.CRITICAL, [event], host="gpu-node-07")
    _, resolved = messages.resolved_message([event], 125.0, event.ts, host="gpu-node-07")
    for blocks, end in ((firing, "…)"), (resolved, "…) (after 2m05s)")):
        head = blocks[0]["text"]["text"]
        assert len(head) == messages.HEADER_MAX and head.endswith(end)
        assert "gpu-node-07 · run exp-9 (llama-70b-sweep" in head


def test_header_too_long_without_the_file_is_still_within_the_limit() -> None:
    """Rule names, host and run too long for any file name still give a 150-char header."""
    rules = [alert(f"rule-{'x' * 40}-{n}", line=42) for n in range(4)]
    _, blocks = messages.firing_message(Severity.CRITICAL, rules, host="h" * 60, env_run="r" * 80)
    assert len(blocks[0]["text"]["text"]) == messages.HEADER_MAX


@pytest.mark.parametrize(
    ("env", "run"),
    [
        ({"SLURM_JOB_ID": "812345", "POD_NAME": "trainer-0", "WANDB_RUN_ID": "3xq9k2"}, "812345"),
        ({"POD_NAME": "trainer-0", "WANDB_RUN_ID": "3xq9k2"}, "trainer-0"),
        ({"WANDB_RUN_ID": "3xq9k2"}, "3xq9k2"),
    ],
)
def test_slack_messages_name_the_environment_run_and_which_rules_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], run: str
) -> None:
    """Through slack-sdk and the fake Slack: a log without a run id gets the run its logwatch
    process's environment names (SLURM_JOB_ID, then POD_NAME, then WANDB_RUN_ID); the partly
    resolved edit then strikes the resolved rule and names the one still firing."""
    for name in ("SLURM_JOB_ID", "POD_NAME", "WANDB_RUN_ID", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    clock = FakeClock(T0)
    with FakeSlack(rate_per_s=None) as fake:
        sink = open_slack_sink(
            slack_config(fake, group_wait_s=10.0),
            tmp_path,
            clock=clock,
            policy=DeliveryPolicy(pace_s=0.01, backoff_base_s=0.05, backoff_cap_s=0.2),
            report=[].append,
        )
        sink.emit(alert("nan-loss", line=42))
        sink.emit(alert("nan-grad", line=42))
        clock.advance(10)
        sink.tick(clock.now())
        sink.emit(alert("nan-grad", status="resolved", line=57, at_s=30))
        sink.close()
        (message,) = fake.posts("C0ALERTS01")
    posted, edited = message["edits"][0], message
    assert f"run {run} (train.log)" in posted["blocks"][0]["text"]["text"]
    assert f"(run {run})" in posted["text"]
    assert edited["blocks"][0]["text"]["text"].startswith("🔴 FIRING nan-loss (critical) — ")
    assert "*Still firing (1 of 2):*\n• *nan-loss*" in shown(edited["blocks"])
    assert "• ✅ ~nan-grad run/train.log:42 step 1200~ resolved at line 57" in shown(
        edited["blocks"]
    )
