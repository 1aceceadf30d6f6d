"""`logwatch tail` against a real Alertmanager: what an alert carries, a recovery, an
Alertmanager that comes back, a logwatch that dies."""

from __future__ import annotations

import socket
import time
from datetime import datetime

from tests.cluster.clusterkit import NAN, RECOVERED, RUN, START, am_config, append
from tests.cluster.conftest import Cluster
from tests.cluster.engines import Node, free_port, wait_for


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_alert_shows_in_alertmanager_with_its_labels_and_ends_when_the_log_recovers(
    cluster: Cluster,
) -> None:
    """A NaN fired by tail is in GET /api/v2/alerts with the contract's labels, annotations and
    lease; the recovery ends it there, and the receiver hears both."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    node = cluster.node("n1", am_config(am.url), log=START)
    node.wait_following()
    assert node.said(f"alerts to the terminal, Alertmanager {am.url}")
    log = node.folder / "train.log"
    append(log, NAN)
    [alert] = wait_for(am.alerts, 30, "the alert in Alertmanager")
    assert alert["labels"] == {
        "alertname": "nan-loss",
        "severity": "critical",
        "host": socket.gethostname(),
        "source": str(log),
        "run": RUN,
        "cluster": "pod-3",
    }
    notes = alert["annotations"]
    assert notes["summary"].startswith("loss is nan at step 2")
    assert notes["description"].startswith("Stop or roll back")
    assert (notes["log_line"], notes["step"], notes["value"]) == ("step=2 loss=nan", "2", "nan")
    assert alert["generatorURL"] == f"https://wandb.ai/team/proj/runs/{RUN}"
    lease_s = (_when(alert["endsAt"]) - _when(alert["updatedAt"])).total_seconds()
    assert 2.0 < lease_s <= 4.5  # 4 x resend_interval (1s) ahead of the post
    wait_for(hook.firing, 30, "the firing notification")

    append(log, RECOVERED)
    wait_for(lambda: not am.alerts(), 30, "the alert ended in Alertmanager")
    resolved = wait_for(
        lambda: [n for n in hook.received if n["status"] == "resolved"], 30, "resolved"
    )
    assert resolved[0]["alerts"][0]["labels"]["alertname"] == "nan-loss"
    assert node.stop() == 0


def test_alertmanager_down_then_back_loses_nothing(cluster: Cluster) -> None:
    """An alert fired while Alertmanager is down reaches it once it comes up on that address;
    the failure is said once (with the fix), the recovery once."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    node = cluster.node("n1", am_config(url), log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    wait_for(lambda: node.said("cannot connect"), 30, "the delivery failure said")
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook, port=port).start()
    [alert] = wait_for(am.alerts, 30, "the alert after Alertmanager came back")
    assert (alert["labels"]["alertname"], alert["labels"]["run"]) == ("nan-loss", RUN)
    wait_for(lambda: node.said(f"Alertmanager {url}: delivering again"), 30, "recovery said")
    failures = [line for line in node.err if f"Alertmanager {url}: cannot connect" in line]
    assert len(failures) == 1
    assert "Fix: start Alertmanager there or fix the URL" in failures[0]


def test_killed_logwatch_alert_expires_at_its_ends_at(cluster: Cluster) -> None:
    """After kill -9, nobody re-posts: Alertmanager ends the alert at its endsAt lease (4 x
    resend_interval), not after its 5-minute resolve_timeout, and the receiver hears it."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    node = cluster.node("n1", am_config(am.url), log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    wait_for(hook.firing, 30, "the firing notification")
    node.kill()
    killed = time.time()
    [alert] = am.alerts()
    last_lease = _when(alert["endsAt"])
    wait_for(lambda: not am.alerts(), 30, "the alert expired")
    [resolved] = wait_for(
        lambda: [n for n in hook.received if n["status"] == "resolved"], 30, "resolved"
    )
    ended = _when(resolved["alerts"][0]["endsAt"])
    # ended by the lease of its last post: at most one more post landed after the GET above
    assert last_lease <= ended
    assert (ended - last_lease).total_seconds() <= 2.5
    assert ended.timestamp() - killed <= 5.0  # the lease: 4 x 1s after the last post


def test_restarted_logwatch_announces_what_still_fires(cluster: Cluster) -> None:
    """A logwatch killed while an alert fires, restarted against an Alertmanager that lost
    everything, posts that alert again from its state directory (no new log line needed)."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    config = am_config(am.url)
    node = cluster.node("n1", config, log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    [before] = wait_for(am.alerts, 30, "the alert in Alertmanager")
    node.kill()
    am.stop()
    fresh = cluster.alertmanager("am-fresh", hook, port=am.port).start()
    assert fresh.alerts() == []
    again = Node(node.folder, ["--config", str(node.folder / "logwatch.toml")])
    cluster.adopt(again)
    [after] = wait_for(fresh.alerts, 60, "the alert announced again")
    assert after["labels"] == before["labels"]
    assert after["startsAt"] == before["startsAt"]  # the same incident, not a new one
