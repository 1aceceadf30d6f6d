"""A fleet's post-mortem as text and JSON: the verdict first, each cascade as one timeline
entry, the rest in time order across sources, and one summary row per host."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.drivers.lineinfo import SYMPTOM
from logwatch.drivers.replay import ReplayResult
from logwatch.drivers.verdict import Cascade, Fleet
from logwatch.redact import visible
from logwatch.sinks.render import same_incident, timeline_entry
from logwatch.words import counted


def cascade_text(cascade: Cascade, world: int) -> str:
    """`nccl-timeout on 255/256 ranks, 03:00:13-03:00:41, SeqNum 88811 (ALLREDUCE, 600 s)`."""
    span = ""
    if cascade.first is not None and cascade.last is not None:
        span = f", {cascade.first:%H:%M:%S}-{cascade.last:%H:%M:%S}"
    seq = f", SeqNum {cascade.seq}" if cascade.seq is not None else ""
    detail = [part for part in (cascade.op, _seconds(cascade.timeout_ms)) if part]
    more = f" ({', '.join(detail)})" if detail else ""
    return f"nccl-timeout on {len(cascade.ranks)}/{world} ranks{span}{seq}{more}"


def _seconds(ms: int | None) -> str:
    return f"{ms // 1000} s" if ms else ""


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of a fleet's timeline: a verdict, an incident (the events of one line), or a
    symptom many ranks printed, folded (`folded`: its text, `cascade_text`'s for a cascade)."""

    ts: datetime | None
    events: list[AlertEvent]
    folded: str | None = None


def entries(result: ReplayResult, fleet: Fleet) -> list[Entry]:
    """The verdicts, then every event in time order with the symptoms of many ranks folded
    into one entry per kind (each cascade one); the events of one line (`same_incident`) are
    one entry, as in a single file's timeline."""
    out = [Entry(event.ts, [event]) for event in fleet.verdicts]
    symptom_lines = _symptom_lines(fleet.records)
    incidents: list[tuple[int, list[AlertEvent]]] = []
    folded: dict[str, list[AlertEvent]] = defaultdict(list)
    for order, event in enumerate(result.events):
        if any(event is verdict for verdict in fleet.verdicts):
            continue  # first, above
        kind = symptom_lines.get((event.source, event.line))
        if kind is not None:
            folded[kind].append(event)
            continue
        if incidents and same_incident(incidents[-1][1][0], event):
            incidents[-1][1].append(event)
        else:
            incidents.append((order, [event]))
    rows: list[tuple[datetime | None, int, Entry]] = [
        (events[0].ts, order, Entry(events[0].ts, events)) for order, events in incidents
    ]
    for kind, events in folded.items():
        first, text = _fold(kind, events, fleet)
        rows.append((_first_ts(events), -1, Entry(first, events, text)))
    rows.sort(key=lambda row: (row[0] is None, row[0] or datetime.min, row[1]))
    return out + [entry for _, _, entry in rows]


def timeline(result: ReplayResult, fleet: Fleet, *, colour: bool = False) -> list[str]:
    """`entries` as the terminal's timeline lines."""
    return [_line(entry, colour=colour) for entry in entries(result, fleet)]


def _line(entry: Entry, *, colour: bool) -> str:
    if entry.folded is None:
        return timeline_entry(entry.events, colour=colour)
    when = entry.ts.isoformat(sep=" ", timespec="seconds") if entry.ts else "-" * 19
    n = counted(len(entry.events), "alert")
    return f"{when}  CRIT  {visible(entry.folded)} ({n}, per rank in --format jsonl)"


def _symptom_lines(records: pl.DataFrame) -> dict[tuple[str, int], str]:
    rows = records.filter(pl.col("cls") == SYMPTOM).select("source", "line", "kind")
    return {(source, line): kind for source, line, kind in rows.iter_rows()}


def _first_ts(events: list[AlertEvent]) -> datetime | None:
    stamps = [e.ts for e in events if e.ts is not None]
    return min(stamps) if stamps else None


def _fold(kind: str, events: list[AlertEvent], fleet: Fleet) -> tuple[datetime | None, str]:
    """When a symptom many ranks printed began, and its one-line text."""
    if kind == "nccl-timeout" and fleet.cascades:
        return fleet.cascades[0].first, cascade_text(fleet.cascades[0], fleet.world)
    rows = fleet.records.filter(pl.col("kind") == kind)
    ranks = rows.get_column("rank").drop_nulls().n_unique()
    stamps = [e.ts for e in events if e.ts is not None]
    span = f", {min(stamps):%H:%M:%S}-{max(stamps):%H:%M:%S}" if stamps else ""
    return (min(stamps) if stamps else None), f"{kind} on {ranks}/{fleet.world} ranks{span}"


def host_rows(result: ReplayResult, fleet: Fleet) -> list[str]:
    """The summary: one row per host (its ranks, files, lines, time span and alerts)."""
    assert result.facts is not None
    who = result.facts.who()
    hosts: dict[str, dict[str, Any]] = {}
    for source, stats in result.stats.items():
        host = who.source_host.get(source) or "(no host)"
        row = hosts.setdefault(
            host, {"files": 0, "lines": 0, "first": None, "last": None, "alerts": 0, "ranks": set()}
        )
        row["files"] += 1
        row["lines"] += stats.lines
        row["first"] = _earlier(row["first"], stats.first_ts)
        row["last"] = _later(row["last"], stats.last_ts)
    for rank, host in who.rank_host.items():
        if host in hosts:
            hosts[host]["ranks"].add(rank)
    for event in result.events:
        host = event.labels.get("host") or who.source_host.get(event.source) or "(no host)"
        if host in hosts:
            hosts[host]["alerts"] += 1
    culprit = fleet.verdicts[0].labels.get("host") if fleet.verdicts else None
    out = [
        f"{counted(len(fleet.ranks), 'rank')} on {counted(len(fleet.hosts), 'host')}, "
        f"{counted(len(result.stats), 'file')}"
    ]
    out.append(f"{'host':<16} {'ranks':>5} {'files':>5} {'lines':>9}  {'first .. last':<41} alerts")
    for host in sorted(hosts, key=_natural):
        row = hosts[host]
        span = f"{row['first'] or '-'} .. {row['last'] or '-'}"
        mark = "  <- root cause" if host == culprit else ""
        out.append(
            f"{visible(host):<16} {len(row['ranks']):>5} {row['files']:>5} {row['lines']:>9}  "
            f"{span:<41} {row['alerts']}{mark}"
        )
    return out


def _natural(text: str) -> tuple[str, int]:
    digits = "".join(ch for ch in text if ch.isdigit())
    return (text.rstrip("0123456789"), int(digits) if digits else -1)


def _earlier(a: str | None, b: str | None) -> str | None:
    short = _short(b)
    return short if a is None or (short is not None and short < a) else a


def _later(a: str | None, b: str | None) -> str | None:
    short = _short(b)
    return short if a is None or (short is not None and short > a) else a


def _short(iso: str | None) -> str | None:
    return None if iso is None else iso.replace("T", " ")[:19]


def fleet_json(fleet: Fleet) -> dict[str, Any]:
    """`--format json`'s `fleet` object."""
    records = fleet.records
    failed = set(records.filter(pl.col("rank").is_not_null()).get_column("rank").to_list())
    quiet = sorted(set(fleet.ranks) - failed)
    counts = (
        records.filter(pl.col("rank").is_not_null())
        .group_by("cls", "kind")
        .agg(pl.col("rank").n_unique().alias("ranks"), pl.len().alias("lines"))
        .sort("cls", "kind")
    )
    silent = {
        str(rank): _iso(fleet.last_seen.get(rank))
        for rank in sorted(set(range(fleet.world)) | set(fleet.ranks))
        if rank not in failed
    }
    return {
        "ranks": len(fleet.ranks),
        "world": fleet.world,
        "hosts": sorted(fleet.hosts, key=_natural),
        "ranks_without_failure": quiet,
        "silent_ranks": silent,
        "classes": [
            {"class": cls, "kind": kind, "ranks": ranks, "lines": lines}
            for cls, kind, ranks, lines in counts.iter_rows()
        ],
        "cascades": [
            {
                "ranks": len(c.ranks),
                "first": _iso(c.first),
                "last": _iso(c.last),
                "seq": c.seq,
                "op": c.op,
                "timeout_ms": c.timeout_ms,
            }
            for c in fleet.cascades
        ],
        "verdicts": [event.to_json() for event in fleet.verdicts],
    }


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None
