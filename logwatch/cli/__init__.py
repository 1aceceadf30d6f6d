"""The command line: the only package that imports click; one module per command.

Each command module reads top to bottom as its options, the objects it builds, the library call
and what it prints; `options.py` holds the options several share, `errors.py` how our error
types end (one line, an exit code). What only some commands use (Slack, sinks, NVML, the
report, the UI) is imported inside those commands: every `logwatch replay` pays for each module
loaded here before it reads a byte (tests/test_cli_startup.py lists what replay must not load).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import click

from logwatch import __version__
from logwatch.cli.errors import LogwatchGroup, UserError, exit_fast, status_line

__all__ = ["COMMANDS", "UserError", "cli", "main", "run", "status_line"]

COMMANDS = {
    "replay": ("logwatch.cli.replay", "replay_cmd"),
    "report": ("logwatch.cli.report", "report_cmd"),
    "gpu": ("logwatch.cli.gpu", "gpu_cmd"),
    "tail": ("logwatch.cli.tail", "tail_cmd"),
    "top": ("logwatch.cli.top", "top_cmd"),
    "silence": ("logwatch.cli.silence", "silence_group"),
    "doctor": ("logwatch.cli.doctor", "doctor_cmd"),
    "rules": ("logwatch.cli.rules", "rules_group"),
    "test": ("logwatch.cli.test", "test_cmd"),
}
"""Each command's name -> its module and the click command in it. A command's module is
imported when the command is looked up (`logwatch replay` loads no other command's module, nor
what only those import: each costs every replay start-up time); `--help` looks up them all."""


class _LazyGroup(LogwatchGroup):
    """The top-level group: its commands (`COMMANDS`) imported when looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, name = COMMANDS[cmd_name]
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return self.commands.get(cmd_name)


@click.group(
    cls=_LazyGroup,
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


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: typed errors become one line on stderr and exit code 2."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="logwatch")


def run() -> None:
    """The `logwatch` command (and `python -m logwatch`): `main`, ended fast once a batch
    command (`replay`) has finished its work (see `errors.exit_fast`)."""
    exit_fast(main)
