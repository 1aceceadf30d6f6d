"""Many nodes, one notification: two Alertmanager peers gossiping, eight logwatch nodes on one
run's incident."""

from __future__ import annotations

import socket
import time

from tests.cluster.clusterkit import NAN, RUN, START, am_config, append
from tests.cluster.conftest import Cluster
from tests.cluster.engines import free_port, wait_for

QUIET_S = 4.0
"""How long a test watches for a duplicate notification after the first: more than the second
peer's wait (1 x peer timeout, 1s) plus a group interval (1s)."""


def test_two_gossiping_peers_both_hold_the_alert_and_notify_once(cluster: Cluster) -> None:
    """logwatch posts to every peer; both hold the alert, and the receiver behind both gets one
    notification for the group (the second peer sees the first one's in the gossiped log)."""
    hook = cluster.webhook()
    gossip_a, gossip_b = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    am_a = cluster.alertmanager("am-a", hook, cluster=gossip_a, peers=[gossip_b]).start()
    am_b = cluster.alertmanager("am-b", hook, cluster=gossip_b, peers=[gossip_a]).start()
    wait_for(lambda: am_a.peers() == am_b.peers() == 2, 30, "the two peers joined")
    node = cluster.node("n1", am_config(am_a.url, am_b.url), log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)
    for am in (am_a, am_b):
        [alert] = wait_for(am.alerts, 30, f"the alert in {am.url}")
        assert (alert["labels"]["alertname"], alert["labels"]["run"]) == ("nan-loss", RUN)
    wait_for(hook.firing, 30, "a notification")
    time.sleep(QUIET_S)
    [notification] = hook.firing()
    assert notification["groupLabels"] == {"alertname": "nan-loss", "run": RUN}


def test_eight_nodes_on_one_incident_give_one_grouped_notification(cluster: Cluster) -> None:
    """Eight `logwatch tail` processes (eight nodes) see the same run go NaN: Alertmanager gets
    eight alerts and, grouped by [alertname, run], sends one notification holding all eight."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook, group_wait="5s").start()
    nodes = [cluster.node(f"node-{i}", am_config(am.url), log=START) for i in range(8)]
    for node in nodes:
        node.wait_following(timeout_s=90)
    for node in nodes:
        append(node.folder / "train.log", NAN)
    wait_for(lambda: len(am.alerts()) == 8, 60, "eight alerts in Alertmanager")
    wait_for(hook.firing, 30, "the notification")
    time.sleep(QUIET_S)
    [notification] = hook.firing()
    assert notification["groupLabels"] == {"alertname": "nan-loss", "run": RUN}
    sources = {alert["labels"]["source"] for alert in notification["alerts"]}
    assert sources == {str(node.folder / "train.log") for node in nodes}


def test_a_rank_logs_alert_carries_the_logs_host_and_the_watcher_as_instance(
    cluster: Cluster,
) -> None:
    """A rank's log names its host (an NCCL INFO line of node-017): the alert in Alertmanager
    and in the receiver's notification has `host` node-017 and the global rank, and the
    watching machine as `instance`."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    nccl = "[rank139]:node-017:41:41 [3] NCCL INFO comm 0x1 rank 139 nRanks 256 nNodes 32\n"
    node = cluster.node("n1", am_config(am.url), log=START + nccl)
    node.wait_following()
    append(node.folder / "train.log", "[rank139]: step=2 loss=nan\n")
    [alert] = wait_for(am.alerts, 30, "the alert in Alertmanager")
    labels = alert["labels"]
    assert (labels["host"], labels["rank"]) == ("node-017", "139")
    assert labels["instance"] == socket.gethostname()
    [notification] = wait_for(hook.firing, 30, "the notification")
    [told] = notification["alerts"]
    assert (told["labels"]["host"], told["labels"]["instance"]) == (
        "node-017",
        socket.gethostname(),
    )
