"""What an `[[action]]` did shows on its alert in a real Alertmanager (`action` annotation)."""

from __future__ import annotations

import json
import sys

from tests.cluster.clusterkit import NAN, START, am_config, append
from tests.cluster.conftest import Cluster
from tests.cluster.engines import wait_for


def test_action_outcome_is_an_annotation_on_the_alert(cluster: Cluster) -> None:
    """The NaN's alert in Alertmanager gets `action`: the same line tail says on stderr."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    run = json.dumps([sys.executable, "-c", "pass"])
    action = f'[[action]]\nname = "note"\non = ["nan-loss"]\nrun = {run}\n'
    node = cluster.node("n1", am_config(am.url) + action, log=START)
    node.wait_following()
    append(node.folder / "train.log", NAN)

    def noted() -> list[str]:
        return [
            a["annotations"].get("action", "") for a in am.alerts() if "action" in a["annotations"]
        ]

    [note] = wait_for(noted, 30, "the action annotation in Alertmanager")
    assert note.startswith(f"action note: {sys.executable} -c pass exited 0 in ")
    assert node.said(note)
    assert node.stop() == 0
