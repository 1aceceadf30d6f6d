"""The library's front door: the few calls a notebook, an Airflow task or a test needs.

Each is a thin composition of the pipeline's parts (sources -> parse -> engine with its rules),
with the defaults the command line uses. `logwatch/__init__.py` re-exports them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from logwatch.alerts import AlertEvent
from logwatch.drivers.replay import ReplayOptions, ReplayResult
from logwatch.drivers.replay import replay as _replay
from logwatch.engine import ErrorHandler, WarningHandler
from logwatch.rules.loader import RuleSpec, builtin_rules_dir
from logwatch.rules.loader import load_rules as _load_packs
from logwatch.sources.framing import DEFAULT_MAX_LINE_BYTES

PathArg = str | os.PathLike[str]


def load_rules(paths: Iterable[PathArg] = (), *, builtin: bool = True) -> list[RuleSpec]:
    """The built-in rule packs (unless `builtin=False`), then the packs at `paths` (files or
    folders of `.toml`); a later rule with the same id replaces an earlier one."""
    packs = [builtin_rules_dir()] if builtin else []
    return _load_packs([*packs, *(Path(p) for p in paths)])


def replay(
    paths: PathArg | Sequence[PathArg],
    *,
    rules: Sequence[RuleSpec] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    on_event: Callable[[AlertEvent], None] | None = None,
    on_error: ErrorHandler | None = None,
    on_warning: WarningHandler | None = None,
) -> ReplayResult:
    """Run `rules` (default: the built-in packs) over finished logs, one source per path, as
    `logwatch replay` does; `on_event` sees each event as it is found, `on_warning` each
    `DataWarning` (a value read as missing, said once per file and kind)."""
    many = [paths] if isinstance(paths, str | os.PathLike) else paths
    names = [os.fspath(path) for path in many]
    return _replay(
        names,
        load_rules() if rules is None else rules,
        options=ReplayOptions(max_line_bytes=max_line_bytes),
        on_event=on_event,
        on_error=on_error,
        on_warning=on_warning,
    )
