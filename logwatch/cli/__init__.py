"""The command line: the only package that imports click; one module per command.

Each command module reads top to bottom as its options, the objects it builds, the library call
and what it prints; `options.py` holds the options several share, `errors.py` how our error
types end (one line, an exit code). What only some commands use (Slack, sinks, NVML, the
report, the UI) is imported inside those commands: every `logwatch replay` pays for each module
loaded here before it reads a byte (tests/test_cli_startup.py lists what replay must not load).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from logwatch import __version__
from logwatch.cli.doctor import doctor_cmd
from logwatch.cli.errors import LogwatchGroup, UserError, exit_fast, status_line
from logwatch.cli.gpu import gpu_cmd
from logwatch.cli.replay import replay_cmd
from logwatch.cli.report import report_cmd
from logwatch.cli.rules import rules_group
from logwatch.cli.silence import silence_group
from logwatch.cli.tail import tail_cmd
from logwatch.cli.test import test_cmd
from logwatch.cli.top import top_cmd

__all__ = ["UserError", "cli", "main", "run", "status_line"]


@click.group(
    cls=LogwatchGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
    examples=(
        "logwatch replay train.log",
        "logwatch tail '/workspace/*.log'",
        "logwatch report train.log -o report.html",
    ),
)
@click.version_option(__version__, prog_name="logwatch")
def cli() -> None:
    """Watch ML training runs through their logs; alert fast and once when a run goes wrong."""


for command in (
    replay_cmd,
    report_cmd,
    gpu_cmd,
    tail_cmd,
    top_cmd,
    silence_group,
    doctor_cmd,
    rules_group,
    test_cmd,
):
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: typed errors become one line on stderr and exit code 2."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="logwatch")


def run() -> None:
    """The `logwatch` command (and `python -m logwatch`): `main`, ended fast once a batch
    command (`replay`) has finished its work (see `errors.exit_fast`)."""
    exit_fast(main)
