"""Rank and host on every event, and a time on every event's line: `FleetFacts` taps each
replayed block (`SourceTap.see`), keeps per source the few lines that name a writer or a
failure, and at the end of each file gives its events `labels.rank` / `labels.host` (global
ranks only, strings) and, for a line with no time of its own, the time of the last timed line
before it in the same source (the first after it when none is before), marked
`labels.ts_from_line`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field, replace
from datetime import datetime

import polars as pl

from logwatch.alerts import AlertEvent, Status
from logwatch.drivers.layout import PathIdentity, path_identity
from logwatch.drivers.lineinfo import (
    CANDIDATE_COLUMNS,
    RECORD_SCHEMA,
    WRITER_SCHEMA,
    Fact,
    Tapped,
    classed,
    tapped,
)
from logwatch.drivers.noderank import host_ranks, late_hosts, learn_nodes
from logwatch.parse.prefix import line_writer

CANDIDATE_SCHEMA = {name: RECORD_SCHEMA[name] for name in CANDIDATE_COLUMNS}


class SourceTap:
    """One source's view: each block's timed lines, fleet records, facts and writers."""

    def __init__(self, source: str, identity: PathIdentity) -> None:
        self.source = source
        self.identity = identity
        self._timed_lines: list[pl.Series] = []
        self._timed_ts: list[pl.Series] = []
        self._carry: datetime | None = None  # the time of the last timed line so far
        self.records: list[pl.DataFrame] = []
        self.facts: dict[Fact, None] = {}  # the distinct facts, in the order first seen
        self.writers: list[pl.DataFrame] = []

    def see(self, frame: pl.DataFrame) -> None:
        """Take one block (with `source`, `line`, `ts`, `text`) before the rules do."""
        if frame.is_empty():
            return
        files = pl.repeat(0, frame.height, dtype=pl.UInt32, eager=True)
        found = tapped(frame, files, self._carry)[0]
        if found is not None:
            self.take(found)

    def take(self, found: Tapped) -> None:
        """Take what `tapped` found in this source's next block (or its whole file, parsed
        with its group's)."""
        if found.timed_lines.len():
            self._timed_lines.append(found.timed_lines)
            self._timed_ts.append(found.timed_ts)
            self._carry = found.timed_ts[-1]
        self.records.append(found.records)
        self.facts.update(dict.fromkeys(found.facts))
        self.writers.append(found.writers)

    def time_of(self, line: int) -> tuple[int, datetime] | None:
        """The last timed line before the untimed line `line` and its time (the first timed
        one when none is before), or None when the source has no timed line. The index keeps
        only the timed lines an untimed line can take its time from (`lineinfo.tapped`)."""
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
        self._timed_lines, self._timed_ts = [], []
        if found:
            self._timed_lines = [pl.Series("line", [a for a, _ in found], dtype=pl.Int64)]
            self._timed_ts = [pl.Series("ts", [t for _, t in found], dtype=pl.Datetime("us"))]

    def close(self) -> None:
        """Drop the per-line index once the file's events are placed (the rest is small)."""
        self._timed_lines, self._timed_ts = [], []
        self.records = _joined(self.records)
        self.writers = _joined(self.writers)


def _joined(frames: list[pl.DataFrame]) -> list[pl.DataFrame]:
    """The frames with rows, as one (or none: an empty frame is not made, 100 000 cost
    seconds)."""
    kept = [frame for frame in frames if frame.height]
    return [pl.concat(kept)] if len(kept) > 1 else kept


def _concat(frames: list[pl.DataFrame], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    kept = [frame for frame in frames if frame.height]
    if len(kept) == 1:
        return kept[0]
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
    # the global rank of each local rank of the node a source's launcher lines describe
    source_globals: dict[str, tuple[int, ...]] = field(default_factory=dict)

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
        """The global rank of `local` on the node `source`'s launcher lines describe
        (`global_ranks=[...]`, `group_rank=N`: `logwatch.drivers.noderank`), else on the node
        its path names (`{node}`) given `--gpus-per-node`; None when not known."""
        said = self.source_globals.get(source)
        if said is not None:
            return said[local] if 0 <= local < len(said) else None
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
        for source, ranks in other.source_globals.items():
            self.source_globals.setdefault(source, ranks)
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
        self._live_hosts: set[str] = set()  # its hosts (`Who.hosts`), kept as it grows
        # the rows that taps adopted from workers sent apart, a task's at a time (`keep`)
        self._kept: list[tuple[pl.DataFrame, pl.DataFrame]] = []
        self._kept_at: dict[str, tuple[int, int]] = {}  # source: (task's frames, tap's place)
        self._replaced = False  # a source adopted twice: only its last tap's rows count

    def tap(self, source: str, path: str) -> SourceTap:
        """The tap of one source (a new one; a source replayed twice starts over)."""
        return self.adopt(SourceTap(source, path_identity(path, self.layout)))

    def adopt(self, tap: SourceTap) -> SourceTap:
        """Take a tap filled elsewhere (a worker process) as if this replay had tapped it."""
        source = tap.source
        self._replaced = self._replaced or source in self.taps
        self.taps[source] = tap
        self._groups.setdefault(tap.identity.group, []).append(tap)
        self._who = None
        return tap

    def label(self, tap: SourceTap, events: Iterable[AlertEvent]) -> list[AlertEvent]:
        """One file's events with their line's time and their writer's rank and host."""
        # this file's process (its sibling files too) against what the files before it said
        group = {t.source: t for t in self._groups.get(tap.identity.group, [tap])}
        said = resolve(
            group,
            known=self._live,
            known_hosts=self._live_hosts,
            gpus_per_node=self.gpus_per_node,
        )
        who = self._live
        who.merge(said)
        # what `said` named is now in `who` (its own or what `who` held already)
        self._live_hosts.update(who.source_host[source] for source in said.source_host)
        self._live_hosts.update(who.rank_host[rank] for rank in said.rank_host)
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

    def keep(self, taps: list[SourceTap], records: pl.DataFrame, writers: pl.DataFrame) -> None:
        """The records (classed) and writers of `taps` (a task's, adopted in this order), sent
        as one frame each (a frame per file costs the client more than its rows): each row's
        `_tap` is its tap's place in `taps`."""
        self._kept.append((records, writers))
        for place, tap in enumerate(taps):
            self._kept_at[tap.source] = (len(self._kept) - 1, place)

    def records(self) -> pl.DataFrame:
        """Every fleet-relevant line of every source (`RECORD_SCHEMA`), classed."""
        own = classed(
            _concat([r for tap in self.taps.values() for r in tap.records], CANDIDATE_SCHEMA)
        )
        return _concat([own, *self._kept_rows(0, RECORD_SCHEMA)], RECORD_SCHEMA)

    def writers(self) -> pl.DataFrame:
        """Every source's writers (`WRITER_SCHEMA`)."""
        own = [w for tap in self.taps.values() for w in tap.writers]
        return _concat(own + self._kept_rows(1, WRITER_SCHEMA), WRITER_SCHEMA)

    def _kept_rows(self, part: int, schema: Mapping[str, pl.DataType]) -> list[pl.DataFrame]:
        """The rows `keep` took (`part` 0: records, 1: writers), as `taps` orders them."""
        if not self._kept:
            return []
        tapped = {**schema, "_tap": pl.UInt32()}
        rows = _concat([kept[part] for kept in self._kept], tapped)
        if not self._replaced:
            return [rows.drop("_tap")]
        # a source replayed twice: its last tap's rows, in its first tap's place (as `taps`)
        chunks = [
            pl.repeat(i, kept[part].height, dtype=pl.UInt32, eager=True)
            for i, kept in enumerate(self._kept)
        ]
        place = {source: i for i, source in enumerate(self.taps)}
        keys = pl.DataFrame(
            [(chunk, at, place[source]) for source, (chunk, at) in self._kept_at.items()],
            schema={"_chunk": pl.UInt32, "_tap": pl.UInt32, "_place": pl.Int64},
            orient="row",
        )
        rows = rows.hstack([pl.concat(chunks).alias("_chunk")])
        rows = rows.join(keys, on=["_chunk", "_tap"], how="inner", maintain_order="left")
        return [rows.sort("_place", maintain_order=True).drop("_chunk", "_tap", "_place")]


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
    taps: Mapping[str, SourceTap],
    known: Who | None = None,
    known_hosts: Set[str] | None = None,
    *,
    gpus_per_node: int | None = None,
) -> Who:
    """Ranks and hosts: from paths first, then from the lines that name their writer
    (`known`: what other files said, for these files' labels; `known_hosts`: its hosts, when
    the caller keeps them; `gpus_per_node`: a local rank on the node a path's `{node}` names
    is that node's index times it plus the local rank). A loop over each source's distinct
    facts (a few), not its lines."""
    who = Who(gpus_per_node=gpus_per_node)
    rows = [(tap.source, fact) for tap in taps.values() for fact in tap.facts]
    worlds = [f.cworld for _, f in rows if f.cworld is not None]
    worlds += [f.sworld for _, f in rows if f.sworld is not None]
    if known is not None and known.world:
        worlds.append(known.world)
    if not worlds:  # a launcher's or a script's WORLD_SIZE only where no NCCL line says it
        worlds = [f.gworld for _, f in rows if f.gworld is not None]
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
    by_source: dict[str, list[tuple[Fact, int | None]]] = {}
    for source, fact in rows:
        # a comm of the whole world names the global rank; a smaller one, its own
        world_level = who.world is None or fact.cworld == who.world
        rank = fact.crank if world_level else fact.srank
        _learn(who, fact, rank)
        by_source.setdefault(source, []).append((fact, rank))
    for group in groups.values():
        own = [row for tap in group for row in by_source.get(tap.source, ())]
        if own:
            _group_rank(who, group, own)
    # what launcher lines said of nodes: a local rank's global rank without --gpus-per-node
    said = [(source, f.gnode, f.gper, f.granks, f.gmap) for source, f in rows]
    who.source_globals.update(learn_nodes(said, who.gpus_per_node, who.host_local, who.rank_host))
    lacking = [source for source in taps if source not in who.source_host]
    if lacking:  # a host named anywhere that is a folder of the path
        hosts = set(who.source_host.values()) | set(who.rank_host.values())
        if known is not None:
            hosts |= known.hosts() if known_hosts is None else known_hosts
        for source in lacking:
            named = [part for part in re.split(r"[/\\]", source) if part in hosts]
            if named:
                who.source_host[source] = named[-1]
    host_ranks(who.source_globals, who.source_host, who.host_local, who.rank_host)
    if known is not None:  # nodes described by files seen before their host was (an agent's log)
        unplaced = {s: r for s, r in known.source_globals.items() if s not in known.source_host}
        late_hosts(unplaced, who.source_host, who.host_local, who.rank_host)
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


def _learn(who: Who, fact: Fact, global_rank: int | None) -> None:
    """One fact: a global rank's host, local rank and GPU bus."""
    rank = fact.p_rank if fact.p_rank is not None else global_rank
    host = fact.nhost or fact.p_host
    if rank is None or host is None:
        return
    who.rank_host.setdefault(rank, host)
    local = fact.ndev if fact.ndev is not None else fact.p_local
    if local is not None and global_rank is not None:
        who.host_local.setdefault((host, local), rank)
    if fact.bus4 is not None:
        who.bus_rank.setdefault((host, fact.bus4), rank)


def _group_rank(who: Who, group: list[SourceTap], rows: list[tuple[Fact, int | None]]) -> None:
    """The rank and host of the files one process wrote, from their unprefixed facts."""
    own = [(fact, rank) for fact, rank in rows if fact.p_local is None]
    unprefixed = [(fact, rank) for fact, rank in own if fact.p_rank is None]
    ranks = {rank for _, rank in unprefixed if rank is not None}
    if not ranks:
        ranks = {fact.p_rank for fact, _ in own if fact.p_rank is not None}
    named = [fact.nhost for fact, _ in unprefixed] + [fact.khost for fact, _ in unprefixed]
    hosts = {h for h in named if h is not None}
    rank = next(iter(ranks)) if len(ranks) == 1 else None  # several: a file of several writers
    host = next(iter(hosts)) if len(hosts) == 1 else None
    for tap in group:
        if rank is not None:
            who.source_rank.setdefault(tap.source, rank)
        if host is not None:
            who.source_host.setdefault(tap.source, host)
