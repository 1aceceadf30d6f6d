"""`--jobs N` and `--dask ADDRESS`: where a replay of many files does its work (this process,
N processes of this machine, or a Dask cluster); the output is the same in each."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import click

from logwatch.alerts import AlertEvent
from logwatch.cli.errors import status_line, warn_data, warn_rule_error
from logwatch.drivers.replay import ReplayOptions, ReplayResult, replay
from logwatch.drivers.window import Window
from logwatch.errors import ClusterError
from logwatch.rules.loader import RuleSpec
from logwatch.sources.streams import STDIN

SMALL_INPUT_BYTES = 16 << 20  # below this, the default replays in this process (no start-up)
DASK_TIMEOUT_ENV = "LOGWATCH_DASK_TIMEOUT"

JOBS_OPTION = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Replay many files on N processes of this machine, one polars thread each "
    "[default: the cores, for inputs over 16 MB; smaller ones, a single file, standard input, "
    "--export and --export-metrics replay in this process].",
)
DASK_OPTION = click.option(
    "--dask",
    "dask_address",
    metavar="ADDRESS",
    default=None,
    help="Replay the files on the workers of a running Dask cluster (tcp://HOST:PORT or a "
    "scheduler file) that see the same files; needs pip install 'logwatch[dask]'.",
)


def dask_timeout_s(default: float) -> float:
    """How long `--dask` waits for the scheduler and a worker: $LOGWATCH_DASK_TIMEOUT
    (seconds), else `default`."""
    given = os.environ.get(DASK_TIMEOUT_ENV)
    if given is None:
        return default
    try:
        seconds = float(given)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ClusterError(
            f"${DASK_TIMEOUT_ENV}: {given!r} is not a number of seconds over 0 (e.g. 10)"
        )
    return seconds


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def replay_where(
    files: Sequence[str],
    specs: Sequence[RuleSpec],
    *,
    jobs: int | None,
    dask_address: str | None,
    options: ReplayOptions,
    window: Window | None,
    on_event: Callable[[AlertEvent], None],
    in_process: dict[str, Any],
) -> ReplayResult:
    """`replay` here, on `jobs` processes or on a Dask cluster; `in_process`: what only a replay
    in this process takes (the frame hooks, the progress bar)."""
    hooks = in_process.get("on_frame") is not None
    if dask_address is not None and jobs is not None:
        raise click.UsageError("--jobs and --dask: give one (--dask runs on the cluster's workers)")
    if hooks and (dask_address is not None or (jobs or 1) > 1):
        raise click.UsageError(
            "--export, --export-metrics and --actions dry-run see every line in this process: "
            "drop --jobs/--dask"
        )
    common: dict[str, Any] = {
        "options": options,
        "window": window,
    }
    if dask_address is not None:
        from logwatch.drivers.cluster import CONNECT_TIMEOUT_S, DaskRunner
        from logwatch.drivers.parallel import Merge, replay_parallel

        merge = Merge(on_event, warn_rule_error, warn_data, status_line)

        runner = DaskRunner(dask_address, timeout_s=dask_timeout_s(CONNECT_TIMEOUT_S))
        try:
            return replay_parallel(
                files,
                specs,
                runner,
                workers=runner.workers,
                merge=merge,
                check_here=False,
                **common,
            )
        finally:
            runner.close()
    count = jobs if jobs is not None else _default_jobs(files, hooks)
    if hooks:
        count = None  # `--jobs 1` with a hook: the one process is this one, which sees every line
    if count is None or len(files) < 2 or STDIN in files:  # standard input: read here, once
        return replay(
            files,
            specs,
            on_event=on_event,
            on_error=warn_rule_error,
            on_warning=warn_data,
            **common,
            **in_process,
        )
    from logwatch.drivers.parallel import LocalRunner, Merge, replay_parallel

    merge = Merge(on_event, warn_rule_error, warn_data, status_line)
    return replay_parallel(files, specs, LocalRunner(count), workers=count, merge=merge, **common)


def _default_jobs(files: Sequence[str], hooks: bool) -> int | None:
    """The cores, for inputs large enough to repay starting processes; else None (here)."""
    if hooks or len(files) < 2 or cores() < 2:
        return None
    total = 0
    for path in files:
        try:
            total += os.stat(path).st_size
        except OSError:
            return None  # replay in this process names it
    return cores() if total >= SMALL_INPUT_BYTES else None


def unread_line(result: ReplayResult, files: Sequence[str]) -> str | None:
    """`N of M files not read` when some were not (a cluster's worker could not read them)."""
    if not result.unread:
        return None
    return f"{len(result.unread)} of {len(files)} files not read"
