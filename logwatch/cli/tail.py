"""`logwatch tail`: follow live logs and alert as lines come."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from logwatch.cli.errors import status_line
from logwatch.cli.follow import follow_setup
from logwatch.cli.help import HelpCommand
from logwatch.cli.options import (
    CONFIG_OPTION,
    FORMAT_OPTION,
    GPUS_PER_NODE_OPTION,
    LAYOUT_OPTION,
    MAX_LINE_OPTION,
    NO_BUILTIN_OPTION,
    RULES_OPTION,
    VERBOSE_OPTION,
    Duration,
    logging_to_stderr,
)
from logwatch.sources.inotify import WATCHERS


@click.command(
    "tail",
    cls=HelpCommand,
    examples=(
        "logwatch tail train.log",
        "logwatch tail '/workspace/*.log' --format jsonl",
        "python train.py 2>&1 | logwatch tail -",
    ),
)
@click.argument("patterns", nargs=-1, required=True, metavar="PATH_OR_GLOB...")
@FORMAT_OPTION
@RULES_OPTION
@NO_BUILTIN_OPTION
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoints and lock [default: $XDG_STATE_HOME/logwatch or ~/.local/state/logwatch].",
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Print every alert of existing files' history [default: only those still firing at "
    "its end].",
)
@click.option(
    "--from-end", is_flag=True, help="Skip existing files' history: alert on new lines only."
)
@click.option(
    "--poll-interval",
    type=Duration(),
    default="1s",
    show_default=True,
    help="Safety poll: every file is stat()ed this often, whatever inotify says (missed events).",
)
@click.option(
    "--partial-flush",
    type=Duration(),
    default="5s",
    show_default=True,
    help="Evaluate a last line without newline once the file stopped growing this long.",
)
@MAX_LINE_OPTION
@LAYOUT_OPTION
@GPUS_PER_NODE_OPTION
@click.option(
    "--max-batch-delay",
    type=Duration(),
    default="5s",
    show_default=True,
    help="While lines keep arriving, wait up to this long between rounds to read them in "
    "batches: 1s while rounds are cheap, longer (up to this) when each costs over 2% of a "
    "core (many files); the first line after a quiet spell is read at once; 0s: no waiting.",
)
@click.option(
    "--warm-up/--no-warm-up",
    default=True,
    envvar="LOGWATCH_WARM_UP",
    show_envvar=True,
    help="At start, run the rules once over a few typical lines, so the first real alert does "
    "not wait on polars' one-time compiles (about 0.4 s of CPU at start, 5-10 ms less on the "
    "first alert).",
)
@click.option(
    "--watcher",
    type=click.Choice(list(WATCHERS)),
    default="auto",
    envvar="LOGWATCH_WATCHER",
    show_envvar=True,
    show_default=True,
    help="What hears file events: inotify read by logwatch itself (Linux; one thread, many "
    "events a read), watchdog's observer, or auto (inotify on Linux, watchdog elsewhere). "
    "Either way, files are also polled.",
)
@click.option(
    "--gpu",
    "gpu_mode",
    type=click.Choice(["auto", "required", "off"]),
    default=None,
    help="Read the GPUs through NVML: auto says why when it cannot, required exits 2 then "
    "[default: the config's [gpu] mode, else auto].",
)
@click.option(
    "--gpu-interval",
    type=Duration(),
    default=None,
    help="NVML sampling interval [default: the config's [gpu] interval, else 5s].",
)
@click.option(
    "--alertmanager",
    "alertmanager_urls",
    multiple=True,
    metavar="URL",
    help="Post alerts to this Alertmanager (every HA peer: repeat it) [default: [alertmanager] urls].",
)
@click.option(
    "--metrics",
    metavar="HOST:PORT",
    default=None,
    help="Serve Prometheus /metrics here, e.g. 127.0.0.1:9808 [default: [prometheus] listen].",
)
@click.option(
    "--metrics-textfile",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write logwatch.prom into this node-exporter textfile-collector folder.",
)
@click.option(
    "--exit-on",
    "exit_on",
    multiple=True,
    metavar="SEVERITY|RULE",
    help="Exit with status 3 once an alert of this severity or worse (info, warning, critical) "
    "or of this rule id fired and every sink took it (Slack: delivered or spooled); repeatable. "
    "A stop by signal still exits 0.",
)
@click.option(
    "--dry-run-actions",
    is_flag=True,
    help="Say on stderr what each [[action]] would run, and when, instead of running it.",
)
@CONFIG_OPTION
@VERBOSE_OPTION
def tail_cmd(
    patterns: tuple[str, ...],
    fmt: str,
    rule_paths: tuple[str, ...],
    no_builtin_rules: bool,
    state_dir: Path | None,
    from_beginning: bool,
    from_end: bool,
    poll_interval: float,
    partial_flush: float,
    max_line_bytes: int,
    layout: str | None,
    gpus_per_node: int | None,
    max_batch_delay: float,
    warm_up: bool,
    watcher: str,
    gpu_mode: str | None,
    gpu_interval: float | None,
    alertmanager_urls: tuple[str, ...],
    metrics: str | None,
    metrics_textfile: Path | None,
    exit_on: tuple[str, ...],
    dry_run_actions: bool,
    config_path: str | None,
    verbose: bool,
) -> None:
    """Follow live logs (quote globs: new matching files are picked up) and alert as lines come.

    At start, the history of the files that exist runs through the rules silently and only the
    alerts still firing at its end are printed (a NaN that recovered an hour ago is not);
    --from-beginning prints every alert of the history, --from-end none. A checkpoint in the
    state directory overrides these: tail resumes where it stopped."""
    from logwatch.cluster_config import with_cluster_options
    from logwatch.drivers.exit_on import exit_condition
    from logwatch.drivers.runner import run_tail
    from logwatch.drivers.startup import metrics_line, startup_lines
    from logwatch.metrics.exporter import start_exporter
    from logwatch.sinks.registry import open_sinks
    from logwatch.sinks.slack.silences import SilenceStore
    from logwatch.sinks.terminal import TerminalSink

    setup = follow_setup(
        patterns,
        rule_paths,
        no_builtin_rules,
        state_dir,
        from_beginning,
        from_end,
        poll_interval,
        partial_flush,
        max_line_bytes,
        gpu_mode,
        gpu_interval,
        config_path,
        adjust=lambda c: with_cluster_options(c, alertmanager_urls, metrics, metrics_textfile),
        max_batch_delay=max_batch_delay,
        layout=layout,
        gpus_per_node=gpus_per_node,
        warm_up=warm_up,
        watcher=watcher,
    )
    try:
        condition = exit_condition(exit_on, (spec.id for spec in setup.specs)) if exit_on else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--exit-on") from None
    if dry_run_actions and not setup.config.actions:
        raise click.UsageError("--dry-run-actions: the config has no [[action]] table")
    silences = SilenceStore(setup.state_dir, report=status_line)
    terminal = TerminalSink(sys.stdout, fmt=fmt, silences=silences)
    sinks = open_sinks(terminal, setup.config, setup.state_dir)
    startup = [
        *setup.notes,
        *startup_lines(patterns, setup.specs, setup.state_dir, setup.config),
        *setup.gpu_line,
    ]
    plugins: list[Any] = []
    if setup.config.actions:
        from logwatch.actions.pids import RunPids
        from logwatch.actions.sink import describe, note_listeners, open_action_sink
        from logwatch.sinks.base import TakesStopper

        pids = RunPids()
        plugins.append(pids)
        actions = open_action_sink(
            setup.config.actions,
            setup.state_dir,
            pids=lambda source, line: pids.pid(source),  # live: the last run start
            dry_run=dry_run_actions,
            listeners=note_listeners(sinks),  # Slack's thread reply, Alertmanager's note
        )
        for sink in sinks:  # a Slack "Stop run" button runs its action once, by name
            if isinstance(sink, TakesStopper):
                sink.set_stopper(actions.run_once)
        sinks.append(actions)
        startup += [describe(spec) for spec in setup.config.actions]
    exporter = start_exporter(setup.config, sinks, setup.gpu)
    if exporter is not None:
        startup.append(metrics_line(exporter.endpoint, exporter.textfile))
    with logging_to_stderr(verbose):
        code = run_tail(
            patterns,
            setup.specs,
            sinks,
            state_dir=setup.state_dir,
            options=setup.options,
            status=status_line,
            # the exporter counts last
            plugins=[*plugins, *(p for p in (setup.gpu, exporter) if p is not None)],
            startup=startup,
            exit_on=condition,
        )
    if code:
        sys.exit(code)
