"""The sinks a config can ask for, keyed by the config table that turns each on.

A new destination is one entry here plus the parser of its config table in `config.py`. Each
factory imports its sink when called, so importing this module pulls in no client library
(`slack_sdk` loads only when a config has a [slack] table). A sink with a `backlog()` (what it
still has to deliver) shows in `logwatch_delivery_queue_depth{sink}`, keyed by its table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from logwatch.config import Config
from logwatch.sinks.base import Sink

SinkFactory = Callable[[Config, Path], Sink]
"""(config, state directory) -> the sink its table describes."""


def _slack(config: Config, state_dir: Path) -> Sink:
    from logwatch.sinks.slack.sink import open_slack_sink  # slack_sdk: only when configured

    return open_slack_sink(config, state_dir)


def _alertmanager(config: Config, state_dir: Path) -> Sink:
    from logwatch.sinks.alertmanager.sink import open_alertmanager_sink

    return open_alertmanager_sink(config, state_dir)


def _webhook(config: Config, state_dir: Path) -> Sink:
    from logwatch.sinks.webhook.sink import open_webhook_sink

    return open_webhook_sink(config.webhooks, state_dir)


SINKS: dict[str, SinkFactory] = {
    "slack": _slack,
    "alertmanager": _alertmanager,
    "webhook": _webhook,
}


def open_sinks(
    terminal: Sink, config: Config, state_dir: Path, registry: dict[str, SinkFactory] | None = None
) -> list[Sink]:
    """The terminal sink first, then one per registered table the config has, in registry order."""
    chosen = SINKS if registry is None else registry
    opened = [
        factory(config, state_dir)
        for table, factory in chosen.items()
        if table in config.sink_tables
    ]
    return [terminal, *opened]


@runtime_checkable
class Backlogged(Protocol):
    """A sink that can say how much it still has to deliver."""

    def backlog(self) -> int:
        """Items accepted but not yet delivered."""
        ...


def sink_backlogs(sinks: Sequence[Sink], config: Config) -> dict[str, Callable[[], int]]:
    """`backlog()` of each opened config sink that has one, by its table name."""
    tables = [table for table in SINKS if table in config.sink_tables]
    # open_sinks puts the terminal first, then one sink per table in registry order
    return {
        table: sink.backlog
        for table, sink in zip(tables, sinks[1:], strict=False)
        if isinstance(sink, Backlogged)
    }
