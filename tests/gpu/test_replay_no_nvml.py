"""`replay` is a post-mortem of files: it never probes NVML (no pynvml import, no
`logwatch-gpu-unavailable` alert from `nvml`), whatever the host has."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import NAN_LOG, ROOT

PROBE = """
import sys
from click.testing import CliRunner
from logwatch.cli import cli
result = CliRunner().invoke(cli, ["replay", "--format", "jsonl", sys.argv[1]])
print(result.exit_code, "pynvml" in sys.modules)
print(result.stdout)
"""


def test_replay_never_imports_pynvml_nor_says_the_gpu_notice() -> None:
    """A replay in a fresh interpreter: pynvml is never imported, and no alert comes from
    the NVML side (its first alert is the log's own)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, NAN_LOG], cwd=ROOT, capture_output=True, text=True, check=True
    )
    status, *alerts = done.stdout.splitlines()
    assert status == "0 False"
    assert alerts and all('"source": "nvml' not in line for line in alerts)
    assert all("logwatch-gpu-unavailable" not in line for line in alerts)
