"""`logwatch doctor`: check what a run needs (config, packs, Slack, NVML, readable logs)."""

from __future__ import annotations

import sys

import click

from logwatch.cli.help import HelpCommand
from logwatch.cli.options import CONFIG_OPTION, VERBOSE_OPTION, logging_to_stderr


@click.command(
    "doctor",
    cls=HelpCommand,
    examples=("logwatch doctor", "logwatch doctor '/workspace/*.log' --config logwatch.toml"),
)
@click.argument("globs", nargs=-1)
@CONFIG_OPTION
@VERBOSE_OPTION
def doctor_cmd(globs: tuple[str, ...], config_path: str | None, verbose: bool) -> None:
    """Check config, rule packs, Slack token and channel, NVML, and that GLOBs match readable logs."""
    from logwatch.doctor import run_doctor

    with logging_to_stderr(verbose):
        checks = run_doctor(config_path, globs)
    for check in checks:
        click.echo(check.line())
    if any(not c.ok and c.required for c in checks):
        sys.exit(1)
