"""The library's front door: the few calls a notebook, an Airflow task or a test needs.

Each is a thin composition of the pipeline's parts (sources -> parse -> engine with its rules),
with the defaults the command line uses. `logwatch/__init__.py` re-exports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from logwatch.alerts import AlertEvent
from logwatch.config import Config, config_rules, find_config, load_config
from logwatch.drivers.replay import ReplayOptions, ReplayResult
from logwatch.drivers.replay import replay as _replay
from logwatch.drivers.window import Bound, Window, parse_bound
from logwatch.engine import ErrorHandler, WarningHandler
from logwatch.rules.loader import RuleSpec, builtin_rules_dir
from logwatch.rules.loader import load_rules as _load_packs
from logwatch.sources.framing import DEFAULT_MAX_LINE_BYTES

PathArg = str | os.PathLike[str]


def load_rules(paths: Iterable[PathArg] = (), *, builtin: bool = True) -> list[RuleSpec]:
    """The built-in rule packs (unless `builtin=False`), then the packs at `paths` (files or
    folders of `.toml`); a later rule with the id of an earlier one replaces it when it says
    `replace = true`, else `RulesError`."""
    packs = [builtin_rules_dir()] if builtin else []
    return _load_packs([*packs, *(Path(p) for p in paths)])


def load_config_and_rules(
    config_path: PathArg | None = None, rule_paths: Iterable[PathArg] = (), *, builtin: bool = True
) -> tuple[Config, list[RuleSpec]]:
    """The config the command line reads (`config_path`, else $LOGWATCH_CONFIG, else
    ./logwatch.toml, else $XDG_CONFIG_HOME/logwatch/config.toml, else none) and the rules it
    loads: the config's packs and `[rules.<id>]` overrides, then `rule_paths`; `builtin=False`
    leaves out the built-in packs whatever the config says."""
    config = load_config(find_config(None if config_path is None else os.fspath(config_path)))
    if config.path is None:
        return config, load_rules(rule_paths, builtin=builtin)
    config = replace(config, builtin_rules=config.builtin_rules and builtin)
    return config, config_rules(config, [os.fspath(p) for p in rule_paths])


def replay(
    paths: PathArg | Sequence[PathArg],
    *,
    rules: Sequence[RuleSpec] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    on_event: Callable[[AlertEvent], None] | None = None,
    on_error: ErrorHandler | None = None,
    on_warning: WarningHandler | None = None,
    since: Bound | str | None = None,
    until: Bound | str | None = None,
) -> ReplayResult:
    """Run `rules` (default: the built-in packs) over finished logs, one source per path, as
    `logwatch replay` does; `on_event` sees each event as it is found, `on_warning` each
    `DataWarning` (a value read as missing, said once per file and kind); `since` / `until`
    keep only the lines from / up to a step (`1400`) or a time (a datetime, or text as
    `--since` takes it), as `--since` / `--until` do."""
    many = [paths] if isinstance(paths, str | os.PathLike) else paths
    names = [os.fspath(path) for path in many]
    window = None
    if since is not None or until is not None:
        window = Window(_bound(since, "since"), _bound(until, "until"))
    return _replay(
        names,
        load_rules() if rules is None else rules,
        options=ReplayOptions(max_line_bytes=max_line_bytes),
        on_event=on_event,
        on_error=on_error,
        on_warning=on_warning,
        window=window,
    )


def _bound(value: Bound | str | None, name: str) -> Bound | None:
    return parse_bound(value, name) if isinstance(value, str) else value
