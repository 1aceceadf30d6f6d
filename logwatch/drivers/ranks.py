"""Rank and host on every event, and a time on every event's line: `FleetFacts` taps each
replayed block (`SourceTap.see`), keeps per source the few lines that name a writer or a
failure, and at the end of each file gives its events `labels.rank` / `labels.host` (global
ranks only, strings) and, for a line with no time of its own, the time of the last timed line
before it in the same source (the first after it when none is before), marked
`labels.ts_from_line`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

import polars as pl

from logwatch.alerts import AlertEvent, Status
from logwatch.drivers.layout import PathIdentity, path_identity
from logwatch.drivers.lineinfo import (
    CANDIDATE_COLUMNS,
    FACT_SCHEMA,
    RECORD_SCHEMA,
    classed,
    facts,
    maybe_classed,
)
from logwatch.parse.prefix import line_writer, with_prefixes

CANDIDATE_SCHEMA = {name: RECORD_SCHEMA[name] for name in CANDIDATE_COLUMNS}
WRITER_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "p_rank": pl.Int64(),
    "p_local": pl.Int64(),
    "lines": pl.UInt32(),
    "last_line": pl.Int64(),
    "first_ts": pl.Datetime("us"),
    "last_ts": pl.Datetime("us"),
}
"""Per source and line prefix (one writer): how many lines, the last, the first and last time."""


class SourceTap:
    """One source's view: each block's timed lines, fleet records, facts and writers."""

    def __init__(self, source: str, identity: PathIdentity) -> None:
        self.source = source
        self.identity = identity
        self._timed_lines: list[pl.Series] = []
        self._timed_ts: list[pl.Series] = []
        self._carry: tuple[int, datetime] | None = None  # the last timed line so far
        self.records: list[pl.DataFrame] = []
        self.facts: list[pl.DataFrame] = []
        self.writers: list[pl.DataFrame] = []

    def see(self, frame: pl.DataFrame) -> None:
        """Take one block (with `source`, `line`, `ts`, `text`) before the rules do."""
        if frame.is_empty():
            return
        base = frame.select("source", "line", "ts", "text")
        timed = base.filter(pl.col("ts").is_not_null())
        if timed.height:
            self._timed_lines.append(timed.get_column("line"))
            self._timed_ts.append(timed.get_column("ts"))
        carry_line = self._carry[0] if self._carry else None
        carry_ts = self._carry[1] if self._carry else None
        base = base.with_columns(
            pl.col("ts").is_not_null().alias("timed"),
            pl.col("ts").forward_fill().fill_null(pl.lit(carry_ts, dtype=pl.Datetime("us"))),
            pl.when(pl.col("ts").is_not_null())
            .then(pl.col("line"))
            .forward_fill()
            .fill_null(pl.lit(carry_line, dtype=pl.Int64))
            .alias("_from"),
        )
        base = with_prefixes(base)
        if timed.height:
            last = timed.row(timed.height - 1)
            self._carry = (last[1], last[2])
        self.records.append(maybe_classed(base))
        self.facts.append(facts(base))
        self.writers.append(
            base.group_by("p_rank", "p_local")
            .agg(
                pl.len().cast(pl.UInt32).alias("lines"),
                pl.col("line").max().alias("last_line"),
                pl.col("ts").filter(pl.col("timed")).min().alias("first_ts"),
                pl.col("ts").filter(pl.col("timed")).max().alias("last_ts"),
            )
            .with_columns(pl.lit(self.source).alias("source"))
            .select(list(WRITER_SCHEMA))
        )

    def time_of(self, line: int) -> tuple[int, datetime] | None:
        """The last timed line before `line` and its time (the first timed one when none is
        before), or None when the source has no timed line."""
        if not self._timed_lines:
            return None
        if len(self._timed_lines) > 1:  # joined once, for every event of the file after it
            self._timed_lines = [pl.concat(self._timed_lines)]
            self._timed_ts = [pl.concat(self._timed_ts)]
        lines, stamps = self._timed_lines[0], self._timed_ts[0]
        at = int(lines.search_sorted(line, side="left")) - 1
        at = max(at, 0)
        return int(lines[at]), stamps[at]

    def keep_times(self, lines: Iterable[int]) -> None:
        """Keep of the per-line index only what `time_of` answers for these lines (a file's
        untimed events: what travels back from a worker, `logwatch.drivers.parallel`)."""
        found = sorted({hit for line in set(lines) if (hit := self.time_of(line)) is not None})
        self._timed_lines = [pl.Series("line", [a for a, _ in found], dtype=pl.Int64)]
        self._timed_ts = [pl.Series("ts", [t for _, t in found], dtype=pl.Datetime("us"))]
        if not found:
            self._timed_lines, self._timed_ts = [], []

    def close(self) -> None:
        """Drop the per-line index once the file's events are placed (the rest is small)."""
        self._timed_lines, self._timed_ts = [], []
        self.records = [_concat(self.records, CANDIDATE_SCHEMA)]
        self.facts = [_concat(self.facts, FACT_SCHEMA)]
        self.writers = [_concat(self.writers, WRITER_SCHEMA)]


def _concat(frames: list[pl.DataFrame], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    kept = [frame for frame in frames if frame.height]
    return pl.concat(kept) if kept else pl.DataFrame(schema=dict(schema))


@dataclass(slots=True)
class Who:
    """Ranks and hosts as far as the facts so far know them."""

    world: int | None = None
    source_rank: dict[str, int] = field(default_factory=dict)
    source_host: dict[str, str] = field(default_factory=dict)
    source_local: dict[str, int] = field(default_factory=dict)
    host_local: dict[tuple[str, int], int] = field(default_factory=dict)  # (host, local): rank
    rank_host: dict[int, str] = field(default_factory=dict)
    bus_rank: dict[tuple[str, str], int] = field(default_factory=dict)  # (host, bus): rank
    gpus_per_node: int | None = None  # `--gpus-per-node`: node index x it + local = rank
    source_node: dict[str, int] = field(default_factory=dict)  # a path's `{node}` index

    def rank_of(self, source: str, p_rank: int | None, p_local: int | None) -> int | None:
        """A line's global rank, or None when it cannot be known."""
        if p_rank is not None:
            return p_rank
        local = p_local if p_local is not None else self.source_local.get(source)
        host = self.source_host.get(source)
        if local is not None and host is not None and (host, local) in self.host_local:
            return self.host_local[(host, local)]
        if local is not None:
            by_node = self.by_node(source, local)
            if by_node is not None:
                return by_node
        if p_local is not None:
            return None  # a node file's line of one local rank: not the file's rank
        return self.source_rank.get(source)

    def by_node(self, source: str, local: int) -> int | None:
        """The global rank of `local` on the node `source`'s path names (`{node}`), given
        `--gpus-per-node`; None when either is not known."""
        node = self.source_node.get(source)
        if node is None or self.gpus_per_node is None:
            return None
        return node * self.gpus_per_node + local

    def hosts(self) -> set[str]:
        """Every host named so far."""
        return set(self.source_host.values()) | set(self.rank_host.values())

    def merge(self, other: Who) -> None:
        """Take what `other` knows that this does not."""
        self.world = max(self.world or 0, other.world or 0) or None
        # loops over `other`'s entries only: a file's few into the run's many
        for source, rank in other.source_rank.items():
            self.source_rank.setdefault(source, rank)
        for source, host in other.source_host.items():
            self.source_host.setdefault(source, host)
        for source, local in other.source_local.items():
            self.source_local.setdefault(source, local)
        for key, rank in other.host_local.items():
            self.host_local.setdefault(key, rank)
        for rank, host in other.rank_host.items():
            self.rank_host.setdefault(rank, host)
        for bus, rank in other.bus_rank.items():
            self.bus_rank.setdefault(bus, rank)
        for source, node in other.source_node.items():
            self.source_node.setdefault(source, node)
        self.gpus_per_node = self.gpus_per_node or other.gpus_per_node

    def host_of(self, source: str, rank: int | None, p_host: str | None) -> str | None:
        if p_host is not None:
            return p_host
        if source in self.source_host:
            return self.source_host[source]
        return self.rank_host.get(rank) if rank is not None else None


class FleetFacts:
    """What every source said of its writers, for labels and the fleet post-mortem."""

    def __init__(
        self,
        layout: re.Pattern[str] | None = None,
        *,
        gpus_per_node: int | None = None,
        retell: Callable[[AlertEvent], AlertEvent] | None = None,
    ) -> None:
        self.layout = layout
        self.gpus_per_node = gpus_per_node
        self._retell = retell  # summaries that name a placed label (`drivers.retell`)
        self.taps: dict[str, SourceTap] = {}
        self._groups: dict[str, list[SourceTap]] = {}
        self._who: Who | None = None
        self._live = Who()  # what the files so far said, for each file's labels

    def tap(self, source: str, path: str) -> SourceTap:
        """The tap of one source (a new one; a source replayed twice starts over)."""
        return self.adopt(SourceTap(source, path_identity(path, self.layout)))

    def adopt(self, tap: SourceTap) -> SourceTap:
        """Take a tap filled elsewhere (a worker process) as if this replay had tapped it."""
        source = tap.source
        self.taps[source] = tap
        self._groups.setdefault(tap.identity.group, []).append(tap)
        self._who = None
        return tap

    def label(self, tap: SourceTap, events: Iterable[AlertEvent]) -> list[AlertEvent]:
        """One file's events with their line's time and their writer's rank and host."""
        # this file's process (its sibling files too) against what the files before it said
        group = {t.source: t for t in self._groups.get(tap.identity.group, [tap])}
        self._live.merge(resolve(group, known=self._live, gpus_per_node=self.gpus_per_node))
        who = self._live
        out: list[AlertEvent] = []
        given: dict[str, dict[str, str]] = {}  # an alert's firing labels, for its resolve
        for event in events:
            key = event.fingerprint
            added = given.get(key) if event.status == Status.RESOLVED else None
            if added is None:
                added = writer_labels(tap.source, tap.identity, who, event.text)
                if event.status == Status.FIRING:
                    given[key] = added
            event = placed(event, added, tap.time_of)
            out.append(self._retell(event) if self._retell is not None else event)
        tap.close()
        return out

    def who(self) -> Who:
        """Ranks and hosts from the paths and every fact so far."""
        if self._who is None:
            self._who = resolve(self.taps, gpus_per_node=self.gpus_per_node)
        return self._who

    def records(self) -> pl.DataFrame:
        """Every fleet-relevant line of every source (`RECORD_SCHEMA`), classed."""
        candidates = [r for tap in self.taps.values() for r in tap.records]
        return classed(_concat(candidates, CANDIDATE_SCHEMA))

    def writers(self) -> pl.DataFrame:
        """Every source's writers (`WRITER_SCHEMA`)."""
        return _concat([w for tap in self.taps.values() for w in tap.writers], WRITER_SCHEMA)


def writer_labels(source: str, identity: PathIdentity, who: Who, text: str) -> dict[str, str]:
    """`rank`, `local_rank` and `host` of the writer of a line of `source` (from its prefixes,
    its path and what `who` knows), each where known."""
    p_rank, p_local, p_host = line_writer(text)
    rank = who.rank_of(source, p_rank, p_local)
    host = who.host_of(source, rank, p_host)
    labels: dict[str, str] = {}
    if rank is not None:
        labels["rank"] = str(rank)
    local = p_local if p_local is not None else identity.local
    if local is not None:
        labels["local_rank"] = str(local)
    if host is not None:
        labels["host"] = host
    return labels


def placed(
    event: AlertEvent,
    added: Mapping[str, str],
    time_of: Callable[[int], tuple[int, datetime] | None],
) -> AlertEvent:
    """`event` with its writer's labels `added` and, when its line has no time of its own,
    the time `time_of` gives its line (the last timed line before it), marked `ts_from_line`."""
    ts = event.ts
    if ts is None:
        found = time_of(event.line)
        if found is not None:
            ts = found[1]
            added = {**added, "ts_from_line": str(found[0])}
    if not added and ts is event.ts:
        return event
    kept = dict(event.labels)
    if "rank" in kept:  # the rule's own rank (global): the rank it is about (`run-crashed`'s)
        added = {name: value for name, value in added.items() if name != "rank"}
    elif "rank" in added:
        kept.pop("local_rank", None)  # the rule's local rank: placed after the global one
    return replace(event, ts=ts, labels={**kept, **added})


def resolve(
    taps: Mapping[str, SourceTap], known: Who | None = None, *, gpus_per_node: int | None = None
) -> Who:
    """Ranks and hosts: from paths first, then from the lines that name their writer
    (`known`: what other files said, for these files' labels; `gpus_per_node`: a local rank on
    the node a path's `{node}` names is that node's index times it plus the local rank)."""
    who = Who(gpus_per_node=gpus_per_node)
    all_facts = _concat([f for tap in taps.values() for f in tap.facts], FACT_SCHEMA)
    worlds = [w for w in all_facts.get_column("cworld").to_list() if w is not None]
    worlds += [w for w in all_facts.get_column("sworld").to_list() if w is not None]
    if known is not None and known.world:
        worlds.append(known.world)
    who.world = max(worlds) if worlds else None
    groups: dict[str, list[SourceTap]] = {}
    for tap in taps.values():
        groups.setdefault(tap.identity.group, []).append(tap)
        if tap.identity.host is not None:
            who.source_host[tap.source] = tap.identity.host
        if tap.identity.local is not None:
            who.source_local[tap.source] = tap.identity.local
        if tap.identity.rank is not None:
            who.source_rank[tap.source] = tap.identity.rank
        if tap.identity.node is not None:
            who.source_node[tap.source] = tap.identity.node
    world_level = pl.col("cworld") == pl.lit(who.world) if who.world is not None else pl.lit(True)
    rows = all_facts.with_columns(
        pl.when(world_level).then(pl.col("crank")).otherwise(pl.col("srank")).alias("global"),
        pl.when(pl.col("bus").str.len_chars() == 5)
        .then(pl.col("bus").str.slice(0, 4))
        .otherwise(pl.col("bus"))
        .alias("bus4"),
    )
    for row in rows.iter_rows(named=True):
        _learn(who, row)
    by_source = rows.partition_by("source", as_dict=True, maintain_order=True)
    for group in groups.values():
        own = [by_source[(tap.source,)] for tap in group if (tap.source,) in by_source]
        _group_rank(who, group, _concat(own, rows.schema))
    hosts = set(who.source_host.values()) | set(who.rank_host.values())
    if known is not None:
        hosts |= known.hosts()
    for tap in taps.values():
        if tap.source not in who.source_host:
            parts = re.split(r"[/\\]", tap.source)
            named = [part for part in parts if part in hosts]
            if named:
                who.source_host[tap.source] = named[-1]
    # a torchrun file's rank from its host and local rank, once the host's map is known
    for source, local in who.source_local.items():
        host = who.source_host.get(source)
        if source in who.source_rank or host is None:
            continue
        if (host, local) in who.host_local:
            who.source_rank[source] = who.host_local[(host, local)]
        elif known is not None and (host, local) in known.host_local:
            who.source_rank[source] = known.host_local[(host, local)]
    for source, local in who.source_local.items():
        by_node = who.by_node(source, local)
        if source not in who.source_rank and by_node is not None:
            who.source_rank[source] = by_node
    for source, rank in who.source_rank.items():
        host = who.source_host.get(source)
        if host is not None:
            who.rank_host.setdefault(rank, host)
            mate = who.source_local.get(source)
            if mate is not None:
                who.host_local.setdefault((host, mate), rank)
    return who


def _learn(who: Who, row: Mapping[str, object]) -> None:
    """One fact row: a global rank's host, local rank and GPU bus."""
    rank = row["p_rank"] if row["p_rank"] is not None else row["global"]
    host = row["nhost"] or row["p_host"]
    if not isinstance(rank, int) or not isinstance(host, str):
        return
    who.rank_host.setdefault(rank, host)
    local = row["ndev"] if row["ndev"] is not None else row["p_local"]
    if isinstance(local, int) and row["global"] is not None:
        who.host_local.setdefault((host, local), rank)
    if isinstance(row["bus4"], str):
        who.bus_rank.setdefault((host, row["bus4"]), rank)


def _group_rank(who: Who, group: list[SourceTap], rows: pl.DataFrame) -> None:
    """The rank and host of the files one process wrote, from their unprefixed facts."""
    sources = [tap.source for tap in group]
    own = rows.filter(pl.col("p_local").is_null())
    unprefixed = own.filter(pl.col("p_rank").is_null())
    ranks = {r for r in unprefixed.get_column("global").to_list() if r is not None}
    if not ranks:
        ranks = {r for r in own.get_column("p_rank").to_list() if r is not None}
    named = unprefixed.get_column("nhost").to_list() + unprefixed.get_column("khost").to_list()
    hosts = {h for h in named if h is not None}
    rank = next(iter(ranks)) if len(ranks) == 1 else None  # several: a file of several writers
    host = next(iter(hosts)) if len(hosts) == 1 else None
    for source in sources:
        if rank is not None:
            who.source_rank.setdefault(source, rank)
        if host is not None:
            who.source_host.setdefault(source, host)
