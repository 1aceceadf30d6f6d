"""An Alertmanager that stays down: said when it starts, summarised at most once a minute (on
the injected clock) while it lasts, not once per retry."""

from __future__ import annotations

import re
import socket

from logwatch.cluster_config import AlertmanagerConfig
from logwatch.sinks.alertmanager.peers import Peer, make_client
from logwatch.testing import FakeClock
from tests.support.tailkit import wait_until


def test_a_peer_that_stays_down_is_summarised_once_a_minute() -> None:
    """Connection refused, retried many times: one line with the fix; after a minute of the
    clock, one `still failing, N times in 1m00s` line at the next failure; no more."""
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    clock = FakeClock()
    said: list[str] = []
    config = AlertmanagerConfig(urls=(url,), timeout_s=2.0)
    peer = Peer(
        make_client(url, config),
        lambda: (b"[]", 1),
        backoff_cap_s=0.05,
        report=said.append,
        clock=clock.monotonic,
    )
    try:
        peer.due()
        wait_until(lambda: peer.failures_total >= 5)
        assert len(said) == 1
        clock.advance(60)
        wait_until(lambda: len(said) == 2)
        failures = peer.failures_total
        wait_until(lambda: peer.failures_total >= failures + 5)
    finally:
        peer.close(wait_s=2.0)
    assert said[0].startswith(f"Alertmanager {url}: ")
    assert "Fix: " in said[0]
    assert re.fullmatch(
        rf"Alertmanager {re.escape(url)}: still failing, \d+ times in 1m00s; .+", said[1]
    )
    assert len(said) == 2
