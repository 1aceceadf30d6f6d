"""`python -m logwatch ...`: the same as the `logwatch` command."""

from logwatch.cli import run

run()
