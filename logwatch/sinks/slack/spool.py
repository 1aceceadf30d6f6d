"""The durable outbox: an append-only, fsynced journal of delivery jobs and their outcomes.

Records (one JSON object a line): `job` (what to send), `attempt` (written before each request),
`settled` (a definite "not accepted" answer: the attempt did not post), `done` (Slack accepted it:
channel ID and ts), `dead` (permanently refused). A job whose last record is `attempt` is *in
doubt*: the request may have been accepted with its answer lost, so it is reconciled before any
re-post. The journal is replayed on open, so pending jobs survive restarts in their order.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from logwatch.atomic import open_private, open_private_bytes, take_delivery_lock, write_atomic
from logwatch.redact import stderr_line
from logwatch.words import counted

POST, UPDATE, REPLY = "post", "update", "reply"
JOURNAL = "slack-spool.jsonl"
LOCK = "slack-spool.lock"
KEEP_SENT = 5000
"""Refs of messages no later job can need (edited to resolved) kept on compaction, newest."""


@dataclass(frozen=True, slots=True)
class Job:
    """One Slack request to make: a new message, an edit of one, or a thread reply to one."""

    id: str
    channel: str
    kind: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    parent: str | None = None
    metadata: dict[str, Any] | None = None
    created_s: float = 0.0
    broadcast: bool = False  # a thread reply also shown in the channel (it notifies)
    keep_open: bool = True  # a post: its ref is kept until an edit that `closes` it
    closes: bool = True  # an edit: the last one of its message (its ref may be let go)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        """Inverse of `asdict`."""
        return cls(**{k: data[k] for k in cls.__slots__ if k in data})


@dataclass(frozen=True, slots=True)
class MessageRef:
    """Where Slack put a message: channel ID and ts (empty ts in webhook mode)."""

    channel: str
    ts: str


@dataclass(slots=True)
class _JobState:
    job: Job
    seq: int
    in_doubt: bool = False
    attempts: int = 0


class Spool:
    """Pending jobs per channel, in enqueue order, persisted before they are attempted."""

    def __init__(
        self,
        directory: Path,
        *,
        sync: bool = True,
        report: Callable[[str], None] = stderr_line,
        keep_sent: int = KEEP_SENT,
    ) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = directory / JOURNAL
        self.sync, self.report, self.keep_sent = sync, report, keep_sent
        self._lock_file = take_delivery_lock(directory / LOCK, "Slack alerts")
        self._cond = threading.Condition()
        self._pending: dict[str, _JobState] = {}
        self._sent: dict[str, MessageRef] = {}
        self._open: set[str] = set()  # posted messages not edited to resolved yet
        self._seq = 0
        try:
            self._replay()
            self._compact()
            self._out: TextIO = open_private(self.path)  # lives with the spool
        except BaseException:
            self._lock_file.close()  # a spool that failed to open holds no lock
            raise

    def _replay(self) -> None:
        if not self.path.exists():
            return
        bad: list[tuple[int, bytes, str]] = []
        last, cut_last = 0, False
        with open(self.path, "rb") as stream:
            for last, raw in enumerate(stream, 1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    problem: str | None = _damage(raw)
                else:
                    problem = _invalid(record)
                if problem is None:
                    self._apply(record)
                    continue
                # Kept byte for byte, one per line (a cut last line gets its newline).
                bad.append((last, raw if raw.endswith(b"\n") else raw + b"\n", problem))
                cut_last = not raw.endswith(b"\n")
        if bad:
            self._set_aside(bad, cut_last=cut_last and bad[-1][0] == last)

    def _set_aside(self, bad: list[tuple[int, bytes, str]], *, cut_last: bool) -> None:
        """Keep records it cannot apply next to the journal (compaction drops them), say so once."""
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
        with open_private_bytes(aside) as out:  # byte for byte: the damage is the evidence
            out.writelines(raw for _, raw, _ in bad)
        number, _, problem = bad[0]
        damaged = sum(1 for _, _, why in bad if why.startswith(_DAMAGED))
        if damaged == 0:
            said = f"not a spool record ({problem}); skipped {counted(len(bad), 'such record')}"
        else:
            said = f"{problem}; skipped {counted(damaged, 'damaged record')}"
            if len(bad) > damaged:
                said += f" and {len(bad) - damaged} that {'is not a spool record' if len(bad) - damaged == 1 else 'are not spool records'}"
        if cut_last:
            said += (
                "; the last record was cut short by a crash mid-write, so its alert cannot be "
                "recovered from half a record"
            )
        self.report(f"{self.path}:{number}: {said}, kept in {aside}")

    def _apply(self, record: dict[str, Any]) -> None:
        op, job_id = record.get("op"), record.get("id", "")
        state = self._pending.get(job_id)
        if op == "job":
            self._seq += 1
            self._pending[job_id] = _JobState(Job.from_json(record["job"]), self._seq)
        elif op == "done":
            self._sent[job_id] = MessageRef(record["channel"], record["ts"])
            self._pending.pop(job_id, None)
            self._track_open(job_id, state, record)
        elif op == "dead":
            self._pending.pop(job_id, None)
        elif state is not None and op == "attempt":
            state.in_doubt, state.attempts = True, state.attempts + 1
        elif state is not None and op == "settled":
            state.in_doubt = False

    def _track_open(self, job_id: str, state: _JobState | None, record: dict[str, Any]) -> None:
        """A posted alert message stays open (its ref pinned) until the edit that closes it
        (resolved) was accepted: until then an edit, a repeat or the resolve may come after any
        number of later messages or restarts. A post nothing will edit (the replay digest) is
        not pinned, and an edit that leaves the message open (partly resolved) unpins nothing."""
        job = state.job if state is not None else None
        if record.get("open") or (job is not None and job.kind == POST and job.keep_open):
            self._open.add(job_id)
        if job is not None and job.kind == UPDATE and job.closes and isinstance(job.parent, str):
            self._open.discard(job.parent)

    def _compact(self) -> None:
        """Rewrite the journal with only what is still needed: pending jobs, the refs of open
        messages and of pending jobs' parents, and the newest `keep_sent` other refs."""
        # isinstance: a wrong-typed record is still pending until delivery dead-letters it
        parents = {s.job.parent for s in self._pending.values() if isinstance(s.job.parent, str)}
        needed = self._open | {parent for parent in parents if parent}
        others = [job_id for job_id in self._sent if job_id not in needed]
        keep = needed | set(others[len(others) - self.keep_sent :] if self.keep_sent else [])
        lines = [
            json.dumps({"op": "done", "id": job_id, **asdict(ref), "open": job_id in self._open})
            for job_id, ref in self._sent.items()
            if job_id in keep
        ]
        for state in sorted(self._pending.values(), key=lambda s: s.seq):
            lines.append(json.dumps({"op": "job", "id": state.job.id, "job": asdict(state.job)}))
            if state.in_doubt:
                lines.append(json.dumps({"op": "attempt", "id": state.job.id}))
        write_atomic(self.path, "".join(line + "\n" for line in lines).encode())

    def _write(self, record: dict[str, Any]) -> None:
        self._out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._out.flush()
        if self.sync:
            os.fsync(self._out.fileno())

    def enqueue(self, job: Job) -> None:
        """Persist a job (fsynced) and wake the worker."""
        if not job.created_s:
            job = Job(**{**asdict(job), "created_s": time.time()})
        with self._cond:
            record = {"op": "job", "id": job.id, "job": asdict(job)}
            self._write(record)
            self._apply(record)
            self._cond.notify_all()

    def record(self, op: str, job_id: str, **extra: Any) -> None:
        """Append an outcome (`attempt`, `settled`, `done`, `dead`) for a job."""
        with self._cond:
            record = {"op": op, "id": job_id, **extra}
            self._write(record)
            self._apply(record)
            self._cond.notify_all()

    def head(self, channel: str) -> tuple[Job, bool] | None:
        """The oldest pending job of a channel and whether it is in doubt."""
        with self._cond:
            states = [s for s in self._pending.values() if s.job.channel == channel]
            if not states:
                return None
            first = min(states, key=lambda s: s.seq)
            return first.job, first.in_doubt

    def channels(self) -> set[str]:
        """Channels with pending jobs."""
        with self._cond:
            return {s.job.channel for s in self._pending.values()}

    def sent(self, job_id: str | None) -> MessageRef | None:
        """Where an accepted job's message is."""
        with self._cond:
            return self._sent.get(job_id) if job_id else None

    def pending_count(self) -> int:
        """Jobs not yet accepted or dead-lettered."""
        with self._cond:
            return len(self._pending)

    def wait(self, timeout_s: float) -> None:
        """Block until the journal changes or the timeout passes."""
        with self._cond:
            self._cond.wait(timeout_s)

    def wake(self) -> None:
        """Wake every waiter (shutdown)."""
        with self._cond:
            self._cond.notify_all()

    def close(self) -> None:
        """Close the journal and release the directory lock."""
        with self._cond:
            if not self._out.closed:
                self._out.close()
            if not self._lock_file.closed:
                self._lock_file.close()


_DAMAGED = "damaged: "


def _damage(raw: bytes) -> str:
    """What is wrong with a line that is not JSON at all."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"{_DAMAGED}not UTF-8 text"
    if not raw.endswith(b"\n") or raw.lstrip().startswith(b"{"):
        return f"{_DAMAGED}a record cut short"
    return f"{_DAMAGED}not JSON"


def job_problem(job: Job) -> str | None:
    """Why a job read back from the journal cannot be sent (a field of the wrong type), or None."""
    if job.kind not in (POST, UPDATE, REPLY):
        return f"kind {job.kind!r} is not post, update or reply"
    if not isinstance(job.blocks, list) or not all(isinstance(b, dict) for b in job.blocks):
        return f"blocks must be a list of objects, got {type(job.blocks).__name__}"
    if job.parent is not None and not isinstance(job.parent, str):
        return f"parent must be a job id or null, got {type(job.parent).__name__}"
    if job.metadata is not None and not isinstance(job.metadata, dict):
        return f"metadata must be an object or null, got {type(job.metadata).__name__}"
    if isinstance(job.created_s, bool) or not isinstance(job.created_s, int | float):
        return f"created_s must be a number, got {type(job.created_s).__name__}"
    return None


def _invalid(record: Any) -> str | None:
    """Why a JSON value is not a journal record this spool can apply, or None."""
    if not isinstance(record, dict):
        return f"expected an object, got {json.dumps(record)[:40]}"
    op, job_id = record.get("op"), record.get("id")
    if op not in ("job", "attempt", "settled", "done", "dead") or not isinstance(job_id, str):
        return f"unknown op {op!r} or no id"
    if op == "done" and not all(isinstance(record.get(k), str) for k in ("channel", "ts")):
        return "a 'done' record needs channel and ts"
    if op == "job":
        job = record.get("job")
        names = ("id", "channel", "kind", "text")
        if not isinstance(job, dict) or not all(isinstance(job.get(k), str) for k in names):
            return "a 'job' record needs a job with id, channel, kind and text"
        if set(job) - set(Job.__slots__):
            return f"unknown job fields {sorted(set(job) - set(Job.__slots__))}"
    return None
