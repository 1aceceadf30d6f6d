"""The Socket Mode link that brings button presses: slack-sdk's own (builtin) client, kept
connected by a thread of ours with capped exponential backoff.

Socket Mode needs no public URL: the client dials out to Slack (works from a login node behind
NAT). Every envelope is acknowledged at once (Slack wants it within 3 s), then handed on. A lost
connection is said once (and its return once); alerting never waits for this link: it runs on
its own threads and only takes the Slack sink's lock to act on a press.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from logwatch.redact import redact, stderr_line

BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 60.0
_quiet = logging.getLogger("logwatch.slack.socketmode")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False  # its retries are ours to say, once, not one log line each


class SocketLink:
    """Keeps one Socket Mode connection up; `on_press` gets each `block_actions` payload."""

    def __init__(
        self,
        app_token: str,
        base_url: str,
        timeout_s: float,
        on_press: Callable[[dict[str, Any]], None],
        *,
        report: Callable[[str], None] = stderr_line,
        ping_interval_s: float = 5.0,
        backoff_cap_s: float = BACKOFF_CAP_S,
    ) -> None:
        from slack_sdk import WebClient
        from slack_sdk.socket_mode.builtin import SocketModeClient

        web = WebClient(base_url=base_url, timeout=timeout_s, retry_handlers=[])  # type: ignore[arg-type]  # float works
        self.client = SocketModeClient(
            app_token=app_token,
            web_client=web,
            logger=_quiet,
            auto_reconnect_enabled=False,  # ours, with backoff, said once
            ping_interval=ping_interval_s,
        )
        self.client.socket_mode_request_listeners.append(self._on_request)
        self.on_press, self.report, self.backoff_cap_s = on_press, report, backoff_cap_s
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._keep_up, name="logwatch-slack-socket", daemon=True
        )
        self._thread.start()

    def _on_request(self, client: Any, request: Any) -> None:
        from slack_sdk.socket_mode.response import SocketModeResponse

        client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        payload = request.payload if isinstance(request.payload, dict) else {}
        if request.type == "interactive" and payload.get("type") == "block_actions":
            self.on_press(payload)

    def _keep_up(self) -> None:
        failures, up, said_down = 0, False, False
        while not self._stop.is_set():
            if self.client.is_connected():
                if not up and said_down:
                    self.report("logwatch: Slack buttons: Socket Mode connected again")
                up, said_down, failures = True, False, 0
                self._stop.wait(0.5)
                continue
            if up:
                up = False
                if not said_down:
                    said_down = True
                    self.report(
                        "logwatch: Slack buttons: lost the Socket Mode connection; reconnecting "
                        "with backoff (alerts go out meanwhile; presses wait until it is back)"
                    )
            why = self._connect()
            if self.client.is_connected():
                continue
            if not said_down:
                said_down = True
                self.report(
                    redact(
                        f"logwatch: Slack buttons: cannot open the Socket Mode connection ({why}); "
                        "retrying with backoff (alerts go out meanwhile). Fix: an xapp- token with "
                        "connections:write in [slack] app_token_file, Socket Mode on in the app"
                    )
                )
            step = min(BACKOFF_BASE_S * 2.0**failures, self.backoff_cap_s)
            failures += 1
            self._stop.wait(step * (0.5 + 0.5 * random.random()))

    def _connect(self) -> str:
        """Try once; why it failed (empty when it may have worked)."""
        try:
            self.client.connect_to_new_endpoint(force=True)
        except Exception as exc:  # network, invalid_auth, ...: retried with backoff
            response = getattr(exc, "response", None)
            code = response.get("error") if response is not None else None
            return str(code or f"{type(exc).__name__}: {exc}")
        return "the WebSocket handshake failed"

    def connected(self) -> bool:
        """Whether presses can arrive now."""
        return self.client.is_connected()

    def close(self) -> None:
        """Stop reconnecting and close the connection."""
        self._stop.set()
        self.client.close()
        self._thread.join(timeout=5)
