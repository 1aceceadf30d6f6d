"""How the command line ends and complains: our error types as one line and an exit code, the
`logwatch: ...` status lines on stderr, and the fast exit of a finished batch command."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from logwatch.cli.help import HelpGroup
from logwatch.errors import LogwatchError
from logwatch.redact import redact, visible, wrapped_note

if TYPE_CHECKING:
    from logwatch.engine import DataWarning


class UserError(click.ClickException):
    """A LogwatchError as click shows it: `Error: <one line>` and exit code 2."""

    exit_code = 2


class LogwatchGroup(HelpGroup):
    """A command group whose commands' typed errors end as one redacted line and exit code 2,
    and whose output may go to a reader that left (`logwatch replay ... | head`)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LogwatchError as exc:
            raise UserError(visible(redact(str(exc)))) from None  # file names are the user's
        except BrokenPipeError:
            sys.stderr.close()  # `logwatch replay ... | head`: the reader left, nothing to say
            sys.exit(0)


def status_line(message: str) -> None:
    """`logwatch: <message>` on stderr."""
    # file names in it are the user's: controls in them must not reach the terminal raw
    click.echo(wrapped_note(f"logwatch: {visible(message)}", sys.stderr), err=True)


def warn_rule_error(rule: str, source: str, exc: Exception) -> None:
    """A rule that failed on a source (and is off for it) as a status line."""
    status_line(
        f"rule {rule!r} failed on {source} and is off for it: "
        f"{type(exc).__name__}: {exc} (report this with the log line that triggered it)"
    )


def warn_data(warning: DataWarning) -> None:
    """A value read as missing (`DataWarning`) as a status line."""
    status_line(str(warning))


_finished: list[bool] = []
"""Set by a batch command (`replay`) once its work is done and its output written."""


def mark_finished() -> None:
    """Say that the command's work is done and its output written (see `exit_fast`)."""
    _finished.append(True)


def exit_fast(main: Callable[[], None]) -> None:
    """Run `main`, but a finished command ends its process without the interpreter's teardown,
    which spends about 50 ms freeing polars' modules (2 % of a 740 MB replay). Nothing is left
    to run by then: its threads are joined, its files closed, and its output is flushed here (a
    failed flush exits as usual)."""
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
