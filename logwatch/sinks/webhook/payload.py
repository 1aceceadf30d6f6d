"""An alert group as Alertmanager's webhook payload (version 4), so receivers written for
Alertmanager (Teams, Discord, ntfy, PagerDuty bridges) take it unchanged."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from logwatch.alerts import FIRING, AlertEvent
from logwatch.redact import redact
from logwatch.sinks.alertmanager.payload import Identity, alert_annotations, alert_labels, rfc3339

ZERO_TIME = "0001-01-01T00:00:00Z"
"""What Alertmanager writes as `endsAt` of an alert still firing."""
RECEIVER = "logwatch"


@dataclass(frozen=True, slots=True)
class GroupAlert:
    """One alert of a group: its event, when it started, when it ended (None: firing)."""

    event: AlertEvent
    starts_at: datetime
    ends_at: datetime | None


def alert_body(alert: GroupAlert, identity: Identity) -> dict[str, Any]:
    """One element of `alerts[]`."""
    event = alert.event
    return {
        "status": "firing" if alert.ends_at is None else "resolved",
        "labels": _masked(alert_labels(event, identity)),
        "annotations": _masked(alert_annotations(event)),
        "startsAt": rfc3339(alert.starts_at),
        "endsAt": ZERO_TIME if alert.ends_at is None else rfc3339(alert.ends_at),
        "generatorURL": identity.generator_url or "",
        "fingerprint": event.fingerprint,
    }


def group_payload(rule: str, alerts: Sequence[GroupAlert], identity: Identity) -> dict[str, Any]:
    """The webhook body of one group (one rule's alerts that changed together)."""
    bodies = [alert_body(alert, identity) for alert in alerts]
    firing = any(alert.event.status == FIRING for alert in alerts)
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="{rule}"}}',
        "truncatedAlerts": 0,
        "status": "firing" if firing else "resolved",
        "receiver": RECEIVER,
        "groupLabels": {"alertname": rule},
        "commonLabels": _common([b["labels"] for b in bodies]),
        "commonAnnotations": _common([b["annotations"] for b in bodies]),
        "externalURL": "",
        "alerts": bodies,
    }


def merge_payloads(bodies: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """Payloads of one group as one: the latest state of each alert (by fingerprint), in the
    order they first came; `status` firing while any of them fires. (The outbox merges only
    payloads of distinct alerts, so that each change of an alert is posted.)"""
    if len(bodies) == 1:
        return bodies[0]
    latest: dict[str, Any] = {}
    for body in bodies:
        for alert in body.get("alerts", []):
            latest[str(alert.get("fingerprint"))] = alert
    alerts = list(latest.values())
    firing = any(alert.get("status") == "firing" for alert in alerts)
    return {
        **bodies[-1],
        "status": "firing" if firing else "resolved",
        "commonLabels": _common([alert.get("labels", {}) for alert in alerts]),
        "commonAnnotations": _common([alert.get("annotations", {}) for alert in alerts]),
        "alerts": alerts,
    }


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """The pairs every map has (Alertmanager's commonLabels / commonAnnotations)."""
    if not maps:
        return {}
    first, rest = maps[0], maps[1:]
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in rest)}


def _masked(values: Mapping[str, str]) -> dict[str, str]:
    return {key: redact(value) for key, value in values.items()}
