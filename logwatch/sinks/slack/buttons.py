"""The buttons of an alert message and what a press does ([slack] app_token_file).

Silence 1h / Silence until resolved (the silences of `logwatch silence`, in the state dir),
Acknowledge (no more "still firing" reminders) and, for each `[[action]]` with `button = true`
that the group's alerts call for, Stop run (Slack asks to confirm; it runs the action once, through
the action journal's at-most-once). Only `allowed_users` and members of `allowed_groups` may
press: anyone else gets an ephemeral "not allowed" and the attempt is said on stderr. Each press
edits the message to say who did what (and until when)."""

from __future__ import annotations

import glob
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from logwatch.alerts import AlertEvent
from logwatch.buttons_config import ButtonsConfig
from logwatch.errors import SilenceError
from logwatch.redact import redact, stderr_line
from logwatch.sinks.slack.messages import Block, escape
from logwatch.sinks.slack.notices import Notice
from logwatch.sinks.slack.notifier import Notifier

if TYPE_CHECKING:
    from logwatch.actions.spec import ActionSpec

SILENCE_1H, SILENCE_RESOLVED, ACKNOWLEDGE = (
    "logwatch.silence_1h",
    "logwatch.silence_resolved",
    "logwatch.ack",
)
STOP = "logwatch.stop:"
"""Prefix of a Stop run button's action_id; the action's name follows."""
UNTIL_RESOLVED_S = 365 * 86400.0
"""How long a "until resolved" silence lasts if its alert never resolves (ended by the resolve)."""
GROUPS_TTL_S = 60.0


class Outcome(Protocol):
    """What an action did (`ActionOutcome`): its one-line message."""

    message: str


Stopper = Callable[[str, AlertEvent, Callable[[Any], None]], "str | None"]
"""ActionSink.run_once: (action name, alert, then) -> None when started, else why not."""


@dataclass(frozen=True, slots=True)
class Press:
    """One button press as Slack's `block_actions` payload tells it."""

    user: str
    action_id: str
    value: str
    channel: str
    label: str


def press_of(payload: dict[str, Any]) -> Press | None:
    """The press in a `block_actions` payload; None for anything else."""
    actions = payload.get("actions") or []
    if payload.get("type") != "block_actions" or not actions:
        return None
    action = actions[0]
    return Press(
        user=str((payload.get("user") or {}).get("id", "")),
        action_id=str(action.get("action_id", "")),
        value=str(action.get("value", "")),
        channel=str((payload.get("channel") or {}).get("id", "")),
        label=str((action.get("text") or {}).get("text", "")),
    )


def controls(stop_actions: Sequence[ActionSpec]) -> Callable[[Notice], list[Block]]:
    """The actions block of a firing group's message (its id in each button's value)."""

    def build(notice: Notice) -> list[Block]:
        live = [e for fp, e in notice.members.items() if fp not in notice.resolved]
        buttons = [
            _button("🔕 Silence 1h", SILENCE_1H, notice.id),
            _button("🔕 Silence until resolved", SILENCE_RESOLVED, notice.id),
            _button("👀 Acknowledge", ACKNOWLEDGE, notice.id),
        ]
        for spec in stop_actions:
            if any(spec.matches(e) for e in live):
                stop = _button(f"⏹️ Stop run ({spec.name})", STOP + spec.name, notice.id)
                stop["style"] = "danger"
                stop["confirm"] = {
                    "title": {"type": "plain_text", "text": "Stop the run?"},
                    "text": {
                        "type": "mrkdwn",
                        "text": f"Runs the action *{escape(spec.name)}* once for this alert.",
                    },
                    "confirm": {"type": "plain_text", "text": "Stop run"},
                    "deny": {"type": "plain_text", "text": "Cancel"},
                    "style": "danger",
                }
                buttons.append(stop)
        return [{"type": "actions", "block_id": "logwatch-controls", "elements": buttons[:25]}]

    return build


def _button(text: str, action_id: str, value: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text[:75], "emoji": True},
        "action_id": action_id[:255],
        "value": value,
    }


class ButtonDesk:
    """Answers presses (on the Socket Mode client's threads), under the Slack sink's lock."""

    def __init__(
        self,
        config: ButtonsConfig,
        notifier: Notifier,
        lock: threading.Lock,
        web: Any,
        *,
        report: Callable[[str], None] = stderr_line,
    ) -> None:
        self.config, self.notifier, self.lock, self.web = config, notifier, lock, web
        self.report = report
        self.stopper: Stopper | None = None  # set once the action sink exists (tail)
        self._pressing = threading.Lock()  # one press at a time: a double click runs once
        self._groups: tuple[float, frozenset[str]] | None = None

    def handle(self, payload: dict[str, Any]) -> None:
        """Act on one `block_actions` payload; every failure is said, never raised."""
        press = press_of(payload)
        if press is None:
            return
        try:
            with self._pressing:
                self._handle(press)
        except Exception as exc:  # a press must never take the Socket Mode client down
            self.report(
                redact(
                    f"logwatch: Slack button {press.label!r} by {press.user} failed: {type(exc).__name__}: {exc}"
                )
            )

    def _handle(self, press: Press) -> None:
        if not self.allowed(press.user):
            self.report(
                redact(
                    f"logwatch: Slack button {press.label!r} pressed by {press.user}, who is not in "
                    "[slack] allowed_users or allowed_groups: ignored"
                )
            )
            self._ephemeral(
                press,
                "🚫 You are not allowed to use logwatch's buttons here (ask for a place in [slack] allowed_users or allowed_groups).",
            )
            return
        with self.lock:
            notice = self.notifier.posted.get(press.value)
        if notice is None:
            self._ephemeral(
                press,
                "This alert is no longer firing, so there is nothing to do (or another logwatch "
                "process posted it: Slack hands each press to one connection of the app, so give "
                "each logwatch process its own Slack app).",
            )
            return
        if press.action_id in (SILENCE_1H, SILENCE_RESOLVED):
            self._silence(press, notice, until_resolved=press.action_id == SILENCE_RESOLVED)
        elif press.action_id == ACKNOWLEDGE:
            self._acknowledge(press, notice)
        elif press.action_id.startswith(STOP):
            self._stop(press, notice, press.action_id.removeprefix(STOP))

    def allowed(self, user: str) -> bool:
        """In allowed_users, or a member of one of allowed_groups (looked up, kept a minute)."""
        if user in self.config.allowed_users:
            return True
        return bool(self.config.allowed_groups) and user in self._group_members()

    def _group_members(self) -> frozenset[str]:
        now = time.monotonic()
        if self._groups is not None and now - self._groups[0] < GROUPS_TTL_S:
            return self._groups[1]
        members: set[str] = set()
        for group in self.config.allowed_groups:
            try:
                members |= set(self.web.usergroups_users_list(usergroup=group).get("users", []))
            except Exception as exc:  # said; that group lets nobody in until the lookup works
                self.report(
                    redact(
                        f"logwatch: Slack user group {group}: cannot list its members ({exc}); "
                        "its members may not press until this works (add usergroups:read to the app)"
                    )
                )
                return frozenset(members)
        self._groups = (now, frozenset(members))
        return self._groups[1]

    def _silence(self, press: Press, notice: Notice, *, until_resolved: bool) -> None:
        store = self.notifier.silences
        if store is None:
            return
        now = self.notifier.clock.now()
        duration = UNTIL_RESOLVED_S if until_resolved else 3600.0
        pairs = dict.fromkeys((e.rule, e.source) for e in notice.members.values())
        try:
            for rule, source in pairs:
                store.add(
                    glob.escape(rule),
                    glob.escape(source),
                    duration,
                    f"Slack: {press.user} silenced it "
                    + ("until resolved" if until_resolved else "for 1h"),
                    now,
                    author=f"slack:{press.user}",
                    notice=notice.id if until_resolved else "",
                )
        except SilenceError as exc:
            self.report(redact(f"logwatch: Slack button {press.label!r}: {exc}"))
            self._ephemeral(press, f"Could not silence: {exc}")
            return
        until = (
            "until it resolves" if until_resolved else f"until {_when(now + timedelta(hours=1))}"
        )
        self._mark(notice, f"🔕 Silenced {until} by <@{press.user}>")

    def _acknowledge(self, press: Press, notice: Notice) -> None:
        with self.lock:
            if notice.acked_by:
                self._ephemeral(press, f"Already acknowledged by <@{notice.acked_by}>.")
                return
            notice.acked_by = press.user
        self._mark(notice, f"👀 Acknowledged by <@{press.user}>: no more reminders")

    def _stop(self, press: Press, notice: Notice, action: str) -> None:
        live = [e for fp, e in notice.members.items() if fp not in notice.resolved]
        if self.stopper is None or not live:
            self._ephemeral(press, "Nothing to stop: no action runs for this alert now.")
            return

        def then(outcome: Outcome) -> None:
            self._mark(notice, f"⏹️ {escape(outcome.message)} (pressed by <@{press.user}>)")

        why = self.stopper(action, live[0], then)
        if why is not None:
            self._ephemeral(press, escape(why))
            return
        self._mark(notice, f"⏹️ Stop run ({escape(action)}) pressed by <@{press.user}>: running")

    def _mark(self, notice: Notice, line: str) -> None:
        with self.lock:
            self.notifier.mark(notice.id, line)

    def _ephemeral(self, press: Press, text: str) -> None:
        try:
            self.web.chat_postEphemeral(channel=press.channel, user=press.user, text=text)
        except Exception as exc:  # the answer is a courtesy: said, not retried
            self.report(redact(f"logwatch: Slack: could not answer {press.user} ({exc})"))


def _when(at: datetime) -> str:
    """A time as Slack shows it in each reader's own time zone (the fallback: ISO)."""
    epoch = int(at.timestamp())
    return f"<!date^{epoch}^{{date_short_pretty}} {{time}}|{at.isoformat(sep=' ', timespec='minutes')}>"
