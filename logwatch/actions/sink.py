"""`ActionSink`: the consumer of the lifecycle's events that runs `[[action]]` commands.

On the driver's thread: `emit` matches each event against the actions, runs what is due now
and journals what waits for its `after`; `tick` starts what fell due; a resolve cancels what
still waits for its alert. Each command runs on its own thread (a slow `scancel` never holds up
alerting), journaled before it starts and after it ends (`journal`), and what happened is said
on one stderr line and handed to the listeners (Slack's thread reply, Alertmanager's
annotation, the counter)."""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Protocol, runtime_checkable

from logwatch.actions.argv import Unfilled, fill
from logwatch.actions.journal import HOUR_S, ActionJournal, DryJournal
from logwatch.actions.process import KILL_AFTER_TERM_S, ProcessRunner, RunResult
from logwatch.actions.spec import ActionSpec
from logwatch.alerts import FIRING, RESOLVED, AlertEvent
from logwatch.durations import format_duration
from logwatch.errors import StateError
from logwatch.redact import redact, stderr_line

OUTCOMES = ("ok", "failed", "timeout", "skipped", "capped", "cancelled", "dry_run", "interrupted")
"""The `outcome` label of `logwatch_action_runs_total`."""


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What one action did (or did not do) for one alert, and the line that says it."""

    action: str
    outcome: str
    message: str
    fingerprint: str
    rule: str
    source: str
    line: int
    at: float  # wall seconds (log time in replay)

    def to_json(self) -> dict[str, object]:
        """An `action` row of `replay --format json`."""
        return {
            "type": "action",
            "action": self.action,
            "outcome": self.outcome,
            "rule": self.rule,
            "source": self.source,
            "line": self.line,
            "at": datetime.fromtimestamp(self.at).isoformat(timespec="seconds"),
            "fingerprint": self.fingerprint,
            "message": self.message,
        }


@runtime_checkable
class TakesActionNotes(Protocol):
    """A sink that shows what an action did beside its alert (Slack's thread reply,
    Alertmanager's `action` annotation)."""

    def note_action(self, fingerprint: str, text: str) -> None:
        """Say `text` on the alert with this fingerprint."""
        ...


def note_listeners(sinks: Sequence[object]) -> list[Callable[[ActionOutcome], None]]:
    """One listener per sink that takes action notes."""
    return [partial(_note, sink) for sink in sinks if isinstance(sink, TakesActionNotes)]


def _note(sink: TakesActionNotes, outcome: ActionOutcome) -> None:
    sink.note_action(outcome.fingerprint, outcome.message)


@dataclass(frozen=True, slots=True)
class _Wait:
    spec: ActionSpec
    event: AlertEvent
    due: float


def action_key(spec: ActionSpec, event: AlertEvent) -> str:
    """One alert's run of one action: the action, the alert, the line that fired it."""
    return f"{spec.name}/{event.fingerprint}/{event.line}"


def shown(argv: Sequence[str]) -> str:
    """An argv as a shell would need it typed (masked): for people, never run."""
    return redact(shlex.join(argv))


def seconds(value: float) -> str:
    """`0.4 s`, `12 s`, `2m00s`."""
    if value < 10:
        return f"{value:.1f} s"
    return f"{value:.0f} s" if value < 60 else format_duration(value)


class ActionSink:
    """Runs the actions of `specs` for the events it is given (a `Sink`)."""

    def __init__(
        self,
        specs: Sequence[ActionSpec],
        journal: ActionJournal | DryJournal,
        runner: ProcessRunner,
        *,
        pids: Callable[[str, int], int | None],
        env: Mapping[str, str],
        now: Callable[[], float] = time.time,
        report: Callable[[str], None] = stderr_line,
        dry_run: bool = False,
        listeners: Sequence[Callable[[ActionOutcome], None]] = (),
    ) -> None:
        self.specs, self.journal, self.runner = list(specs), journal, runner
        self.pids, self.env, self.now, self.report = pids, env, now, report
        self.dry_run, self.listeners = dry_run, list(listeners)
        self.counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._waits: dict[str, _Wait] = {}
        self._threads: list[threading.Thread] = []
        self._dry_starts: dict[str, list[float]] = {}
        self._followers: dict[str, Callable[[ActionOutcome], None]] = {}  # run_once's `then`
        self._starting = threading.Lock()  # a due wait starts once: by tick or by run_once
        by_name = {spec.name: spec for spec in self.specs}
        for run in journal.interrupted:
            self._said(
                run.action,
                "interrupted",
                f"action {run.action}: may have run for the alert of line "
                f"{run.key.rsplit('/', 1)[-1]} ({run.argv or 'its command'} was started at "
                f"{datetime.fromtimestamp(run.at).isoformat(timespec='seconds')} and logwatch "
                "stopped before it ended); not run again",
                None,
            )
        for wait in journal.waiting():
            spec = by_name.get(wait.action)
            if spec is None:
                journal.cancel(wait.key)  # the action left the config meanwhile
            else:
                self._waits[wait.key] = _Wait(spec, wait.event, wait.due)

    # --- the Sink protocol ---------------------------------------------------------------

    def emit(self, event: AlertEvent) -> None:
        """Run, or schedule, each action this event calls for; a resolve cancels its waits."""
        if event.status == RESOLVED:
            self._cancel(event)
        for spec in self.specs:
            if not spec.matches(event):
                continue
            key = action_key(spec, event)
            if key in self._waits or self.journal.settled(key):
                continue  # at most once per alert: a re-announced alert runs nothing again
            if spec.after_s > 0:
                due = self.now() + spec.after_s
                self.journal.wait(key, spec.name, due, event)
                self._waits[key] = _Wait(spec, event, due)
                self.report(
                    f"action {spec.name}: runs in {format_duration(spec.after_s)} for "
                    f"{_alert(event)} unless it resolves first"
                )
            else:
                self._start(key, spec, event)

    def tick(self, now: datetime) -> None:
        """Start what waited long enough."""
        wall = self.now()
        for key, wait in list(self._waits.items()):
            if wait.due <= wall:
                with self._starting:  # a Slack button (run_once) may have taken it meanwhile
                    if self._waits.pop(key, None) is not None:
                        self._start(key, wait.spec, wait.event)

    def run_once(
        self, name: str, event: AlertEvent, then: Callable[[ActionOutcome], None]
    ) -> str | None:
        """Run the action `name` for this alert now (a Slack "Stop run" button), at most once
        per alert like every run (one waiting for its `after` runs now): None when started
        (`then` gets its outcome, on the action's thread), else why it was not."""
        spec = next((s for s in self.specs if s.name == name), None)
        if spec is None:
            return f"no [[action]] named {name!r} in the config"
        key = action_key(spec, event)
        with self._starting:
            if self._waits.pop(key, None) is None and self.journal.settled(key):
                return f"action {name} already ran for {_alert(event)} (at most once per alert)"
            self._followers[key] = then
            self._start(key, spec, event)
        return None

    def action_counts(self) -> dict[tuple[str, str], int]:
        """Outcomes so far by (action, outcome): `logwatch_action_runs_total`."""
        with self._lock:
            return dict(self.counts)

    def next_due(self) -> float | None:
        """When the first waiting action falls due (None: none waits)."""
        return min((wait.due for wait in self._waits.values()), default=None)

    def rename_source(self, old: str, new: str) -> None:
        """`old`'s alerts go on under `new` (a rotated log): a waiting action follows its alert,
        so the resolve that comes under `new` still cancels it."""
        for key, wait in list(self._waits.items()):
            if wait.event.source == old:
                self._waits[key] = _Wait(wait.spec, replace(wait.event, source=new), wait.due)

    def close(self) -> None:
        """Wait for the commands running (each within its timeout); what still waits for its
        `after` stays journaled for the next start."""
        for thread in list(self._threads):
            thread.join()
        self.journal.close()

    # --- the steps -------------------------------------------------------------------------

    def _cancel(self, resolved: AlertEvent) -> None:
        for key, wait in list(self._waits.items()):
            if wait.event.fingerprint != resolved.fingerprint or wait.spec.when != FIRING:
                continue
            del self._waits[key]
            self.journal.cancel(key)
            self._said(
                wait.spec.name,
                "cancelled",
                f"action {wait.spec.name}: cancelled: {_alert(wait.event)} resolved inside "
                f"after={format_duration(wait.spec.after_s)}",
                wait.event,
            )

    def _start(self, key: str, spec: ActionSpec, event: AlertEvent) -> None:
        dry = self.dry_run or spec.dry_run
        filled = fill(spec, event, self.pids(event.source, event.line), self.env)
        if isinstance(filled, Unfilled):
            self.journal.done(key, spec.name, "skipped")
            message = f"action {spec.name}: not run for {_alert(event)}: {filled.reason}"
            self._said(spec.name, "skipped", message, event, key)
            return
        if spec.max_per_hour is not None and self._runs_within_hour(spec, dry) >= spec.max_per_hour:
            self.journal.done(key, spec.name, "capped")
            message = (
                f"action {spec.name}: not run for {_alert(event)}: max_per_hour = "
                f"{spec.max_per_hour} reached (runs in the last hour, across restarts)"
            )
            self._said(spec.name, "capped", message, event, key)
            return
        if dry:
            now = self.now()
            self._dry_starts.setdefault(spec.name, []).append(now)
            self.journal.done(key, spec.name, "dry_run")
            when = datetime.fromtimestamp(now).isoformat(sep=" ", timespec="seconds")
            message = (
                f"action {spec.name} (dry run): would run {shown(filled.argv)} at {when} "
                f"for {_alert(event)}"
            )
            self._said(spec.name, "dry_run", message, event, key)
            return
        self.journal.start(key, spec.name, shown(filled.argv))  # fsynced before it runs
        thread = threading.Thread(
            target=self._run,
            args=(key, spec, event, filled.argv, filled.env),
            name=f"logwatch-action-{spec.name}",
            daemon=True,
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _runs_within_hour(self, spec: ActionSpec, dry: bool) -> int:
        if not dry:
            return self.journal.runs_within_hour(spec.name)
        cutoff = self.now() - HOUR_S
        return sum(1 for at in self._dry_starts.get(spec.name, []) if at >= cutoff)

    def _run(
        self,
        key: str,
        spec: ActionSpec,
        event: AlertEvent,
        argv: tuple[str, ...],
        env: dict[str, str],
    ) -> None:
        result = self.runner.run(argv, env, spec.timeout_s)
        outcome = _outcome(result)
        self.journal.done(key, spec.name, outcome)
        ended = f"action {spec.name}: {_ended(argv, result, spec)}"
        self._said(spec.name, outcome, ended, event, key)

    def _said(
        self,
        action: str,
        outcome: str,
        message: str,
        event: AlertEvent | None,
        key: str = "",
    ) -> None:
        with self._lock:
            self.counts[(action, outcome)] = self.counts.get((action, outcome), 0) + 1
        self.report(message)
        if event is None:
            return
        said = ActionOutcome(
            action,
            outcome,
            redact(message),
            event.fingerprint,
            event.rule,
            event.source,
            event.line,
            self.now(),
        )
        follower = self._followers.pop(key, None)
        for listener in [*self.listeners, *([follower] if follower else [])]:
            try:
                listener(said)
            except Exception as exc:  # a listener (Slack, Alertmanager) never stops the next
                self.report(
                    f"action {action}: could not pass the outcome on: {type(exc).__name__}: {exc}"
                )


def _alert(event: AlertEvent) -> str:
    return f"{event.rule} on {event.source}:{event.line}"


def _outcome(result: RunResult) -> str:
    if result.timed_out:
        return "timeout"
    return "ok" if result.exit_code == 0 else "failed"


def _ended(argv: tuple[str, ...], result: RunResult, spec: ActionSpec) -> str:
    """`scancel 812345 exited 0 in 0.4 s`, and what else there is to say."""
    if result.exit_code is None:
        return f"cannot run {shown(argv[:1])}: {result.error} (its 'run' in the config, line {spec.line})"
    took = seconds(result.seconds)
    if result.timed_out:
        how = (
            f"did not end within timeout = {format_duration(spec.timeout_s)}: sent SIGTERM"
            f" (SIGKILL {KILL_AFTER_TERM_S:g} s later if still running); exit {result.exit_code}"
        )
        return f"{shown(argv)} {how}, after {took}"
    line = f"{shown(argv)} exited {result.exit_code} in {took}"
    if result.exit_code != 0 and result.output:
        line += f": {result.output}"
    return line


def open_action_sink(
    specs: Sequence[ActionSpec],
    state_dir: Path,
    *,
    pids: Callable[[str, int], int | None],
    dry_run: bool = False,
    report: Callable[[str], None] = stderr_line,
    runner: ProcessRunner | None = None,
    listeners: Sequence[Callable[[ActionOutcome], None]] = (),
) -> ActionSink:
    """The ActionSink `tail` runs: its journal in the state directory, real processes, this
    process's environment for `{env:NAME}`."""
    from logwatch.actions.process import SubprocessRunner

    # a dry run keeps what it would have done in memory: a later real run still acts
    try:
        journal = DryJournal() if dry_run else ActionJournal(state_dir, report=report)
    except OSError as exc:
        raise StateError(
            f"{state_dir / 'actions.jsonl'}: cannot open the actions journal "
            f"({exc.strerror or exc}); actions run only when each run can be journaled first. "
            "Fix: permissions or free space in the state directory"
        ) from None
    return ActionSink(
        specs,
        journal,
        runner or SubprocessRunner(),
        pids=pids,
        env=dict(os.environ),
        report=report,
        dry_run=dry_run,
        listeners=listeners,
    )


def describe(spec: ActionSpec) -> str:
    """One line for tail's startup block: what runs on what."""
    on = "every rule" if "*" in spec.on else ", ".join(spec.on)
    when = f"{spec.when}" + (f" for {format_duration(spec.after_s)}" if spec.after_s else "")
    extra = " (dry run)" if spec.dry_run else ""
    return f"action {spec.name}{extra}: {shown(spec.run)} when {on} is {when}"
