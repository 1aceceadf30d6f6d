"""`logwatch report`: a post-mortem as one self-contained HTML file (and PNGs of its charts)."""

from __future__ import annotations

import click

from logwatch.cli.errors import warn_data, warn_rule_error
from logwatch.cli.help import HelpCommand
from logwatch.cli.options import (
    CONFIG_OPTION,
    MAX_LINE_OPTION,
    NO_BUILTIN_OPTION,
    RULES_OPTION,
    SINCE_OPTION,
    UNTIL_OPTION,
    config_and_rules,
    window,
)
from logwatch.drivers.replay import ReplayOptions
from logwatch.words import counted


@click.command(
    "report",
    cls=HelpCommand,
    examples=(
        "logwatch report train.log -o report.html",
        "logwatch report a.log b.log -o runs.html --png charts/",
    ),
)
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

    _, specs = config_and_rules(config_path, rule_paths, no_builtin_rules)
    lines_window = window(since, until)
    browser = find_browser() if png_dir is not None else None  # before the work, not after
    report = build_report(
        list(paths),
        specs,
        options=ReplayOptions(max_line_bytes=max_line_bytes),
        window=lines_window,
        on_error=warn_rule_error,
        on_warning=warn_data,
    )
    size = report.write(output)
    click.echo(
        f"wrote {output} ({size / 1024:.0f} KiB: {counted(len(report.sources), 'file')}, "
        f"{counted(len(report.charts), 'chart')}, "
        f"{counted(len(report.result.events), 'alert event')})"
    )
    if png_dir is not None and browser is not None:
        pngs = write_pngs(report.charts, png_dir, browser)
        click.echo(f"wrote {counted(len(pngs), 'PNG file')} to {png_dir}")
