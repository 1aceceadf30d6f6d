"""Rank, host and line time on every event `tail` sends, as replay gives them
(`logwatch.drivers.ranks`): the live driver's first plugin sees each batch before the rules
(the lines that name a writer, the timed lines) and labels each event on its way to the sinks.

What differs from replay, which places a file's events at its end: an event is placed when it
is sent, with what the lines so far said (a rank first named after its alert is not given to
it), and an untimed line takes the time of the last timed line before it, or of the first after
it only when that line came in the same batch. Kept across rounds and in the checkpoint: each
source's facts (deduplicated), its last timed line, and the labels each firing alert was given,
so that its resolve, also after a restart, carries the same labels and fingerprint."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import polars as pl

from logwatch.alerts import AlertEvent, Status
from logwatch.drivers.classes import IDENTITY_ANY
from logwatch.drivers.layout import path_identity
from logwatch.drivers.lineinfo import FACT_SCHEMA, distinct_facts, facts
from logwatch.drivers.plugins import DriverView, Plugin
from logwatch.drivers.ranks import SourceTap, Who, placed, resolve, writer_labels
from logwatch.parse.prefix import prefixes

KEPT_TIMED_LINES = 1024
"""Timed lines kept per source between rounds, for an event decided after its line's round
(`run-crashed` after its quiet spell): the time of an older untimed line is not guessed."""

Followed = Callable[[], Iterable[tuple[str, bool]]]
"""The sources the driver follows now, each with whether its checkpoint keeps it (a pipe's
does not)."""
Retell = Callable[[AlertEvent], AlertEvent]
"""Rewrites a placed event's summary with its placed labels (`logwatch.drivers.placing`)."""


class LineTimes:
    """A source's timed lines as far as they are kept: the time an untimed line takes."""

    __slots__ = ("_cut", "_lines", "_stamps")

    def __init__(self) -> None:
        self._lines = pl.Series("line", [], dtype=pl.Int64)
        self._stamps = pl.Series("ts", [], dtype=pl.Datetime("us"))
        self._cut = False  # timed lines before the first kept one were dropped

    def see(self, timed: pl.DataFrame) -> None:
        """Keep a batch's timed lines (`line` Int64, `ts` Datetime("us"), none null)."""
        if timed.height:
            self._lines = self._lines.append(timed.get_column("line"))
            self._stamps = self._stamps.append(timed.get_column("ts"))

    def trim(self) -> None:
        """Keep the last `KEPT_TIMED_LINES` timed lines."""
        if self._lines.len() > KEPT_TIMED_LINES:
            self._lines = self._lines.tail(KEPT_TIMED_LINES)
            self._stamps = self._stamps.tail(KEPT_TIMED_LINES)
            self._cut = True

    def time_of(self, line: int) -> tuple[int, datetime] | None:
        """The last timed line before `line` and its time (the first timed line when none is
        before and none was dropped); None when not known."""
        if self._lines.is_empty():
            return None
        at = int(self._lines.search_sorted(line, side="left")) - 1
        if at < 0:
            if self._cut:
                return None
            at = 0
        return int(self._lines[at]), self._stamps[at]

    def last(self) -> tuple[int, datetime] | None:
        """The last timed line seen."""
        if self._lines.is_empty():
            return None
        return int(self._lines[-1]), self._stamps[-1]

    def restore(self, line: int, ts: datetime) -> None:
        """Start from a checkpoint's last timed line (the lines before it are not kept)."""
        self._lines = pl.Series("line", [line], dtype=pl.Int64)
        self._stamps = pl.Series("ts", [ts], dtype=pl.Datetime("us"))
        self._cut = True


class LivePlacement(Plugin):
    """The tail driver's placement: every event of a followed file with its writer's `rank`,
    `local_rank` and `host` labels and its line's carried time (`ts_from_line`)."""

    name = "placement"
    columns: frozenset[str] | None = frozenset({"source", "line", "ts", "text"})

    def __init__(
        self,
        layout: re.Pattern[str] | None = None,
        *,
        gpus_per_node: int | None = None,
        retell: Retell | None = None,
        followed: Followed = lambda: (),
    ) -> None:
        self.layout = layout
        self._followed = followed
        self.gpus_per_node = gpus_per_node
        self._retell = retell
        self._taps: dict[str, SourceTap] = {}  # each source's identity and facts
        self._facts: dict[str, pl.DataFrame] = {}  # its facts' rows, as the checkpoint keeps them
        self._times: dict[str, LineTimes] = {}
        self._who: Who | None = None  # None: the facts changed since it was resolved
        # each source's firing alerts' labels, by fingerprint: what their resolves carry
        self._given: dict[str, dict[str, dict[str, str]]] = {}

    def _tap(self, source: str) -> SourceTap:
        tap = self._taps.get(source)
        if tap is None:
            tap = self._taps[source] = SourceTap(source, path_identity(source, self.layout))
            self._times[source] = LineTimes()
            self._who = None
        return tap

    def observe(self, frame: pl.DataFrame) -> None:
        """A batch's timed lines and the lines that name their writer (one source's lines or a
        round's of many: a few queries for all of them, then each source's share)."""
        if frame.is_empty():
            return
        sources = frame.get_column("source")
        names = sources.unique(maintain_order=True).to_list() if sources.n_unique() > 1 else None
        taps = [self._tap(str(name)) for name in (names or [sources[0]])]
        timed = frame.select(
            "source",
            pl.col("line").cast(pl.Int64),
            pl.col("ts").cast(pl.Datetime("us")),
        ).filter(pl.col("ts").is_not_null())
        # the prefixes of the few lines that name a writer, not of every line
        naming = frame.select("source", "line", "ts", "text").filter(
            pl.col("text").str.contains(IDENTITY_ANY)
        )
        found = facts(naming.with_columns(prefixes(pl.col("text")))) if naming.height else None
        if names is None:
            self._times[taps[0].source].see(timed)
            if found is not None and found.height:
                self._add_facts(taps[0], found)
            return
        # (each part's source read from its first row: `as_dict` runs a select per part)
        for part in timed.partition_by("source"):
            self._times[str(part.get_column("source")[0])].see(part)
        if found is not None and found.height:
            for part in found.partition_by("source", maintain_order=True):
                self._add_facts(self._taps[str(part.get_column("source")[0])], part)

    def _add_facts(self, tap: SourceTap, found: pl.DataFrame) -> None:
        known = self._facts.get(tap.source, pl.DataFrame(schema=FACT_SCHEMA))
        merged = pl.concat([known, found]).unique(maintain_order=True)
        if merged.height != known.height:
            self._facts[tap.source] = merged
            tap.facts = distinct_facts(merged)
            self._who = None

    def who(self) -> Who:
        """Ranks and hosts from every followed file's path and facts so far."""
        if self._who is None:
            self._who = resolve(self._taps, gpus_per_node=self.gpus_per_node)
        return self._who

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        """The event with its writer's labels and its line's time (one not of a followed file,
        a GPU alert, passes as it is)."""
        tap = self._taps.get(event.source)
        if tap is None:
            return event
        key, given = event.fingerprint, self._given.setdefault(tap.source, {})
        added = given.pop(key, None) if event.status == Status.RESOLVED else None
        if added is None:
            added = writer_labels(tap.source, tap.identity, self.who(), event.text)
            if event.status == Status.FIRING:
                given[key] = added
        event = placed(event, added, self._times[tap.source].time_of)
        return self._retell(event) if self._retell is not None else event

    def round(self, driver: DriverView) -> Sequence[AlertEvent]:
        """After a round's events went out: forget the sources no longer followed, keep only
        the last timed lines of the others."""
        followed = {source for source, _ in self._followed()}
        for source in [source for source in self._taps if source not in followed]:
            del self._taps[source], self._times[source]
            self._given.pop(source, None)
            self._facts.pop(source, None)
            self._who = None
        for times in self._times.values():
            times.trim()
        return []

    def export_state(self) -> Any:
        """Each source's facts and last timed line, and the firing alerts' labels."""
        sources: dict[str, Any] = {}
        kept = {source for source, checkpointed in self._followed() if checkpointed}
        for source in self._taps:
            if source not in kept:
                continue
            last = self._times[source].last()
            rows = self._facts[source].rows() if source in self._facts else []
            sources[source] = {
                "facts": [list(row) for row in rows],
                "last_timed": None if last is None else [last[0], last[1].isoformat()],
                "given": self._given.get(source, {}),
            }
        return {"sources": sources}

    def import_state(self, data: Any) -> None:
        """Restore `export_state`'s data; ValueError when it is not that."""
        if not isinstance(data, dict) or not isinstance(data.get("sources"), dict):
            raise ValueError("placement: expected an object with 'sources'")
        restored: list[tuple[str, list[Any], Any]] = []
        given_by_source: dict[str, dict[str, dict[str, str]]] = {}
        for source, saved in data["sources"].items():
            if not isinstance(saved, dict) or not isinstance(saved.get("facts"), list):
                raise ValueError(f"placement: source {source!r} has no facts list")
            given = saved.get("given", {})
            if not isinstance(given, dict) or not all(
                isinstance(k, str) and _str_map(v) for k, v in given.items()
            ):
                raise ValueError(f"placement: source {source!r}: 'given' is not labels")
            restored.append((source, saved["facts"], saved.get("last_timed")))
            given_by_source[source] = {k: dict(v) for k, v in given.items()}
        for source, rows, last in restored:
            tap = self._tap(source)
            try:
                frame = pl.DataFrame(_padded(rows), schema=FACT_SCHEMA, orient="row")
                if last is not None:
                    line, stamp = int(last[0]), datetime.fromisoformat(str(last[1]))
                    self._times[source].restore(line, stamp)
            except (TypeError, ValueError, IndexError, pl.exceptions.PolarsError) as exc:
                raise ValueError(f"placement: source {source!r}: {exc}") from None
            if frame.height:
                self._facts[source] = frame
                tap.facts = distinct_facts(frame)
        self._given = given_by_source
        self._who = None

    def rename(self, old: str, new: str) -> None:
        """A followed file's source is now called `new` (a new file took its name): what its
        lines said goes with it; the new file under `old` starts afresh."""
        tap = self._taps.pop(old, None)
        if tap is None:
            return
        moved = SourceTap(new, tap.identity)
        moved.facts = tap.facts
        self._taps[new] = moved
        self._times[new] = self._times.pop(old)
        if old in self._facts:
            self._facts[new] = self._facts.pop(old)
        # its firing alerts' keys named the old source; their resolves are placed afresh, from
        # the same facts (a resolve that ends a run carries its firing's line, so its labels)
        self._given.pop(old, None)
        self._who = None


def _padded(rows: list[Any]) -> list[Any]:
    """Fact rows as a checkpoint kept them, the node columns a checkpoint of an older logwatch
    lacks (`logwatch.drivers.noderank`) as nulls."""
    size = len(FACT_SCHEMA)
    return [[*row, *([None] * (size - len(row)))] if isinstance(row, list) else row for row in rows]


def _str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )
