"""`python -m logwatch.cli ...`: the same as the `logwatch` command."""

from logwatch.cli import run

run()
