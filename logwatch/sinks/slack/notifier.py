"""The alert lifecycle between the engine and Slack: grouping, inhibition, silences, repeats, resolve.

Alertmanager's model in one process. Firing alerts of one rule that arrive within `group_wait` are
one message, and so are several rules firing on the same source and line (one incident); a group's message gets at most one "still firing" thread reply per `repeat_interval`;
when all its alerts resolved it is edited to RESOLVED and gets a thread reply. Inhibited or
silenced alerts are held back (not dropped) and go out on the next tick once nothing mutes them.
Time comes from the injected Clock, so tests move it instead of sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from logwatch.alerts import FIRING, AlertEvent, event_from_json
from logwatch.atomic import write_atomic
from logwatch.clock import Clock
from logwatch.config import AlertsConfig
from logwatch.drivers.statesafe import write_failure
from logwatch.durations import format_duration
from logwatch.engine.lifecycle import moved_source
from logwatch.errors import SilencesUnreadable
from logwatch.redact import stderr_line
from logwatch.sinks.slack import messages
from logwatch.sinks.slack.notices import Notice as Notice  # its old home
from logwatch.sinks.slack.notices import event_json, notice_from_json, notice_json
from logwatch.sinks.slack.silences import SilenceStore
from logwatch.sinks.slack.spool import POST, REPLY, UPDATE, Job
from logwatch.statecheck import LIST, fields
from logwatch.words import counted

STATE_FILE = "notify-state.json"
EVENTS_FILE = "notify-events.jsonl"
"""Events emitted (and sources renamed) since the last full save of STATE_FILE, one JSON object
a line."""
RENAMED = "renamed"
"""The key of a journal record that says a source was renamed (`{"renamed": {"old", "new"}}`)."""


class Outbox(Protocol):
    """Where jobs go (the durable spool, or a list in tests)."""

    def enqueue(self, job: Job) -> None:
        """Take one job; it must be durable when this returns."""
        ...


class Notifier:
    """Turns alert events into Slack jobs, once per problem. Implements the Sink protocol."""

    def __init__(
        self,
        outbox: Outbox,
        *,
        channel: str,
        settings: AlertsConfig,
        clock: Clock,
        silences: SilenceStore | None = None,
        state_dir: Path | None = None,
        new_id: Callable[[], str] = lambda: secrets.token_hex(8),
        report: Callable[[str], None] = stderr_line,
        ignore_rules: frozenset[str] = frozenset(),
        env_run: str | None = None,
        controls: Callable[[Notice], list[messages.Block]] | None = None,
    ) -> None:
        self.controls = controls  # the buttons of a firing message ([slack] app_token_file)
        self.outbox, self.channel, self.settings, self.clock = outbox, channel, settings, clock
        self.env_run = env_run  # the run this process's environment names, for logs naming none
        self.silences, self.new_id, self.report = silences, new_id, report
        self.ignore_rules = ignore_rules  # host notices the config keeps out of Slack
        self.state_path = state_dir / STATE_FILE if state_dir is not None else None
        self.journal_path = state_dir / EVENTS_FILE if state_dir is not None else None
        self._journal_fd: int | None = None
        self.firing: dict[str, AlertEvent] = {}
        self.held: dict[str, AlertEvent] = {}
        self.pending: dict[str, Notice] = {}
        self.posted: dict[str, Notice] = {}
        # (source, line) -> (group id, fingerprint) of the waiting members there: the group a
        # new alert of the same line joins, found without scanning every member (a cascade of
        # thousands of alerts inside group_wait was quadratic). Checked against `pending` on use.
        self._at_line: dict[tuple[str, int], list[tuple[str, str]]] = {}
        self._dirty = False
        self._save_failing: str | None = None  # why the last save failed, until one works
        self._notes: dict[str, list[str]] = {}  # replies waiting for their group's message
        self._load()

    # --- the Sink protocol ---------------------------------------------------------------------

    def emit(self, event: AlertEvent) -> None:
        """Take one event from the engine (rules in `ignore_rules` are not Slack's business);
        durable (journalled and fsynced) when this returns."""
        if event.rule in self.ignore_rules:
            return
        if event.status == FIRING:
            self._fire(event)
        else:
            self._resolve(event)
        self._dirty = True
        self._advance()
        # Durable here, not at the next tick: once emit returns, the tail driver's journal and
        # checkpoint treat the event as delivered, so a kill -9 before a tick lost the waiting
        # group for good. One fsync'd append per event (the full state is rewritten at ticks
        # only: rewriting it per event is quadratic in a burst), replayed by `_load`; chosen
        # over a flush step in every sink and driver, it keeps the contract in the sink.
        self._journal(event_json(event))

    def rename_source(self, old: str, new: str) -> None:
        """`old`'s alerts go on under `new` (a rotated file): every group keeps its message, so
        a later resolve edits it; durable (journalled and fsynced) when this returns."""
        self._move(old, new)
        self._dirty = True
        self._journal({RENAMED: {"old": old, "new": new}})

    def _move(self, old: str, new: str) -> None:
        self.firing = moved_source(self.firing, old, new)
        self.held = moved_source(self.held, old, new)
        for notice in [*self.pending.values(), *self.posted.values()]:
            if any(e.source == old for e in notice.members.values()):
                notice.moved[new] = notice.moved.pop(old, old)  # renamed twice: the first name
            notice.members = moved_source(notice.members, old, new)
            notice.resolved = moved_source(notice.resolved, old, new)
        self._index()

    def close(self) -> None:
        """Send every group still waiting, then persist."""
        for key in list(self.pending):
            self._flush(key)
        self._save()
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None

    def _journal(self, record: dict[str, Any]) -> None:
        """Append one record (an event, or a rename) to the journal the next full save
        empties, fsync'd. A write that fails leaves the state dirty: the next tick's full save
        tries again and says why."""
        if self.journal_path is None:
            return
        with contextlib.suppress(OSError):
            if self._journal_fd is None:
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                self._journal_fd = os.open(self.journal_path, flags, 0o600)
            os.write(self._journal_fd, (json.dumps(record) + "\n").encode())
            os.fsync(self._journal_fd)

    # --- transitions ---------------------------------------------------------------------------

    def _fire(self, event: AlertEvent) -> None:
        fp = event.fingerprint
        if fp in self.firing:
            return  # the same problem again: no new message (repeats go by repeat_interval)
        self.firing[fp] = event
        if self.muted_by(event) is not None:
            self.held[fp] = event
            return
        self._join(event)

    def _join(self, event: AlertEvent) -> None:
        notice = self._pending_for(event)
        if notice is None:
            notice = Notice(self.new_id(), event.rule, event.severity, self._now())
            self.pending[notice.id] = notice
        notice.members[event.fingerprint] = event
        notice.severity = max(notice.severity, event.severity)
        self._mark(notice.id, event.fingerprint, event)

    def _pending_for(self, event: AlertEvent) -> Notice | None:
        """The waiting group an alert joins: one with its source and line (the same incident,
        another rule), else one of its rule."""
        if event.line > 0:
            for key, fp in self._at_line.get((event.source, event.line), ()):
                notice = self.pending.get(key)
                member = notice.members.get(fp) if notice is not None else None
                if member is not None and _same_line(member, event):
                    return notice
        return next((n for n in self.pending.values() if n.rule == event.rule), None)

    def _index(self) -> None:
        """Rebuild `_at_line` from the waiting groups (after a load or a rename)."""
        self._at_line = {}
        for notice in self.pending.values():
            for fp, member in notice.members.items():
                self._mark(notice.id, fp, member)

    def _mark(self, notice_id: str, fp: str, member: AlertEvent) -> None:
        """`member` (of that group) in `_at_line`, where its line is known."""
        if member.line > 0:
            self._at_line.setdefault((member.source, member.line), []).append((notice_id, fp))

    def _unindex(self, notice_id: str, member: AlertEvent) -> None:
        key = (member.source, member.line)
        left = [entry for entry in self._at_line.get(key, ()) if entry[0] != notice_id]
        if left:
            self._at_line[key] = left
        else:
            self._at_line.pop(key, None)

    def _resolve(self, event: AlertEvent) -> None:
        fp = event.fingerprint
        self.firing.pop(fp, None)
        self.held.pop(fp, None)
        for waiting in list(self.pending.values()):
            if (member := waiting.members.pop(fp, None)) is not None:
                self._unindex(waiting.id, member)
                if not waiting.members:
                    del self.pending[waiting.id]  # resolved within group_wait: nothing to say
                return
        for notice in self.posted.values():
            if fp in notice.members and fp not in notice.resolved:
                notice.resolved[fp] = event
                if len(notice.resolved) == len(notice.members):
                    self._close_notice(notice)
                else:
                    self._show_partly_resolved(notice)
                return

    def _show_partly_resolved(self, notice: Notice) -> None:
        """Edit a group's message to mark the alerts that resolved while others still fire
        (an edit, so no ping: the thread reply and the channel hear of it when all resolved)."""
        self._send(UPDATE, *self._firing(notice), parent=notice.id, closes=False)

    def _firing(self, notice: Notice) -> tuple[str, list[messages.Block]]:
        """A group's firing message: its alerts, what people did with it, its buttons."""
        text, blocks = messages.firing_message(
            notice.severity,
            list(notice.members.values()),
            env_run=self.env_run,
            ended=notice.resolved,
        )
        extra = [messages.context(mark) for mark in notice.marks[-5:]]
        extra += self.controls(notice) if self.controls is not None else []
        body = blocks[:-1][: messages.BLOCKS_MAX - 1 - len(extra)]  # the list gives way
        return text, body + extra + blocks[-1:]

    def mark(self, notice_id: str, line: str) -> bool:
        """Show what someone did (a button) on a posted group's message, by an edit; False when
        no message of this process is open for that id (resolved, or never posted)."""
        notice = self.posted.get(notice_id)
        if notice is None:
            return False
        notice.marks.append(line)
        self._dirty = True
        self._send(UPDATE, *self._firing(notice), parent=notice.id, closes=False)
        return True

    def _close_notice(self, notice: Notice) -> None:
        firing_s = _firing_seconds(notice, self._now())
        first = min((e.ts for e in notice.members.values() if e.ts is not None), default=None)
        restarted = all(e.restarted for e in notice.resolved.values())
        text, blocks = messages.resolved_message(
            list(notice.members.values()),
            firing_s,
            first,
            restarted=restarted,
            env_run=self.env_run,
            moved=notice.moved,
        )
        self._send(UPDATE, text, blocks, parent=notice.id)
        took = format_duration(firing_s)
        reply, reply_blocks = messages.reply_message(
            f"{messages.ENDED} after {took}: nothing was fixed"
            if restarted
            else f"✅ resolved after {took}"
        )
        broadcast = self.settings.notify_on_resolve
        self._send(REPLY, reply, reply_blocks, parent=notice.id, broadcast=broadcast)
        del self.posted[notice.id]
        if self.silences is not None and notice.marks:  # a button may have silenced it
            try:
                self.silences.end_for_notice(notice.id, self.clock.now())
            except SilencesUnreadable as exc:
                self.report(f"logwatch: {exc}")

    # --- time-driven work ----------------------------------------------------------------------

    def tick(self) -> None:
        """Time-driven work, then persist the state if it changed (at most once per tick)."""
        self._advance()
        if self._dirty:
            self._save()

    def _advance(self) -> None:
        """Release alerts nothing mutes any more, send due groups, send due repeats."""
        for fp, event in list(self.held.items()):
            if self.muted_by(event) is None:
                del self.held[fp]
                self._join(event)
        now = self._now()
        for key, notice in list(self.pending.items()):
            if now >= notice.opened_s + self.settings.group_wait_s:
                self._flush(key)
        for notice in list(self.posted.values()):
            self._maybe_repeat(notice, now)

    def note(self, fingerprint: str, text: str) -> bool:
        """A thread reply on the message of the alert with this fingerprint (what an action
        did); a group still waiting gets it right after its message. False: no message of this
        process speaks for that alert (not posted by it, silenced, or kept off Slack)."""
        shown, blocks = messages.reply_message(messages.escape(text))
        for notice in self.posted.values():
            if fingerprint in notice.members:
                self._send(REPLY, shown, blocks, parent=notice.id)
                return True
        for notice in self.pending.values():
            if fingerprint in notice.members:
                self._notes.setdefault(notice.id, []).append(text)
                return True
        return False

    def _flush(self, key: str) -> None:
        notice = self.pending.pop(key)
        for member in notice.members.values():
            self._unindex(key, member)
        for fp, event in list(notice.members.items()):
            if self.muted_by(event) is not None:
                self.held[fp] = notice.members.pop(fp)
        if not notice.members:
            return
        self._send(POST, *self._firing(notice), job_id=notice.id)
        notice.last_notified_s = self._now()
        self.posted[notice.id] = notice
        for note in self._notes.pop(notice.id, []):
            self.note(next(iter(notice.members)), note)

    def _maybe_repeat(self, notice: Notice, now: float) -> None:
        still = [e for fp, e in notice.members.items() if fp not in notice.resolved]
        if notice.acked_by or not still:
            return  # acknowledged: someone is on it
        if now - notice.last_notified_s < self.settings.repeat_interval_s:
            return
        if all(self.muted_by(e) is not None for e in still):
            return
        took = format_duration(_firing_seconds(notice, now))
        text, blocks = messages.reply_message(
            f"🔁 still firing after {took}: {len(still)} of {counted(len(notice.members), 'alert')}"
        )
        self._send(REPLY, text, blocks, parent=notice.id)
        notice.last_notified_s = now
        self._dirty = True

    def muted_by(self, event: AlertEvent) -> str | None:
        """Why an alert is held back now (`silence <id>` / `inhibited by <rule>`), or None."""
        for source_rule, target_rule in self.settings.inhibit:
            if target_rule != event.rule:
                continue
            for other in self.firing.values():
                if other.rule == source_rule and other.source == event.source:
                    return f"inhibited by {source_rule}"
        if self.silences is not None:
            silence = self.silences.muting(event.rule, event.source, self.clock.now())
            if silence is not None:
                return f"silence {silence.id}"
        return None

    # --- plumbing ------------------------------------------------------------------------------

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def _send(
        self,
        kind: str,
        text: str,
        blocks: list[dict[str, Any]],
        *,
        parent: str | None = None,
        job_id: str | None = None,
        broadcast: bool = False,
        closes: bool = True,
    ) -> None:
        job_id = job_id or self.new_id()
        job = Job(
            job_id, self.channel, kind, text, blocks, parent, broadcast=broadcast, closes=closes
        )
        self.outbox.enqueue(job)

    def _save(self) -> None:
        if self.state_path is None:
            self._dirty = False
            return
        data = {
            "firing": [event_json(e) for e in self.firing.values()],
            "held": sorted(self.held),
            "pending": [notice_json(n) for n in self.pending.values()],
            "posted": [notice_json(n) for n in self.posted.values()],
        }
        try:
            self.state_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            write_atomic(self.state_path, json.dumps(data).encode())
        except OSError as exc:  # said once per cause; the state stays here, tried each tick
            cause = exc.strerror or str(exc)
            if cause != self._save_failing:
                self._save_failing = cause
                self.report(write_failure(self.state_path.parent, STATE_FILE, exc, 1.0))
            return
        if self._save_failing is not None:
            self._save_failing = None
            self.report(f"{self.state_path}: writes work again; Slack state saved")
        if self._journal_fd is not None:
            os.ftruncate(self._journal_fd, 0)  # after the state is durable: replay is idempotent
        self._dirty = False  # only now: a failed save is tried again at the next tick

    def _load(self) -> None:
        """Read the saved state; a file that is not one is set aside (said once) and we start afresh."""
        if self.state_path is None:
            return
        if not self.state_path.exists():
            self._replay_journal()
            return
        try:
            data = fields(
                json.loads(self.state_path.read_text(encoding="utf-8")),
                {"firing": LIST, "held": LIST, "pending": LIST, "posted": LIST},
                "notify state",
            )
            firing = {e.fingerprint: e for e in map(event_from_json, data["firing"])}
            held = {fp: firing[fp] for fp in data["held"] if fp in firing}
            pending = {n.id: n for n in map(notice_from_json, data["pending"])}
            posted = {n.id: n for n in map(notice_from_json, data["posted"])}
        except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError) as exc:
            self._set_aside(f"{type(exc).__name__}: {exc}")
            return
        self.firing, self.held, self.pending, self.posted = firing, held, pending, posted
        self._index()
        self._replay_journal()

    def _replay_journal(self) -> None:
        """Apply events emitted after the last full save (a crash left them); a torn last
        line is skipped (that emit never returned)."""
        if self.journal_path is None or not self.journal_path.exists():
            return
        for raw in self.journal_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(raw)
                renamed = _renamed(record)
                if renamed is not None:
                    self._move(*renamed)
                    self._dirty = True
                    continue
                event = event_from_json(record)
            except (ValueError, TypeError, KeyError, AttributeError):
                continue
            if event.status == FIRING:
                self._fire(event)
            else:
                self._resolve(event)
            self._dirty = True

    def _set_aside(self, reason: str) -> None:
        assert self.state_path is not None
        aside = self.state_path.with_name(
            f"{self.state_path.name}.corrupt-{datetime.now():%Y%m%dT%H%M%S}"
        )
        os.replace(self.state_path, aside)
        self.report(
            f"{self.state_path}: not a logwatch notify state ({reason[:200]}); moved it to "
            f"{aside} and started afresh (alerts firing before the restart may be posted again)"
        )


def _renamed(record: Any) -> tuple[str, str] | None:
    """(old, new) of a journalled rename, None for an event; ValueError for a bad rename."""
    if not isinstance(record, dict) or RENAMED not in record:
        return None
    names = record[RENAMED]
    old, new = names.get("old"), names.get("new")
    if not (isinstance(old, str) and isinstance(new, str)):
        raise ValueError(f"a journalled rename needs old and new names, got {names!r}")
    return old, new


def _same_line(a: AlertEvent, b: AlertEvent) -> bool:
    """Two alerts of one log line (a line number of 0 or less says none is known)."""
    return a.source == b.source and a.line == b.line and a.line > 0


def _firing_seconds(notice: Notice, now: float) -> float:
    """How long a group fired: log time when both ends have timestamps, else wall time."""
    starts = [e.ts for e in notice.members.values() if e.ts is not None]
    ends = [e.ts for e in notice.resolved.values() if e.ts is not None]
    if starts and ends and len(ends) == len(notice.members):
        return max((max(ends) - min(starts)).total_seconds(), 0.0)
    return max(now - notice.opened_s, 0.0)
