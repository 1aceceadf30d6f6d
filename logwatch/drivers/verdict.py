"""The fleet post-mortem's verdict: which rank failed first, from every rank's fleet-relevant
lines (`logwatch.drivers.ranks`). A primary (the failure itself) beats any symptom; when no rank
printed one, the rank missing from the collective every other rank timed out in, else the rank
whose log stopped first, else the rank its peers name. A victim is never the verdict."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import polars as pl

from logwatch.alerts import AlertEvent, Severity, Status
from logwatch.drivers.lineinfo import CAUSE_TEXT, PRIMARY, RECORD_SCHEMA, SYMPTOM
from logwatch.drivers.ranks import FleetFacts, Who
from logwatch.redact import redact

RULE = "root-cause"
DEFAULT_SKEW = timedelta(seconds=30)
# Among primaries within the skew window of the first: hardware before software.
_KIND_ORDER = {
    "gpu-lost": 0,
    "xid": 1,
    "cuda-error": 2,
    "cuda-oom": 3,
    "host-oom": 4,
    "segfault": 5,
    "nan-loss": 6,
    "nan-grad": 7,
}
FIX = (
    "Fix the culprit named here first (drain its GPU or host for a hardware error, else its "
    "traceback); the other ranks only waited on it. Resume from the last checkpoint."
)


@dataclass(frozen=True, slots=True)
class Cascade:
    """One collective many ranks timed out in."""

    ranks: frozenset[int]
    first: datetime | None
    last: datetime | None
    seq: int | None
    op: str | None
    timeout_ms: int | None


@dataclass(frozen=True, slots=True)
class Fleet:
    """What the fleet post-mortem found: who was there, what each printed, the verdicts."""

    ranks: frozenset[int]
    hosts: frozenset[str]
    world: int
    records: pl.DataFrame  # RECORD_SCHEMA plus the resolved `rank` and `host`; empty: no fleet
    last_seen: dict[int, datetime | None]
    cascades: list[Cascade]
    verdicts: list[AlertEvent] = field(default_factory=list)

    @property
    def is_fleet(self) -> bool:
        """Lines from two or more ranks: a verdict is due when they failed as a crowd."""
        return len(self.ranks) >= 2

    @property
    def failed(self) -> bool:
        """A fleet that failed as a crowd: its post-mortem reads verdict first."""
        return self.is_fleet and bool(self.verdicts)


def analyse(facts: FleetFacts, *, skew: timedelta = DEFAULT_SKEW) -> Fleet:
    """The fleet's ranks, cascades and verdict from what the replay's taps kept."""
    who = facts.who()
    writers = _resolved(facts.writers(), who)
    if not who.bus_rank and writers.get_column("rank").drop_nulls().n_unique() < 2:
        # one writer or none: no fleet (a record's rank is its writer's, or from a kernel
        # line's GPU bus, and no bus is known), so its lines need no classing
        return _fleet(_resolved(pl.DataFrame(schema=RECORD_SCHEMA), who), writers, who, skew)
    records = _resolved(facts.records(), who)
    attempts = {s: t.identity.attempt for s, t in facts.taps.items() if t.identity.attempt}
    if len(set(attempts.values())) > 1:
        # torchrun restarted: each attempt is its own failure, with its own verdict
        shared = [s for s in facts.taps if s not in attempts]  # a host's kernel log
        fleets = []
        for attempt in sorted(set(attempts.values()), key=int):
            sources = [s for s, a in attempts.items() if a == attempt] + shared
            fleets.append(
                _fleet(
                    records.filter(pl.col("source").is_in(sources)),
                    writers.filter(pl.col("source").is_in(sources)),
                    who,
                    skew,
                )
            )
        whole = _fleet(records, writers, who, skew, verdict=False)
        verdicts = [v for f in fleets for v in f.verdicts]
        return replace(whole, verdicts=verdicts)
    return _fleet(records, writers, who, skew)


def _fleet(
    records: pl.DataFrame,
    writers: pl.DataFrame,
    who: Who,
    skew: timedelta,
    *,
    verdict: bool = True,
) -> Fleet:
    """The fleet of these lines, and its verdict when asked and due."""
    last_seen: dict[int, datetime | None] = {}
    for row in writers.filter(pl.col("rank").is_not_null()).iter_rows(named=True):
        prev = last_seen.get(row["rank"])
        ts = row["last_ts"]
        last_seen[row["rank"]] = ts if prev is None or (ts is not None and ts > prev) else prev
    ranks = frozenset(last_seen) | frozenset(
        r for r in records.get_column("rank").to_list() if r is not None
    )
    hosts = frozenset(h for h in who.source_host.values()) | frozenset(who.rank_host.values())
    world = max(who.world or 0, len(ranks))
    cascades = _cascades(records)
    fleet = Fleet(ranks, hosts, world, records, last_seen, cascades)
    if not fleet.is_fleet or not verdict:
        return fleet
    found = _verdict(fleet, who, skew)
    if found is None or "victims" not in found.labels:
        return fleet  # no crowd: one rank's failure is its own alerts' to tell
    if "rank" not in found.labels and "host" not in found.labels:
        return fleet  # a verdict that names no one helps no one
    return Fleet(ranks, hosts, world, records, last_seen, cascades, [found])


def _resolved(frame: pl.DataFrame, who: Who) -> pl.DataFrame:
    """`frame` with each row's global `rank` and `host` (None where it cannot be known),
    decided once per distinct writer (source, prefixes, bus), not per row: a NaN stretch is
    thousands of rows of one writer."""
    keys = [name for name in ("source", "p_rank", "p_local", "p_host", "bus") if name in frame]
    writers = frame.select(keys).unique(maintain_order=True)
    ranks: list[int | None] = []
    hosts: list[str | None] = []
    for row in writers.iter_rows(named=True):
        rank = who.rank_of(row["source"], row["p_rank"], row["p_local"])
        host = who.host_of(row["source"], rank, row.get("p_host"))
        bus = row.get("bus")
        if rank is None and host is not None and bus is not None:
            rank = who.bus_rank.get((host, bus))  # a kernel's Xid names the GPU's bus
        ranks.append(rank)
        hosts.append(host)
    named = writers.with_columns(
        pl.Series("rank", ranks, dtype=pl.Int64), pl.Series("host", hosts, dtype=pl.String)
    )
    return frame.join(named, on=keys, how="left", nulls_equal=True, maintain_order="left")


def _cascades(records: pl.DataFrame) -> list[Cascade]:
    """Each collective (process group, sequence number) that ranks timed out in, largest first."""
    timeouts = records.filter(
        (pl.col("kind") == "nccl-timeout") & pl.col("rank").is_not_null()
    ).with_columns(pl.col("seq").fill_null(-1), pl.col("pg").fill_null(0))
    seqs = timeouts.filter(pl.col("seq") >= 0).group_by("pg", "seq").agg(pl.col("rank").n_unique())
    out = []
    for pg, seq, _ in seqs.sort("rank", "seq", descending=[True, False]).iter_rows():
        # a rank's lines of this collective, and its other timeout lines without a number
        ranks_in = timeouts.filter((pl.col("seq") == seq) & (pl.col("pg") == pg))
        members = set(ranks_in.get_column("rank").to_list())
        rows = timeouts.filter(pl.col("rank").is_in(list(members)))
        stamps = rows.get_column("ts").drop_nulls()
        op = ranks_in.get_column("op").drop_nulls()
        limit = ranks_in.get_column("timeout_ms").drop_nulls()
        out.append(
            Cascade(
                frozenset(members),
                stamps.min() if stamps.len() else None,  # type: ignore[arg-type]  # Datetime
                stamps.max() if stamps.len() else None,  # type: ignore[arg-type]
                None if seq < 0 else int(seq),
                str(op[0]) if op.len() else None,
                int(limit[0]) if limit.len() else None,
            )
        )
    if not out and timeouts.height:
        members = set(timeouts.get_column("rank").to_list())
        stamps = timeouts.get_column("ts").drop_nulls()
        first = stamps.min() if stamps.len() else None
        last = stamps.max() if stamps.len() else None
        out.append(Cascade(frozenset(members), first, last, None, None, None))  # type: ignore[arg-type]
    return out


def _verdict(fleet: Fleet, who: Who, skew: timedelta) -> AlertEvent | None:
    records = fleet.records
    victims_by_rank = _first_symptoms(records)
    found = _first_error(fleet, who, victims_by_rank, skew)
    if found is not None:
        return found
    return _likely(fleet, who, victims_by_rank, skew)


def _first_symptoms(records: pl.DataFrame) -> dict[int, datetime | None]:
    """Each rank that printed a symptom, and when it first did."""
    rows = records.filter((pl.col("cls") == SYMPTOM) & pl.col("rank").is_not_null())
    firsts = rows.group_by("rank").agg(pl.col("ts").min())
    return dict(firsts.iter_rows())


def _first_error(
    fleet: Fleet, who: Who, symptoms: dict[int, datetime | None], skew: timedelta
) -> AlertEvent | None:
    """The earliest primary of a rank that was not already a victim when it printed it."""
    primaries = fleet.records.filter(pl.col("cls") == PRIMARY)
    candidates: list[dict[str, object]] = []
    for row in primaries.iter_rows(named=True):
        rank = row["rank"]
        if rank is None and row["bus"] is not None and row["host"] is not None:
            rank = who.bus_rank.get((row["host"], row["bus"]))
        if rank is None and row["host"] is not None:
            rank = _only_quiet_rank(fleet, row["host"], symptoms)
        ts = row["ts"] if row["timed"] else fleet.last_seen.get(rank) if rank is not None else None
        ts = ts or row["ts"]
        first_symptom = symptoms.get(rank) if rank is not None else None
        if first_symptom is not None and ts is not None and ts > first_symptom:
            continue  # printed after its own timeout: a consequence on a victim
        candidates.append({**row, "rank": rank, "ts": ts})
    if not candidates:
        return None
    timed = [c for c in candidates if c["ts"] is not None]
    earliest = min((c["ts"] for c in timed), default=None)  # type: ignore[type-var]
    window = [
        c
        for c in candidates
        if earliest is None or (c["ts"] is not None and c["ts"] <= earliest + skew)  # type: ignore[operator]
    ]
    window.sort(
        key=lambda c: (
            c["rank"] in symptoms,
            _KIND_ORDER.get(str(c["kind"]), 9),
            c["ts"] or datetime.max,
            str(c["source"]),
            c["line"],
        )
    )
    best = window[0]
    rank = best["rank"]
    if rank is None:  # a host's kernel line: the rank of that host that erred with it
        mates = [c for c in window if c["rank"] is not None and c["host"] == best["host"]]
        rank = mates[0]["rank"] if mates else None
    host = (
        best["host"]
        if best["host"] is not None
        else (who.rank_host.get(rank) if isinstance(rank, int) else None)
    )
    return _event(
        fleet,
        rank if isinstance(rank, int) else None,
        host if isinstance(host, str) else None,
        str(best["kind"]),
        "first-error",
        source=str(best["source"]),
        line=int(best["line"]),  # type: ignore[call-overload]
        ts=best["ts"] if isinstance(best["ts"], datetime) else None,
        text=str(best["text"]),
        what=f"Xid {best['xid']}" if best["kind"] == "xid" and best["xid"] is not None else "",
    )


def _only_quiet_rank(fleet: Fleet, host: str, symptoms: dict[int, datetime | None]) -> int | None:
    """A host-level line's rank: the one rank of that host that is no victim, if one."""
    on_host = fleet.records.filter(pl.col("host") == host).get_column("rank").drop_nulls()
    ranks = set(on_host.to_list()) | {r for r in fleet.last_seen if _host_of(fleet, r) == host}
    quiet = [r for r in ranks if r not in symptoms]
    return quiet[0] if len(quiet) == 1 else None


def _host_of(fleet: Fleet, rank: int) -> str | None:
    rows = fleet.records.filter(pl.col("rank") == rank).get_column("host").drop_nulls()
    return str(rows[0]) if rows.len() else None


def _likely(
    fleet: Fleet, who: Who, symptoms: dict[int, datetime | None], skew: timedelta
) -> AlertEvent | None:
    """No rank printed a primary: the rank missing from the cascade, the first silent one, or
    the one its peers name."""
    cascade = fleet.cascades[0] if fleet.cascades else None
    everyone = set(fleet.ranks) | set(range(fleet.world))
    if cascade is not None:
        missing = sorted(everyone - cascade.ranks - set(symptoms))
        if len(missing) == 1:
            return _quiet_verdict(fleet, who, missing[0], "missing-from-collective")
        if missing:
            first = _first_silent(fleet, missing, cascade, skew)
            if first is not None:
                return _quiet_verdict(fleet, who, first, "missing-from-collective")
    quiet = sorted(everyone - set(symptoms))
    first = _first_silent(fleet, quiet or sorted(fleet.ranks), cascade, skew)
    if first is not None:
        return _quiet_verdict(fleet, who, first, "first-silent")
    peers = fleet.records.get_column("peer").drop_nulls()
    if peers.len():
        named = int(peers.mode().sort()[0])
        return _quiet_verdict(fleet, who, named, "named-by-peers")
    return None


def _first_silent(
    fleet: Fleet, ranks: list[int], cascade: Cascade | None, skew: timedelta
) -> int | None:
    """The rank whose log stopped first, more than `skew` before any other of `ranks` and
    before the cascade."""
    seen = sorted(
        ((fleet.last_seen[r], r) for r in ranks if fleet.last_seen.get(r) is not None),
    )
    if not seen:
        return ranks[0] if len(ranks) == 1 else None
    (ts, rank), rest = seen[0], seen[1:]
    if rest and rest[0][0] - ts <= skew:  # type: ignore[operator]
        return None
    if cascade is not None and cascade.first is not None and ts >= cascade.first:  # type: ignore[operator]
        return None
    return rank


def _quiet_verdict(fleet: Fleet, who: Who, rank: int, basis: str) -> AlertEvent:
    """The verdict on a rank that printed no primary: placed at its last line."""
    host = who.rank_host.get(rank) or _host_of(fleet, rank)
    rows = fleet.records.filter(pl.col("rank") == rank).sort("line")
    source, line, text = "", 0, ""
    if rows.height:
        last = rows.row(rows.height - 1, named=True)
        source, line, text = str(last["source"]), int(last["line"]), str(last["text"])
    for src, r in who.source_rank.items():
        if r == rank and not source:
            source = src
    return _event(
        fleet,
        rank,
        host,
        "none",
        basis,
        source=source,
        line=line,
        ts=fleet.last_seen.get(rank),
        text=text,
    )


def _event(
    fleet: Fleet,
    rank: int | None,
    host: str | None,
    cause: str,
    basis: str,
    *,
    source: str,
    line: int,
    ts: datetime | None,
    text: str,
    what: str = "",
) -> AlertEvent:
    victims: set[int] = set()
    for cascade in fleet.cascades[:1]:
        victims |= cascade.ranks
    symptom_ranks = fleet.records.filter(
        (pl.col("cls") == SYMPTOM) & pl.col("rank").is_not_null()
    ).get_column("rank")
    victims |= set(symptom_ranks.to_list())
    if rank is not None:
        victims.discard(rank)
    who = f"rank {rank}" if rank is not None else "a rank"
    where = f" ({host})" if host else ""
    when = f" at {ts:%H:%M:%S}" if ts is not None else ""
    if basis == "first-error":
        head = f"{who}{where}: {what or CAUSE_TEXT.get(cause, cause)}{when}"
    else:
        reason = {
            "missing-from-collective": "it is missing from the collective the others timed out in",
            "first-silent": "its log stopped first",
            "named-by-peers": "its peers name it",
        }[basis]
        head = f"{who}{where} likely failed first{when}: it printed no error; {reason}"
    summary = f"{head}; {_aftermath(fleet, len(victims))}"
    labels = {
        "rank": "" if rank is None else str(rank),
        "host": host or "",
        "cause": cause,
        "basis": basis,
        "victims": str(len(victims)) if victims else "",
    }
    labels = {key: value for key, value in labels.items() if value}
    return AlertEvent(
        rule=RULE,
        severity=Severity.CRITICAL,
        status=Status.FIRING,
        source=source,
        line=line,
        ts=ts,
        step=None,
        value=None,
        summary=redact(summary),
        fix=FIX,
        text=redact(text),
        labels=labels,
    )


def _aftermath(fleet: Fleet, victims: int) -> str:
    cascade = fleet.cascades[0] if fleet.cascades else None
    if cascade is None:
        return f"{victims} of {fleet.world} ranks then stopped"
    what = " ".join(
        part
        for part in (
            cascade.op or "a collective",
            f"SeqNum {cascade.seq}" if cascade.seq is not None else "",
        )
        if part
    )
    limit = f" ({cascade.timeout_ms // 1000} s)" if cascade.timeout_ms else ""
    return f"{len(cascade.ranks)} of {fleet.world} ranks then timed out in {what}{limit}"
