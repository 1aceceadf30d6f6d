"""Who wrote each line of a multi-rank log and what kind of failure line it is, as polars
expressions over a block: the launchers' line prefixes (`[rankN]:`, `[defaultL]:`, `N: `,
`[1,N]<stderr>:`, pdsh `host: `), the lines that name a rank or host (NCCL `host:pid:tid [L]`
headers and `comm ... rank R nRanks W`, `Setting up process group ... [rank=R]`, a kernel
log's host, what a launcher says of its node: `logwatch.drivers.noderank`), and for
fleet-relevant lines their class (`logwatch.drivers.classes`): a primary (the failure itself)
or a symptom (what the other ranks print because of it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import polars as pl

# re-exported (`as`): their home was here
from logwatch.drivers.classes import CAUSE_TEXT as CAUSE_TEXT
from logwatch.drivers.classes import (
    CLASS_ANY,
    CLASS_GATE,
    CLASSES,
    IDENTITY_ANY,
    NONFINITE_CLASSES,
    OTHER_ANY,
    WORD_ANY,
)
from logwatch.drivers.classes import IDENTITY_WORDS as IDENTITY_WORDS
from logwatch.drivers.classes import PRIMARY as PRIMARY
from logwatch.drivers.classes import SYMPTOM as SYMPTOM
from logwatch.drivers.noderank import NODE_PATTERNS, NODE_SCHEMA
from logwatch.parse.prefix import PREFIX, with_prefixes
from logwatch.parse.prefix import prefixes as prefixes  # re-exported: its home was here

# Lines that say who wrote them (kept per source to resolve ranks and hosts): NCCL's INFO lines
# (`host:pid:tid [dev] NCCL INFO comm 0x.. rank R nRanks W ... busId B`), torch's process group
# setup, a kernel log's host.
NCCL_INFO = (
    r"^(?P<nhost>[A-Za-z][\w.-]*):\d+:\d+ \[(?P<ndev>\d+)\] NCCL INFO "
    r"(?:(?:ncclCommInitRank )?comm 0x[0-9a-fA-F]+ rank (?P<crank>\d+) n[Rr]anks (?P<cworld>\d+)"
    r"(?:.*?busId (?P<bus>[0-9a-fA-F]+))?)?"
)
SETUP = r"Setting up process group[^\n]*\[rank=(?P<srank>\d+), world_size=(?P<sworld>\d+)\]"
KERNEL = r"^(?:\S+|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) (?P<khost>[A-Za-z][\w.-]*) kernel:"


_NUMBERS = {
    "seq": r"SeqNum=(\d+)|NCCL work: (\d+)|work sequence id: (\d+)|detected by watchdog at work: (\d+)",
    "timeout_ms": r"Timeout\(ms\)=(\d+)",
    "enqueued": r"last enqueued (?:NCCL )?work: (-?\d+)",
    "completed": r"last completed (?:NCCL )?work: (-?\d+)",
    "pg": r"\[PG (?:ID )?(\d+)",
    "peer": r"timeout from\s+rank (\d+)",
}
_OP = r"OpType=(\w+)"
_XID_CODE = r"NVRM: Xid \([^)]*\): (\d+)"
_XID_BUS = r"NVRM: Xid \((?:PCI:)?[0-9A-Fa-f]{4}:([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})"

RECORD_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "line": pl.Int64(),
    "ts": pl.Datetime("us"),
    "timed": pl.Boolean(),
    "p_rank": pl.Int64(),
    "p_local": pl.Int64(),
    "p_host": pl.String(),
    "kind": pl.String(),
    "cls": pl.String(),
    "seq": pl.Int64(),
    "op": pl.String(),
    "pg": pl.Int64(),
    "timeout_ms": pl.Int64(),
    "enqueued": pl.Int64(),
    "completed": pl.Int64(),
    "peer": pl.Int64(),
    "xid": pl.Int64(),
    "bus": pl.String(),
    "text": pl.String(),
}
"""One fleet-relevant line: where, when (`timed`: its own time, else the source's last), who
by its prefixes, its class and kind, and the collective it names."""

FACT_SCHEMA: dict[str, pl.DataType] = {
    "source": pl.String(),
    "p_rank": pl.Int64(),
    "p_local": pl.Int64(),
    "p_host": pl.String(),
    "nhost": pl.String(),
    "ndev": pl.Int64(),
    "crank": pl.Int64(),
    "cworld": pl.Int64(),
    "srank": pl.Int64(),
    "sworld": pl.Int64(),
    "khost": pl.String(),
    "bus": pl.String(),
    **NODE_SCHEMA,
}
"""One line that names its writer (rank, host, GPU, world size) or its node (group rank,
local world size, global ranks: `logwatch.drivers.noderank`)."""


def maybe_classed(
    frame: pl.DataFrame, keep: tuple[str, ...] = (), *, dense: bool | None = None
) -> pl.DataFrame:
    """The rows of a block that may be fleet-relevant (one literal pass; `classed` decides,
    once for every source, as its regexes cost more per call than per line). `dense`: whether
    most lines hold a class word (None: as most of the block's first lines do), which takes
    `_dense_kept`'s way to the same rows."""
    text = pl.col("text")
    if dense is None:
        dense = mostly_worded(frame)
    if dense:
        rows = frame.filter(_dense_kept(frame))
    else:
        rows = frame.filter(text.str.contains(CLASS_ANY))
        # `classed`'s own first filter, on the rows the literals pass: a word can be on every
        # line (Megatron's `number of nan iterations: 0`, `check-inf`), and what passes is kept
        # to the file's end. The whole gate is one slow regex (no literal to start from): only
        # the NaN and Inf classes' own run on every row, the whole gate only where another
        # class's words are (`OTHER_ANY`: any other class's match has one of them).
        marks = rows.select(
            text.str.contains(NONFINITE_CLASSES).fill_null(False).alias("nonfinite"),
            text.str.contains(OTHER_ANY).fill_null(False).alias("other"),
        )
        kept, other = marks.get_column("nonfinite"), marks.get_column("other")
        undecided = other & ~kept
        if undecided.any():
            gated = rows.filter(undecided).select(text.str.contains(CLASS_GATE).fill_null(False))
            kept = kept.scatter(undecided.arg_true(), gated.to_series())
        rows = rows.filter(kept)
    # kept to the file's end: in buffers of their own, not views into the whole block's
    return rows.select(*keep, *CANDIDATE_COLUMNS).with_columns(_OWN_TEXT)


# Text kept to a file's end in buffers of its own: a column cut from a block's rows holds the
# block's buffers (the lines' text; a writer's one `source` held that column's, +35 MB retained
# over the 730 MB DFlash file; the few records' `source` views cost less than copies).
_OWN_TEXT = pl.col("text") + pl.lit("")
_OWN_SOURCE = pl.col("source") + pl.lit("")
_SAMPLE_ROWS = 256
"""How many of a block's first lines tell whether most of its lines hold a class word."""


def mostly_worded(frame: pl.DataFrame) -> bool:
    """Whether most of the first lines of `frame` hold a class word (`CLASS_ANY`): then a
    literal pass would pass nearly every line, and `maybe_classed` ends with it instead."""
    head = frame.head(_SAMPLE_ROWS)
    if not head.height:
        return False
    return bool(head.select(pl.col("text").str.contains(CLASS_ANY).mean()).item() > 0.5)


def _dense_kept(frame: pl.DataFrame) -> pl.Series:
    """The rows `maybe_classed` keeps, for a block most of whose lines hold a class word
    (Megatron's `number of nan iterations: 0` on every line), where the literal pass would pass
    nearly every line: the NaN classes' patterns and the other classes' words over every line,
    and the literals (which the rows kept must hold: a class word) and the whole gate only on
    the few lines these leave. Kept: a class word and a NaN class's match, or a class word,
    another class's word and the whole gate's match."""
    text = pl.col("text")
    marks = frame.select(
        text.str.contains(NONFINITE_CLASSES).fill_null(False).alias("nonfinite"),
        text.str.contains(OTHER_ANY).fill_null(False).alias("other"),
    )
    nonfinite, other = marks.get_column("nonfinite"), marks.get_column("other")
    kept = nonfinite | other
    if not kept.any():
        return kept
    rows = kept.arg_true()
    some = frame.get_column("text").gather(rows)
    decided = some.to_frame().select(text.str.contains(CLASS_ANY).fill_null(False)).to_series()
    undecided = other.gather(rows) & ~nonfinite.gather(rows)
    if undecided.any():  # the whole gate, slow, only where another class's words decide
        at = undecided.arg_true()
        gate = some.gather(at).to_frame().select(text.str.contains(CLASS_GATE).fill_null(False))
        decided = decided.scatter(at, decided.gather(at) & gate.to_series())
    return kept.scatter(rows, decided)


CANDIDATE_COLUMNS = ["source", "line", "ts", "timed", "p_rank", "p_local", "p_host", "text"]


def classed(frame: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """The fleet-relevant rows (`CANDIDATE_COLUMNS`) as `RECORD_SCHEMA` rows (after the `keep`
    columns of `frame`)."""
    rows = frame.filter(pl.col("text").str.contains(CLASS_GATE))
    if rows.is_empty():
        return pl.DataFrame(schema={**{name: frame.schema[name] for name in keep}, **RECORD_SCHEMA})
    text = pl.col("text")
    kind: pl.Expr = pl.lit(None, dtype=pl.String)
    cls: pl.Expr = pl.lit(None, dtype=pl.String)
    for name, klass, pattern in reversed(CLASSES):
        hit = text.str.contains(pattern)
        kind = pl.when(hit).then(pl.lit(name)).otherwise(kind)
        cls = pl.when(hit).then(pl.lit(klass)).otherwise(cls)
    numbers = [_first_number(text, pattern).alias(name) for name, pattern in _NUMBERS.items()]
    bus = text.str.extract_groups(_XID_BUS)
    out = rows.with_columns(
        kind.alias("kind"),
        cls.alias("cls"),
        text.str.extract(_OP, 1).alias("op"),
        text.str.extract(_XID_CODE, 1).cast(pl.Int64, strict=False).alias("xid"),
        pl.concat_str(bus.struct.field("1"), bus.struct.field("2")).str.to_lowercase().alias("bus"),
        *numbers,
    ).filter(pl.col("kind").is_not_null())
    return out.select(*keep, *(pl.col(name).cast(dtype) for name, dtype in RECORD_SCHEMA.items()))


def _first_number(text: pl.Expr, pattern: str) -> pl.Expr:
    """The first capture group of any alternative of `pattern` that matched, as an integer."""
    groups = text.str.extract_groups(pattern)
    count = re.compile(pattern).groups
    fields = [groups.struct.field(str(i)) for i in range(1, count + 1)]
    return pl.coalesce(*fields).cast(pl.Int64, strict=False)


def facts(frame: pl.DataFrame, keep: tuple[str, ...] = ()) -> pl.DataFrame:
    """The rows of a block that name their writer, as `FACT_SCHEMA` rows (and the `keep`
    columns of `frame`), in the order of the patterns that found them."""
    rows = frame.filter(pl.col("text").str.contains(IDENTITY_ANY))
    if rows.is_empty():
        return pl.DataFrame(schema={**FACT_SCHEMA, **{name: frame.schema[name] for name in keep}})
    # The identity patterns read the line after its launcher prefixes.
    rows = rows.with_columns(pl.col("text").str.replace(PREFIX, "").alias("_body"))
    body = pl.col("_body")
    parts = []
    found_by = (("NCCL INFO", NCCL_INFO), ("Setting up", SETUP), (" kernel:", KERNEL))
    for word, pattern in (*found_by, *NODE_PATTERNS):
        some = rows.filter(body.str.contains(word, literal=True))
        if some.height:
            found = some.with_columns(body.str.extract_groups(pattern).alias("_found"))
            parts.append(found.unnest("_found"))
    out = pl.concat(parts, how="diagonal_relaxed") if parts else rows.clear()
    for name, dtype in FACT_SCHEMA.items():
        if name not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=dtype).alias(name))
    out = out.with_columns(pl.col("bus").str.to_lowercase())
    said = ("nhost", "crank", "srank", "khost", *NODE_SCHEMA)
    known = pl.any_horizontal(pl.col(name).is_not_null() for name in said)
    return out.filter(known).select(
        *(pl.col(name).cast(dtype, strict=False) for name, dtype in FACT_SCHEMA.items()), *keep
    )


TAPPED_COLUMNS = ["source", "line", "ts", "text"]  # what a tap reads of a frame


class Fact(NamedTuple):
    """One distinct line-named writer fact of a source (a `FACT_SCHEMA` row less its source and
    raw bus; `bus4`: the bus as an Xid line names it)."""

    p_rank: int | None
    p_local: int | None
    p_host: str | None
    nhost: str | None
    ndev: int | None
    crank: int | None
    cworld: int | None
    srank: int | None
    sworld: int | None
    khost: str | None
    bus4: str | None
    gnode: int | None = None
    gper: int | None = None
    granks: str | None = None
    gmap: str | None = None
    gworld: int | None = None


@dataclass(frozen=True, slots=True)
class Tapped:
    """What a source's tap keeps of one block: its timed lines and their times, its
    maybe fleet-relevant lines (`CANDIDATE_COLUMNS`, for `classed`), the distinct facts naming its writers (in the
    order first seen), its writers (`WRITER_SCHEMA`)."""

    timed_lines: pl.Series
    timed_ts: pl.Series
    records: pl.DataFrame
    facts: tuple[Fact, ...]
    writers: pl.DataFrame


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

_BUS4 = (
    pl.when(pl.col("bus").str.len_chars() == 5)
    .then(pl.col("bus").str.slice(0, 4))
    .otherwise(pl.col("bus"))
    .alias("bus4")
)


def distinct_facts(found: pl.DataFrame) -> dict[Fact, None]:
    """`FACT_SCHEMA` rows as a tap keeps them: the distinct `Fact`s, in the order first seen."""
    rows = found.with_columns(_BUS4).select(Fact._fields).rows()
    return dict.fromkeys(Fact(*row) for row in rows)


def tapped(
    frame: pl.DataFrame, files: pl.Series, carry_ts: datetime | None = None
) -> list[Tapped | None]:
    """What a tap keeps of each of the files whose lines `frame` holds one file after another
    (`source`, `line`, `ts`, `text`; `files`: each row's file, 0, 1, ... in order), in one pass
    over them all: the same as one pass per file. `carry_ts`: the time before the first file's
    first line (its earlier block's last). None for a file without lines."""
    count = int(files.max()) + 1 if files.len() else 0  # type: ignore[arg-type]  # UInt32
    ts = pl.col("ts")

    def per_file(expr: pl.Expr) -> pl.Expr:
        # a window per file only where there are several (a window costs a group-by)
        return expr if count == 1 else expr.over("_file")

    base = frame.select(TAPPED_COLUMNS).hstack([files.alias("_file")])
    base = base.with_columns(
        ts.is_not_null().alias("timed"),
        per_file(ts.forward_fill()).fill_null(pl.lit(carry_ts, dtype=pl.Datetime("us"))),
    )
    base = with_prefixes(base)  # extracted only when some line of the group has a prefix
    # The timed lines an untimed line can take its time from: each one followed by an untimed
    # line (or by the end of the block), and each file's first (`SourceTap.time_of` answers
    # only for untimed lines). Not every timed line: that index grew with the file.
    after = per_file(pl.col("timed").shift(-1))
    first = pl.col("timed") & (per_file(pl.col("timed").cum_sum()) == 1)
    kept = pl.col("timed") & (after.is_null() | ~after | first)
    timed = base.filter(kept).select("_file", "line", "ts")
    # The lines with a class or an identity word, in one literal pass (two cost a third more),
    # unless most lines hold a class word (then `maybe_classed` ends with its literals).
    dense = mostly_worded(base)
    words = base if dense else base.filter(pl.col("text").str.contains(WORD_ANY))
    # classed once for every source, at the end
    records = maybe_classed(words, keep=("_file",), dense=dense)
    # each file's facts together, in the order of its own pass; a fact said again adds nothing
    found = facts(words, keep=("_file",)).sort("_file", maintain_order=True)
    found = found.with_columns(_BUS4).select("_file", *Fact._fields).unique(maintain_order=True)
    writers = _writers(base, one_file=count == 1)
    by_file: list[list[Fact]] = [[] for _ in range(count)]
    for row in found.iter_rows():
        by_file[row[0]].append(Fact(*row[1:]))
    sizes = files.value_counts(sort=False)
    lines = dict(
        zip(
            sizes.get_column(files.name).to_list(), sizes.get_column("count").to_list(), strict=True
        )
    )
    cuts = [_cut(part, count) for part in (timed, records, writers)]
    return [
        Tapped(
            cuts[0][i].get_column("line"),
            cuts[0][i].get_column("ts"),
            cuts[1][i],
            tuple(by_file[i]),
            cuts[2][i],
        )
        if lines.get(i)
        else None
        for i in range(count)
    ]


_WRITER_AGGS = [
    pl.len().cast(pl.UInt32).alias("lines"),
    pl.col("line").max().alias("last_line"),
    pl.col("ts").filter(pl.col("timed")).min().alias("first_ts"),
    pl.col("ts").filter(pl.col("timed")).max().alias("last_ts"),
]
_WRITER_KEYS = ["_file", "source", "p_rank", "p_local"]


def _writers(base: pl.DataFrame, *, one_file: bool) -> pl.DataFrame:
    """`WRITER_SCHEMA` rows (after `_file`): per file, source and line prefix, in the order first
    seen. One file of one source whose lines have no prefix (a single trainer's log, the common
    case) is one writer: aggregated without a group-by, which costs a hash of every line."""
    out: pl.DataFrame | None = None
    height = base.height
    unprefixed = (
        base.get_column("p_rank").null_count() == height
        and base.get_column("p_local").null_count() == height
    )
    if one_file and unprefixed and height:
        source = pl.col("source")
        flat = base.select(
            *(pl.col(name).first() for name in _WRITER_KEYS),
            *_WRITER_AGGS,
            (source == source.first()).all(ignore_nulls=False).alias("_one"),
        )
        if flat.item(0, "_one") is True:
            out = flat.drop("_one")
    if out is None:
        out = base.group_by(*_WRITER_KEYS, maintain_order=True).agg(*_WRITER_AGGS)
    # kept to the file's end (`SourceTap.writers`): `source` in a buffer of its own
    out = out.with_columns(_OWN_SOURCE)
    return out.select("_file", *(pl.col(name).cast(dtype) for name, dtype in WRITER_SCHEMA.items()))


def _cut(frame: pl.DataFrame, count: int) -> list[pl.DataFrame]:
    """`frame` (sorted by `_file`) as one frame per file, `_file` dropped."""
    ids = frame.get_column("_file")
    ends = ids.search_sorted(pl.Series(range(1, count + 1), dtype=ids.dtype), side="left")
    rows = frame.drop("_file")
    out, start = [], 0
    for end in ends.to_list():
        out.append(rows.slice(start, end - start))
        start = end
    return out
