"""The real engines for the cluster tests: Alertmanager and Prometheus processes on loopback
(free ports, storage in a temp dir), a webhook receiver behind Alertmanager, and `logwatch tail`
processes as the "nodes".

A missing binary skips with the reason; under LOGWATCH_CI=1 (what .ci/run sets) it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.process import Collected

ALERTMANAGER = "prometheus-alertmanager"
PROMETHEUS = "prometheus"
PROMTOOL = "promtool"
INSTALL = (
    "apt-get install -y --no-install-recommends prometheus prometheus-alertmanager "
    "(.ci/run does it as root)"
)


def binary(name: str) -> str:
    """The binary's path; skip (locally) or fail (LOGWATCH_CI=1) when it is not installed."""
    path = shutil.which(name)
    if path is None:
        reason = f"{name} is not installed: {INSTALL}"
        if os.environ.get("LOGWATCH_CI") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def free_port() -> int:
    """A TCP port nothing listens on right now (loopback)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; AssertionError naming `what` else."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s}s")
        time.sleep(0.1)


def get_json(url: str, context: ssl.SSLContext | None = None) -> Any:
    """GET and decode JSON; None when the server is not answering (yet)."""
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as answer:
            return json.loads(answer.read())
    except (OSError, ValueError):
        return None


class Webhook:
    """A loopback webhook receiver: every notification Alertmanager POSTs, in arrival order."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def firing(self) -> list[dict[str, Any]]:
        """The notifications whose status is firing."""
        return [n for n in self.received if n["status"] == "firing"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Engine:
    """One server process (Alertmanager or Prometheus), ready once its /-/ready answers."""

    def __init__(self, args: Sequence[str], port: int, log: Path) -> None:
        self.port, self.log, self.args = port, log, list(args)
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.context: ssl.SSLContext | None = None  # set when it serves HTTPS

    def start(self, timeout_s: float = 20.0) -> Engine:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        wait_for(self._ready, timeout_s, f"{self.args[0]} ready on {self.url} (log: {self.log})")
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.args[0]} exited: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(
                self.url + "/-/ready", timeout=2, context=self.context
            ) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; idempotent."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class Alertmanager(Engine):
    """prometheus-alertmanager on 127.0.0.1, routing to `webhook` by [alertname, run]."""

    def __init__(
        self,
        folder: Path,
        webhook: Webhook,
        *,
        port: int | None = None,
        group_wait: str = "1s",
        group_interval: str = "1s",
        cluster: str = "",
        peers: Sequence[str] = (),
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "alertmanager.yml"
        config.write_text(
            "route:\n  receiver: hook\n  group_by: [alertname, run]\n"
            f"  group_wait: {group_wait}\n  group_interval: {group_interval}\n  repeat_interval: 1h\n"
            "receivers:\n  - name: hook\n    webhook_configs:\n"
            f"      - url: {webhook.url}\n        send_resolved: true\n",
            encoding="utf-8",
        )
        port = port or free_port()
        args = [binary(ALERTMANAGER), f"--config.file={config}"]
        args += [f"--storage.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}"]
        args += [f"--cluster.listen-address={cluster}"]
        if cluster:  # gossip fast, settle fast, and let the second peer wait 1 s, not 15
            args += ["--cluster.peer-timeout=1s", "--cluster.gossip-interval=100ms"]
            args += ["--cluster.settle-timeout=2s", "--cluster.pushpull-interval=1s"]
            args += [f"--cluster.peer={peer}" for peer in peers]
        if tls is not None:  # (certificate, key): serve HTTPS only (Prometheus' web config)
            web = folder / "web.yml"
            web.write_text(
                f"tls_server_config:\n  cert_file: {tls[0]}\n  key_file: {tls[1]}\n",
                encoding="utf-8",
            )
            args.append(f"--web.config.file={web}")
        super().__init__(args, port, folder / "alertmanager.log")
        if tls is not None:
            self.url = f"https://127.0.0.1:{port}"
            self.context = ssl.create_default_context(cafile=str(tls[0]))

    def alerts(self) -> list[dict[str, Any]]:
        """GET /api/v2/alerts (active, silenced and inhibited alerts)."""
        return get_json(self.url + "/api/v2/alerts", self.context) or []

    def peers(self) -> int:
        """How many cluster members this peer sees (itself included)."""
        status = get_json(self.url + "/api/v2/status", self.context) or {}
        return len((status.get("cluster") or {}).get("peers") or [])


class Prometheus(Engine):
    """prometheus on 127.0.0.1, scraping `targets` every second."""

    def __init__(self, folder: Path, targets: Sequence[str]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = folder / "prometheus.yml"
        listed = ", ".join(f"'{t}'" for t in targets)
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: logwatch\n    static_configs:\n      - targets: [{listed}]\n",
            encoding="utf-8",
        )
        port = free_port()
        args = [binary(PROMETHEUS), f"--config.file={config}"]
        args += [f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{port}"]
        super().__init__(args, port, folder / "prometheus.log")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant PromQL query's result vector ([] while there is none)."""
        answer = get_json(f"{self.url}/api/v1/query?query={urllib.parse.quote(expr)}")
        return (
            list(answer["data"]["result"]) if answer and answer.get("status") == "success" else []
        )


class Node(Collected):
    """A `logwatch tail` process ("a node") over one folder's logs, stderr collected."""

    def __init__(
        self, folder: Path, args: Sequence[str], *, env: dict[str, str] | None = None
    ) -> None:
        self.folder = folder
        cmd = ["tail", str(folder / "*.log"), "--gpu", "off"]
        cmd += ["--state-dir", str(folder / "state"), "--format", "jsonl", *args]
        super().__init__(cmd, env=env)

    def wait_following(self, timeout_s: float = 60.0) -> None:
        """Until it caught up on its files and follows them."""
        wait_for(lambda: self.said("following it"), timeout_s, f"tail on {self.folder} started")
