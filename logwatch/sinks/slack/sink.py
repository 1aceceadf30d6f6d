"""Wiring: config + state directory -> Notifier -> Spool -> DeliveryWorker -> Slack, as one Sink.

The sink has no timer thread: whoever feeds it calls `tick(now)` (the tail driver, once per
round). `send_digest` (replay --notify) needs no tick: it spools one job and drains it."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from logwatch.alerts import FIRING, AlertEvent
from logwatch.clock import Clock, SystemClock
from logwatch.config import Config, SlackConfig
from logwatch.errors import ConfigError
from logwatch.hostinfo import environment_run
from logwatch.redact import redact, stderr_line
from logwatch.sinks.slack import messages
from logwatch.sinks.slack.buttons import ButtonDesk, Stopper, controls
from logwatch.sinks.slack.delivery import DEAD_LETTER, DeliveryPolicy, DeliveryWorker
from logwatch.sinks.slack.notifier import Notifier
from logwatch.sinks.slack.silences import SilenceStore
from logwatch.sinks.slack.socketmode import SocketLink
from logwatch.sinks.slack.spool import POST, Job, Spool
from logwatch.sinks.slack.transport import BotTransport, Transport, WebhookTransport
from logwatch.words import counted


def make_transport(slack: SlackConfig) -> Transport:
    """The slack-sdk transport the config asks for."""
    if slack.webhook_url:
        return WebhookTransport(slack.webhook_url, slack.timeout_s)
    if not slack.token:
        raise ConfigError("[slack]: no token (set SLACK_BOT_TOKEN or [slack] token_file)")
    return BotTransport(slack.token, slack.base_url, slack.timeout_s)


class SlackSink:
    """The Sink `tail` feeds: lifecycle on the caller's thread (the driver ticks it each round),
    delivery on background threads."""

    def __init__(
        self,
        notifier: Notifier,
        worker: DeliveryWorker,
        spool: Spool,
        *,
        tick_s: float = 1.0,
        drain_s: float = 5.0,
        report: Callable[[str], None] = stderr_line,
    ) -> None:
        self.notifier, self.worker, self.spool, self.drain_s = notifier, worker, spool, drain_s
        self.tick_s, self.report = tick_s, report
        self._lock = threading.Lock()  # library callers may emit and tick from two threads
        self._last_tick: datetime | None = None
        self._last_said = ""
        self.buttons: ButtonDesk | None = None  # [slack] app_token_file: presses act here
        self.link: SocketLink | None = None

    @property
    def lock(self) -> threading.Lock:
        """Held while the lifecycle changes (a button press takes it too)."""
        return self._lock

    def set_stopper(self, stopper: Stopper) -> None:
        """What a Stop run button calls (`ActionSink.run_once`), once the actions exist."""
        if self.buttons is not None:
            self.buttons.stopper = stopper

    def emit(self, event: AlertEvent) -> None:
        """Hand one event to the lifecycle; returns once its jobs are on disk."""
        with self._lock:
            self.notifier.emit(event)

    def note_action(self, fingerprint: str, text: str) -> None:
        """What an action did, as a thread reply on its alert's message (called from the
        action's thread)."""
        with self._lock:
            self.notifier.note(fingerprint, text)

    def rename_source(self, old: str, new: str) -> None:
        """`old`'s alerts go on under `new`: their messages are edited, not posted again."""
        with self._lock:
            self.notifier.rename_source(old, new)

    def tick(self, now: datetime) -> None:
        """Let time-driven work happen (group flush, repeats, expired silences), at most once per
        `tick_s`; a failing step is said once per distinct error, never raised."""
        if (
            self._last_tick is not None
            and 0 <= (now - self._last_tick).total_seconds() < self.tick_s
        ):
            return  # rounds come faster than lifecycle timers need (a clock stepped back ticks)
        self._last_tick = now
        try:
            with self._lock:
                self.notifier.tick()
        except Exception as exc:  # the caller's rounds must outlive any one bad tick
            said = f"logwatch: Slack notifications: a periodic step failed ({type(exc).__name__}: {exc}); still running, retrying every {self.tick_s:g}s"
            if said != self._last_said:
                self.report(redact(said))
            self._last_said = said
        else:
            self._last_said = ""

    def backlog(self) -> int:
        """Slack requests spooled but not yet delivered (`logwatch_delivery_queue_depth`)."""
        return self.spool.pending_count()

    def close(self) -> None:
        """Send waiting groups, give delivery `drain_s` to finish, keep the rest spooled."""
        if self.link is not None:
            self.link.close()  # no more presses: what they would change is about to be saved
        with self._lock:
            self.notifier.close()
        self.worker.drain(self.drain_s)
        self.worker.close()
        self.spool.close()


def slack_ignored_rules(config: Config) -> frozenset[str]:
    """Rules kept off Slack: the no-NVML host notice, unless `[gpu] notify_unavailable`."""
    from logwatch.gpu.sampler import GPU_UNAVAILABLE

    return frozenset() if config.gpu.notify_unavailable else frozenset({GPU_UNAVAILABLE})


def open_slack_sink(
    config: Config,
    state_dir: Path,
    *,
    clock: Clock | None = None,
    policy: DeliveryPolicy | None = None,
    report: Callable[[str], None] = stderr_line,
    tick_s: float = 1.0,
    ping_interval_s: float = 5.0,
) -> SlackSink:
    """A SlackSink for the config's [slack] table, with its spool in the state directory (and,
    with buttons, a Socket Mode link that pings every `ping_interval_s`: a silent loss is
    found within about five of them)."""
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
        policy=policy or DeliveryPolicy(pace_s=config.slack.pace_s),
        report=report,
        clock=time.monotonic if clock is None else clock.monotonic,
    )
    buttons = config.slack.buttons
    stop_actions = [spec for spec in config.actions if spec.button]
    notifier = Notifier(
        spool,
        channel=config.slack.channel,
        settings=config.alerts,
        clock=clock or SystemClock(),
        silences=SilenceStore(state_dir, report=report),
        state_dir=state_dir,
        report=report,
        ignore_rules=slack_ignored_rules(config),
        env_run=environment_run(),
        controls=controls(stop_actions) if buttons is not None else None,
    )
    sink = SlackSink(notifier, worker, spool, tick_s=tick_s, report=report)
    if buttons is not None and config.slack.token:
        from slack_sdk import WebClient

        web = WebClient(
            token=config.slack.token,
            base_url=config.slack.base_url,
            timeout=config.slack.timeout_s,  # type: ignore[arg-type]  # float works
        )
        sink.buttons = ButtonDesk(buttons, notifier, sink.lock, web, report=report)
        sink.link = SocketLink(
            buttons.app_token,
            config.slack.base_url,
            config.slack.timeout_s,
            sink.buttons.handle,
            report=report,
            ping_interval_s=ping_interval_s,
        )
    return sink


def digest_lines(events: Sequence[AlertEvent]) -> list[str]:
    """A totals line (firing + resolved = all events), then one line per rule and source."""
    if not events:
        return []
    groups: dict[tuple[str, str], list[AlertEvent]] = {}
    for event in events:
        groups.setdefault((event.rule, event.source), []).append(event)
    fired = sum(e.status == FIRING for e in events)
    total = f"*{fired} firing + {len(events) - fired} resolved = {counted(len(events), 'event')}*"
    return [total, *(digest_line(group) for _, group in sorted(groups.items()))]


def digest_line(group: Sequence[AlertEvent]) -> str:
    """One rule on one source: severity, firing and resolved counts, first (and last) log time."""
    esc, first = messages.escape, group[0]
    severity = max(e.severity for e in group)
    fired = sum(e.status == FIRING for e in group)
    times = sorted(e.ts for e in group if e.ts is not None)
    span = messages.when(times[0]) if times else "?"
    if len(times) > 1 and times[-1] != times[0]:
        span += f" to {messages.when(times[-1])}"
    return (
        f"• {messages.icon(severity)} *{esc(first.rule)}* ({severity.label}) in "
        f"`{esc(first.source)}`: {fired} firing, {len(group) - fired} resolved · {span}"
    )


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
            # keep_open=False: nothing edits or answers a digest, so its ref need not be kept
            job = Job(
                secrets.token_hex(8), config.slack.channel, POST, text, blocks, keep_open=False
            )
            spool.enqueue(job)
            return worker.drain(timeout_s)
        finally:
            worker.close()
    finally:
        spool.close()
