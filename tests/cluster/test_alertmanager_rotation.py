"""A rotated log's firing alert in a real Alertmanager (issue 13): the alert labelled with the
old name ends at the rotation, the one under the new name fires on and ends with the recovery."""

from __future__ import annotations

import os

from tests.cluster.clusterkit import NAN, RECOVERED, START, am_config, append
from tests.cluster.conftest import Cluster
from tests.cluster.engines import Node, wait_for


def test_a_rotated_files_alert_moves_to_its_new_name_and_resolves_there(cluster: Cluster) -> None:
    """NaN in train.log, `mv train.log old.log` and a new train.log: Alertmanager has one
    active alert, labelled source=old.log (the train.log one resolved, not left firing); the
    old file recovers and nothing stays active."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    node = cluster.node("n1", am_config(am.url), log=START)
    node.wait_following()
    log, old = node.folder / "train.log", node.folder / "old.log"
    append(log, NAN)
    [before] = wait_for(am.alerts, 30, "the alert in Alertmanager")
    assert before["labels"]["source"] == str(log)
    os.rename(log, old)
    log.write_text(START, encoding="utf-8")  # the next run
    wait_for(lambda: node.said("a new file took this name"), 30, "the rotation seen")

    def moved() -> list[dict[str, object]]:
        return [a for a in am.alerts() if a["labels"]["source"] == str(old)]

    wait_for(lambda: len(am.alerts()) == 1 and moved(), 30, "only the alert under old.log")
    [after] = am.alerts()
    assert after["startsAt"] == before["startsAt"]  # the same incident, under its new name
    assert after["annotations"]["renamed_from"] == str(log)
    append(old, RECOVERED)
    wait_for(lambda: not am.alerts(), 30, "nothing active once the old file recovered")
    assert node.stop() == 0


def test_the_move_survives_a_restart_between_rotation_and_recovery(cluster: Cluster) -> None:
    """logwatch stops after the rotation; the next one (same state directory) ends the alert
    under old.log when the old file recovers: alertmanager.json kept it under its new name."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    node = cluster.node("n1", am_config(am.url), log=START)
    node.wait_following()
    log, old = node.folder / "train.log", node.folder / "old.log"
    append(log, NAN)
    wait_for(am.alerts, 30, "the alert in Alertmanager")
    os.rename(log, old)
    log.write_text(START, encoding="utf-8")
    wait_for(lambda: node.said("a new file took this name"), 30, "the rotation seen")
    assert node.stop() == 0
    again = cluster.adopt(Node(node.folder, ["--config", str(node.folder / "logwatch.toml")]))
    wait_for(lambda: again.said(f"{old}: resuming at line"), 60, "old.log resumed")
    append(old, RECOVERED)
    wait_for(lambda: not am.alerts(), 30, "nothing active once the old file recovered")
    assert again.stop() == 0
