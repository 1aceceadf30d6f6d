"""A loopback Socket Mode server, for tests: the WebSocket that FakeSlack's
`apps.connections.open` points the real slack-sdk client at.

It speaks RFC 6455 (the handshake, masked client frames, ping/pong, close), greets each
connection with Slack's `hello`, sends `interactive` envelopes carrying real `block_actions`
payloads (`press`), and records the client's acknowledgements by `envelope_id` (`wait_ack`).
`drop` cuts every connection without a close frame, as a network outage does, and `refused`
makes FakeSlack's apps.connections.open fail until it is cleared.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import struct
import threading
import time
from typing import Any

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA
_SENDING = threading.Lock()  # a pong and a press must not interleave their bytes


class SocketModeServer:
    """Accepts Socket Mode connections on loopback; `url` is what apps.connections.open hands out."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.connections = 0  # handshakes completed, reconnections included
        self.acks: dict[str, dict[str, Any]] = {}
        self.refused = False  # True: apps.connections.open fails (Slack's Socket Mode is down)
        self._live: list[socket.socket] = []
        self._cond = threading.Condition()
        self._closed = False
        threading.Thread(target=self._accept, name="fake-socket-mode", daemon=True).start()

    @property
    def url(self) -> str:
        """A fresh connection URL (Slack's carry a one-time ticket)."""
        return f"ws://127.0.0.1:{self.port}/link/?ticket={secrets.token_hex(8)}&app_id=A0FAKE"

    # --- what a test does ------------------------------------------------------------------

    def wait_connected(self, timeout_s: float = 20.0, count: int = 1) -> bool:
        """Whether `count` handshakes were completed (and one connection is live) in time."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self.connections < count or not self._live:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def press(
        self,
        action_id: str,
        value: str,
        *,
        user: str,
        channel: str,
        message_ts: str,
        text: str = "button",
    ) -> str:
        """Send one `block_actions` envelope as Slack does when `user` presses a button; its
        envelope_id."""
        envelope_id = secrets.token_hex(8)
        payload = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": "T0FAKE",
            },
            "api_app_id": "A0FAKE",
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"{int(time.time())}.1.{secrets.token_hex(6)}",
            "team": {"id": "T0FAKE", "domain": "fake"},
            "channel": {"id": channel, "name": "alerts"},
            "message": {"type": "message", "ts": message_ts},
            "response_url": f"http://127.0.0.1:{self.port}/actions/{envelope_id}",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": "logwatch-controls",
                    "text": {"type": "plain_text", "text": text, "emoji": True},
                    "value": value,
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        envelope = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": "interactive",
            "accepts_response_payload": False,
        }
        self.send(envelope)
        return envelope_id

    def send(self, message: dict[str, Any]) -> None:
        """One text frame to the newest live connection (AssertionError when there is none)."""
        with self._cond:
            assert self._live, "no Socket Mode connection is open"
            conn = self._live[-1]
        _write(conn, TEXT, json.dumps(message).encode())

    def wait_ack(self, envelope_id: str, timeout_s: float = 10.0) -> bool:
        """Whether the client acknowledged this envelope in time."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while envelope_id not in self.acks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def drop(self) -> None:
        """Cut every live connection, no close frame (an outage)."""
        with self._cond:
            live, self._live = self._live, []
        for conn in live:
            conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self._closed = True
        self._listener.close()
        self.drop()

    # --- the server side -------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            if not self._handshake(conn):
                conn.close()
                return
            with self._cond:
                self.connections += 1
                self._live.append(conn)
                self._cond.notify_all()
            hello = {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0FAKE"}}
            _write(conn, TEXT, json.dumps(hello).encode())
            self._read_frames(conn)
        except OSError:
            pass  # dropped (by `drop`, or by the client)
        finally:
            with self._cond:
                if conn in self._live:
                    self._live.remove(conn)
            conn.close()

    def _handshake(self, conn: socket.socket) -> bool:
        request = b""
        while b"\r\n\r\n" not in request:
            chunk = conn.recv(1024)
            if not chunk:
                return False
            request += chunk
        headers = dict(
            line.split(": ", 1) for line in request.decode().split("\r\n")[1:] if ": " in line
        )
        key = {k.lower(): v for k, v in headers.items()}.get("sec-websocket-key", "")
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        conn.sendall(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
        )
        return True

    def _read_frames(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        while True:
            head = reader.read(2)
            if len(head) < 2:
                return
            opcode, masked, length = head[0] & 0x0F, head[1] & 0x80, head[1] & 0x7F
            if length == 126:
                length = struct.unpack("!H", reader.read(2))[0]
            elif length == 127:
                length = struct.unpack("!Q", reader.read(8))[0]
            mask = reader.read(4) if masked else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(reader.read(length)))
            if opcode == PING:
                _write(conn, PONG, data)
            elif opcode == CLOSE:
                _write(conn, CLOSE, data[:2])
                return
            elif opcode == TEXT:
                self._took(json.loads(data.decode()))

    def _took(self, message: dict[str, Any]) -> None:
        envelope_id = message.get("envelope_id")
        if isinstance(envelope_id, str):
            with self._cond:
                self.acks[envelope_id] = message
                self._cond.notify_all()


def _write(conn: socket.socket, opcode: int, data: bytes) -> None:
    """One unmasked frame (a server's frames are never masked)."""
    size = len(data)
    if size < 126:
        head = struct.pack("!BB", 0x80 | opcode, size)
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, size)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, size)
    with _SENDING:
        conn.sendall(head + data)
