"""Slack messages as read on a phone: each fact once, the fix kept, the header says where."""

from __future__ import annotations

import re
import socket
from dataclasses import replace
from typing import Any

from slackhelp import alert

from logwatch.alerts import Severity
from logwatch.sinks.slack import messages
from logwatch.sinks.slack.sink import digest_lines


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
