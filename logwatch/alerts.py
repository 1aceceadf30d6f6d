"""Alert events: what the engine emits and every sink (terminal, JSON, Slack) consumes, and
`Sink`, the protocol of what consumes them."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum, StrEnum
from typing import Any, Protocol

from logwatch.statecheck import ANY, INT, OBJECT, STR, TIME, fields, optional

# What json.dumps(ensure_ascii=False) leaves raw but a terminal acts on: DEL, C1, bidi controls.
_C1 = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


class Status(StrEnum):
    """Where an alert is in its lifecycle; the value is what JSON and rule packs say."""

    FIRING = "firing"
    RESOLVED = "resolved"


FIRING = Status.FIRING
RESOLVED = Status.RESOLVED


class EndReason(StrEnum):
    """Why an alert stopped firing; the value is what JSON says."""

    RECOVERED = "recovered"  # the condition cleared: something was fixed or got better
    RESTARTED = "restarted"  # the run restarted (or its log was truncated): nothing was fixed


class Severity(IntEnum):
    """Alert severities, ordered so that `>=` means 'at least as bad'."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @classmethod
    def parse(cls, name: str) -> Severity:
        """Parse `info` / `warning` / `critical` (case-insensitive)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            names = ", ".join(s.name.lower() for s in cls)
            raise ValueError(f"unknown severity {name!r} (expected one of: {names})") from None

    @property
    def label(self) -> str:
        """Lower-case name, as written in rule packs and JSON."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class AlertEvent:
    """One transition of one alert: it fired, or it resolved."""

    rule: str
    severity: Severity
    status: Status
    source: str
    line: int
    ts: datetime | None
    step: int | None
    value: float | None
    summary: str
    fix: str = ""
    text: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    reason: EndReason | None = None  # RESOLVED only; None there means RECOVERED
    run: str | None = None  # the run id its log announced (`run start: run_id=...`), if any
    runbook_url: str = ""  # its rule's runbook, when the pack gives one

    def __post_init__(self) -> None:
        # Every resolve says why it ended, so consumers never have to guess from the summary.
        if self.status == Status.RESOLVED and self.reason is None:
            object.__setattr__(self, "reason", EndReason.RECOVERED)
        elif self.status == Status.FIRING and self.reason is not None:
            object.__setattr__(self, "reason", None)

    @property
    def restarted(self) -> bool:
        """Whether this event ends an alert because its run restarted (not a recovery)."""
        return self.reason == EndReason.RESTARTED

    @property
    def fingerprint(self) -> str:
        """Identity of the alert across its lifecycle: (rule, source, labels)."""
        return alert_fingerprint(self.rule, self.source, self.labels)

    def to_json(self) -> dict[str, Any]:
        """Strict-JSON object: non-finite values become the strings "nan", "inf", "-inf"."""
        return {
            "rule": self.rule,
            "severity": self.severity.label,
            "status": self.status,
            "reason": self.reason,
            "source": self.source,
            "line": self.line,
            "ts": self.ts.isoformat() if self.ts is not None else None,
            "step": self.step,
            "value": json_number(self.value),
            "summary": self.summary,
            "fix": self.fix,
            "text": self.text,
            "labels": dict(self.labels),
            "run": self.run,
            "runbook_url": self.runbook_url,
            "fingerprint": self.fingerprint,
        }

    def to_jsonl(self) -> str:
        """One line of strict JSON."""
        line = json.dumps(self.to_json(), ensure_ascii=False, allow_nan=False)
        # json.dumps escapes C0 controls but leaves DEL, C1 (8-bit CSI/OSC) and bidi controls
        # raw; the same JSON with those as \uNNNN escapes is safe on a terminal.
        return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


NOT_IDENTITY = frozenset({"ts_from_line"})
"""Labels that say something of one event, not which alert it is (its firing and its resolve
may differ in them)."""


def alert_fingerprint(rule: str, source: str, labels: Mapping[str, str]) -> str:
    """Stable short hash of an alert's identity."""
    identity = sorted((k, v) for k, v in labels.items() if k not in NOT_IDENTITY)
    key = json.dumps([rule, source, identity], ensure_ascii=False)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def json_number(value: float | None) -> float | str | None:
    """A float as strict JSON allows it."""
    if value is None:
        return None
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def event_from_json(data: Mapping[str, Any]) -> AlertEvent:
    """The inverse of `AlertEvent.to_json` (checkpoints, spools); ValueError naming the field
    on a malformed object (every field is checked here, not at its first use)."""
    fields(data, _EVENT_FIELDS, "alert event", optional_fields=_EVENT_OPTIONAL)
    labels = data.get("labels", {})
    if not all(isinstance(value, str) for value in labels.values()):
        raise ValueError(f"alert event: 'labels' must map names to strings, got {labels!r}")
    value, ts = data["value"], data["ts"]
    if isinstance(value, str) and value not in ("nan", "inf", "-inf"):
        raise ValueError(f"alert event: 'value' must be a number, got {value!r}")
    return AlertEvent(
        rule=data["rule"],
        severity=Severity.parse(data["severity"]),
        status=Status(data["status"]),
        source=data["source"],
        line=data["line"],
        ts=datetime.fromisoformat(ts) if ts is not None else None,
        step=data["step"],
        value=None if value is None else float(value),
        summary=data["summary"],
        fix=data.get("fix", ""),
        text=data.get("text", ""),
        labels=dict(labels),
        reason=_reason(data.get("reason")),
        run=data.get("run"),
        runbook_url=data.get("runbook_url") or "",
    )


_EVENT_FIELDS = {
    "rule": STR,
    "severity": STR,
    "status": STR,
    "source": STR,
    "line": INT,
    "ts": optional(TIME),
    "step": optional(INT),
    "value": optional(ANY),
    "summary": STR,
}
_EVENT_OPTIONAL = {
    "fix": STR,
    "text": STR,
    "labels": OBJECT,
    "reason": optional(STR),
    "run": optional(STR),
    "runbook_url": optional(STR),
}


def _reason(raw: Any) -> EndReason | None:
    """A saved reason; absent (checkpoints and spools written before it existed) is None."""
    return None if raw is None else EndReason(raw)


def still_firing(events: Iterable[AlertEvent]) -> list[AlertEvent]:
    """The alerts whose last event is a firing one (what was still wrong at the end), in
    firing order."""
    last: dict[str, AlertEvent] = {}
    for event in events:
        last.pop(event.fingerprint, None)
        last[event.fingerprint] = event
    return [event for event in last.values() if event.status == FIRING]


class Sink(Protocol):
    """Anything that takes alert events in order. `emit` must not block the caller for long."""

    def emit(self, event: AlertEvent) -> None:
        """Take one event (fired or resolved)."""
        ...

    def tick(self, now: datetime) -> None:
        """Let time-driven work happen; the tail driver calls it once per round (wall clock)."""
        ...

    def rename_source(self, old: str, new: str) -> None:
        """The alerts firing under `old` go on under `new` (a rotated file: a new file took its
        name); their later events come with `new`. Nothing is emitted for it; a sink that keys
        what it sent by source (Slack's messages, Alertmanager's labels) re-keys it."""
        ...

    def close(self) -> None:
        """Flush and release resources; called once at shutdown."""
        ...
