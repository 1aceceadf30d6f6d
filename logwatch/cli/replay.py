"""`logwatch replay`: the rules over finished log files, a timeline of what went wrong."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from logwatch.alerts import AlertEvent, Severity
from logwatch.cli.errors import mark_finished, status_line, warn_data, warn_rule_error
from logwatch.cli.help import HelpCommand
from logwatch.cli.options import (
    CONFIG_OPTION,
    MAX_LINE_OPTION,
    NO_BUILTIN_OPTION,
    RULES_OPTION,
    SEVERITIES,
    SINCE_OPTION,
    STATE_DIR_OPTION,
    UNTIL_OPTION,
    VERBOSE_OPTION,
    config_and_rules,
    logging_to_stderr,
    state_dir_path,
    window,
)
from logwatch.cli.progress import ReplayProgress
from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.sinks.base import StreamSink
from logwatch.sinks.render import summary_lines
from logwatch.words import counted

# What only some runs use (Slack, Parquet export, the terminal sink's colours) is imported where
# it is used: every `logwatch replay` pays for each module loaded here before it reads a byte
# (tests/test_cli_startup.py lists what replay must not load).
if TYPE_CHECKING:
    from logwatch.drivers.export import FrameExport


@click.command(
    "replay",
    cls=HelpCommand,
    examples=(
        "logwatch replay train.log",
        "logwatch replay 'runs/*.log' --format jsonl > alerts.jsonl",
        "logwatch replay train.log --since 1400 --fail-on critical  # exit 1: one fired",
    ),
)
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "jsonl", "json"]),
    default="text",
    show_default=True,
    help="text: a timeline of alerts and a summary per file; jsonl: one JSON object per alert "
    "event; json: one JSON document (events and stats).",
)
@RULES_OPTION
@NO_BUILTIN_OPTION
@click.option(
    "--fail-on",
    type=SEVERITIES,
    default=None,
    help="Exit 1 when an alert of this severity or worse fired [default: never].",
)
@MAX_LINE_OPTION
@click.option(
    "--actions",
    "actions_mode",
    type=click.Choice(["dry-run"]),
    default=None,
    help="Say what the config's [[action]] commands would have run, and when (log time); "
    "replay never runs them.",
)
@click.option(
    "--notify", is_flag=True, help="Post one digest message to Slack ([slack] in the config)."
)
@click.option(
    "--export-metrics",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the metrics as OpenMetrics with the log's timestamps (for `promtool tsdb "
    "create-blocks-from openmetrics`).",
)
@CONFIG_OPTION
@STATE_DIR_OPTION
@VERBOSE_OPTION
@SINCE_OPTION
@UNTIL_OPTION
@click.option(
    "--export",
    "export_path",
    metavar="PATH",
    default=None,
    help="Write the parsed frames (logwatch.SCHEMA) as Parquet: one file, or one per source "
    "when PATH is a folder or ends with /.",
)
@click.option(
    "--export-events",
    "events_path",
    metavar="FILE",
    default=None,
    help="Write the alert events as Parquet (the JSONL fields).",
)
def replay_cmd(
    paths: tuple[str, ...],
    fmt: str,
    rule_paths: tuple[str, ...],
    no_builtin_rules: bool,
    fail_on: str | None,
    max_line_bytes: int,
    actions_mode: str | None,
    notify: bool,
    export_metrics: Path | None,
    config_path: str | None,
    state_dir: str | None,
    verbose: bool,
    since: str | None,
    until: str | None,
    export_path: str | None,
    events_path: str | None,
) -> None:
    """Run the rules over finished log files and print a timeline of what went wrong."""
    config, specs = config_and_rules(config_path, rule_paths, no_builtin_rules)
    lines_window = window(since, until)
    stream_fmt = "jsonl" if fmt == "json" else fmt
    sink = StreamSink(sys.stdout, fmt=stream_fmt, colour=_colour(fmt))
    export = _frame_export(export_path)
    progress = _Progress()
    timeline = _timeline() if export_metrics is not None else None
    pids = _run_pids(config, actions_mode)

    def on_event(event: AlertEvent) -> None:
        if fmt != "json":  # json: one document at the end
            sink.emit(event)
        if timeline is not None:
            timeline.add_event(event)

    try:
        result = replay(
            paths,
            specs,
            options=ReplayOptions(
                max_line_bytes=max_line_bytes, metrics=export is not None, stats=fmt != "jsonl"
            ),
            progress=progress,
            on_event=on_event,
            on_error=warn_rule_error,
            on_warning=warn_data,
            window=lines_window,
            on_frame=_frame_hooks(
                export,
                timeline.add_frame if timeline is not None else None,
                pids.observe if pids is not None else None,
            ),
        )
    except BaseException:
        with suppress(Exception):
            sink.close()  # the incident held: what was found before the stop is printed
        if export is not None:
            export.abort()
        raise
    finally:
        progress.close()
    sink.close()  # the last incident of the timeline
    if timeline is not None and export_metrics is not None:
        samples = timeline.write(export_metrics)
        status_line(f"{samples} metric samples written to {export_metrics} (OpenMetrics)")
    if export is not None:
        export.close()
    if events_path is not None:
        from logwatch.drivers.export import write_events

        write_events(result.events_frame(), events_path)
    planned = _planned(config, result.events, pids)
    if fmt == "json":
        document = result.to_json()
        if pids is not None:
            document["actions"] = [outcome.to_json() for outcome in planned]
        click.echo(json.dumps(document, allow_nan=False, indent=2))
    elif fmt == "jsonl":
        for outcome in planned:
            click.echo(json.dumps(outcome.to_json(), ensure_ascii=False))
    if fmt == "text":
        if not result.events:
            click.echo("no alerts")
        for outcome in planned:
            click.echo(outcome.message)
        click.echo("")
        for line in summary_lines(result.stats, result.events):
            click.echo(line)
    if notify:
        from logwatch.sinks.slack.sink import send_digest

        with logging_to_stderr(verbose):
            title = (
                f"logwatch replay: {counted(len(result.events), 'alert event')} in "
                f"{counted(len(paths), 'file')}"
            )
            if not send_digest(config, state_dir_path(state_dir), title, result.events):
                click.echo(
                    "logwatch: the Slack digest is not delivered yet; it stays spooled", err=True
                )
    mark_finished()
    if fail_on is not None and result.fired(Severity.parse(fail_on)):
        sys.exit(1)


def _run_pids(config: Any, actions_mode: str | None) -> Any:
    """The run-start tracker `--actions dry-run` fills `{pid}` from (None without it)."""
    if actions_mode is None:
        return None
    if not config.actions:
        raise click.UsageError(
            f"--actions dry-run: the config ({config.path or 'none found'}) has no [[action]] table"
        )
    from logwatch.actions.pids import RunPids

    return RunPids()


def _planned(config: Any, events: list[AlertEvent], pids: Any) -> list[Any]:
    """What the actions would have done for these events (`--actions dry-run`), else nothing."""
    if pids is None:
        return []
    import os

    from logwatch.actions.plan import plan_actions

    return plan_actions(config.actions, events, pids, dict(os.environ))


class _Progress:
    """A progress bar on stderr for large files, only when stderr is a terminal."""

    def __init__(self, min_bytes: int = 64 << 20) -> None:
        self.min_bytes = min_bytes
        # rich's bar: bytes read, throughput and time left (`logwatch.cli.progress`)
        self.bar = ReplayProgress(min_bytes=min_bytes)

    def __call__(self, source: str, done: int, total: int) -> None:
        self.bar(source, done, total)

    def close(self) -> None:
        self.bar.close()


def _colour(fmt: str) -> bool:
    """Whether the text timeline is coloured (stdout a terminal that wants it)."""
    if fmt != "text":
        return False
    from logwatch.sinks.terminal import wants_colour

    return wants_colour(sys.stdout)


def _frame_export(export_path: str | None) -> FrameExport | None:
    if export_path is None:
        return None
    from logwatch.drivers.export import FrameExport

    return FrameExport(export_path)


def _timeline() -> Any:
    from logwatch.metrics.openmetrics import MetricsTimeline

    return MetricsTimeline()


def _frame_hooks(*hooks: Callable[[Any], None] | None) -> Callable[[Any], None] | None:
    """One `on_frame` for replay from those given (the export, the metrics timeline)."""
    given = [hook for hook in hooks if hook is not None]
    if not given:
        return None

    def each(frame: Any) -> None:
        for hook in given:
            hook(frame)

    return each
