"""Helpers shared by the Slack tests: alert events, a list outbox, and settings."""

from __future__ import annotations

from datetime import datetime, timedelta

from logwatch.alerts import AlertEvent, Severity
from logwatch.sinks.slack.spool import Job

T0 = datetime(2026, 11, 28, 14, 0, 0)


def alert(
    rule: str = "nan-loss",
    source: str = "run/train.log",
    status: str = "firing",
    *,
    line: int = 10,
    at_s: float = 0.0,
    severity: Severity = Severity.CRITICAL,
    text: str = "step=1200 loss=nan",
) -> AlertEvent:
    """An alert event as the engine would emit it."""
    return AlertEvent(
        rule=rule,
        severity=severity,
        status=status,
        source=source,
        line=line,
        ts=T0 + timedelta(seconds=at_s),
        step=1200,
        value=float("nan"),
        summary=f"{rule} {status} in {source}",
        fix="roll back",
        text=text,
    )


class ListOutbox:
    """Collects jobs in order (the lifecycle tests look at what would be sent)."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def enqueue(self, job: Job) -> None:
        self.jobs.append(job)

    def kinds(self) -> list[str]:
        return [j.kind for j in self.jobs]


def slack_config(fake: object, *, webhook: bool = False, timeout_s: float = 2.0, **alerts: float):  # type: ignore[no-untyped-def]
    """A Config pointing at a FakeSlack (bot mode, or webhook mode)."""
    from logwatch.config import AlertsConfig, Config, SlackConfig

    slack = SlackConfig(
        channel="C0ALERTS01",
        base_url=fake.base_url,  # type: ignore[attr-defined]
        timeout_s=timeout_s,
        token=fake.token,  # type: ignore[attr-defined]
        webhook_url=fake.webhook_url if webhook else None,  # type: ignore[attr-defined]
    )
    return Config(slack=slack, alerts=AlertsConfig(**alerts))
