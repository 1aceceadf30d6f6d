"""The command line. The only module that imports click; commands stay thin."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from logwatch import __version__
from logwatch.alerts import Severity
from logwatch.durations import parse_duration
from logwatch.errors import LogwatchError
from logwatch.reader import DEFAULT_MAX_LINE_BYTES
from logwatch.render import summary_lines
from logwatch.replay import ReplayOptions, replay
from logwatch.ruleset import RuleSpec, builtin_rules_dir, load_rules
from logwatch.sinks import StreamSink

SEVERITIES = click.Choice([s.label for s in Severity], case_sensitive=False)


def load_rule_specs(extra: Sequence[str], builtin: bool = True) -> list[RuleSpec]:
    """The built-in rule packs (unless disabled) followed by the user's."""
    paths = ([builtin_rules_dir()] if builtin else []) + [Path(p) for p in extra]
    return load_rules(paths)


def _warn_rule_error(rule: str, source: str, exc: Exception) -> None:
    click.echo(
        f"logwatch: rule {rule!r} failed on {source} and is off for it: "
        f"{type(exc).__name__}: {exc} (report this with the log line that triggered it)",
        err=True,
    )


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


class UserError(click.ClickException):
    """A LogwatchError as click shows it: `Error: <one line>` and exit code 2."""

    exit_code = 2


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LogwatchError as exc:
            raise UserError(str(exc)) from None
        except BrokenPipeError:
            sys.stderr.close()  # `logwatch replay ... | head`: the reader left, nothing to say
            sys.exit(0)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="logwatch")
def cli() -> None:
    """Watch ML training runs through their logs; alert fast and once when a run goes wrong."""


@cli.command("replay")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "jsonl"]),
    default="text",
    show_default=True,
    help="text: a timeline and a summary per file; jsonl: one JSON object per alert event.",
)
@click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    metavar="PATH",
    help="Add a rule pack (a .toml file or a folder of them); repeatable.",
)
@click.option("--no-builtin-rules", is_flag=True, help="Use only the packs given with --rules.")
@click.option(
    "--fail-on",
    type=SEVERITIES,
    default=None,
    help="Exit 1 when an alert of this severity or worse fired.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=256),
    default=DEFAULT_MAX_LINE_BYTES,
    show_default=True,
    help="Longer lines are truncated with a marker.",
)
def replay_cmd(
    paths: tuple[str, ...],
    fmt: str,
    rule_paths: tuple[str, ...],
    no_builtin_rules: bool,
    fail_on: str | None,
    max_line_bytes: int,
) -> None:
    """Run the rules over finished log files and print a timeline of what went wrong."""
    specs = load_rule_specs(rule_paths, builtin=not no_builtin_rules)
    sink = StreamSink(sys.stdout, fmt=fmt, colour=fmt == "text" and sys.stdout.isatty())
    progress = _Progress()
    try:
        result = replay(
            paths,
            specs,
            options=ReplayOptions(max_line_bytes=max_line_bytes),
            progress=progress,
            on_event=sink.emit,
            on_error=_warn_rule_error,
        )
    finally:
        progress.close()
    if fmt == "text":
        if not result.events:
            click.echo("no alerts")
        click.echo("")
        for line in summary_lines(result.stats):
            click.echo(line)
    if fail_on is not None:
        threshold = Severity.parse(fail_on)
        if any(e.severity >= threshold and e.status == "firing" for e in result.events):
            sys.exit(1)


@cli.command("gpu")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: the NVML status line and a table; json: one JSON object.",
)
def gpu_cmd(fmt: str) -> None:
    """Show one snapshot of this host's GPUs through NVML, the NVML status first (exit 1 when
    NVML does not work here)."""
    import json

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
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "jsonl"]),
    default="text",
    show_default=True,
    help="text: the replay timeline; jsonl: one JSON object per alert event.",
)
@click.option("--rules", "rule_paths", multiple=True, metavar="PATH", help="Add a rule pack.")
@click.option("--no-builtin-rules", is_flag=True, help="Use only the packs given with --rules.")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Checkpoints and lock [default: $XDG_STATE_HOME/logwatch or ~/.local/state/logwatch].",
)
@click.option("--from-beginning", is_flag=True, help="Emit every alert of existing files' history.")
@click.option("--from-end", is_flag=True, help="Skip existing files' history.")
@click.option("--poll-interval", type=_Duration(), default="1s", show_default=True)
@click.option(
    "--partial-flush",
    type=_Duration(),
    default="5s",
    show_default=True,
    help="Evaluate a last line without newline once the file stopped growing this long.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=256),
    default=DEFAULT_MAX_LINE_BYTES,
    show_default=True,
    help="Longer lines are truncated with a marker.",
)
@click.option(
    "--gpu",
    "gpu_mode",
    type=click.Choice(["auto", "required", "off"]),
    default="auto",
    show_default=True,
    help="Read the GPUs through NVML: auto says why when it cannot; required exits 2 then.",
)
@click.option("--gpu-interval", default="5s", show_default=True, help="NVML sampling interval.")
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
    gpu_mode: str,
    gpu_interval: str,
) -> None:
    """Follow live logs (quote globs: new matching files are picked up) and alert as lines come."""
    from logwatch.checkpoint import default_state_dir
    from logwatch.follow import FollowOptions
    from logwatch.tail import TailOptions, run_tail

    if from_beginning and from_end:
        raise click.UsageError("--from-beginning and --from-end exclude each other; pick one")
    specs = load_rule_specs(rule_paths, builtin=not no_builtin_rules)
    sink = StreamSink(sys.stdout, fmt=fmt, colour=fmt == "text" and sys.stdout.isatty())
    start = "beginning" if from_beginning else "end" if from_end else "catch-up"
    options = TailOptions(
        start=start,
        poll_interval_s=poll_interval,
        follow=FollowOptions(partial_flush_s=partial_flush, max_line_bytes=max_line_bytes),
    )
    status = _status_line
    gpu = start_gpu_link(gpu_mode, gpu_interval, specs, status)
    run_tail(
        patterns,
        specs,
        [sink],
        state_dir=state_dir or default_state_dir(),
        options=options,
        status=status,
        gpu=gpu,
    )


def _status_line(message: str) -> None:
    click.echo(f"logwatch: {message}", err=True)


def start_gpu_link(
    mode: str, interval: str, specs: Sequence[RuleSpec], status: Callable[[str], None]
) -> Any:
    """The GPU side for `tail` per the settings: NVML status on stderr, None when off."""
    from logwatch.gpu.model import GpuSettings
    from logwatch.gpu.nvml import NvmlReader
    from logwatch.gpu.sampler import start_gpu
    from logwatch.live import GpuLink

    try:
        settings = GpuSettings.parse(mode, interval)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--gpu / --gpu-interval") from None
    started = start_gpu(settings, NvmlReader())
    if started.status is not None:
        status(started.status.line())
    if settings.mode == "off":
        return None
    return GpuLink(started, specs)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: typed errors become one line on stderr and exit code 2."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="logwatch")


if __name__ == "__main__":
    main()
