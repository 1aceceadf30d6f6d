"""`logwatch report`: a post-mortem as one self-contained HTML file (and PNGs of its charts)."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any

import click

from logwatch.cli.errors import mark_finished, status_line, warn_data, warn_rule_error
from logwatch.cli.help import HelpCommand
from logwatch.cli.jobs import DASK_OPTION, JOBS_OPTION, replay_where, unread_line
from logwatch.cli.options import (
    CONFIG_OPTION,
    LAYOUT_OPTION,
    MAX_LINE_OPTION,
    NO_BUILTIN_OPTION,
    RULES_OPTION,
    SINCE_OPTION,
    SKEW_OPTION,
    UNTIL_OPTION,
    config_and_rules,
    fleet_skew,
    window,
)
from logwatch.drivers.replay import ReplayOptions, ReplayResult
from logwatch.sources.expand import expand_inputs, skipped_line
from logwatch.words import counted

if TYPE_CHECKING:
    from logwatch.report.build import ReplayAsk


@click.command(
    "report",
    cls=HelpCommand,
    examples=(
        "logwatch report train.log -o report.html",
        "logwatch report a.log b.log -o runs.html --png charts/",
        "logwatch report /logs/run-1234/ -o run.html --jobs 8  # every rank's log",
    ),
)
@click.argument("paths", nargs=-1, required=True)
@click.option("-o", "--output", required=True, metavar="FILE", help="The HTML file to write.")
@click.option(
    "--x",
    "x_axis",
    type=click.Choice(["step", "time"]),
    default=None,
    help="What the charts' x axis counts. Default: the training step when every file has "
    "step lines (runs and restarts overlay), else time, else each file's line numbers.",
)
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
@SKEW_OPTION
@LAYOUT_OPTION
@JOBS_OPTION
@DASK_OPTION
@CONFIG_OPTION
def report_cmd(
    paths: tuple[str, ...],
    output: str,
    x_axis: str | None,
    rule_paths: tuple[str, ...],
    no_builtin_rules: bool,
    since: str | None,
    until: str | None,
    png_dir: str | None,
    max_line_bytes: int,
    skew: str,
    layout: str | None,
    jobs: int | None,
    dask_address: str | None,
    config_path: str | None,
) -> None:
    """Write a post-mortem report: one self-contained HTML file with a header per file, plots
    with each run (a file, each `run start:` restart) its own series (NaN and Inf marked), and
    the alert table; for every rank's log of a run (a folder, a glob), the verdict, the ranks x
    time strip and the charts of the culprit's and the lowest rank's files. On a terminal,
    progress goes to stderr."""
    from logwatch.report.build import build_report
    from logwatch.report.fleet import by_path
    from logwatch.report.png import find_browser, write_pngs

    config, specs = config_and_rules(config_path, rule_paths, no_builtin_rules)
    lines_window = window(since, until)
    inputs = expand_inputs(paths)  # a folder (recursively) or a quoted glob: a fleet's logs
    skipped = skipped_line(inputs)
    if skipped is not None:
        click.echo(skipped, err=True)
    browser = find_browser() if png_dir is not None else None  # before the work, not after
    spread = dask_address is not None or (jobs or 1) > 1
    if spread and not by_path(inputs.files, layout):
        raise click.UsageError(
            "--jobs/--dask: the charts of files that are not one run's ranks need every line in "
            "this process; drop --jobs/--dask (a run's folder of rank logs uses them)"
        )
    if spread and config.actions:
        raise click.UsageError(
            "--jobs/--dask: the report lists what the config's [[action]] commands would have "
            "run, which needs every line in this process; drop --jobs/--dask"
        )
    with _Progress(enabled=sys.stderr.isatty(), files=len(inputs.files)) as progress:
        report = build_report(
            inputs.files,
            specs,
            options=ReplayOptions(
                max_line_bytes=max_line_bytes,
                layout=layout,
                skew_s=fleet_skew(skew).total_seconds(),
            ),
            window=lines_window,
            on_error=warn_rule_error,
            on_warning=warn_data,
            x=x_axis,
            progress=progress.read,
            on_stage=progress.stage,
            actions=config.actions,  # what they would have done: listed, never run
            replayer=_Where(jobs, dask_address),
        )
        progress.stage("writing " + output)
        size = report.write(output)
    click.echo(
        f"wrote {output} ({size / 1024:.0f} KiB: {counted(len(report.sources), 'file')}, "
        f"{counted(len(report.charts), 'chart')}, "
        f"{counted(len(report.result.events), 'alert event')})"
    )
    if png_dir is not None and browser is not None:
        pngs = write_pngs(report.charts, png_dir, browser)
        click.echo(f"wrote {counted(len(pngs), 'PNG file')} to {png_dir}")
    unread = unread_line(report.result, inputs.files)
    if unread is not None:
        status_line(unread)
        sys.exit(2)
    mark_finished()


class _Where:
    """A fleet report's replay where `replay` would run it: here, `--jobs N`, `--dask`."""

    def __init__(self, jobs: int | None, dask_address: str | None) -> None:
        self.jobs = jobs
        self.dask_address = dask_address

    def __call__(self, ask: ReplayAsk) -> ReplayResult:
        return replay_where(
            ask.paths,
            ask.rules,
            jobs=None if ask.on_frame is not None else self.jobs,  # the hook runs here (refused
            dask_address=self.dask_address,  # with --jobs N > 1 and --dask before the work)
            options=ask.options,
            window=ask.window,
            on_event=lambda _: None,
            in_process={"progress": ask.progress, "on_frame": ask.on_frame},
        )


BARS = 4
"""Up to this many files read get a bar each; more (a fleet's rank logs) share one bar that
counts them."""


class _Progress:
    """rich's progress on stderr while a report is made: a bar per file read (bytes, rate,
    time left), or one for all `files` past `BARS` (how many are read, and their bytes), then
    what is being done; nothing at all when stderr is not a terminal."""

    def __init__(self, *, enabled: bool, files: int = 1) -> None:
        self.enabled = enabled
        self.files = files
        self.bar: Any = None
        self.tasks: dict[str, Any] = {}
        self.stage_task: Any = None
        self.read_bytes: dict[str, int] = {}  # source -> its bytes read (past BARS files)
        self.read_total = 0
        self.all_task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.bar is not None:
            self.bar.stop()

    def read(self, source: str, done: int, total: int) -> None:
        """After each block of `source`."""
        if self.bar is None:
            return
        if self.files > BARS:
            self._read_all(source, done, total)
            return
        if source not in self.tasks:
            self.tasks[source] = self.bar.add_task(f"reading {source}", total=total or None)
        self.bar.update(self.tasks[source], completed=done)

    def _read_all(self, source: str, done: int, total: int) -> None:
        """One bar for every file: the files begun, the bytes read of them."""
        self.read_total += done - self.read_bytes.get(source, 0)
        self.read_bytes[source] = done
        what = f"reading {len(self.read_bytes)} of {counted(self.files, 'file')}"
        if self.all_task is None:
            self.all_task = self.bar.add_task(what, total=None)
        self.bar.update(self.all_task, description=what, completed=self.read_total)

    def stage(self, what: str) -> None:
        """A step after the reading (drawing the charts, writing the page)."""
        if self.bar is None:
            return
        if self.stage_task is None:
            self.stage_task = self.bar.add_task(what, total=None)
        self.bar.update(self.stage_task, description=what)
