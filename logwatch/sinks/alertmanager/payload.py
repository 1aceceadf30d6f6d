"""Alert events as Alertmanager API v2 alerts: labels that identify, annotations that describe.

Labels never change between posts of one alert (no step, value or time in them): `alertname`
(the rule id), `severity`, `host`, `source`, the rule's own labels, the config's static labels,
and `run` whenever the log or the environment names the run. Annotations carry the rest.

`host` is where the event happened: the log's host where placement named one (a fleet's rank
log, `labels.host`), else the watching machine. When the two differ, the watching machine is
`instance` (Prometheus' label for the target that reported it), unless the static labels set one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from logwatch.alerts import NOT_IDENTITY, AlertEvent

LOG_LINE_CHARS = 2048
"""An annotation's log line is cut here: Alertmanager keeps every annotation in memory."""
RESOLVED_RESEND_S = 15 * 60.0
"""A resolved alert is re-posted this long (Prometheus does the same), so every peer hears it."""
_BAD_LABEL_CHAR = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True, slots=True)
class Identity:
    """What every alert of this logwatch carries: host, static labels, the environment's run."""

    host: str
    labels: Mapping[str, str] = field(default_factory=dict)
    env_run: str | None = None
    generator_url: str | None = None


def label_name(key: str) -> str:
    """A rule label's key as a valid Alertmanager label name (`gpu.idx` -> `gpu_idx`)."""
    name = _BAD_LABEL_CHAR.sub("_", key)
    return name if name and not name[0].isdigit() else f"_{name}"


def alert_labels(event: AlertEvent, identity: Identity) -> dict[str, str]:
    """The labels that identify this alert in Alertmanager (not those that say something of
    one event only: an untimed line's `ts_from_line` would make its resolve another alert)."""
    labels = {label_name(k): str(v) for k, v in event.labels.items() if k not in NOT_IDENTITY}
    labels.update(identity.labels)
    host = event.labels.get("host") or identity.host  # the log's host, else the watcher's
    if host != identity.host:
        labels.setdefault("instance", identity.host)
    labels.update(
        alertname=event.rule,
        severity=event.severity.label,
        host=host,
        source=event.source,
    )
    run = event.run or identity.env_run
    if run:
        labels["run"] = run
    return labels


def alert_annotations(event: AlertEvent) -> dict[str, str]:
    """What describes it; the latest post wins in Alertmanager."""
    notes = {"summary": event.summary, "description": event.fix}
    if event.text:
        notes["log_line"] = event.text[:LOG_LINE_CHARS]
    if event.step is not None:
        notes["step"] = str(event.step)
    if event.value is not None:
        notes["value"] = _number(event.value)
    if event.line:
        notes["line"] = str(event.line)
    if event.runbook_url:
        notes["runbook_url"] = event.runbook_url
    return {k: v for k, v in notes.items() if v}


def generator_url(template: str | None, labels: Mapping[str, str]) -> str | None:
    """The `generator_url` template with `{run}`, `{source}`, `{rule}`, `{host}` filled in."""
    if not template:
        return None
    values = {
        "run": labels.get("run", ""),
        "source": labels["source"],
        "rule": labels["alertname"],
        "host": labels["host"],
    }
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError):
        return template  # a brace the template meant literally: sent as written


@dataclass(slots=True)
class AmAlert:
    """One alert as logwatch keeps it between posts (and in `alertmanager.json`)."""

    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: datetime
    ends_at: datetime | None = None  # set once resolved
    generator_url: str | None = None
    version: int = 0  # the sink's change counter when this alert last changed
    rule_labels: dict[str, str] = field(default_factory=dict)
    """The event's own labels as the rule gave them: with `alertname` and `source` they make the
    logwatch fingerprint again when the source is renamed."""

    def body(self, now: datetime, lease_s: float) -> dict[str, Any]:
        """The API v2 object: while firing, endsAt is a lease (now + 4 x resend interval)."""
        ends = self.ends_at if self.ends_at is not None else now + timedelta(seconds=lease_s)
        out: dict[str, Any] = {
            "labels": self.labels,
            "annotations": self.annotations,
            "startsAt": rfc3339(self.starts_at),
            "endsAt": rfc3339(ends),
        }
        if self.generator_url:
            out["generatorURL"] = self.generator_url
        return out

    def to_json(self) -> dict[str, Any]:
        """For the state file."""
        return {
            "labels": self.labels,
            "annotations": self.annotations,
            "starts_at": self.starts_at.isoformat(),
            "ends_at": self.ends_at.isoformat() if self.ends_at else None,
            "generator_url": self.generator_url,
            "rule_labels": self.rule_labels,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AmAlert:
        """The inverse of `to_json`; ValueError when malformed."""
        try:
            ends = data["ends_at"]
            return cls(
                labels={str(k): str(v) for k, v in dict(data["labels"]).items()},
                annotations={str(k): str(v) for k, v in dict(data["annotations"]).items()},
                starts_at=_aware(datetime.fromisoformat(data["starts_at"])),
                ends_at=_aware(datetime.fromisoformat(ends)) if ends else None,
                generator_url=None
                if data.get("generator_url") is None
                else str(data["generator_url"]),
                # absent in states saved before renames were followed
                rule_labels={str(k): str(v) for k, v in dict(data.get("rule_labels", {})).items()},
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed Alertmanager alert: {exc!r}") from None


def rfc3339(when: datetime) -> str:
    """UTC, millisecond precision, `Z`: what Alertmanager itself writes."""
    return _aware(when).astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.astimezone()


def _number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:g}"
