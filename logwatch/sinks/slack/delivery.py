"""The delivery worker: one thread per channel drains the spool in order, off the caller's path.

Per channel: at most one request per `pace_s`; after a 429 nothing is sent to that channel before
Retry-After has passed (other channels go on); transient failures back off exponentially with
jitter up to `backoff_cap_s`; permanent refusals go to the dead-letter file and the worker moves
on. A job in doubt (its answer was lost) is looked up in Slack before it is posted again.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from logwatch.atomic import open_private
from logwatch.faults import Episode, RepeatedFaults
from logwatch.redact import redact, stderr_line
from logwatch.sinks.slack.spool import UPDATE, Job, MessageRef, Spool, job_problem
from logwatch.sinks.slack.transport import (
    PERMANENT,
    Permanent,
    RateLimited,
    Transient,
    Transport,
    log,
)

DEAD_LETTER = "slack-dead-letter.jsonl"
RECONCILE_HINT = {
    "missing_scope": "add the channels:history and groups:history scopes to the Slack app and "
    "reinstall it, for exactly-once delivery after timeouts",
}


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """Pacing and retry settings (seconds)."""

    pace_s: float = 1.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0


@dataclass(slots=True)
class DeliveryStats:
    """Counters a user (and a test) can read."""

    requests: int = 0
    delivered: int = 0
    rate_limited: int = 0
    transient: int = 0
    reconciled: int = 0
    dead: int = 0
    retry_waits_s: list[float] = field(default_factory=list)


class DeliveryWorker:
    """Drains a Spool through a Transport on background threads."""

    def __init__(
        self,
        spool: Spool,
        transport: Transport,
        *,
        dead_letter: Path,
        policy: DeliveryPolicy = DeliveryPolicy(),
        report: Callable[[str], None] = stderr_line,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spool, self.transport, self.policy = spool, transport, policy
        self.dead_letter, self.report = dead_letter, report
        # Failures that repeat (Slack down, the spool's disk) are said when they start, once a
        # minute while they last and when they end, never at every retry.
        self.faults = RepeatedFaults(lambda m: report(redact(f"logwatch: {m}")), clock=clock)
        self.rng = rng or random.Random()
        self.stats = DeliveryStats()
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._no_reconcile: set[str] = set()
        self._reconcile_reported: set[str] = set()
        self._watcher = threading.Thread(target=self._watch, name="logwatch-slack", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        """Start a channel thread for every channel that has work."""
        while not self._stop.is_set():
            for channel in self.spool.channels():
                with self._lock:
                    if channel not in self._threads:
                        thread = threading.Thread(
                            target=self._run,
                            args=(channel,),
                            name=f"logwatch-slack-{channel}",
                            daemon=True,
                        )
                        self._threads[channel] = thread
                        thread.start()
            self.spool.wait(0.5)

    def _run(self, channel: str) -> None:
        failures = 0
        next_at = 0.0
        while not self._stop.is_set():
            head = self.spool.head(channel)
            if head is None:
                self.spool.wait(0.5)
                continue
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
                continue
            job, in_doubt = head
            wait_s = self._step(job, in_doubt, failures)
            failures = failures + 1 if wait_s is not None and wait_s < 0 else 0
            next_at = time.monotonic() + (abs(wait_s) if wait_s is not None else self.policy.pace_s)

    def _step(self, job: Job, in_doubt: bool, failures: int) -> float | None:
        """Deliver one job; one that cannot be sent is dead-lettered, never the thread's end."""
        problem = job_problem(job)
        if problem is not None:
            self._bury_bad(job, problem)
            return None
        try:
            return self._deliver(job, in_doubt, failures)
        except Exception as exc:  # a bug or a damaged job must not stop the channel for good
            try:
                self._bury_bad(job, f"{type(exc).__name__}: {exc}")
            except Exception as again:  # the spool itself fails (disk): retry later
                self.faults.failed(
                    "slack spool",
                    f"slack spool: delivery on {job.channel} failed ({again}); retrying",
                    detail=str(again),
                )
                return -self._backoff(failures)
            return None

    def _deliver(self, job: Job, in_doubt: bool, failures: int) -> float | None:
        """One step for one job. None: paced as usual; > 0: a Retry-After wait; < 0: a backoff."""
        parent = self.spool.sent(job.parent)
        if in_doubt and job.kind != UPDATE and self._can_reconcile(job.channel):
            try:
                self.stats.requests += 1
                found = self.transport.find(job, parent)
            except RateLimited as exc:
                return self._rate_limited(job, exc)
            except Transient as exc:
                return self._transient(exc, failures)
            except Permanent as exc:
                self._reconcile_unavailable(job.channel, exc.code)
            else:
                if found is not None:
                    self.stats.reconciled += 1
                    self.spool.record("done", job.id, channel=found.channel, ts=found.ts)
                    self._delivered()
                    return None
        return self._send(job, parent, failures)

    def _send(self, job: Job, parent: MessageRef | None, failures: int) -> float | None:
        try:
            self.spool.record("attempt", job.id)
            self.stats.requests += 1
            ref = self.transport.send(job, parent)
        except RateLimited as exc:
            self.spool.record("settled", job.id)
            return self._rate_limited(job, exc)
        except Transient as exc:
            if not exc.in_doubt:
                self.spool.record("settled", job.id)
            return self._transient(exc, failures)
        except Permanent as exc:
            self._bury(job, exc.code)
            return None
        self.spool.record("done", job.id, channel=ref.channel, ts=ref.ts)
        self.stats.delivered += 1
        self._delivered()
        return None

    def _delivered(self) -> None:
        """A job went through: a failure that lasted is over."""
        self.faults.recovered("slack", self._recovered)
        self.faults.recovered("slack spool", lambda *_: "slack spool: works again")

    def _queued(self) -> str:
        count = self.spool.pending_count()
        return f"{count} alert{'' if count == 1 else 's'} queued"

    def _recovered(self, episode: Episode, now_s: float) -> str:
        tries = f"{episode.failures} failed tr{'y' if episode.failures == 1 else 'ies'}"
        left = self.spool.pending_count()
        queued = f"; {self._queued()}" if left else ""
        return f"slack: delivering again after {tries} in {episode.lasted(now_s)}{queued}"

    def _rate_limited(self, job: Job, exc: RateLimited) -> float:
        self.stats.rate_limited += 1
        wait = max(exc.retry_after_s, self.policy.pace_s) + 0.01
        self.stats.retry_waits_s.append(wait)
        log.debug("Slack rate-limited channel %s; waiting %.1fs", job.channel, wait)
        said = f"Slack is rate-limiting channel {job.channel} (HTTP 429)"
        queued = self._queued()
        self.faults.failed(
            "slack",
            f"slack: {said}; waiting {wait:.0f}s as it asks, {queued}",
            detail=f"{said}; {queued}",
        )
        return wait

    def _transient(self, exc: Transient, failures: int) -> float:
        self.stats.transient += 1
        wait = self._backoff(failures)
        if self._stop.is_set():
            return -wait  # cut short by close(): nothing to retry, the job stays spooled
        log.debug("Slack request failed (%s); retrying in %.1fs", redact(str(exc)), wait)
        queued = self._queued()
        self.faults.failed(
            "slack", f"slack: {exc.said}; retrying, {queued}", detail=f"{exc.said}; {queued}"
        )
        return -wait

    def _can_reconcile(self, channel: str) -> bool:
        return self.transport.can_reconcile and channel not in self._no_reconcile

    def _reconcile_unavailable(self, channel: str, code: str) -> None:
        """The lookup was refused for good: post again (at-least-once), say why once per code."""
        self._no_reconcile.add(channel)
        if code in self._reconcile_reported:
            return
        self._reconcile_reported.add(code)
        hint = RECONCILE_HINT.get(code) or PERMANENT.get(code, "see the Slack API docs")
        self.report(
            redact(
                f"logwatch: Slack reconciliation is unavailable for channel {channel} ({code}): "
                "a post whose answer was lost is posted again, so a duplicate is possible. "
                f"Fix: {hint}"
            )
        )

    def _backoff(self, failures: int) -> float:
        """Capped exponential backoff with jitter (between half and all of the step)."""
        step = min(self.policy.backoff_base_s * 2.0**failures, self.policy.backoff_cap_s)
        return step * (0.5 + 0.5 * self.rng.random())

    def _bury(self, job: Job, code: str) -> None:
        hint = PERMANENT.get(code, "see the Slack API docs for this error code")
        self._dead_letter(job, code)
        self.report(
            redact(
                f"logwatch: Slack refused a message for channel {job.channel} ({code}); moved it to {self.dead_letter}. Fix: {hint}"
            )
        )

    def _bury_bad(self, job: Job, why: str) -> None:
        """A job read back from the spool that cannot be sent: dead-letter it, say why, go on."""
        self._dead_letter(job, "bad_job", why)
        self.report(
            redact(
                f"logwatch: Slack job {job.id} in the spool cannot be sent ({why}); moved it to "
                f"{self.dead_letter} and went on with the next job. Fix: nothing to do for delivery; "
                "its alert is in that file (report it if logwatch itself wrote the record)"
            )
        )

    def _dead_letter(self, job: Job, code: str, why: str | None = None) -> None:
        """Append the job to the dead-letter file and mark it dead in the spool."""
        entry: dict[str, object] = {"error": code, "time": time.time(), "job": asdict(job)}
        if why is not None:
            entry["why"] = why
        self.dead_letter.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open_private(self.dead_letter) as out:
            out.write(json.dumps(entry, ensure_ascii=False, default=repr) + "\n")
        self.spool.record("dead", job.id, error=code)
        self.stats.dead += 1

    def drain(self, timeout_s: float) -> bool:
        """Wait until nothing is pending (True) or the timeout passes (False)."""
        deadline = time.monotonic() + timeout_s
        while self.spool.pending_count():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.spool.wait(min(left, 0.2))
        return True

    def close(self) -> None:
        """Stop the threads; whatever is pending stays in the spool for the next start.

        A request in flight is not waited for (the transport gives up on it at once), so this
        takes well under a second even when Slack trickles its answers.
        """
        self._stop.set()
        self.transport.close()
        self.spool.wake()
        self._watcher.join()
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join()
