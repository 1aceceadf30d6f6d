"""`logwatch silence add|list|expire`: mute alerts for a while."""

from __future__ import annotations

from datetime import datetime

import click

from logwatch.cli.help import HelpGroup
from logwatch.cli.options import (
    CONFIG_OPTION,
    STATE_DIR_OPTION,
    config_and_rules,
    state_dir_path,
)
from logwatch.durations import parse_duration


@click.group(
    "silence",
    cls=HelpGroup,
    examples=(
        "logwatch silence add nan-loss --source '*rank1.log' --for 1h --comment shard",
        "logwatch silence list",
    ),
)
def silence_group() -> None:
    """Mute alerts for a while: add, list, expire (a running tail picks changes up)."""


@silence_group.command(
    "add",
    examples=(
        "logwatch silence add nan-loss --for 30m --comment 'rolling back'",
        "logwatch silence add 'xid-*' --source '*node7*' --for 1d --comment repair",
    ),
)
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

    _, specs = config_and_rules(config_path, (), False)
    check_rule(rule, [spec.id for spec in specs] + [GPU_UNAVAILABLE, GPU_HUNG, GPU_ERROR])
    silence = SilenceStore(state_dir_path(state_dir)).add(
        rule, source, seconds, comment, datetime.now()
    )
    click.echo(f"{silence.id}  silenced {rule} on {source} until {silence.ends:%Y-%m-%d %H:%M:%S}")


@silence_group.command("list", examples=("logwatch silence list", "logwatch silence list --all"))
@click.option("--all", "show_all", is_flag=True, help="Also list expired silences.")
@STATE_DIR_OPTION
def silence_list(show_all: bool, state_dir: str | None) -> None:
    """List active silences."""
    from logwatch.sinks.slack.silences import SilenceStore

    now = datetime.now()
    shown = [s for s in SilenceStore(state_dir_path(state_dir)).all() if show_all or s.active(now)]
    for s in shown:
        state = "active " if s.active(now) else "expired"
        click.echo(
            f"{s.id}  {state}  {s.rule}  {s.source}  until {s.ends:%Y-%m-%d %H:%M:%S}  {s.comment}"
        )
    if not shown:
        click.echo("no active silences")


@silence_group.command(
    "expire",
    examples=(
        "logwatch silence expire 3f2a9c",
        "logwatch silence expire 3f2a9c --state-dir /srv/lw",
    ),
)
@click.argument("silence_id")
@STATE_DIR_OPTION
def silence_expire(silence_id: str, state_dir: str | None) -> None:
    """End a silence now."""
    from logwatch.sinks.slack.silences import SilenceStore

    silence = SilenceStore(state_dir_path(state_dir)).expire(silence_id, datetime.now())
    click.echo(f"{silence.id}  expired ({silence.rule} on {silence.source})")
