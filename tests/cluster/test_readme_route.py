"""The README's minimal alertmanager.yml is a config Alertmanager accepts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.cluster.engines import binary
from tests.support.paths import ROOT


def test_readme_route_passes_amtool_check_config(tmp_path: Path) -> None:
    """`amtool check-config` accepts the README's route (group_by: [alertname, run])."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```yaml\n(# alertmanager\.yml\n.*?)```", readme, re.S)
    assert match is not None, "README has no alertmanager.yml block"
    assert "group_by: [alertname, run]" in match.group(1)
    config = tmp_path / "alertmanager.yml"
    config.write_text(match.group(1), encoding="utf-8")
    done = subprocess.run(
        [binary("amtool"), "check-config", str(config)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
