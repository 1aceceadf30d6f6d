"""The command line. The only module that imports click; commands stay thin."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from logwatch import __version__
from logwatch.alerts import AlertEvent, Severity
from logwatch.config import Config, config_rules, default_state_dir, find_config, load_config
from logwatch.drivers.replay import ReplayOptions, replay
from logwatch.drivers.window import Window, parse_bound
from logwatch.durations import parse_duration
from logwatch.errors import LogwatchError
from logwatch.redact import install_log_handler, redact, remove_log_handler, visible
from logwatch.rules.loader import RuleSpec, builtin_rules_dir, load_rules
from logwatch.sinks.base import StreamSink
from logwatch.sinks.render import summary_lines
from logwatch.sources.framing import DEFAULT_MAX_LINE_BYTES

# What only some commands use (Slack, silences, sinks, doctor, Parquet export, the terminal
# sink) is imported in those commands: every `logwatch replay` pays for each module loaded here
# before it reads a byte (tests/test_cli_startup.py lists what replay must not load).
if TYPE_CHECKING:
    from logwatch.drivers.export import FrameExport
    from logwatch.engine import DataWarning

SEVERITIES = click.Choice([s.label for s in Severity], case_sensitive=False)


def load_rule_specs(extra: Sequence[str], builtin: bool = True) -> list[RuleSpec]:
    """The built-in rule packs (unless disabled) followed by the user's."""
    paths = ([builtin_rules_dir()] if builtin else []) + [Path(p) for p in extra]
    return load_rules(paths)


def _warn_rule_error(rule: str, source: str, exc: Exception) -> None:
    _status_line(
        f"rule {rule!r} failed on {source} and is off for it: "
        f"{type(exc).__name__}: {exc} (report this with the log line that triggered it)"
    )


def _warn_data(warning: DataWarning) -> None:
    _status_line(str(warning))


class _Progress:
    """A progress bar on stderr for large files, only when stderr is a terminal."""

    def __init__(self, min_bytes: int = 64 << 20) -> None:
        self.min_bytes = min_bytes
        self.bar: Any = None
        self.source = ""
        self.done = 0

    def __call__(self, source: str, done: int, total: int) -> None:
        if total < self.min_bytes or not sys.stderr.isatty():
            return
        if source != self.source:
            self.close()
            self.bar = click.progressbar(length=total, label=source, file=sys.stderr)
            self.bar.__enter__()
            self.source, self.done = source, 0
        self.bar.update(done - self.done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


CONFIG_OPTION = click.option(
    "--config",
    "config_path",
    metavar="PATH",
    default=None,
    help="Config file (TOML) [default: $LOGWATCH_CONFIG, else ./logwatch.toml, else "
    "$XDG_CONFIG_HOME/logwatch/config.toml, when present].",
)
STATE_DIR_OPTION = click.option(
    "--state-dir",
    metavar="DIR",
    default=None,
    help="Where state lives (silences, Slack spool); default $XDG_STATE_HOME/logwatch.",
)
VERBOSE_OPTION = click.option(
    "--verbose", "-v", is_flag=True, help="Debug logging on stderr (secrets redacted)."
)
FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "jsonl"]),
    default="text",
    show_default=True,
    help="text: a timeline of alerts (replay adds a summary per file); jsonl: one JSON object "
    "per alert event.",
)
RULES_OPTION = click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    metavar="PATH",
    help="Add a rule pack (a .toml file or a folder of them); repeatable.",
)
NO_BUILTIN_OPTION = click.option(
    "--no-builtin-rules", is_flag=True, help="Use only the packs given with --rules."
)
MAX_LINE_OPTION = click.option(
    "--max-line-bytes",
    type=click.IntRange(min=256),
    default=DEFAULT_MAX_LINE_BYTES,
    show_default=True,
    help="Longer lines are truncated with a marker.",
)


def _config_and_rules(
    config_path: str | None, rule_paths: Sequence[str], no_builtin_rules: bool
) -> tuple[Config, list[RuleSpec]]:
    """The config (given, ./logwatch.toml, or none) and the rule packs it and the options name."""
    config = load_config(find_config(config_path))
    if config.path is None:
        specs = load_rule_specs(rule_paths, builtin=not no_builtin_rules)
    else:
        config = replace(config, builtin_rules=config.builtin_rules and not no_builtin_rules)
        specs = config_rules(config, rule_paths)
    for spec in specs:
        if spec.replaces is not None:
            _status_line(f"{spec.origin}: rule {spec.id!r} replaces the one at {spec.replaces}")
    return config, specs


def _state_dir(option: str | None) -> Path:
    return Path(option) if option else default_state_dir()


@contextmanager
def _logging(verbose: bool) -> Iterator[None]:
    """Route logging (slack-sdk's too) to stderr through the redacting filter."""
    handler = install_log_handler(sys.stderr, verbose=verbose)
    try:
        yield
    finally:
        remove_log_handler(handler)


class UserError(click.ClickException):
    """A LogwatchError as click shows it: `Error: <one line>` and exit code 2."""

    exit_code = 2


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LogwatchError as exc:
            raise UserError(redact(str(exc))) from None
        except BrokenPipeError:
            sys.stderr.close()  # `logwatch replay ... | head`: the reader left, nothing to say
            sys.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="logwatch")
def cli() -> None:
    """Watch ML training runs through their logs; alert fast and once when a run goes wrong."""


SINCE_OPTION = click.option(
    "--since",
    metavar="T",
    default=None,
    help="Only the lines from this step (1400) or time ('2026-11-28 14:05') on.",
)
UNTIL_OPTION = click.option(
    "--until", metavar="T", default=None, help="Only the lines up to this step or time."
)


def _window(since: str | None, until: str | None) -> Window | None:
    if since is None and until is None:
        return None
    return Window(
        None if since is None else parse_bound(since, "--since"),
        None if until is None else parse_bound(until, "--until"),
    )


@cli.command("replay")
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
    help="Exit 1 when an alert of this severity or worse fired.",
)
@MAX_LINE_OPTION
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
    config, specs = _config_and_rules(config_path, rule_paths, no_builtin_rules)
    window = _window(since, until)
    stream_fmt = "jsonl" if fmt == "json" else fmt
    sink = StreamSink(sys.stdout, fmt=stream_fmt, colour=_colour(fmt))
    export = _frame_export(export_path)
    progress = _Progress()
    timeline = _timeline() if export_metrics is not None else None

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
            on_error=_warn_rule_error,
            on_warning=_warn_data,
            window=window,
            on_frame=_frame_hooks(export, timeline.add_frame if timeline is not None else None),
        )
    except BaseException:
        if export is not None:
            export.abort()
        raise
    finally:
        progress.close()
    if timeline is not None and export_metrics is not None:
        samples = timeline.write(export_metrics)
        _status_line(f"{samples} metric samples written to {export_metrics} (OpenMetrics)")
    if export is not None:
        export.close()
    if events_path is not None:
        from logwatch.drivers.export import write_events

        write_events(result.events_frame(), events_path)
    if fmt == "json":
        click.echo(json.dumps(result.to_json(), allow_nan=False, indent=2))
    if fmt == "text":
        if not result.events:
            click.echo("no alerts")
        click.echo("")
        for line in summary_lines(result.stats, result.events):
            click.echo(line)
    if notify:
        from logwatch.sinks.slack.sink import send_digest

        with _logging(verbose):
            title = f"logwatch replay: {len(result.events)} alert events in {len(paths)} file(s)"
            if not send_digest(config, _state_dir(state_dir), title, result.events):
                click.echo(
                    "logwatch: the Slack digest is not delivered yet; it stays spooled", err=True
                )
    _finished.append(True)
    if fail_on is not None:
        threshold = Severity.parse(fail_on)
        if any(e.severity >= threshold and e.status == "firing" for e in result.events):
            sys.exit(1)


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


@cli.command("report")
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", required=True, metavar="FILE", help="The HTML file to write.")
@RULES_OPTION
@NO_BUILTIN_OPTION
@SINCE_OPTION
@UNTIL_OPTION
@click.option(
    "--png",
    "png_dir",
    metavar="DIR",
    default=None,
    help="Also write each chart as a PNG (needs Chromium).",
)
@MAX_LINE_OPTION
@CONFIG_OPTION
def report_cmd(
    paths: tuple[str, ...],
    output: str,
    rule_paths: tuple[str, ...],
    no_builtin_rules: bool,
    since: str | None,
    until: str | None,
    png_dir: str | None,
    max_line_bytes: int,
    config_path: str | None,
) -> None:
    """Write a post-mortem report: one self-contained HTML file with a header per run, plots
    (NaN and Inf marked), and the alert table."""
    from logwatch.report.build import build_report
    from logwatch.report.png import find_browser, write_pngs

    _, specs = _config_and_rules(config_path, rule_paths, no_builtin_rules)
    window = _window(since, until)
    browser = find_browser() if png_dir is not None else None  # before the work, not after
    report = build_report(
        list(paths),
        specs,
        options=ReplayOptions(max_line_bytes=max_line_bytes),
        window=window,
        on_error=_warn_rule_error,
        on_warning=_warn_data,
    )
    size = report.write(output)
    click.echo(
        f"wrote {output} ({size / 1024:.0f} KiB: {len(report.sources)} file(s), "
        f"{len(report.charts)} charts, {len(report.result.events)} alert events)"
    )
    if png_dir is not None and browser is not None:
        pngs = write_pngs(report.charts, png_dir, browser)
        click.echo(f"wrote {len(pngs)} PNG files to {png_dir}")


def _text_or_json(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--format text|json` (default text) for commands that print one document."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help=help_text,
    )


@cli.command("gpu")
@_text_or_json("text: the NVML status line and a table; json: one JSON object.")
def gpu_cmd(fmt: str) -> None:
    """Show one snapshot of this host's GPUs through NVML, the NVML status first (exit 1 when
    NVML does not work here)."""

    from logwatch.gpu.nvml import NvmlReader
    from logwatch.gpu.report import snapshot_json, snapshot_lines
    from logwatch.gpu.sampler import take_snapshot

    snapshot = take_snapshot(NvmlReader())
    if fmt == "json":
        click.echo(json.dumps(snapshot_json(snapshot), indent=2))
    else:
        for line in snapshot_lines(snapshot):
            click.echo(line)
    if not snapshot.status.available:
        sys.exit(1)


class _Duration(click.ParamType):  # type: ignore[type-arg]  # generic since click 8.5; subscripting fails on older click at runtime
    """A duration option ("500ms", "1s", "10m") as seconds."""

    name = "duration"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if seconds <= 0:
            self.fail(f"{value!r} must be longer than zero", param, ctx)
        return seconds


@cli.command("tail")
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
@click.option("--from-beginning", is_flag=True, help="Emit every alert of existing files' history.")
@click.option("--from-end", is_flag=True, help="Skip existing files' history.")
@click.option(
    "--poll-interval",
    type=_Duration(),
    default="1s",
    show_default=True,
    help="Safety poll: every file is stat()ed this often, whatever inotify says (missed events).",
)
@click.option(
    "--partial-flush",
    type=_Duration(),
    default="5s",
    show_default=True,
    help="Evaluate a last line without newline once the file stopped growing this long.",
)
@MAX_LINE_OPTION
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
    type=_Duration(),
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
    gpu_mode: str | None,
    gpu_interval: float | None,
    alertmanager_urls: tuple[str, ...],
    metrics: str | None,
    metrics_textfile: Path | None,
    config_path: str | None,
    verbose: bool,
) -> None:
    """Follow live logs (quote globs: new matching files are picked up) and alert as lines come."""
    from logwatch.cluster_config import with_cluster_options
    from logwatch.drivers.runner import run_tail
    from logwatch.drivers.startup import metrics_line, startup_lines
    from logwatch.sinks.registry import open_sinks
    from logwatch.sinks.slack.silences import SilenceStore
    from logwatch.sinks.terminal import TerminalSink

    setup = _follow_setup(
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
    )
    config, specs, state_dir, options, gpu, gpu_line = (
        setup.config,
        setup.specs,
        setup.state_dir,
        setup.options,
        setup.gpu,
        setup.gpu_line,
    )
    status = _status_line
    terminal = TerminalSink(sys.stdout, fmt=fmt, silences=SilenceStore(state_dir, report=status))
    sinks = open_sinks(terminal, config, state_dir)
    startup = [*startup_lines(patterns, specs, state_dir, config), *gpu_line]
    exporter = start_exporter(config, sinks, gpu)
    if exporter is not None:
        startup.append(metrics_line(exporter.endpoint, exporter.textfile))
    with _logging(verbose):
        run_tail(
            patterns,
            specs,
            sinks,
            state_dir=state_dir,
            options=options,
            status=status,
            plugins=[p for p in (gpu, exporter) if p is not None],  # the exporter counts last
            startup=startup,
        )


@dataclass(frozen=True, slots=True)
class _Follow:
    """What `tail` and `top` set up from `tail`'s options."""

    config: Config
    specs: list[RuleSpec]
    state_dir: Path
    options: Any  # TailOptions (imported with the command)
    gpu: Any  # GpuLink | None
    gpu_line: list[str]


def _follow_setup(
    patterns: Sequence[str],
    rule_paths: Sequence[str],
    no_builtin_rules: bool,
    state_dir: Path | None,
    from_beginning: bool,
    from_end: bool,
    poll_interval: float,
    partial_flush: float,
    max_line_bytes: int,
    gpu_mode: str | None,
    gpu_interval: float | None,
    config_path: str | None,
    *,
    adjust: Callable[[Config], Config] = lambda config: config,
) -> _Follow:
    """Config, rules, a secured state directory, tail options and the GPU side, from `tail`'s
    option values (the same checks and errors, in the same order); `adjust` applies options to
    the config before anything starts (tail's --alertmanager / --metrics)."""
    from logwatch.drivers.runner import check_patterns
    from logwatch.drivers.statesafe import secure_state_dir
    from logwatch.drivers.tail import StartMode, TailOptions
    from logwatch.sources.follow import FollowOptions

    if from_beginning and from_end:
        raise click.UsageError("--from-beginning and --from-end exclude each other; pick one")
    config, specs = _config_and_rules(config_path, rule_paths, no_builtin_rules)
    config = adjust(config)
    state_dir = state_dir or default_state_dir()
    secure_state_dir(state_dir)  # before the Slack sink reads silences and its spool there
    start = (
        StartMode.BEGINNING if from_beginning else StartMode.END if from_end else StartMode.CATCH_UP
    )
    options = TailOptions(
        start=start,
        poll_interval_s=poll_interval,
        follow=FollowOptions(partial_flush_s=partial_flush, max_line_bytes=max_line_bytes),
    )
    check_patterns(patterns)
    gpu_line: list[str] = []  # said last in the startup block, once the sinks are open too
    gpu = start_gpu_link(
        gpu_mode or config.gpu.mode,
        gpu_interval if gpu_interval is not None else config.gpu.interval_s,
        specs,
        gpu_line.append,
    )
    return _Follow(config, specs, state_dir, options, gpu, gpu_line)


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
)
"""`tail`'s parameters that `top` takes as they are (what to follow, rules, state, GPUs)."""


@cli.command("top", params=[p for p in tail_cmd.params if p.name in TOP_SHARED])
@click.option(
    "--interval",
    type=_Duration(),
    default="1s",
    show_default=True,
    help="How often ages refresh (and, piped, how often a status line per source is printed).",
)
def top_cmd(patterns: tuple[str, ...], interval: float, **follow: Any) -> None:
    """A live view of every followed run (step, loss, stalls, alerts, GPUs); piped, one status
    line per source every interval. Same files, rules and checkpoints as `tail`."""
    from logwatch.drivers.startup import sinks_line, watching_line
    from logwatch.redact import install_log_handler
    from logwatch.sinks.registry import open_sinks
    from logwatch.top.app import Notes, TopOptions, run_top
    from logwatch.top.plugin import TopPlugin

    setup = _follow_setup(patterns, **follow)
    notes = Notes(sys.stderr)
    for line in setup.gpu_line:
        notes.say(visible(line))
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
        )
    finally:
        remove_log_handler(handler)


@cli.group("silence")
def silence_group() -> None:
    """Mute alerts for a while: add, list, expire (a running tail picks changes up)."""


@silence_group.command("add")
@click.argument("rule")
@click.option(
    "--source", default="*", show_default=True, help="Glob of sources (log paths) to mute."
)
@click.option("--for", "duration", required=True, help="How long, e.g. 30m, 2h, 1d.")
@click.option("--comment", required=True, help="Why (shown in `silence list`).")
@STATE_DIR_OPTION
@CONFIG_OPTION
def silence_add(
    rule: str,
    source: str,
    duration: str,
    comment: str,
    state_dir: str | None,
    config_path: str | None,
) -> None:
    """Silence RULE (a rule id or glob, matching a built-in or configured rule) on matching
    sources."""
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--for") from None
    from logwatch.gpu.sampler import GPU_ERROR, GPU_HUNG, GPU_UNAVAILABLE
    from logwatch.sinks.slack.silences import SilenceStore, check_rule

    _, specs = _config_and_rules(config_path, (), False)
    check_rule(rule, [spec.id for spec in specs] + [GPU_UNAVAILABLE, GPU_HUNG, GPU_ERROR])
    silence = SilenceStore(_state_dir(state_dir)).add(
        rule, source, seconds, comment, datetime.now()
    )
    click.echo(f"{silence.id}  silenced {rule} on {source} until {silence.ends:%Y-%m-%d %H:%M:%S}")


@silence_group.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also list expired silences.")
@STATE_DIR_OPTION
def silence_list(show_all: bool, state_dir: str | None) -> None:
    """List active silences."""
    from logwatch.sinks.slack.silences import SilenceStore

    now = datetime.now()
    shown = [s for s in SilenceStore(_state_dir(state_dir)).all() if show_all or s.active(now)]
    for s in shown:
        state = "active " if s.active(now) else "expired"
        click.echo(
            f"{s.id}  {state}  {s.rule}  {s.source}  until {s.ends:%Y-%m-%d %H:%M:%S}  {s.comment}"
        )
    if not shown:
        click.echo("no active silences")


@silence_group.command("expire")
@click.argument("silence_id")
@STATE_DIR_OPTION
def silence_expire(silence_id: str, state_dir: str | None) -> None:
    """End a silence now."""
    from logwatch.sinks.slack.silences import SilenceStore

    silence = SilenceStore(_state_dir(state_dir)).expire(silence_id, datetime.now())
    click.echo(f"{silence.id}  expired ({silence.rule} on {silence.source})")


@cli.command("doctor")
@click.argument("globs", nargs=-1)
@CONFIG_OPTION
@VERBOSE_OPTION
def doctor_cmd(globs: tuple[str, ...], config_path: str | None, verbose: bool) -> None:
    """Check config, rule packs, Slack token and channel, NVML, and that GLOBs match readable logs."""
    from logwatch.doctor import run_doctor

    with _logging(verbose):
        checks = run_doctor(config_path, globs)
    for check in checks:
        click.echo(check.line())
    if any(not c.ok and c.required for c in checks):
        sys.exit(1)


@cli.group("rules")
def rules_group() -> None:
    """List the rules logwatch loads, or check rule packs."""


@rules_group.command("list")
@RULES_OPTION
@NO_BUILTIN_OPTION
@_text_or_json("text: an aligned table; json: a JSON array of objects.")
@CONFIG_OPTION
def rules_list(
    rule_paths: tuple[str, ...], no_builtin_rules: bool, fmt: str, config_path: str | None
) -> None:
    """List every loaded (enabled) rule: id, type, severity, where it is defined, summary."""
    import json

    from logwatch.rules.catalog import rule_rows, rule_table

    _, specs = _config_and_rules(config_path, rule_paths, no_builtin_rules)
    rows = rule_rows(specs)
    if fmt == "json":
        click.echo(json.dumps([row.as_json() for row in rows], indent=2))
    else:
        for line in rule_table(rows):
            click.echo(line)


@rules_group.command("check")
@click.argument("packs", nargs=-1, required=True, metavar="PACK...")
def rules_check(packs: tuple[str, ...]) -> None:
    """Validate rule packs (files or folders): `N rules OK`, else one `file:line: problem` line
    per problem and exit 2."""
    from logwatch.rules.catalog import check_packs

    result = check_packs(Path(p) for p in packs)
    for problem in result.problems:
        click.echo(redact(problem))
    if result.problems:
        sys.exit(2)
    click.echo(f"{result.rules} rules OK")  # the contract's wording, for scripts: even "1 rules OK"


@cli.command("test")
@click.argument("files", nargs=-1, required=True, metavar="TESTS.toml...")
@click.option(
    "--junit",
    "junit_path",
    metavar="FILE",
    default=None,
    help="Also write the results as JUnit XML to FILE (for CI).",
)
def test_cmd(files: tuple[str, ...], junit_path: str | None) -> None:
    """Run rule tests: replay each test's input log and compare the alerts with the ones it
    expects (exit 0 all pass, 1 a test failed, 2 a broken test file)."""
    from logwatch.ruletest import load_test_files, report_lines, run_test_files, write_junit

    results = run_test_files(load_test_files([Path(f) for f in files]))
    for line in report_lines(results):
        click.echo(line)
    if junit_path is not None:
        write_junit(Path(junit_path), results)
    if not all(result.passed for result in results):
        sys.exit(1)


def _status_line(message: str) -> None:
    # file names in it are the user's: controls in them must not reach the terminal raw
    click.echo(f"logwatch: {visible(message)}", err=True)


def start_gpu_link(
    mode: str, interval_s: float, specs: Sequence[RuleSpec], status: Callable[[str], None]
) -> Any:
    """The GPU side for `tail` per the settings: NVML status on stderr, None when off."""
    from logwatch.gpu.link import GpuLink
    from logwatch.gpu.model import GpuSettings
    from logwatch.gpu.nvml import NvmlReader
    from logwatch.gpu.sampler import start_gpu

    try:
        settings = GpuSettings.parse(mode, f"{interval_s}s")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu / --gpu-interval") from None
    started = start_gpu(settings, NvmlReader())
    status(
        f"GPUs: {started.status.line()}"
        if started.status
        else "GPUs: off (--gpu off or [gpu] mode)"
    )
    if settings.mode == "off":
        return None
    return GpuLink(started, specs)


def start_exporter(config: Config, sinks: Sequence[Any], gpu: Any) -> Any:
    """The Prometheus exporter the config and options ask for (None when neither does); when
    it cannot start, the sinks and the GPU side are closed before the error goes up."""
    if config.prometheus is None:
        return None
    from logwatch.hostinfo import environment_run
    from logwatch.metrics.exporter import exporter_for
    from logwatch.sinks.registry import sink_backlogs

    try:
        return exporter_for(
            config.prometheus.listen,
            config.prometheus.textfile_dir,
            backlogs=sink_backlogs(sinks, config),
            gpu=gpu,
            export_gpu=config.gpu.export,
            env_run=environment_run(),
        )
    except BaseException:
        for sink in sinks:
            sink.close()
        if gpu is not None:
            gpu.close()
        raise


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: typed errors become one line on stderr and exit code 2."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="logwatch")


_finished: list[bool] = []
"""Set by a batch command (`replay`) once its work is done and its output written."""


def run() -> None:
    """The `logwatch` command (and `python -m logwatch`): `main`, but a finished `replay` ends
    its process without the interpreter's teardown, which spends about 50 ms freeing polars'
    modules (2 % of a 740 MB replay). Nothing is left to run by then: its threads are joined,
    its files closed, and its output is flushed here (a failed flush exits as usual)."""
    _finished.clear()
    try:
        main()
    except SystemExit as done:
        code = done.code
        if _finished and (code is None or isinstance(code, int)):
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError):
                raise done from None
            os._exit(code or 0)
        raise


if __name__ == "__main__":
    run()
