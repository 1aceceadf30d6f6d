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
from logwatch.cli.errors import mark_finished, status_line
from logwatch.cli.help import HelpCommand
from logwatch.cli.jobs import DASK_OPTION, JOBS_OPTION, replay_where, unread_line
from logwatch.cli.options import (
    CONFIG_OPTION,
    GPUS_PER_NODE_OPTION,
    LAYOUT_OPTION,
    MAX_LINE_OPTION,
    NO_BUILTIN_OPTION,
    RULES_OPTION,
    SEVERITIES,
    SINCE_OPTION,
    SKEW_OPTION,
    STATE_DIR_OPTION,
    UNTIL_OPTION,
    VERBOSE_OPTION,
    config_and_rules,
    fleet_skew,
    logging_to_stderr,
    state_dir_path,
    window,
)
from logwatch.cli.progress import ReplayProgress
from logwatch.drivers.replay import ReplayOptions, ReplayResult
from logwatch.drivers.verdict import Fleet
from logwatch.fleet.render import fleet_json, host_rows
from logwatch.fleet.render import timeline as fleet_timeline
from logwatch.sinks.base import StreamSink
from logwatch.sinks.render import summary_lines
from logwatch.sources.expand import expand_inputs, skipped_line
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
@SKEW_OPTION
@LAYOUT_OPTION
@GPUS_PER_NODE_OPTION
@click.option(
    "--export-events",
    "events_path",
    metavar="FILE",
    default=None,
    help="Write the alert events as Parquet (the JSONL fields).",
)
@JOBS_OPTION
@DASK_OPTION
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
    skew: str,
    layout: str | None,
    gpus_per_node: int | None,
    jobs: int | None,
    dask_address: str | None,
) -> None:
    """Run the rules over finished log files (or every log under a folder, or a quoted glob)
    and print a timeline of what went wrong; for many ranks, the first failing one first."""
    config, specs = config_and_rules(config_path, rule_paths, no_builtin_rules)
    lines_window = window(since, until)
    skew_window = fleet_skew(skew)
    inputs = expand_inputs(paths)
    skipped = skipped_line(inputs)
    if skipped is not None:
        click.echo(skipped, err=True)
    files = inputs.files
    stream_fmt = "jsonl" if fmt == "json" else fmt
    sink = StreamSink(sys.stdout, fmt=stream_fmt, colour=_colour(fmt))
    export = _frame_export(export_path)
    progress = _Progress()
    timeline = _timeline() if export_metrics is not None else None
    pids = _run_pids(config, actions_mode)
    # The verdict comes first: text waits for the end; JSONL streams only a single file.
    streamed = fmt == "jsonl" and len(files) == 1
    found: list[AlertEvent] = []  # what is not streamed, for a stop before the end

    def on_event(event: AlertEvent) -> None:
        if streamed:
            sink.emit(event)
        elif fmt != "json":
            found.append(event)
        if timeline is not None:
            timeline.add_event(event)

    on_frame = _frame_hooks(
        export,
        timeline.add_frame if timeline is not None else None,
        pids.observe if pids is not None else None,
    )
    try:
        result = replay_where(
            files,
            specs,
            jobs=jobs,
            dask_address=dask_address,
            options=ReplayOptions(
                max_line_bytes=max_line_bytes,
                metrics=export is not None,
                stats=fmt != "jsonl",
                layout=layout,
                skew_s=skew_window.total_seconds(),
                gpus_per_node=gpus_per_node,
            ),
            on_event=on_event,
            window=lines_window,
            in_process={"progress": progress, "on_frame": on_frame},
        )
    except BaseException:
        with suppress(Exception):
            for event in found:  # what was found before the stop is printed
                sink.emit(event)
            sink.close()
        if export is not None:
            export.abort()
        raise
    finally:
        progress.close()
    fleet = result.fleet
    verdicts = fleet.verdicts if fleet is not None else []
    # the verdict first (a single file's JSONL streamed it last, as it came)
    in_order = [*verdicts, *(e for e in result.events if all(e is not v for v in verdicts))]
    if fmt == "jsonl" and not streamed:
        for event in in_order:
            sink.emit(event)
    sink.close()
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
        if fleet is not None and fleet.failed:
            document["events"] = [e.to_json() for e in in_order]
            document["fleet"] = fleet_json(fleet)
        if pids is not None:
            document["actions"] = [outcome.to_json() for outcome in planned]
        click.echo(json.dumps(document, allow_nan=False, indent=2))
    elif fmt == "jsonl":
        for outcome in planned:
            click.echo(json.dumps(outcome.to_json(), ensure_ascii=False))
    if fmt == "text":
        _print_text(result, fleet, sink, [outcome.message for outcome in planned])
    if notify:
        from logwatch.sinks.slack.sink import send_digest

        with logging_to_stderr(verbose):
            title = (
                f"logwatch replay: {counted(len(result.events), 'alert event')} in "
                f"{counted(len(files), 'file')}"
            )
            if not send_digest(config, state_dir_path(state_dir), title, in_order):
                click.echo(
                    "logwatch: the Slack digest is not delivered yet; it stays spooled", err=True
                )
    unread = unread_line(result, files)
    if unread is not None:
        status_line(unread)
        sys.exit(2)
    mark_finished()
    if fail_on is not None and result.fired(Severity.parse(fail_on)):
        sys.exit(1)


def _print_text(
    result: ReplayResult, fleet: Fleet | None, sink: StreamSink, planned: list[str]
) -> None:
    """The timeline, what the actions would have done, and the summary: for a fleet, the
    verdict first, cascades folded, a row per host; else each incident in file order and a
    summary per file."""
    if fleet is not None and fleet.failed:
        for line in fleet_timeline(result, fleet, colour=sink.colour):
            click.echo(line)
        for message in planned:
            click.echo(message)
        click.echo("")
        for line in host_rows(result, fleet):
            click.echo(line)
        return
    for event in result.events:
        sink.emit(event)
    sink.close()
    if not result.events:
        click.echo("no alerts")
    for message in planned:
        click.echo(message)
    click.echo("")
    for line in summary_lines(result.stats, result.events):
        click.echo(line)


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
