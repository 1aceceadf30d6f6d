"""The webhook's durable outbox: an append-only, fsynced journal of payloads and one delivery
thread that posts them in order, retrying with backoff through outages.

Records (one JSON object a line): `job` (a payload to post), `done` (the receiver answered
2xx), `dead` (it refused the payload for good: 4xx other than 408 / 429; the payload is kept
in the dead-letter file). The journal is replayed on open (pending jobs survive restarts, in
order) and compacted to what is still pending. A lock file keeps a second logwatch from
delivering the same journal (which would post twice). A crash between the receiver's 2xx and
the `done` record posts that payload once more on restart: at least once, as Alertmanager.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from logwatch.atomic import open_private, take_delivery_lock, write_atomic
from logwatch.redact import redact, stderr_line
from logwatch.sinks.webhook.payload import merge_payloads
from logwatch.statecheck import OBJECT, STR, fields
from logwatch.webhook_config import WebhookConfig

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 60.0
RETRY_STATUSES = frozenset({408, 425, 429})
MERGE_MAX = 100
"""Pending payloads of one group merged into one post at most (the receiver's body limit)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What a post got: `ok`, `retry` (try again later) or `dead` (refused for good), and why."""

    verdict: str
    why: str = ""


Poster = Callable[[bytes], Answer]


def http_poster(config: WebhookConfig) -> Poster:
    """POSTs a body to the configured URL with its headers and deadline."""
    headers = {"Content-Type": "application/json", "User-Agent": "logwatch", **config.headers}

    def post(body: bytes) -> Answer:
        request = urllib.request.Request(config.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
                response.read()
            return Answer("ok")
        except urllib.error.HTTPError as exc:
            said = exc.read(200).decode("utf-8", "replace").strip()
            why = f"HTTP {exc.code}" + (f": {said}" if said else "")
            retry = exc.code in RETRY_STATUSES or exc.code >= 500
            return Answer("retry" if retry else "dead", redact(why))
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            # (HTTPException: a bad status line or a body cut short is no OSError; raised, it
            # ended the delivery thread, and nothing more was posted until a restart)
            reason = getattr(exc, "reason", exc)
            return Answer("retry", redact(str(reason)))

    return post


class Outbox:
    """Pending payloads of one webhook, persisted before they are posted."""

    def __init__(
        self,
        directory: Path,
        config: WebhookConfig,
        *,
        poster: Poster | None = None,
        report: Callable[[str], None] = stderr_line,
        sync: bool = True,
        backoff_cap_s: float = BACKOFF_CAP_S,
    ) -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        stem = f"webhook-{config.key}"
        self.path = directory / f"{stem}.jsonl"
        self.dead_path = directory / f"{stem}.dead.jsonl"
        self.name, self.report, self.sync = config.name, report, sync
        self.poster = poster or http_poster(config)
        self.backoff_cap_s = backoff_cap_s
        self._lock_file = take_delivery_lock(directory / f"{stem}.lock", config.name)
        self._cond = threading.Condition()
        self._pending: dict[str, Mapping[str, Any]] = {}  # insertion order: delivery order
        self._failing: str | None = None
        self._stop = threading.Event()
        try:
            self._replay()
            self._compact()
            self._out: TextIO = open_private(self.path)
        except BaseException:
            self._lock_file.close()
            raise
        self._thread = threading.Thread(target=self._deliver, name=f"logwatch-{stem}", daemon=True)
        self._thread.start()

    # --- the journal -------------------------------------------------------------------

    def _replay(self) -> None:
        if not self.path.exists():
            return
        bad: list[tuple[int, str]] = []
        with open(self.path, "rb") as stream:
            for number, raw in enumerate(stream, 1):
                if not raw.strip():
                    continue
                try:
                    self._apply(_checked(json.loads(raw.decode("utf-8"))))
                except (UnicodeDecodeError, ValueError) as exc:
                    bad.append((number, str(exc)))
        if bad:
            number, why = bad[0]
            self.report(
                f"{self.path}:{number}: not a webhook record ({why}); skipped {len(bad)} "
                "record(s) (a record cut short by a crash mid-write is lost with it)"
            )

    def _apply(self, record: dict[str, Any]) -> None:
        if record["op"] == "job":
            self._pending[record["id"]] = record["body"]
        else:
            self._pending.pop(record["id"], None)

    def _compact(self) -> None:
        lines = [
            json.dumps({"op": "job", "id": job_id, "body": body}, ensure_ascii=False) + "\n"
            for job_id, body in self._pending.items()
        ]
        write_atomic(self.path, "".join(lines).encode())

    def _write(self, record: dict[str, Any]) -> None:
        self._out.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._out.flush()
        if self.sync:
            os.fsync(self._out.fileno())
        self._apply(record)

    def enqueue(self, job_id: str, body: Mapping[str, Any]) -> None:
        """Keep a payload (fsynced) and wake the delivery thread."""
        with self._cond:
            self._write({"op": "job", "id": job_id, "body": dict(body)})
            self._cond.notify_all()

    def pending_count(self) -> int:
        """Payloads not yet accepted (or refused for good)."""
        with self._cond:
            return len(self._pending)

    # --- delivery ----------------------------------------------------------------------

    def _head(self) -> tuple[list[str], Mapping[str, Any]] | None:
        """The oldest pending payload, with the ones right behind it of the same group (an
        outage's backlog, a burst of one rule on many ranks) merged into it: one post. A payload
        with an alert already in the post ends it: each change of an alert is posted, in order,
        however long it waited (folded, a firing and its resolve would be one resolved post, a
        resolve of an alert the receiver never saw fire, and only when the two happened to wait
        together: a slow delivery thread, a failed first post)."""
        with self._cond:
            while not self._pending and not self._stop.is_set():
                self._cond.wait(1.0)
            jobs = list(self._pending.items())[:MERGE_MAX]
        if not jobs:
            return None
        first_id, first = jobs[0]
        ids, merged = [first_id], [first]
        seen = _fingerprints(first)
        for job_id, body in jobs[1:]:
            alerts = _fingerprints(body)
            if body.get("groupKey") != first.get("groupKey") or not seen.isdisjoint(alerts):
                break
            ids.append(job_id)
            merged.append(body)
            seen |= alerts
        return ids, merge_payloads(merged)

    def _deliver(self) -> None:
        failures = 0
        while not self._stop.is_set():
            head = self._head()
            if head is None:
                continue
            job_ids, body = head
            answer = self.poster(json.dumps(body, ensure_ascii=False).encode())
            if answer.verdict == "retry":
                failures += 1
                self._said_failing(answer.why)
                self._stop.wait(min(self.backoff_cap_s, BACKOFF_BASE_S * 2 ** min(failures, 16)))
                continue
            failures = 0
            with self._cond:
                if answer.verdict == "dead":
                    self._dead(job_ids[0], body, answer.why)
                for job_id in job_ids:
                    self._write(
                        {"op": "dead" if answer.verdict == "dead" else "done", "id": job_id}
                    )
                self._cond.notify_all()
            self._said_recovered()

    def _said_failing(self, why: str) -> None:
        if self._failing != why:
            self.report(
                f"{self.name}: cannot deliver ({why}); {self.pending_count()} alert group(s) kept "
                f"in {self.path}, retrying with backoff"
            )
        self._failing = why

    def _said_recovered(self) -> None:
        if self._failing is not None:
            self.report(f"{self.name}: delivering again ({self.pending_count()} pending)")
        self._failing = None

    def _dead(self, job_id: str, body: Mapping[str, Any], why: str) -> None:
        with open_private(self.dead_path) as out:
            out.write(
                json.dumps({"id": job_id, "why": why, "body": body}, ensure_ascii=False) + "\n"
            )
        self.report(
            f"{self.name}: the receiver refused an alert group for good ({why}); kept in "
            f"{self.dead_path}. Fix: check what the receiver expects"
        )

    def drain(self, timeout_s: float) -> bool:
        """Wait until nothing is pending (True) or the timeout passes (False)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, drain_s: float = 3.0) -> None:
        """Give delivery `drain_s`, then stop; what is left stays in the journal."""
        self.drain(drain_s)
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout=30)
        with self._cond:
            if not self._out.closed:
                self._out.close()
        self._lock_file.close()


def _fingerprints(body: Mapping[str, Any]) -> set[str]:
    """The alerts of a payload, by fingerprint."""
    return {str(alert.get("fingerprint")) for alert in body.get("alerts", [])}


def _checked(record: Any) -> dict[str, Any]:
    op = record.get("op") if isinstance(record, dict) else None
    if op == "job":
        return fields(record, {"op": STR, "id": STR, "body": OBJECT}, "webhook record 'job'")
    if op in ("done", "dead"):
        return fields(record, {"op": STR, "id": STR}, f"webhook record {op!r}")
    raise ValueError(f"unknown op {op!r} (expected job, done or dead)")
