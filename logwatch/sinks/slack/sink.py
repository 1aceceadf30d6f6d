"""Wiring: config + state directory -> Notifier -> Spool -> DeliveryWorker -> Slack, as one Sink."""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from logwatch.alerts import FIRING, AlertEvent
from logwatch.clock import Clock, SystemClock
from logwatch.config import Config, SlackConfig
from logwatch.errors import ConfigError
from logwatch.redact import redact, stderr_line
from logwatch.sinks.slack import messages
from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.notifier import Notifier
from logwatch.sinks.slack.silences import SilenceStore
from logwatch.sinks.slack.spool import POST, Job, Spool
from logwatch.sinks.slack.transport import BotTransport, Transport, WebhookTransport


def make_transport(slack: SlackConfig) -> Transport:
    """The slack-sdk transport the config asks for."""
    if slack.webhook_url:
        return WebhookTransport(slack.webhook_url, slack.timeout_s)
    if not slack.token:
        raise ConfigError("[slack]: no token (set SLACK_BOT_TOKEN or [slack] token_file)")
    return BotTransport(slack.token, slack.base_url, slack.timeout_s)


class SlackSink:
    """The Sink `tail` feeds: lifecycle on the caller's thread, delivery on background threads."""

    def __init__(
        self,
        notifier: Notifier,
        worker: DeliveryWorker,
        spool: Spool,
        *,
        tick_s: float | None = 1.0,
        drain_s: float = 5.0,
        report: Callable[[str], None] = stderr_line,
    ) -> None:
        self.notifier, self.worker, self.spool, self.drain_s = notifier, worker, spool, drain_s
        self.report = report
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if tick_s is not None:
            self._ticker = threading.Thread(
                target=self._tick_loop, args=(tick_s,), daemon=True, name="logwatch-notify-tick"
            )
            self._ticker.start()

    def _tick_loop(self, tick_s: float) -> None:
        """Tick until closed; a failing tick is reported (once per distinct error), never fatal."""
        last = ""
        while not self._stop.wait(tick_s):
            try:
                self.tick()
            except Exception as exc:  # the thread must outlive any one bad tick
                said = f"logwatch: Slack notifications: a periodic step failed ({type(exc).__name__}: {exc}); still running, retrying every {tick_s:g}s"
                if said != last:
                    self.report(redact(said))
                last = said
            else:
                last = ""

    def emit(self, event: AlertEvent) -> None:
        """Hand one event to the lifecycle; returns once its jobs are on disk."""
        with self._lock:
            self.notifier.emit(event)

    def tick(self) -> None:
        """Let time-driven work happen (group flush, repeats, expired silences)."""
        with self._lock:
            self.notifier.tick()

    def close(self) -> None:
        """Send waiting groups, give delivery `drain_s` to finish, keep the rest spooled."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            self.notifier.close()
        self.worker.drain(self.drain_s)
        self.worker.close()
        self.spool.close()


def open_slack_sink(
    config: Config,
    state_dir: Path,
    *,
    clock: Clock | None = None,
    policy: DeliveryPolicy | None = None,
    report: Callable[[str], None] = stderr_line,
    tick_s: float | None = 1.0,
) -> SlackSink:
    """A SlackSink for the config's [slack] table, with its spool in the state directory."""
    if config.slack is None:
        raise ConfigError(
            f"{config.path or 'logwatch.toml'}:1: no [slack] table: nothing to notify"
        )
    transport = make_transport(config.slack)
    spool = Spool(state_dir, report=report)
    worker = DeliveryWorker(
        spool,
        transport,
        dead_letter=state_dir / DEAD_LETTER,
        policy=policy or DeliveryPolicy(),
        report=report,
    )
    notifier = Notifier(
        spool,
        channel=config.slack.channel,
        settings=config.alerts,
        clock=clock or SystemClock(),
        silences=SilenceStore(state_dir, report=report),
        state_dir=state_dir,
        report=report,
    )
    return SlackSink(notifier, worker, spool, tick_s=tick_s, report=report)


def digest_lines(events: Sequence[AlertEvent]) -> list[str]:
    """One line per rule and source of the alerts that fired."""
    fired = [e for e in events if e.status == FIRING]
    counts = Counter((e.rule, e.source) for e in fired)
    esc = messages.escape
    return [f"• *{esc(r)}* x{n} in `{esc(s)}`" for (r, s), n in sorted(counts.items())]


def send_digest(
    config: Config,
    state_dir: Path,
    title: str,
    events: Sequence[AlertEvent],
    *,
    timeout_s: float = 60.0,
    report: Callable[[str], None] = stderr_line,
) -> bool:
    """Post one digest message for a replay; True once Slack accepted it (else it stays spooled)."""
    if config.slack is None:
        raise ConfigError(
            f"{config.path or 'logwatch.toml'}:1: --notify needs a [slack] table in the config"
        )
    text, blocks = messages.digest_message(title, digest_lines(events) or ["no alerts"])
    spool = Spool(state_dir, report=report)
    try:
        worker = DeliveryWorker(
            spool, make_transport(config.slack), dead_letter=state_dir / DEAD_LETTER, report=report
        )
        try:
            spool.enqueue(Job(secrets.token_hex(8), config.slack.channel, POST, text, blocks))
            return worker.drain(timeout_s)
        finally:
            worker.close()
    finally:
        spool.close()
