"""How posting to Alertmanager fails: a refusal names the field (real Alertmanager), a server
that trickles its answer is cut at the deadline, each failure is said once per peer."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from logwatch.cluster_config import AlertmanagerConfig
from logwatch.sinks.alertmanager.peers import Peer, PostError, make_client
from tests.cluster.conftest import Cluster
from tests.cluster.engines import wait_for

NO_LABELS = b'[{"annotations": {"summary": "x"}}]'


def test_a_refusal_names_the_field_once_per_peer(cluster: Cluster) -> None:
    """Alertmanager's 422 for an alert without labels is said once, naming the field and the
    fix, however often the post is retried."""
    am = cluster.alertmanager("am", cluster.webhook()).start()
    said: list[str] = []
    config = AlertmanagerConfig(urls=(am.url,), timeout_s=2.0)
    peer = Peer(
        make_client(am.url, config), lambda: (NO_LABELS, 1), backoff_cap_s=0.1, report=said.append
    )
    try:
        peer.due()
        wait_for(lambda: peer.failures_total >= 3, 20, "three failed posts")
    finally:
        peer.close(wait_s=2.0)
    [line] = said
    assert f"Alertmanager {am.url}: answered HTTP 422: 0.labels in body is required" in line
    assert "Fix: a label or annotation logwatch sent was refused" in line


@pytest.fixture
def trickler() -> Iterator[str]:
    """A server that accepts, then sends one byte a second and never finishes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            for byte in b"HTTP/1.1 200 OK\r\n":
                if stop.wait(1.0):
                    return
                conn.sendall(bytes([byte]))

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()


def test_a_trickling_answer_is_cut_at_the_deadline(trickler: str) -> None:
    """A server that answers a byte at a time never trips socket timeouts; the request's one
    deadline cuts it and says so."""
    client = make_client(trickler, AlertmanagerConfig(urls=(trickler,), timeout_s=1.0))
    with pytest.raises(PostError) as caught:
        client.post(b"[]", threading.Event())
    assert caught.value.kind == "timeout"
    assert str(caught.value) == "no answer within 1s"
