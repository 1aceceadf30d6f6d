"""Slack transports over slack-sdk (bot token or incoming webhook) and the error classification.

slack-sdk's own retry handlers are switched off (`retry_handlers=[]`): every retry is the
delivery worker's, paced per channel and counted in the spool. Each request either returns a
MessageRef or raises one of the outcome exceptions below.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC
from email.utils import parsedate_to_datetime
from http import HTTPStatus
from typing import Any, Protocol
from urllib.error import URLError

from logwatch.sinks.slack.spool import POST, REPLY, UPDATE, Job, MessageRef

EVENT_TYPE = "logwatch_alert"
PERMANENT = {
    "invalid_auth": "check the bot token (SLACK_BOT_TOKEN or [slack] token_file); run `logwatch doctor`",
    "not_authed": "set SLACK_BOT_TOKEN or [slack] token_file",
    "account_inactive": "the token's app or user was deactivated; install the app again",
    "token_revoked": "the token was revoked; install the app again and update the token",
    "channel_not_found": "check [slack] channel (use the channel ID, e.g. C0123456789) and that the bot can see it",
    "not_in_channel": "invite the bot to the channel (/invite @your-bot) or grant chat:write.public",
    "is_archived": "the channel is archived; unarchive it or pick another channel",
    "missing_scope": "add the chat:write scope to the Slack app and reinstall it",
    "invalid_blocks": "a message logwatch built was refused; report it with the dead-letter entry",
    "msg_too_long": "a message logwatch built was too long; report it with the dead-letter entry",
    "msg_blocks_too_long": "a message logwatch built was too long; report it with the dead-letter entry",
    "invalid_payload": "a webhook payload was refused; report it with the dead-letter entry",
    "no_service": "the webhook URL was revoked; create a new incoming webhook",
    "invalid_token": "the webhook URL is wrong or revoked; create a new incoming webhook",
    "channel_is_archived": "the webhook's channel is archived; create a webhook for another channel",
    "action_prohibited": "an admin restricted this webhook; ask a workspace admin",
}
RETRYABLE = {
    "fatal_error",
    "internal_error",
    "service_unavailable",
    "request_timeout",
    "ratelimited",
}
UPDATE_GONE = {"message_not_found", "cant_update_message", "edit_window_closed"}
SEARCH_MARGIN_S = 120.0
"""How far before a job's creation (on Slack's clock) the lookup for its message starts."""
log = logging.getLogger("logwatch.slack")


class RateLimited(Exception):
    """HTTP 429: wait at least `retry_after_s` on this channel."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"rate limited; Retry-After {retry_after_s:g}s")
        self.retry_after_s = retry_after_s


class Transient(Exception):
    """Worth retrying after a backoff. `in_doubt`: Slack may have accepted the request.
    `said`: the failure in a user's words (`Slack answered HTTP 502 (bad gateway)`), never the
    answer's body (an HTML error page)."""

    def __init__(self, reason: str, *, in_doubt: bool, said: str | None = None) -> None:
        super().__init__(reason)
        self.in_doubt = in_doubt
        self.said = said or reason


class Permanent(Exception):
    """Slack refused for good (error code); retrying cannot help."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class Deadline:
    """A wall-clock deadline for a whole request: connect, send and the entire answer.

    urllib's timeout is per socket operation, so a server that answers a byte at a time never
    trips it, and slack-sdk opens its connections itself, leaving no socket to close from a
    watchdog. So the request runs on a daemon thread that the caller stops waiting for at the
    deadline, or at once on `close`; the caller gets an in-doubt Transient (the request may yet
    land: the job is reconciled before any re-post). The abandoned thread's result is dropped;
    it ends by itself when the server stops sending, and never touches the spool.
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._waiting: set[threading.Event] = set()
        self._closed = False

    def call(self, request: Callable[..., Any], **kwargs: Any) -> Any:
        """request(**kwargs), or Transient(in_doubt) past the deadline or once closed."""
        done = threading.Event()
        box: list[tuple[bool, Any]] = []

        def run() -> None:
            try:
                box.append((True, request(**kwargs)))
            except BaseException as exc:  # handed to the caller, who classifies it
                box.append((False, exc))
            finally:
                done.set()

        with self._lock:
            if self._closed:
                raise Transient("shutting down; not sent", in_doubt=False)
            self._waiting.add(done)
        try:
            threading.Thread(target=run, name="logwatch-slack-request", daemon=True).start()
            done.wait(self.timeout_s)
        finally:
            with self._lock:
                self._waiting.discard(done)
        said = f"Slack did not answer within {self.timeout_s:g}s"
        if not box:
            why = "shutting down" if self._closed else f"deadline of {self.timeout_s:g}s passed"
            raise Transient(f"no complete answer from Slack ({why})", in_doubt=True, said=said)
        ok, value = box[0]
        if not ok:
            reason = value.reason if isinstance(value, URLError) else value
            if isinstance(reason, TimeoutError):
                # the socket's own timeout (the same length) can beat the deadline by a hair:
                # the same failure, said the same way
                raise Transient(f"{type(reason).__name__}: {reason}", in_doubt=True, said=said)
            raise value
        return value

    def close(self) -> None:
        """Stop waiting for requests in flight (shutdown); later calls are refused."""
        with self._lock:
            self._closed = True
            for event in self._waiting:
                event.set()


class SlackTime:
    """Slack's clock as its answers show it, kept as an offset from the host's clock.

    Slack stamps every message `ts` with its own clock, and the two clocks may disagree by
    minutes either way, so a window in which to look for our message must be on Slack's clock.
    Each Web API answer's `Date` header (whole seconds) and each new message's `ts` (the most
    exact) update the offset; the latest wins, so a host clock that is stepped is followed.
    """

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self.now = now
        self.offset_s: float | None = None  # Slack's clock minus the host's; None: not seen yet

    def saw_headers(self, headers: Any) -> None:
        """Read Slack's time from an answer's Date header; an absent or unreadable one is ignored."""
        value = None
        if headers:
            value = headers.get("Date") or headers.get("date")
        if isinstance(value, list):
            value = value[0] if value else None
        try:
            when = parsedate_to_datetime(str(value)) if value else None
        except (TypeError, ValueError, IndexError):
            return
        if when is not None:  # an HTTP date is GMT, also when it says so as -0000
            self.offset_s = when.replace(tzinfo=when.tzinfo or UTC).timestamp() - self.now()

    def saw_ts(self, ts: str) -> None:
        """Read Slack's time from the `ts` of a message it just stored."""
        with contextlib.suppress(ValueError):  # not a ts: keep what the headers said
            slack_s = float(ts)
            if math.isfinite(slack_s):
                self.offset_s = slack_s - self.now()

    def to_slack(self, host_s: float) -> float | None:
        """A host time on Slack's clock; None while no answer has shown Slack's time."""
        return None if self.offset_s is None else host_s + self.offset_s


class Transport(Protocol):
    """Sends one job; `find` looks for a job's message (reconciliation), None if it cannot."""

    can_reconcile: bool

    def send(self, job: Job, parent: MessageRef | None) -> MessageRef:
        """Make the request; raise RateLimited / Transient / Permanent when it did not land."""
        ...

    def find(self, job: Job, parent: MessageRef | None) -> MessageRef | None:
        """The job's message if Slack already has it."""
        ...

    def close(self) -> None:
        """Give up on requests in flight (they end as in-doubt Transients)."""
        ...


def retry_after(headers: Any) -> float:
    """Seconds from a Retry-After header (1 when absent or unreadable)."""
    value = None
    if headers:
        value = headers.get("Retry-After") or headers.get("retry-after")
    if isinstance(value, list):
        value = value[0] if value else None
    try:
        return max(float(value), 0.0) if value is not None else 1.0
    except ValueError:
        return 1.0


def classify_api(status: int, headers: Any, data: Any) -> Exception:
    """The outcome exception for a Web API answer that was not a success."""
    if status == 429:
        return RateLimited(retry_after(headers))
    code = data.get("error", "") if isinstance(data, dict) else ""
    if status >= 500 or code.startswith("Received a response in a non-JSON format"):
        return Transient(
            f"HTTP {status} {code[:80]}".strip(), in_doubt=True, said=http_said(status)
        )
    if code in RETRYABLE:
        return Transient(
            f"ok:false {code}", in_doubt=code != "ratelimited", said=f"Slack answered {code}"
        )
    return Permanent(code or f"http_{status}")


def http_said(status: int) -> str:
    """`Slack answered HTTP 502 (bad gateway)`; a 200 here carried a body that is not JSON."""
    if status == 200:
        return "Slack answered HTTP 200 with a page that is not JSON"
    try:
        phrase = f" ({HTTPStatus(status).phrase.lower()})"
    except ValueError:
        phrase = ""
    return f"Slack answered HTTP {status}{phrase}"


def classify_exception(exc: BaseException) -> Exception:
    """The outcome exception for a request that raised (network, timeout)."""
    reason = exc.reason if isinstance(exc, URLError) else exc
    refused = isinstance(reason, ConnectionRefusedError)
    return Transient(
        f"{type(reason).__name__}: {reason}", in_doubt=not refused, said=network_said(reason)
    )


def network_said(reason: object) -> str:
    """A request that raised, in a user's words: DNS, refused, reset, timed out."""
    if isinstance(reason, socket.gaierror):
        return f"the Slack host name does not resolve (DNS: {reason.strerror or reason})"
    if isinstance(reason, ConnectionRefusedError):
        return "Slack's address refused the connection"
    if isinstance(reason, TimeoutError):
        return "Slack did not answer in time"
    if isinstance(reason, ConnectionError):
        return f"the connection to Slack broke ({type(reason).__name__})"
    if isinstance(reason, OSError) and reason.strerror:
        return f"cannot reach Slack ({reason.strerror})"
    return f"cannot reach Slack ({type(reason).__name__})"


class BotTransport:
    """chat.postMessage / chat.update / threads with a bot token; reconciles via history."""

    can_reconcile = True

    def __init__(self, token: str, base_url: str, timeout_s: float) -> None:
        from slack_sdk import WebClient  # imported here: `import logwatch` stays light

        # float timeouts work with urllib although slack-sdk annotates int
        self.client = WebClient(
            token=token,
            base_url=base_url,
            timeout=timeout_s,  # type: ignore[arg-type]
            retry_handlers=[],
        )
        self.deadline = Deadline(timeout_s)
        self.slack_time = SlackTime()

    def close(self) -> None:
        self.deadline.close()

    def _call(self, request: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
        """One Web API call (a bound WebClient method), its failures classified."""
        from slack_sdk.errors import SlackApiError

        try:
            response = self.deadline.call(request, **kwargs)
        except Transient:
            raise
        except SlackApiError as exc:
            r = exc.response
            self.slack_time.saw_headers(r.headers)
            raise classify_api(r.status_code, r.headers, r.data) from None
        except Exception as exc:  # urllib raises URLError, TimeoutError, ConnectionError, ...
            raise classify_exception(exc) from None
        self.slack_time.saw_headers(response.headers)
        data: dict[str, Any] = response.data if isinstance(response.data, dict) else {}
        return data

    def send(self, job: Job, parent: MessageRef | None) -> MessageRef:
        if job.kind == UPDATE and parent is not None and parent.ts:
            try:
                data = self._call(
                    self.client.chat_update,
                    channel=parent.channel,
                    ts=parent.ts,
                    text=job.text,
                    blocks=job.blocks,
                )
                return MessageRef(data.get("channel", parent.channel), data.get("ts", parent.ts))
            except Permanent as exc:
                if exc.code not in UPDATE_GONE:
                    raise
                log.warning(
                    "chat.update failed (%s); posting the update as a new message", exc.code
                )
        thread = parent.ts if job.kind == REPLY and parent is not None and parent.ts else None
        channel = parent.channel if parent is not None and thread else job.channel
        data = self._call(
            self.client.chat_postMessage,
            channel=channel,
            text=job.text,
            blocks=job.blocks,
            thread_ts=thread,
            reply_broadcast=bool(thread and job.broadcast),
            unfurl_links=False,
            metadata={"event_type": EVENT_TYPE, "event_payload": {"job": job.id}},
        )
        ts = str(data.get("ts", ""))
        self.slack_time.saw_ts(ts)
        return MessageRef(str(data.get("channel", channel)), ts)

    def find(self, job: Job, parent: MessageRef | None) -> MessageRef | None:
        """Look for our metadata in the channel (or thread) since the job was created, on
        Slack's clock (which gave the message its ts), never the host's."""
        if self.slack_time.offset_s is None:
            self._call(self.client.auth_test)  # no answer seen yet: its Date is Slack's time
        created = self.slack_time.to_slack(job.created_s)
        if job.kind == REPLY and parent is not None and parent.ts:
            # without Slack's time, a reply still cannot be older than its parent
            oldest = parent.ts if created is None else f"{created - SEARCH_MARGIN_S:.6f}"
            data = self._call(
                self.client.conversations_replies,
                channel=parent.channel,
                ts=parent.ts,
                oldest=oldest,
                include_all_metadata=True,
                limit=200,
            )
            channel = parent.channel
        else:
            # without Slack's time, the newest messages of the channel (no lower bound)
            since = {} if created is None else {"oldest": f"{created - SEARCH_MARGIN_S:.6f}"}
            data = self._call(
                self.client.conversations_history,
                channel=job.channel,
                include_all_metadata=True,
                limit=200,
                **since,
            )
            channel = job.channel
        for message in data.get("messages", []):
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            if payload.get("job") == job.id:
                return MessageRef(channel, str(message.get("ts", "")))
        return None


class WebhookTransport:
    """An incoming webhook: posts only; an update or reply becomes a new message."""

    can_reconcile = False

    def __init__(self, url: str, timeout_s: float) -> None:
        from slack_sdk.webhook import WebhookClient

        self.client = WebhookClient(url=url, timeout=timeout_s, retry_handlers=[])  # type: ignore[arg-type]  # float works
        self.deadline = Deadline(timeout_s)

    def close(self) -> None:
        self.deadline.close()

    def send(self, job: Job, parent: MessageRef | None) -> MessageRef:
        try:
            response = self.deadline.call(self.client.send, text=job.text, blocks=job.blocks)
        except Transient:
            raise
        except Exception as exc:  # the webhook client raises only for network trouble
            raise classify_exception(exc) from None
        body = (response.body or "").strip()
        if response.status_code == 200 and body == "ok":
            return MessageRef("webhook", "")
        if response.status_code == 429:
            raise RateLimited(retry_after(response.headers))
        if response.status_code >= 500 or response.status_code == 200:
            said = http_said(response.status_code)
            raise Transient(f"HTTP {response.status_code} {body[:80]}", in_doubt=True, said=said)
        code = body if body in PERMANENT else _json_error(body) or f"http_{response.status_code}"
        raise Permanent(code)

    def find(self, job: Job, parent: MessageRef | None) -> MessageRef | None:
        return None


def _json_error(body: str) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return str(data.get("error")) if isinstance(data, dict) and data.get("error") else None


def monotonic() -> float:
    """The delivery worker's clock (real time: it paces real HTTP requests)."""
    return time.monotonic()


__all__ = [
    "POST",
    "REPLY",
    "UPDATE",
    "BotTransport",
    "Permanent",
    "RateLimited",
    "Transient",
    "WebhookTransport",
]
