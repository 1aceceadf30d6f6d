"""A Slack message's group of alerts (`Notice`) and how the notify state file keeps it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from logwatch.alerts import AlertEvent, Severity, event_from_json
from logwatch.sinks.slack import messages
from logwatch.statecheck import LIST, NUMBER, OBJECT, STR, fields


@dataclass(slots=True)
class Notice:
    """One Slack message and the alerts it speaks for."""

    id: str
    rule: str
    severity: Severity
    opened_s: float
    members: dict[str, AlertEvent] = field(default_factory=dict)
    resolved: dict[str, AlertEvent] = field(default_factory=dict)
    last_notified_s: float = 0.0
    moved: dict[str, str] = field(default_factory=dict)
    """Sources renamed since the message was posted (a rotated file): new name -> posted name."""
    marks: list[str] = field(default_factory=list)
    """What people did with the buttons (silenced, acknowledged, stopped), shown on the message."""
    acked_by: str = ""
    """The Slack user who acknowledged it: no more "still firing" reminders."""


def event_json(event: AlertEvent) -> dict[str, Any]:
    """An event as the state file keeps it (the log line cut: messages show at most 3000 chars)."""
    data = event.to_json()
    data["text"] = messages.cut(data["text"], messages.SECTION_MAX)
    return data


def notice_json(notice: Notice) -> dict[str, Any]:
    return {
        "id": notice.id,
        "rule": notice.rule,
        "severity": notice.severity.label,
        "opened_s": notice.opened_s,
        "last_notified_s": notice.last_notified_s,
        "members": [event_json(e) for e in notice.members.values()],
        "resolved": [event_json(e) for e in notice.resolved.values()],
        "moved": notice.moved,
        "marks": notice.marks,
        "acked_by": notice.acked_by,
    }


_NOTICE_FIELDS = {
    "id": STR,
    "rule": STR,
    "severity": STR,
    "opened_s": NUMBER,
    "last_notified_s": NUMBER,
    "members": LIST,
    "resolved": LIST,
}


def notice_from_json(data: dict[str, Any]) -> Notice:
    optional = {"moved": OBJECT, "marks": LIST, "acked_by": STR}
    fields(data, _NOTICE_FIELDS, "Slack notice", optional_fields=optional)
    members: Sequence[AlertEvent] = [event_from_json(e) for e in data["members"]]
    resolved: Sequence[AlertEvent] = [event_from_json(e) for e in data["resolved"]]
    moved = data.get("moved", {})  # absent in states saved before renames were kept
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in dict(moved).items()):
        raise ValueError(f"'moved' must map source names to source names, got {moved!r}")
    return Notice(
        id=data["id"],
        rule=data["rule"],
        severity=Severity.parse(data["severity"]),
        opened_s=data["opened_s"],
        members={e.fingerprint: e for e in members},
        resolved={e.fingerprint: e for e in resolved},
        last_notified_s=data["last_notified_s"] if not math.isnan(data["last_notified_s"]) else 0.0,
        moved=dict(moved),
        marks=[str(mark) for mark in data.get("marks", [])],
        acked_by=data.get("acked_by", ""),
    )
