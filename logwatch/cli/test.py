"""`logwatch test`: rule tests, each an input log and the alerts it must produce."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from logwatch.cli.help import HelpCommand


@click.command(
    "test",
    cls=HelpCommand,
    examples=("logwatch test rules/", "logwatch test my-rules.test.toml --junit results.xml"),
)
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
    from logwatch.cli.progress import RuleTestProgress
    from logwatch.ruletest import load_test_files, report_lines, run_test_files, write_junit

    loaded = load_test_files([Path(f) for f in files])
    progress = RuleTestProgress()
    try:
        results = run_test_files(loaded, progress=progress)
    finally:
        progress.close()
    for line in report_lines(results):
        click.echo(line)
    if junit_path is not None:
        write_junit(Path(junit_path), results)
    if not all(result.passed for result in results):
        sys.exit(1)
