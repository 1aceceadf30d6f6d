"""What joins the tail driver beside the rules: one protocol, every step of a round in it.

A plugin sees the parsed lines (`observe`: a batch, or a round's lines of many sources at
once), may rewrite or drop each alert on its way to the sink (`filter`), adds its own alerts
once per round (`round`) and once at start (`start_events`), keeps state in the checkpoint
under its `name` (`export_state` / `import_state`), and is closed with the driver.
`TailPlugin` is the protocol; `Plugin` is a base whose steps all do nothing; `DriverView` is
what a round sees of the driver (`tail.TailDriver` is one: this module does not import it, it
imports this one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.parse import SCHEMA

if TYPE_CHECKING:
    from logwatch.engine import Engine
    from logwatch.sources.fileset import FileSet


class DriverView(Protocol):
    """What a plugin's `round` reads of the live driver that runs it."""

    @property
    def engine(self) -> Engine:
        """The engine: each source's state, the alerts firing."""
        ...

    @property
    def files(self) -> FileSet:
        """The followed files."""
        ...

    def stall_states(self) -> dict[str, datetime | None]:
        """For each source that has received lines: since when it is stalled, or None."""
        ...


class TailPlugin(Protocol):
    """Something the tail driver runs with its rounds (the GPU side is one)."""

    name: str
    """Its key in the checkpoint's extras (`gpu` for the GPU side)."""

    columns: frozenset[str] | None
    """The parsed columns `observe` reads (None: all): the driver parses no more than the rules
    and the plugins read."""

    def observe(self, frame: pl.DataFrame) -> None:
        """See parsed log lines (history included) before their alerts are sent: one source's
        batch, or a round's batches of several sources in one frame (each source's lines in
        line order; `source` says whose): a plugin folds them per source."""
        ...

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        """The event to send on (rewritten or not), or None to drop it."""
        ...

    def round(self, driver: DriverView) -> Sequence[AlertEvent]:
        """Called in the driver's thread after each round's files; alerts for the sink."""
        ...

    def start_events(self) -> Sequence[AlertEvent]:
        """Alerts to send once, when the driver has opened and caught up."""
        ...

    def export_state(self) -> Any:
        """JSON-able state for the checkpoint; None when there is nothing to keep."""
        ...

    def import_state(self, data: Any) -> None:
        """Restore what `export_state` gave; ValueError on malformed data."""
        ...

    def close(self) -> None:
        """Release what it holds (threads, libraries); called once, after the sink's close."""
        ...


class Plugin:
    """A plugin that does nothing: subclass it and override the steps you need."""

    name = "plugin"
    columns: frozenset[str] | None = None  # all: a plugin narrows what it reads by saying so

    def observe(self, frame: pl.DataFrame) -> None:
        """Nothing to see."""

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        """Every event passes unchanged."""
        return event

    def round(self, driver: DriverView) -> Sequence[AlertEvent]:
        """No alerts of its own."""
        return []

    def start_events(self) -> Sequence[AlertEvent]:
        """No alerts at start."""
        return []

    def export_state(self) -> Any:
        """No state to checkpoint."""
        return None

    def import_state(self, data: Any) -> None:
        """Nothing to restore."""

    def close(self) -> None:
        """Nothing to release."""


def parse_columns(
    engine_columns: frozenset[str], plugins: Iterable[TailPlugin]
) -> frozenset[str] | None:
    """What a live driver parses: the engine's columns and every plugin's (None: all)."""
    columns = set(engine_columns)
    for plugin in plugins:
        if plugin.columns is None:
            return None
        columns |= plugin.columns
    return frozenset(columns)


def plugin_view(columns: frozenset[str]) -> list[str]:
    """The columns of a batch a plugin that reads `columns` is shown, in `SCHEMA` order."""
    return [name for name in SCHEMA if name in columns]
