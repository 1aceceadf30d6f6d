"""A fake Slack Web API on loopback, for tests: the real slack-sdk talks to it through `base_url`.

It speaks Slack's JSON and headers for chat.postMessage, chat.update, conversations.history,
conversations.replies, conversations.info, auth.test, chat.postEphemeral, usergroups.users.list,
apps.connections.open (the app-level token; its URL is the loopback Socket Mode server of
`socketmode.py`, `fake.socket`) and an incoming-webhook endpoint; it checks
the token, the channel, membership and Block Kit limits like Slack does, enforces a per-channel
posting rate (1 msg/s with a burst of 3 by default) with 429 + Retry-After, and can be scripted to
fail: 429s, 5xx, non-JSON bodies, dropped connections, permanent error codes, slow answers
that arrive after the client gave up although the message was stored, and trickled answers (one
byte per `trickle_s`, which no per-read socket timeout ever trips). Its clock may be set apart from
the host's (`clock_offset_s`): message `ts` values and the `Date` header of every answer both come
from it, as they both come from Slack's own clock, which no host can assume agrees with its own.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from logwatch.testing.socketmode import SocketModeServer

WEBHOOK_PATH = "/services/T0FAKE/B0FAKE/fakewebhooksecret0000"
SCOPES = ("chat:write", "channels:read", "groups:read", "channels:history", "groups:history")


@dataclass(frozen=True, slots=True)
class Fault:
    """One scripted answer. `delay_s` answers late but still stores the message (Slack accepted);
    `trickle_s` stores it too, then sends the answer one byte every `trickle_s` seconds."""

    status: int = 200
    error: str | None = None
    retry_after: str | None = None
    body: str | None = None
    delay_s: float = 0.0
    drop: bool = False
    trickle_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Seen:
    """One request as the fake saw it."""

    at: float
    method: str
    channel: str
    status: int
    error: str | None
    body: dict[str, Any] = field(default_factory=dict)


class FakeSlack:
    """The fake server. Use as a context manager; `base_url` and `webhook_url` point at it."""

    def __init__(
        self,
        *,
        token: str = "xoxb-fake-0000-token",
        channels: dict[str, str] | None = None,
        rate_per_s: float | None = 1.0,
        burst: int = 3,
        not_member: tuple[str, ...] = (),
        scopes: tuple[str, ...] = SCOPES,
        clock_offset_s: float = 0.0,
        app_token: str = "xapp-1-A0FAKE-0000-fakeapptoken",
        groups: dict[str, list[str]] | None = None,
    ) -> None:
        self.token, self.scopes = token, scopes
        self.app_token, self.groups = app_token, groups or {}  # Socket Mode; user groups
        self.ephemerals: list[dict[str, Any]] = []  # chat.postEphemeral: only `user` saw them
        self._socket: SocketModeServer | None = None
        self.clock_offset_s = clock_offset_s  # the fake's clock minus the host's (< 0: behind)
        self.channels = (
            channels if channels is not None else {"C0ALERTS01": "alerts", "C0OTHER002": "other"}
        )
        self.rate_per_s, self.burst, self.not_member = rate_per_s, burst, set(not_member)
        self.requests: list[Seen] = []
        self.messages: list[dict[str, Any]] = []
        self.down: str | None = None
        self.trickle_s: float = 0.0  # > 0: every answer trickles (see Fault.trickle_s)
        self._closing = threading.Event()
        self._faults: dict[str, deque[Fault]] = {}
        self._buckets: dict[str, tuple[float, float]] = {}
        self._last_ts_us = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}/api/"
        self.webhook_url = f"http://127.0.0.1:{port}{WEBHOOK_PATH}"

    def __enter__(self) -> FakeSlack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def socket(self) -> SocketModeServer:
        """The loopback Socket Mode server apps.connections.open hands out (started on first use)."""
        with self._lock:
            if self._socket is None:
                self._socket = SocketModeServer()
            return self._socket

    def close(self) -> None:
        """Stop serving (cutting trickled answers short) and wait for handler threads."""
        if self._socket is not None:
            self._socket.close()
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def fail(self, method: str, *faults: Fault) -> None:
        """Answer the next calls of `method` (e.g. `chat.postMessage`, `webhook`) with these faults."""
        with self._lock:
            self._faults.setdefault(method, deque()).extend(faults)

    def posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Stored messages (top-level and replies), in arrival order."""
        with self._lock:
            return [m for m in self.messages if channel is None or m["channel"] == channel]

    def seen(self, method: str) -> list[Seen]:
        """Requests of one method, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.method == method]

    # --- request handling (called on server threads) -------------------------------------------

    def handle(
        self, method: str, params: dict[str, Any], auth: str
    ) -> tuple[Fault, dict[str, Any], str]:
        """Decide the answer: (fault/status, JSON body, channel)."""
        channel = str(params.get("channel", "webhook" if method == "webhook" else ""))
        with self._lock:
            if self.down is not None:
                return (
                    Fault(
                        503, body="<html>503 Service Unavailable</html>", drop=self.down == "drop"
                    ),
                    {},
                    channel,
                )
            queue = self._faults.get(method)
            fault = queue.popleft() if queue else Fault()
            if fault.status != 200 or fault.error or fault.body is not None or fault.drop:
                return fault, {"ok": False, "error": fault.error or "ratelimited"}, channel
            wanted = self.app_token if method == "apps.connections.open" else self.token
            if method != "webhook" and auth != f"Bearer {wanted}":
                return Fault(), {"ok": False, "error": "invalid_auth"}, channel
            handler = _METHODS.get(method)
            if handler is None:
                return Fault(404), {"ok": False, "error": "unknown_method"}, channel
            return fault, handler(self, params), channel

    def channel_id(self, name: str) -> str | None:
        """Resolve an ID, `name` or `#name` to a channel ID."""
        if name in self.channels:
            return name
        wanted = name.lstrip("#")
        return next((cid for cid, cname in self.channels.items() if cname == wanted), None)

    def now(self) -> float:
        """The fake's own clock (epoch seconds): the host's, moved by `clock_offset_s`."""
        return time.time() + self.clock_offset_s

    def take_token(self, key: str) -> float:
        """Per-channel token bucket; 0 when a post may go now, else seconds until it may."""
        if self.rate_per_s is None:
            return 0.0
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate_per_s)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate_per_s

    def store(self, channel: str, params: dict[str, Any]) -> dict[str, Any]:
        """Keep a posted message; returns it with its ts (the fake's clock, unique like Slack's)."""
        micros = max(int(self.now() * 1_000_000), self._last_ts_us + 1)
        self._last_ts_us = micros
        ts = f"{micros // 1_000_000:d}.{micros % 1_000_000:06d}"
        message = {
            "channel": channel,
            "ts": ts,
            "text": params.get("text", ""),
            "blocks": params.get("blocks") or [],
            "thread_ts": params.get("thread_ts"),
            "reply_broadcast": params.get("reply_broadcast"),
            "metadata": params.get("metadata"),
            "edits": [],
        }
        self.messages.append(message)
        return message


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def _too_big(params: dict[str, Any]) -> str | None:
    """Slack's validation of sizes: msg_too_long / invalid_blocks."""
    if len(str(params.get("text", ""))) > 40_000:
        return "msg_too_long"
    blocks = _blocks(params)
    if len(blocks) > 50:
        return "invalid_blocks"
    for block in blocks:
        text = (block.get("text") or {}).get("text", "")
        if (block.get("type") == "header" and len(text) > 150) or len(text) > 3000:
            return "invalid_blocks"
        if not text and block.get("type") in ("header", "section") and not block.get("fields"):
            return "invalid_blocks"
    return None


def _post(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    channel = fake.channel_id(str(params.get("channel", "")))
    if channel is None:
        return {"ok": False, "error": "channel_not_found"}
    if channel in fake.not_member:
        return {"ok": False, "error": "not_in_channel"}
    problem = _too_big(params)
    if problem:
        return {"ok": False, "error": problem}
    wait = fake.take_token(channel)
    if wait:
        return {"ok": False, "error": "ratelimited", "_retry_after": math.ceil(wait)}
    params = {**params, "blocks": _blocks(params)}
    message = fake.store(channel, params)
    return {
        "ok": True,
        "channel": channel,
        "ts": message["ts"],
        "message": {"text": message["text"]},
    }


def _update(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    channel = fake.channel_id(str(params.get("channel", "")))
    if channel is None:
        return {"ok": False, "error": "channel_not_found"}
    problem = _too_big(params)
    if problem:
        return {"ok": False, "error": problem}
    for message in fake.messages:
        if message["channel"] == channel and message["ts"] == params.get("ts"):
            message["edits"].append({"text": message["text"], "blocks": message["blocks"]})
            message["text"], message["blocks"] = params.get("text", ""), _blocks(params)
            return {"ok": True, "channel": channel, "ts": message["ts"], "text": message["text"]}
    return {"ok": False, "error": "message_not_found"}


def _public(message: dict[str, Any], with_metadata: bool) -> dict[str, Any]:
    out = {"type": "message", "ts": message["ts"], "text": message["text"]}
    if message["thread_ts"]:
        out["thread_ts"] = message["thread_ts"]
    if with_metadata and message["metadata"]:
        out["metadata"] = message["metadata"]
    return out


def _history(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    if "channels:history" not in fake.scopes:
        return _missing_scope(fake, "channels:history")
    channel = fake.channel_id(str(params.get("channel", "")))
    if channel is None:
        return {"ok": False, "error": "channel_not_found"}
    oldest = float(params.get("oldest") or 0)
    meta = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
    found = [
        _public(m, meta)
        for m in fake.messages
        if m["channel"] == channel and not m["thread_ts"] and _ts_after(m["ts"], oldest)
    ]
    return {"ok": True, "messages": found[::-1], "has_more": False}


def _replies(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    if "channels:history" not in fake.scopes:
        return _missing_scope(fake, "channels:history")
    channel = fake.channel_id(str(params.get("channel", "")))
    parent = str(params.get("ts", ""))
    oldest = float(params.get("oldest") or 0)
    meta = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
    found = [  # the parent comes first whatever `oldest` says; replies only from `oldest` on
        _public(m, meta)
        for m in fake.messages
        if m["channel"] == channel
        and (m["ts"] == parent or (m["thread_ts"] == parent and _ts_after(m["ts"], oldest)))
    ]
    if not found:
        return {"ok": False, "error": "thread_not_found"}
    return {"ok": True, "messages": found, "has_more": False}


def _missing_scope(fake: FakeSlack, needed: str) -> dict[str, Any]:
    """Slack's answer to a method the token lacks the scope for."""
    return {
        "ok": False,
        "error": "missing_scope",
        "needed": needed,
        "provided": ",".join(fake.scopes),
    }


def _ts_after(ts: str, oldest: float) -> bool:
    # both on the fake's clock, as Slack compares `oldest` with its own ts values
    return float(ts) >= oldest


def _auth_test(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "ok": True,
        "url": "https://fake.slack.com/",
        "team": "Fake",
        "user": "logwatch",
        "user_id": "U0BOT",
        "bot_id": "B0BOT",
    }


def _info(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    channel = fake.channel_id(str(params.get("channel", "")))
    if channel is None:
        return {"ok": False, "error": "channel_not_found"}
    info = {
        "id": channel,
        "name": fake.channels[channel],
        "is_member": channel not in fake.not_member,
    }
    return {"ok": True, "channel": info}


def _webhook(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    problem = _too_big(params)
    if problem:
        return {"ok": False, "error": "invalid_blocks" if problem != "msg_too_long" else problem}
    wait = fake.take_token("webhook")
    if wait:
        return {"ok": False, "error": "ratelimited", "_retry_after": math.ceil(wait)}
    fake.store("webhook", {**params, "blocks": _blocks(params)})
    return {"ok": True}


def _connections_open(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    # the lock is held by `handle`: the server is made without the property's locking
    if fake._socket is None:
        fake._socket = SocketModeServer()
    if fake._socket.refused:
        return {"ok": False, "error": "internal_error"}
    return {"ok": True, "url": fake._socket.url}


def _ephemeral(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    if fake.channel_id(str(params.get("channel", ""))) is None:
        return {"ok": False, "error": "channel_not_found"}
    fake.ephemerals.append({k: params.get(k) for k in ("channel", "user", "text")})
    return {"ok": True, "message_ts": f"{fake.now():.6f}"}


def _group_users(fake: FakeSlack, params: dict[str, Any]) -> dict[str, Any]:
    group = str(params.get("usergroup", ""))
    if group not in fake.groups:
        return {"ok": False, "error": "no_such_subteam"}
    return {"ok": True, "users": list(fake.groups[group])}


_METHODS = {
    "apps.connections.open": _connections_open,
    "chat.postEphemeral": _ephemeral,
    "usergroups.users.list": _group_users,
    "chat.postMessage": _post,
    "chat.update": _update,
    "conversations.history": _history,
    "conversations.replies": _replies,
    "conversations.info": _info,
    "auth.test": _auth_test,
    "webhook": _webhook,
}


def _handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

        def date_time_string(self, timestamp: float | None = None) -> str:
            # the Date header of every answer, from the fake's clock as Slack's is from its own
            return super().date_time_string(fake.now() if timestamp is None else timestamp)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _params(self) -> dict[str, Any]:
            url = urlsplit(self.path)
            params: dict[str, Any] = dict(parse_qsl(url.query))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode("utf-8") if length else ""
            if raw and "json" in (self.headers.get("Content-Type") or ""):
                params.update(json.loads(raw))
            elif raw:
                params.update(dict(parse_qsl(raw)))
            return params

        def _serve(self) -> None:
            path = urlsplit(self.path).path
            method = "webhook" if path == WEBHOOK_PATH else path.removeprefix("/api/")
            params = self._params()
            fault, data, channel = fake.handle(
                method, params, self.headers.get("Authorization", "")
            )
            status, retry = fault.status, fault.retry_after
            if "_retry_after" in data:
                status, retry = 429, str(data.pop("_retry_after"))
            error = None if data.get("ok", True) else data.get("error")
            if fault.body is not None or fault.drop or (status >= 500 and not fault.error):
                error = f"http_{status}"
            with fake._lock:
                fake.requests.append(Seen(time.monotonic(), method, channel, status, error, params))
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.drop:
                self.close_connection = True
                return
            trickle_s = fault.trickle_s or fake.trickle_s
            if trickle_s:
                self.wfile = _Trickle(self.wfile, trickle_s, fake._closing)  # type: ignore[assignment]
            self._answer(method, status, retry, fault.body, data)

        def _answer(
            self,
            method: str,
            status: int,
            retry: str | None,
            body: str | None,
            data: dict[str, Any],
        ) -> None:
            if body is None and method == "webhook":
                body = (
                    "ok"
                    if data.get("ok")
                    else ("rate_limited" if status == 429 else str(data.get("error")))
                )
                if not data.get("ok") and status == 200:
                    status = 404 if data.get("error") == "channel_not_found" else 400
            payload = (body if body is not None else json.dumps(data)).encode("utf-8")
            try:
                self.send_response(status)
                kind = "text/html" if body is not None else "application/json; charset=utf-8"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                if retry is not None:
                    self.send_header("Retry-After", retry)
                if method != "webhook":  # Slack names the token's scopes on every Web API answer
                    self.send_header("x-oauth-scopes", ",".join(fake.scopes))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout) before the answer came

    return Handler


class _Trickle:
    """A writer that sends one byte per `every_s` (headers and body alike) until `stop` is set."""

    def __init__(self, raw: Any, every_s: float, stop: threading.Event) -> None:
        self.raw, self.every_s, self.stop = raw, every_s, stop

    def write(self, data: bytes) -> int:
        for index in range(len(data)):
            if self.stop.wait(self.every_s):
                raise ConnectionResetError("the fake Slack is closing")
            self.raw.write(data[index : index + 1])
        return len(data)

    def flush(self) -> None:
        self.raw.flush()
