"""The `logwatch tail` process around the driver: engine errors reported once, SIGTERM / SIGINT
finishing the batch and checkpointing, the sinks behind one FanOut, the plugins (the GPU side)
closed with it."""

from __future__ import annotations

import os
import signal
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from logwatch.alerts import Sink
from logwatch.drivers.exit_on import EXIT_ON_ALERT, ExitCondition, ExitOn
from logwatch.drivers.fanout import FanOut
from logwatch.drivers.plugins import TailPlugin
from logwatch.drivers.tail import TailDriver
from logwatch.drivers.tail_options import Status, TailOptions
from logwatch.engine import DataWarning, Engine
from logwatch.errors import InputError, StateError
from logwatch.rules.loader import RuleSpec
from logwatch.sources.sniff import file_kind
from logwatch.sources.watch import is_glob


def rule_error_reporter(status: Status) -> Callable[[str, str, Exception], None]:
    """An engine error handler that reports each failing (rule, source) once on `status`."""
    reported: set[tuple[str, str]] = set()

    def on_error(rule: str, source: str, exc: Exception) -> None:
        if (rule, source) not in reported:
            reported.add((rule, source))
            status(
                f"rule {rule!r} failed on {source} and is off for it: "
                f"{type(exc).__name__}: {exc} (report this with the log line that triggered it)"
            )

    return on_error


def data_warning_reporter(status: Status) -> Callable[[DataWarning], None]:
    """An engine warning handler that says each data warning on `status` (the engine says
    each once per source and kind)."""

    def on_warning(warning: DataWarning) -> None:
        status(str(warning))

    return on_warning


def check_patterns(patterns: Sequence[str]) -> None:
    """InputError for an argument tail can never follow: a directory, or an existing path that
    is not a regular file (a FIFO, a device); a missing file is waited for."""
    for pattern in patterns:
        if pattern == "-" or is_glob(pattern):  # "-": standard input, read by a pipe source
            continue
        if os.path.isdir(pattern):
            raise InputError(
                f"{pattern}: is a directory (give the log files in it, e.g. '{pattern}/*.log')"
            )
        try:
            mode = os.stat(pattern).st_mode
        except OSError:
            continue  # not there yet: tail waits for it
        if not stat.S_ISREG(mode):
            raise InputError(
                f"{pattern}: not a regular file ({file_kind(mode)}); "
                "logwatch tail follows regular log files"
            )


def tail_driver(
    patterns: Sequence[str],
    rules: Sequence[RuleSpec],
    sinks: Sequence[Sink],
    *,
    state_dir: Path,
    options: TailOptions,
    status: Status,
    plugins: Sequence[TailPlugin] = (),
) -> TailDriver:
    """The driver `tail` and `top` run: one engine whose rule errors are said once, the sinks
    behind one FanOut whose failures are said on `status`."""
    engine = Engine(
        rules, on_error=rule_error_reporter(status), on_warning=data_warning_reporter(status)
    )
    sink = FanOut(sinks, report=status)
    return TailDriver(
        patterns,
        engine,
        sink,
        plugins=plugins,
        state_dir=state_dir,
        options=options,
        status=status,
    )


def run_tail(
    patterns: Sequence[str],
    rules: Sequence[RuleSpec],
    sinks: Sequence[Sink],
    *,
    state_dir: Path,
    options: TailOptions,
    status: Status,
    plugins: Sequence[TailPlugin] = (),
    startup: Sequence[str] = (),
    exit_on: ExitCondition | None = None,
) -> int:
    """The `logwatch tail` command: follow until SIGTERM / SIGINT, then checkpoint and return 0.
    `startup` lines are said once the signals are ours: a SIGTERM right after them (a supervisor
    that waited for tail to speak) still ends in a checkpoint and exit 0. With `exit_on`, the
    first alert it matches stops it the same way once every sink took the alert, and it returns
    `EXIT_ON_ALERT` (3); a signal that came first keeps its 0, so it never reads as an alert."""
    try:
        check_patterns(patterns)
    except InputError:
        for plugin in plugins:
            plugin.close()
        raise
    stops: list[str] = []  # what stopped it first: "signal" or "alert"

    def stop_for(why: str) -> None:
        stops.append(why)
        driver.stop()

    watcher = ExitOn(exit_on, lambda: stop_for("alert")) if exit_on is not None else None
    driver = tail_driver(
        patterns,
        rules,
        [*sinks, *([watcher] if watcher is not None else [])],  # last: after every sink took it
        state_dir=state_dir,
        options=options,
        status=status,
        plugins=plugins,
    )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop_for("signal")

    try:
        driver.claim()  # a second watch of the same files is refused before the banner
    except StateError:
        for plugin in plugins:
            plugin.close()
        raise
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for line in startup:
            status(line)
        with driver:  # closes the sink (Slack's waiting groups spooled), then the plugins
            driver.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return EXIT_ON_ALERT if stops[:1] == ["alert"] else 0
