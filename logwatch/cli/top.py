"""`logwatch top`: a live view of every followed run, with `tail`'s files, rules and state."""

from __future__ import annotations

import sys
from typing import Any

import click

from logwatch.cli.follow import follow_setup
from logwatch.cli.help import HelpCommand
from logwatch.cli.options import Duration
from logwatch.cli.tail import tail_cmd
from logwatch.redact import install_log_handler, remove_log_handler, visible

TOP_SHARED = (
    "patterns",
    "rule_paths",
    "no_builtin_rules",
    "state_dir",
    "from_beginning",
    "from_end",
    "poll_interval",
    "partial_flush",
    "max_line_bytes",
    "gpu_mode",
    "gpu_interval",
    "config_path",
    "warm_up",
    "watcher",
)
"""`tail`'s parameters that `top` takes as they are (what to follow, rules, state, GPUs)."""


def top_keys() -> tuple[str, list[tuple[str, str]]]:
    """The view's keys, for `--help` (read from the view when help is shown)."""
    from logwatch.top.view import HELP

    return "Keys", [(key, what) for key, what in HELP]


@click.command(
    "top",
    params=[p for p in tail_cmd.params if p.name in TOP_SHARED],
    cls=HelpCommand,
    extra=top_keys,
    examples=(
        "logwatch top '/workspace/*.log'",
        "logwatch top train.log --interval 5s > status.txt   # piped: status lines",
    ),
)
@click.option(
    "--interval",
    type=Duration(),
    default="1s",
    show_default=True,
    help="How often ages refresh (and, piped, how often a status line per source is printed).",
)
def top_cmd(patterns: tuple[str, ...], interval: float, **follow: Any) -> None:
    """A live view of every followed run (step, loss, stalls, alerts, GPUs); piped, one status
    line per source every interval. Same files, rules and checkpoints as `tail`."""
    from logwatch.drivers.startup import sinks_line, watching_line
    from logwatch.sinks.registry import open_sinks
    from logwatch.top.app import Notes, TopOptions, run_top
    from logwatch.top.plugin import TopPlugin

    setup = follow_setup(patterns, **follow)
    notes = Notes(sys.stderr)
    view = TopPlugin()
    sinks = open_sinks(view, setup.config, setup.state_dir)
    footer = (
        f"{watching_line(patterns)} · state {setup.state_dir}",
        sinks_line(setup.config).replace("the terminal", "this view"),
    )
    handler = install_log_handler(notes, verbose=False)  # library warnings: the view's notes
    try:
        run_top(
            patterns,
            setup.specs,
            view,
            sinks,
            state_dir=setup.state_dir,
            options=setup.options,
            top=TopOptions(interval_s=interval),
            gpu=setup.gpu,
            footer=[visible(line) for line in footer],
            stdout=sys.stdout,
            stdin=sys.stdin,
            notes=notes,
            startup=[visible(line) for line in (*setup.notes, *setup.gpu_line)],
        )
    finally:
        remove_log_handler(handler)
