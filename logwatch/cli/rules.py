"""`logwatch rules list|check`: the rules logwatch loads, and rule packs checked."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from logwatch.cli.help import HelpGroup
from logwatch.cli.options import (
    CONFIG_OPTION,
    NO_BUILTIN_OPTION,
    RULES_OPTION,
    config_and_rules,
    text_or_json,
)
from logwatch.redact import redact
from logwatch.words import counted


@click.group(
    "rules",
    cls=HelpGroup,
    examples=("logwatch rules list", "logwatch rules check my-rules.toml"),
)
def rules_group() -> None:
    """List the rules logwatch loads, or check rule packs."""


@rules_group.command(
    "list",
    examples=("logwatch rules list", "logwatch rules list --rules my-rules.toml --format json"),
)
@RULES_OPTION
@NO_BUILTIN_OPTION
@text_or_json("text: an aligned table; json: a JSON array of objects.")
@CONFIG_OPTION
def rules_list(
    rule_paths: tuple[str, ...], no_builtin_rules: bool, fmt: str, config_path: str | None
) -> None:
    """List every loaded (enabled) rule: id, type, severity, where it is defined, summary."""
    from logwatch.rules.catalog import rule_rows, rule_table

    _, specs = config_and_rules(config_path, rule_paths, no_builtin_rules)
    rows = rule_rows(specs)
    if fmt == "json":
        click.echo(json.dumps([row.as_json() for row in rows], indent=2))
    else:
        for line in rule_table(rows):
            click.echo(line)


@rules_group.command(
    "check",
    examples=("logwatch rules check my-rules.toml", "logwatch rules check rules/ team-rules/"),
)
@click.argument("packs", nargs=-1, required=True, metavar="PACK...")
def rules_check(packs: tuple[str, ...]) -> None:
    """Validate rule packs (files or folders): `N rules OK`, else one `file:line: problem` line
    per problem and exit 2. A rule with a built-in rule's id needs `replace = true`; each one
    that replaces a rule is said."""
    from logwatch.rules.catalog import check_packs

    result = check_packs(Path(p) for p in packs)
    for line in (*result.notes, *result.problems):
        click.echo(redact(line))
    if result.problems:
        sys.exit(2)
    click.echo(f"{counted(result.rules, 'rule')} OK")
