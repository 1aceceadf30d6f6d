"""The options several commands share, their types, and what the commands build from them the
same way (config and rules, the state directory, the --since/--until window, logging)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from logwatch.alerts import Severity
from logwatch.api import load_config_and_rules
from logwatch.cli.errors import status_line
from logwatch.config import Config
from logwatch.drivers.window import Window, parse_bound
from logwatch.durations import parse_duration
from logwatch.redact import install_log_handler, remove_log_handler
from logwatch.rules.loader import RuleSpec, describe_origin
from logwatch.sources.framing import DEFAULT_MAX_LINE_BYTES
from logwatch.statekey import default_state_dir

SKEW_OPTION = click.option(
    "--skew",
    default="30s",
    show_default=True,
    metavar="DURATION",
    help="How far the hosts' clocks may differ: a rank's error beats another's timeout "
    "within this window (fleet post-mortems).",
)
LAYOUT_OPTION = click.option(
    "--layout",
    default=None,
    metavar="PATTERN",
    help="Rank and host from paths no built-in layout knows, e.g. "
    "'{host}/{*}/attempt_{*}/{local_rank}/{*}.log' ({host}, {rank}, {local_rank}, {*}, {**}).",
)
SEVERITIES = click.Choice([s.label for s in Severity], case_sensitive=False)

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
    help="Where state lives (silences, Slack spool) [default: $XDG_STATE_HOME/logwatch].",
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
SINCE_OPTION = click.option(
    "--since",
    metavar="T",
    default=None,
    help="Only the lines from this step (1400) or time ('2026-11-28 14:05') on [default: the "
    "first line].",
)
UNTIL_OPTION = click.option(
    "--until",
    metavar="T",
    default=None,
    help="Only the lines up to this step or time [default: the last line].",
)
LAYOUT_OPTION = click.option(
    "--layout",
    default=None,
    metavar="PATTERN",
    help="Rank and host from paths no built-in layout knows, e.g. "
    "'{host}/{*}/attempt_{*}/{local_rank}/{*}.log' ({host}, {rank}, {local_rank}, {node}, {*}, "
    "{**}).",
)
GPUS_PER_NODE_OPTION = click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Ranks per node: a local rank on the node a path's {node} (--layout) numbers is "
    "rank node x N + local [default: global ranks only from the logs].",
)


def text_or_json(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--format text|json` (default text) for commands that print one document."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help=help_text,
    )


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic since click 8.5; subscripting fails on older click at runtime
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


def config_and_rules(
    config_path: str | None, rule_paths: Sequence[str], no_builtin_rules: bool
) -> tuple[Config, list[RuleSpec]]:
    """The config and rules (`logwatch.api.load_config_and_rules`), saying on stderr which rule
    replaces another."""
    config, specs = load_config_and_rules(config_path, rule_paths, builtin=not no_builtin_rules)
    for spec in specs:
        if spec.replaces is not None:
            status_line(
                f"{spec.origin}: rule {spec.id!r} replaces {describe_origin(spec.replaces)}"
            )
    return config, specs


def state_dir_path(option: str | None) -> Path:
    """--state-dir, else the default ($XDG_STATE_HOME/logwatch)."""
    return Path(option) if option else default_state_dir()


def window(since: str | None, until: str | None) -> Window | None:
    """--since/--until as a `Window`, None when neither is given."""
    if since is None and until is None:
        return None
    return Window(
        None if since is None else parse_bound(since, "--since"),
        None if until is None else parse_bound(until, "--until"),
    )


@contextmanager
def logging_to_stderr(verbose: bool) -> Iterator[None]:
    """Route logging (slack-sdk's too) to stderr through the redacting filter."""
    handler = install_log_handler(sys.stderr, verbose=verbose)
    try:
        yield
    finally:
        remove_log_handler(handler)


def fleet_skew(text: str) -> timedelta:
    """`--skew` as a duration."""
    try:
        return timedelta(seconds=parse_duration(text))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--skew") from None
