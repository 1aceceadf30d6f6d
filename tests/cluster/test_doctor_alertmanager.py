"""`logwatch doctor` checks every Alertmanager peer the config names, with tail's own client."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from logwatch.cli import cli
from tests.cluster.clusterkit import am_config
from tests.cluster.conftest import Cluster
from tests.cluster.engines import free_port


def test_doctor_says_which_peer_takes_posts_and_how_to_fix_the_one_that_does_not(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A real Alertmanager is `ok` (an empty post, which alerts nobody); a dead peer is a FAIL
    line naming the URL, what failed and the fix; doctor exits 1."""
    hook = cluster.webhook()
    am = cluster.alertmanager("am", hook).start()
    dead = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "logwatch.toml"
    config.write_text(am_config(am.url, dead) + '[gpu]\nmode = "off"\n')
    result = CliRunner().invoke(cli, ["doctor", "--config", str(config)])
    lines = result.output.splitlines()
    assert f"ok   alertmanager {am.url}: POST /api/v2/alerts accepted" in lines
    [failed] = [line for line in lines if line.startswith(f"FAIL alertmanager {dead}")]
    assert "cannot connect" in failed and "fix: start Alertmanager there or fix the URL" in failed
    assert result.exit_code == 1
    assert am.alerts() == [] and hook.received == []
