"""`WebhookSink`: each alert event, as it is emitted, becomes one alert group posted to every
`[[webhook]]` (one outbox each). Enqueued and fsynced before `emit` returns, so a kill -9 right
after an alert loses nothing; when each alert started is kept in the state directory, so a
resolve after a restart still says when its alert began."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from logwatch.alerts import FIRING, AlertEvent
from logwatch.atomic import write_atomic
from logwatch.errors import StateError
from logwatch.redact import stderr_line
from logwatch.sinks.alertmanager.payload import Identity
from logwatch.sinks.webhook.outbox import Outbox, Poster
from logwatch.sinks.webhook.payload import GroupAlert, group_payload
from logwatch.statecheck import TIME, kind_of
from logwatch.webhook_config import WebhookConfig

STARTS_FILE = "webhook-starts.json"


class WebhookSink:
    """The Sink `tail` feeds for the config's `[[webhook]]` tables."""

    def __init__(
        self,
        outboxes: Sequence[Outbox],
        identity: Identity,
        *,
        state_dir: Path,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        report: Callable[[str], None] = stderr_line,
        drain_s: float = 3.0,
    ) -> None:
        self.outboxes, self.identity, self.now, self.report = list(outboxes), identity, now, report
        self.drain_s = drain_s
        self.starts_path = state_dir / STARTS_FILE
        self.starts = self._load()

    def emit(self, event: AlertEvent) -> None:
        """One group of this alert to every webhook; on disk when this returns."""
        now = self.now()
        fp = event.fingerprint
        if event.status == FIRING:
            starts, ends = self.starts.setdefault(fp, now), None
        else:
            starts, ends = self.starts.pop(fp, now), now
        self._save()
        body = group_payload(event.rule, [GroupAlert(event, starts, ends)], self.identity)
        job_id = secrets.token_hex(8)
        for outbox in self.outboxes:
            outbox.enqueue(job_id, body)

    def tick(self, now: datetime) -> None:
        """Delivery runs on the outboxes' threads."""

    def rename_source(self, old: str, new: str) -> None:
        """The source is a label: the alerts under `new` are new alerts when they next change."""

    def backlog(self) -> int:
        """Alert groups not yet delivered (`logwatch_delivery_queue_depth{sink="webhook"}`)."""
        return sum(outbox.pending_count() for outbox in self.outboxes)

    def close(self) -> None:
        """Give delivery a moment, then stop; what is left is posted on the next start."""
        for outbox in self.outboxes:
            outbox.close(self.drain_s)

    def _load(self) -> dict[str, datetime]:
        if not self.starts_path.exists():
            return {}
        try:
            data = json.loads(self.starts_path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("must be an object of fingerprints to times")
            return {
                str(fp): datetime.fromisoformat(kind_of(at, TIME, f"'{fp}'"))
                for fp, at in data.items()
            }
        except (OSError, ValueError) as exc:
            self.report(
                f"{self.starts_path}: unreadable ({exc}); starting without it (a resolve of an "
                "alert that fired before says it started when it resolved)"
            )
            return {}

    def _save(self) -> None:
        data = {fp: at.isoformat() for fp, at in self.starts.items()}
        try:
            write_atomic(self.starts_path, json.dumps(data).encode())
        except OSError as exc:
            self.report(f"{self.starts_path}: cannot write ({exc.strerror}); kept in memory")


def open_webhook_sink(
    webhooks: Sequence[WebhookConfig],
    state_dir: Path,
    *,
    report: Callable[[str], None] = stderr_line,
    poster: Callable[[WebhookConfig], Poster] | None = None,
) -> WebhookSink:
    """The sink for the config's `[[webhook]]` tables, their outboxes in the state directory."""
    from logwatch.hostinfo import environment_run, host_name

    outboxes: list[Outbox] = []
    try:
        for config in webhooks:
            chosen = poster(config) if poster is not None else None
            try:
                outboxes.append(Outbox(state_dir, config, poster=chosen, report=report))
            except OSError as exc:
                raise StateError(
                    f"{state_dir}: cannot open the spool of {config.name} "
                    f"({exc.strerror or exc}). Fix: permissions or free space in the state "
                    "directory"
                ) from None
    except BaseException:
        for outbox in outboxes:
            outbox.close(0.0)
        raise
    identity = Identity(host=host_name(), env_run=environment_run())
    return WebhookSink(outboxes, identity, state_dir=state_dir, report=report)
