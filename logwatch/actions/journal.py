"""What actions ran, so each runs at most once per alert across restarts and kill -9.

`actions.jsonl` in the state directory (0600, append-only, fsynced), one JSON object a line:
`wait` (an action due later, its alert with it: a restart keeps waiting), `cancel` (its alert
resolved first), `start` (written and fsynced *before* the command starts), `done` (how it
ended). A `start` with no `done` means logwatch died while the command ran: it may have run, so
it is said once on the next start and never run again. Read back schema-checked; a record that
is not one is set aside beside the journal, said once, and skipped.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logwatch.alerts import AlertEvent, event_from_json
from logwatch.atomic import open_private, open_private_bytes, write_atomic
from logwatch.redact import stderr_line
from logwatch.statecheck import NUMBER, OBJECT, STR, fields

JOURNAL = "actions.jsonl"
KEEP_SETTLED = 5000
"""Settled keys kept on compaction (newest): an alert re-announced after a restart is one of
these, far fewer than this many alerts back."""
HOUR_S = 3600.0

_RECORDS = {
    "wait": {"key": STR, "action": STR, "due": NUMBER, "event": OBJECT},
    "cancel": {"key": STR},
    "start": {"key": STR, "action": STR, "at": NUMBER, "argv": STR},
    "done": {"key": STR, "action": STR, "at": NUMBER, "outcome": STR},
}


@dataclass(frozen=True, slots=True)
class Waiting:
    """An action due at `due` (wall seconds) for `event`, unless the alert resolves first."""

    key: str
    action: str
    due: float
    event: AlertEvent


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A command logwatch started and never saw end (it died meanwhile)."""

    key: str
    action: str
    at: float
    argv: str


class ActionJournal:
    """The journal of one state directory; thread-safe (commands end on their own threads)."""

    def __init__(
        self,
        directory: Path,
        *,
        now: Callable[[], float] = time.time,
        report: Callable[[str], None] = stderr_line,
        sync: bool = True,
    ) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path, self.now, self.report, self.sync = directory / JOURNAL, now, report, sync
        self._lock = threading.Lock()
        self._settled: dict[str, None] = {}  # insertion-ordered set
        self._waiting: dict[str, Waiting] = {}
        self._running: dict[str, Interrupted] = {}
        self._starts: list[tuple[str, str, float]] = []  # (key, action, at)
        self._replay()
        self.interrupted = list(self._running.values())
        self._compact()
        self._out = open_private(self.path)
        for run in self.interrupted:
            self.done(run.key, run.action, "interrupted")

    # --- reading back ------------------------------------------------------------------

    def _replay(self) -> None:
        if not self.path.exists():
            return
        bad: list[tuple[int, bytes, str]] = []
        with open(self.path, "rb") as stream:
            for number, raw in enumerate(stream, 1):
                if not raw.strip():
                    continue
                try:
                    self._apply(_checked(json.loads(raw.decode("utf-8"))))
                except (UnicodeDecodeError, ValueError) as exc:
                    bad.append((number, raw if raw.endswith(b"\n") else raw + b"\n", str(exc)))
        if bad:
            aside = self.path.with_name(f"{JOURNAL}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
            with open_private_bytes(aside) as out:
                out.writelines(raw for _, raw, _ in bad)
            number, _, why = bad[0]
            self.report(
                f"{self.path}:{number}: not an action record ({why}); skipped {len(bad)} "
                f"record(s), kept in {aside}"
            )

    def _apply(self, record: dict[str, Any]) -> None:
        op, key = record["op"], record["key"]
        if op == "wait":
            if key not in self._settled:
                self._waiting[key] = Waiting(
                    key, record["action"], record["due"], event_from_json(record["event"])
                )
            return
        self._waiting.pop(key, None)
        self._settled.pop(key, None)
        self._settled[key] = None
        if op == "start":
            self._running[key] = Interrupted(key, record["action"], record["at"], record["argv"])
            self._starts.append((key, record["action"], record["at"]))
        elif op == "done":
            self._running.pop(key, None)

    def _compact(self) -> None:
        """Keep what is still needed: waits, runs in flight, the last hour's starts (for
        max_per_hour), the newest settled keys (as `cancel`: settled, nothing more to say)."""
        cutoff = self.now() - HOUR_S
        self._starts = [(key, action, at) for key, action, at in self._starts if at >= cutoff]
        kept = {key for key, _, _ in self._starts} | set(self._running)
        settled = [key for key in list(self._settled)[-KEEP_SETTLED:] if key not in kept]
        lines: list[dict[str, Any]] = [{"op": "cancel", "key": key} for key in settled]
        for key, action, at in self._starts:
            running = self._running.get(key)
            argv = running.argv if running is not None else ""
            lines.append({"op": "start", "key": key, "action": action, "at": at, "argv": argv})
            if running is None:
                lines.append(
                    {"op": "done", "key": key, "action": action, "at": at, "outcome": "kept"}
                )
        lines += [
            {"op": "start", "key": r.key, "action": r.action, "at": r.at, "argv": r.argv}
            for r in self._running.values()
            if r.at < cutoff
        ]
        lines += [
            {
                "op": "wait",
                "key": w.key,
                "action": w.action,
                "due": w.due,
                "event": w.event.to_json(),
            }
            for w in self._waiting.values()
        ]
        text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        write_atomic(self.path, text.encode())
        self._settled = dict.fromkeys([*settled, *kept])

    # --- questions -----------------------------------------------------------------------

    def settled(self, key: str) -> bool:
        """Whether this alert's action already ran, started, was cancelled or skipped."""
        with self._lock:
            return key in self._settled

    def waiting(self) -> list[Waiting]:
        """Actions a previous logwatch was waiting to run (their `after`)."""
        with self._lock:
            return list(self._waiting.values())

    def runs_within_hour(self, action: str) -> int:
        """How many times this action started in the last hour (across restarts)."""
        cutoff = self.now() - HOUR_S
        with self._lock:
            return sum(1 for _, name, at in self._starts if name == action and at >= cutoff)

    # --- records -------------------------------------------------------------------------

    def wait(self, key: str, action: str, due: float, event: AlertEvent) -> None:
        """An action is due at `due` unless its alert resolves first."""
        self._write(
            {"op": "wait", "key": key, "action": action, "due": due, "event": event.to_json()}
        )

    def cancel(self, key: str) -> None:
        """Its alert resolved (or it was skipped): it will not run."""
        self._write({"op": "cancel", "key": key})

    def start(self, key: str, action: str, argv: str) -> None:
        """Written (and fsynced) before the command starts."""
        self._write({"op": "start", "key": key, "action": action, "at": self.now(), "argv": argv})

    def done(self, key: str, action: str, outcome: str) -> None:
        """How it ended (or that it will never run: skipped, capped)."""
        self._write(
            {"op": "done", "key": key, "action": action, "at": self.now(), "outcome": outcome}
        )

    def _write(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(record, ensure_ascii=False) + "\n")
            self._out.flush()
            if self.sync:
                os.fsync(self._out.fileno())
            self._apply(record)

    def close(self) -> None:
        """Close the journal file."""
        with self._lock:
            if not self._out.closed:
                self._out.close()


def _checked(record: Any) -> dict[str, Any]:
    """A record read back, every field of its op checked; ValueError naming what is wrong."""
    op = record.get("op") if isinstance(record, dict) else None
    if op not in _RECORDS:
        raise ValueError(f"unknown op {op!r} (expected one of: {', '.join(_RECORDS)})")
    fields(record, {"op": STR, **_RECORDS[op]}, f"action record {op!r}")
    if op == "wait":
        event_from_json(record["event"])
    return dict(record)


class DryJournal:
    """The journal of a dry run: the same questions answered from memory, nothing written."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now
        self.interrupted: list[Interrupted] = []
        self._settled: set[str] = set()
        self._starts: list[tuple[str, float]] = []

    def settled(self, key: str) -> bool:
        return key in self._settled

    def waiting(self) -> list[Waiting]:
        return []

    def runs_within_hour(self, action: str) -> int:
        cutoff = self.now() - HOUR_S
        return sum(1 for name, at in self._starts if name == action and at >= cutoff)

    def wait(self, key: str, action: str, due: float, event: AlertEvent) -> None:
        """Nothing to keep: a dry run's waits end with it."""

    def cancel(self, key: str) -> None:
        self._settled.add(key)

    def start(self, key: str, action: str, argv: str) -> None:
        self._settled.add(key)
        self._starts.append((action, self.now()))

    def done(self, key: str, action: str, outcome: str) -> None:
        self._settled.add(key)

    def close(self) -> None:
        """Nothing to close."""
