"""Posting to every Alertmanager peer: one thread each, so a dead or trickling peer holds up
nobody else.

What is posted is state, not a queue: each post carries every alert logwatch knows (firing, and
resolved within the last 15 minutes), so a post that failed is simply made again later with the
newest state and nothing is lost while a peer is down. Each request has one wall-clock deadline
(a watchdog shuts the socket), failures back off exponentially up to a cap, and each kind of
failure is said once per peer with its fix.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import random
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from logwatch.cluster_config import AlertmanagerConfig
from logwatch.faults import RepeatedFaults
from logwatch.redact import redact

API_PATH = "/api/v2/alerts"
BACKOFF_BASE_S = 0.5
FIXES = {
    "connect": "start Alertmanager there or fix the URL ([alertmanager] urls / --alertmanager)",
    "timeout": "check that Alertmanager is healthy ([alertmanager] timeout is the deadline)",
    "tls": "set [alertmanager] ca_file to the CA that signed its certificate (or cert_file / "
    "key_file for client certificates)",
    "auth": "check [alertmanager] bearer_token_env / bearer_token_file / basic_auth_*",
    "not_found": "give the Alertmanager base URL (http://am-0:9093, with its --web.route-prefix "
    "if it has one), not an /api/... path; Alertmanager 0.16 or newer serves API v2",
    "refused": "a label or annotation logwatch sent was refused: check [alertmanager] labels "
    "(report it if the field is one logwatch sets)",
    "server": "Alertmanager failed; it is retried",
}


class PostError(Exception):
    """A post that did not land: `kind` picks the fix, the message says what happened."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Client:
    """HTTP(S) posts to one Alertmanager, with the config's credentials and TLS settings."""

    url: str
    timeout_s: float
    headers: tuple[tuple[str, str], ...]
    context: ssl.SSLContext | None

    def post(self, body: bytes, cancel: threading.Event) -> None:
        """POST the alerts; PostError unless Alertmanager answered 2xx within the deadline."""
        parts = urlsplit(self.url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        conn: http.client.HTTPConnection = (
            http.client.HTTPSConnection(
                parts.hostname or "", port, timeout=self.timeout_s, context=self.context
            )
            if parts.scheme == "https"
            else http.client.HTTPConnection(parts.hostname or "", port, timeout=self.timeout_s)
        )
        finished, expired = threading.Event(), threading.Event()

        def watchdog() -> None:  # a server answering a byte at a time never trips socket timeouts
            deadline = time.monotonic() + self.timeout_s
            while not finished.wait(0.05):
                if cancel.is_set() or time.monotonic() >= deadline:
                    expired.set()
                    _shut(conn)
                    return

        threading.Thread(target=watchdog, name="logwatch-am-deadline", daemon=True).start()
        try:
            conn.request("POST", parts.path + API_PATH, body=body, headers=dict(self.headers))
            answer = conn.getresponse()
            text = answer.read(64 << 10).decode("utf-8", "replace")
            status = answer.status
        except ssl.SSLError as exc:
            raise PostError("tls", f"TLS failed ({exc.reason or exc})") from None
        except (OSError, http.client.HTTPException) as exc:
            if expired.is_set() or isinstance(exc, socket.timeout):
                raise PostError("timeout", f"no answer within {self.timeout_s:g}s") from None
            reason = getattr(exc, "strerror", None) or type(exc).__name__
            raise PostError("connect", f"cannot connect ({reason})") from None
        finally:
            finished.set()
            conn.close()
        if 200 <= status < 300:
            return
        raise PostError(_kind(status), f"answered HTTP {status}: {_message(text)}")


def _shut(conn: http.client.HTTPConnection) -> None:
    """Wake a request blocked on the socket (from the deadline timer's thread)."""
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _kind(status: int) -> str:
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if 400 <= status < 500:
        return "refused"
    return "server"


def _message(text: str) -> str:
    """Alertmanager's error body (`{"code":602,"message":"0.labels in body is required"}`)."""
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:300] or "(no message)"
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])[:300]
    return text.strip()[:300]


def make_client(url: str, config: AlertmanagerConfig) -> Client:
    """A client for one peer with the config's auth and TLS."""
    headers = [("Content-Type", "application/json"), ("User-Agent", "logwatch")]
    if config.bearer_token:
        headers.append(("Authorization", f"Bearer {config.bearer_token}"))
    elif config.basic_auth:
        pair = base64.b64encode(":".join(config.basic_auth).encode()).decode()
        headers.append(("Authorization", f"Basic {pair}"))
    parts = urlsplit(url)
    if parts.username is not None:  # http://user:pass@host: basic auth from the URL
        pair = base64.b64encode(f"{parts.username}:{parts.password or ''}".encode()).decode()
        headers.append(("Authorization", f"Basic {pair}"))
        url = url.replace(parts.netloc, parts.netloc.rpartition("@")[2], 1)
    context = None
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=config.ca_file)
        if config.cert_file:
            context.load_cert_chain(config.cert_file, config.key_file)
        if config.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    return Client(url, config.timeout_s, tuple(headers), context)


class Peer:
    """One Alertmanager: a thread that posts the current alerts whenever they are due."""

    def __init__(
        self,
        client: Client,
        body: Callable[[], tuple[bytes, int]],
        *,
        backoff_cap_s: float,
        report: Callable[[str], None],
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client, self.body, self.report = client, body, report
        # A peer that stays down is summarised once a minute while it lasts.
        self.faults = RepeatedFaults(report, clock=clock)
        self.backoff_cap_s = backoff_cap_s
        self.rng = rng or random.Random()
        self.delivered = 0  # the newest state version this peer accepted
        self.posts = self.failures_total = 0
        self._due = False
        self._retry_at = 0.0
        self._failures = 0
        self._said: str | None = None  # the failure kind last reported
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"logwatch-am-{client.url}", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The peer's base URL."""
        return self.client.url

    def due(self) -> None:
        """Post the current state soon (a change, or a resend)."""
        with self._cv:
            self._due = True
            self._cv.notify()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not self._stop.is_set() and not (
                    self._due and time.monotonic() >= self._retry_at
                ):
                    wait = self._retry_at - time.monotonic() if self._due else None
                    self._cv.wait(wait if wait is None or wait > 0 else 0.01)
                if self._stop.is_set():
                    return
                self._due = False
            self._post()

    def _post(self) -> None:
        data, version = self.body()
        self.posts += 1
        try:
            self.client.post(data, self._stop)
        except PostError as exc:
            if self._stop.is_set():
                return
            self._failed(exc)
            return
        self.delivered = max(self.delivered, version)
        if self._said is not None:
            self.faults.forget(f"Alertmanager {self.url}")
            self.report(f"Alertmanager {self.url}: delivering again")
        self._failures, self._said = 0, None

    def _failed(self, exc: PostError) -> None:
        self.failures_total += 1
        step = min(BACKOFF_BASE_S * 2.0**self._failures, self.backoff_cap_s)
        self._failures += 1
        wait = step * (0.5 + 0.5 * self.rng.random())
        with self._cv:
            self._due, self._retry_at = True, time.monotonic() + wait
        key = f"Alertmanager {self.url}"
        if exc.kind != self._said:  # a new kind of failure is said in full
            self._said = exc.kind
            self.faults.forget(key)
        self.faults.failed(
            key,
            redact(
                f"{key}: {exc}; alerts are kept and retried (backoff up to "
                f"{self.backoff_cap_s:g}s). Fix: {FIXES[exc.kind]}"
            ),
            detail=redact(str(exc)),
        )

    def close(self, wait_s: float) -> None:
        """Stop the thread; a request in flight is cut at once."""
        self._stop.set()
        with self._cv:
            self._cv.notify()
        self._thread.join(wait_s)
