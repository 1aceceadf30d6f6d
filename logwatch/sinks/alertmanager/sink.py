"""The Alertmanager sink: alert events to every HA peer as API v2 alerts, re-posted while firing.

A firing alert is posted with `endsAt` = now + 4 x resend_interval and re-posted every
resend_interval (from `tick`), so it expires by itself if logwatch dies; a resolved one is posted
with `endsAt` = the resolve time and re-posted for 15 minutes. What is firing is kept in
`alertmanager.json` in the state directory (written atomically on every change), so a restarted
logwatch announces it again at once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from logwatch.alerts import FIRING, AlertEvent, alert_fingerprint
from logwatch.atomic import write_atomic
from logwatch.cluster_config import AlertmanagerConfig
from logwatch.config import Config
from logwatch.errors import ConfigError
from logwatch.hostinfo import environment_run, host_name
from logwatch.redact import stderr_line
from logwatch.sinks.alertmanager.payload import (
    LOG_LINE_CHARS,
    RESOLVED_RESEND_S,
    AmAlert,
    Identity,
    alert_annotations,
    alert_labels,
    generator_url,
)
from logwatch.sinks.alertmanager.peers import Peer, make_client

STATE_FILE = "alertmanager.json"
LEASE_RESENDS = 4
"""While firing, endsAt is this many resend intervals ahead (as Prometheus stamps it)."""
BACKOFF_CAP_S = 30.0


class AlertmanagerSink:
    """The Sink `tail` feeds; posting runs on one thread per peer."""

    def __init__(
        self,
        config: AlertmanagerConfig,
        identity: Identity,
        *,
        state_file: Path | None = None,
        report: Callable[[str], None] = stderr_line,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        ignore_rules: frozenset[str] = frozenset(),
    ) -> None:
        self.config, self.identity, self.state_file = config, identity, state_file
        self.ignore_rules = ignore_rules
        self.report, self.now = report, now
        self.alerts: dict[str, AmAlert] = {}  # by logwatch fingerprint
        self.version = 0
        self._lock = threading.Lock()
        self._last_resend: datetime | None = None
        self._save_failed = False
        self._load()
        cap = min(BACKOFF_CAP_S, config.resend_interval_s)
        self.peers = [
            Peer(make_client(url, config), self._body, backoff_cap_s=cap, report=report)
            for url in config.urls
        ]
        if self.alerts:
            self._due()  # a restart: say again at once what is still firing

    def emit(self, event: AlertEvent) -> None:
        """Record the transition, keep it on disk, and have every peer post it."""
        if event.rule in self.ignore_rules:
            return
        now = self.now()
        with self._lock:
            self.version += 1
            known = self.alerts.get(event.fingerprint)
            if event.status == FIRING:
                labels = alert_labels(event, self.identity)
                starts = known.starts_at if known and known.ends_at is None else now
                self.alerts[event.fingerprint] = AmAlert(
                    labels=labels,
                    annotations=alert_annotations(event),
                    starts_at=starts,
                    generator_url=generator_url(self.identity.generator_url, labels),
                    version=self.version,
                    rule_labels=dict(event.labels),
                )
            elif known is not None:
                known.ends_at, known.version = now, self.version
                known.annotations = {**known.annotations, **alert_annotations(event)}
            else:
                return  # a resolve of an alert this sink never heard fire: nothing to end
            self._save()
        self._due()

    def note_action(self, fingerprint: str, text: str) -> None:
        """What an action did, as the alert's `action` annotation (posted again at once)."""
        with self._lock:
            alert = self.alerts.get(fingerprint)
            if alert is None:
                return
            self.version += 1
            alert.annotations = {**alert.annotations, "action": text[:LOG_LINE_CHARS]}
            alert.version = self.version
            self._save()
        self._due()

    def rename_source(self, old: str, new: str) -> None:
        """`old`'s firing alerts go on under `new`. The source is a label, so in Alertmanager
        each is a new alert: the one labelled `old` is resolved now (not left firing until its
        lease ends) and one labelled `new`, started when the first was, fires in its place."""
        now = self.now()
        with self._lock:
            moving = [
                a
                for a in self.alerts.values()
                if a.ends_at is None and a.labels.get("source") == old
            ]
            for alert in moving:
                self.version += 1
                labels = {**alert.labels, "source": new}
                fingerprint = alert_fingerprint(labels["alertname"], new, alert.rule_labels)
                self.alerts[fingerprint] = replace(
                    alert,
                    labels=labels,
                    annotations={**alert.annotations, "renamed_from": old},
                    generator_url=generator_url(self.identity.generator_url, labels),
                    version=self.version,
                )
                alert.ends_at, alert.version = now, self.version
                alert.annotations = {**alert.annotations, "renamed_to": new}
            if not moving:
                return
            self._save()
        self._due()

    def tick(self, now: datetime) -> None:
        """Every resend_interval: drop what resolved over 15 minutes ago, re-post the rest."""
        wall = self.now()
        if self._last_resend is not None:
            since = (wall - self._last_resend).total_seconds()
            if 0 <= since < self.config.resend_interval_s:
                return
        self._last_resend = wall
        cutoff = wall - timedelta(seconds=RESOLVED_RESEND_S)
        with self._lock:
            old = [fp for fp, a in self.alerts.items() if a.ends_at and a.ends_at < cutoff]
            for fp in old:
                del self.alerts[fp]
            if old:
                self._save()
            if not self.alerts:
                return
        self._due()

    def backlog(self) -> int:
        """Alert states some peer has not accepted yet (`logwatch_delivery_queue_depth`)."""
        floor = min((peer.delivered for peer in self.peers), default=self.version)
        with self._lock:
            return sum(alert.version > floor for alert in self.alerts.values())

    def close(self) -> None:
        """Give peers a moment to take what is pending, then stop; firing alerts stay on disk
        (a stop is not a recovery: their lease runs out unless logwatch comes back)."""
        deadline = self.now() + timedelta(seconds=min(self.config.timeout_s, 3.0))
        while self.backlog() and self.now() < deadline:
            threading.Event().wait(0.05)
        for peer in self.peers:
            peer.close(wait_s=1.0)

    def _due(self) -> None:
        for peer in self.peers:
            peer.due()

    def _body(self) -> tuple[bytes, int]:
        """The JSON array every peer gets now, and the state version it holds."""
        lease_s = LEASE_RESENDS * self.config.resend_interval_s
        now = self.now()
        with self._lock:
            alerts = [alert.body(now, lease_s) for alert in self.alerts.values()]
            version = self.version
        return json.dumps(alerts, ensure_ascii=False).encode(), version

    def _load(self) -> None:
        if self.state_file is None or not self.state_file.exists():
            return
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
            self.alerts = {str(fp): AmAlert.from_json(raw) for fp, raw in dict(data).items()}
        except (OSError, ValueError, TypeError) as exc:
            self.report(
                f"{self.state_file}: unreadable ({exc}); starting without it (what was firing "
                "is announced again as its lines are read)"
            )
            self.alerts = {}

    def _save(self) -> None:
        if self.state_file is None:
            return
        data = json.dumps({fp: a.to_json() for fp, a in self.alerts.items()}, ensure_ascii=False)
        try:
            write_atomic(self.state_file, data.encode())
        except OSError as exc:
            if not self._save_failed:
                self.report(
                    f"{self.state_file}: cannot write ({exc.strerror}); Alertmanager alerts are "
                    "held in memory and still posted. Fix: free space or permissions in the "
                    "state directory"
                )
            self._save_failed = True
        else:
            self._save_failed = False


def open_alertmanager_sink(
    config: Config, state_dir: Path, *, report: Callable[[str], None] = stderr_line
) -> AlertmanagerSink:
    """The sink for the config's [alertmanager] table (or `tail --alertmanager URL`)."""
    if config.alertmanager is None:
        raise ConfigError(f"{config.path or 'logwatch.toml'}:1: no [alertmanager] table")
    am = config.alertmanager
    identity = Identity(
        host=host_name(),
        labels=dict(am.labels),
        env_run=environment_run(),
        generator_url=am.generator_url,
    )
    from logwatch.sinks.slack.sink import slack_ignored_rules  # the same host notices stay out

    return AlertmanagerSink(
        am,
        identity,
        state_file=state_dir / STATE_FILE,
        report=report,
        ignore_rules=slack_ignored_rules(config),
    )
