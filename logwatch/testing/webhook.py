"""`WebhookReceiver`: a loopback HTTP server that takes webhook posts as an Alertmanager receiver
would (Teams, ntfy, PagerDuty bridges), for tests of the `[[webhook]]` sink. It can answer with
an error status (an outage behind a proxy) or stop listening and start again on its port."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Received:
    """One post: its path, headers and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class WebhookReceiver:
    """Use as a context manager; `url` points at it. `status` is what it answers (200)."""

    def __init__(self, path: str = "/hook") -> None:
        self.path, self.status = path, 200
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()
        self.url = f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> WebhookReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Listen (again, on the same port after `stop`)."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                status = receiver.status
                if status < 300:
                    with receiver._lock:
                        receiver.received.append(
                            Received(self.path, dict(self.headers.items()), json.loads(raw))
                        )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                """Quiet."""

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        """Stop listening (connections are refused until `start`)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies accepted so far, in arrival order."""
        with self._lock:
            return [item.body for item in self.received]
