"""What `logwatch replay` loads: every module imported at start-up is paid for by every replay,
before it reads a byte, so the commands that need Slack, sinks, NVML or a UI import them
themselves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from logwatch.cli import COMMANDS, cli
from tests.support.paths import NAN_LOG

# Modules only other commands (tail, top, gpu, doctor, silence, --notify, --export) need; the
# GPU records (gpu.model) are NVML's, while replay reads GPU metrics from the log's own keys.
NOT_FOR_REPLAY = (
    "slack_sdk",
    "watchdog",
    "rich",
    "prometheus_client",
    "pynvml",
    "logwatch.sinks.slack",
    "logwatch.sinks.registry",
    "logwatch.sinks.terminal",
    "logwatch.sinks.alertmanager",
    "logwatch.doctor",
    "logwatch.cluster_config",
    "logwatch.drivers.export",
    "logwatch.drivers.tail",
    "logwatch.gpu.model",
    "logwatch.gpu.nvml",
    "logwatch.gpu.sampler",
    "logwatch.metrics",
    "logwatch.report",
    "logwatch.top",
    # the other commands' modules (`cli.COMMANDS`: imported when their command is looked up)
    "logwatch.cli.doctor",
    "logwatch.cli.follow",
    "logwatch.cli.gpu",
    "logwatch.cli.report",
    "logwatch.cli.rules",
    "logwatch.cli.silence",
    "logwatch.cli.tail",
    "logwatch.cli.test",
    "logwatch.cli.top",
    "logwatch.sources.inotify",
)

_RUN = """
import json, sys
from logwatch.cli import main
try:
    main(sys.argv[2:])
except SystemExit as exc:
    code = exc.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def _replay_modules(tmp_path: Path, *args: str) -> tuple[int, str, list[str]]:
    """Run `logwatch replay ARGS` in a fresh interpreter (no config file found): its exit code,
    its stdout, and every module loaded once the command is done."""
    report = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "LOGWATCH_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(report), "replay", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    found = json.loads(report.read_text())
    return found["code"], done.stdout, found["modules"]


def _loaded(modules: list[str]) -> list[str]:
    return [
        name
        for name in modules
        if any(name == banned or name.startswith(banned + ".") for banned in NOT_FOR_REPLAY)
    ]


def test_replay_jsonl_loads_no_slack_sink_nvml_or_ui_module(tmp_path: Path) -> None:
    """`logwatch replay LOG --format jsonl` prints its alerts without loading Slack, the sinks,
    doctor, NVML, watchdog, rich or Prometheus modules."""
    code, stdout, modules = _replay_modules(tmp_path, NAN_LOG, "--format", "jsonl")
    assert code == 0
    events = [json.loads(line) for line in stdout.splitlines()]
    assert "nan-loss" in {event["rule"] for event in events}
    assert _loaded(modules) == []


@pytest.mark.parametrize("args", [["--help"], [NAN_LOG, "--format", "json"]])
def test_replay_help_and_json_load_none_of_them_either(tmp_path: Path, args: list[str]) -> None:
    """`replay --help` and `replay --format json` load none of those modules either."""
    code, stdout, modules = _replay_modules(tmp_path, *args)
    assert code == 0
    assert stdout.startswith("Usage: logwatch replay" if args == ["--help"] else "{")
    assert _loaded(modules) == []


def test_each_lazy_command_is_found_by_its_own_name() -> None:
    """`cli.COMMANDS` names each command as its module's click command calls itself, and
    `--help` lists every one of them."""
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
