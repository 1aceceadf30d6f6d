"""Who wrote a line of a multi-rank log, by the prefixes launchers put on it: `[rankN]:`,
torchrun's `[defaultL]:` (a local rank), `srun -l`'s `N: `, Open MPI's `[1,N]<stderr>:` and
pdsh's `host: `. The rules read them to keep one alert per rank of a node's file
(`logwatch.rules.writers`), the drivers to place events (`logwatch.drivers.lineinfo`)."""

from __future__ import annotations

import re

import polars as pl

from logwatch.parse.dialects.darknet import DARKNET_PATTERN

# Nested launcher prefixes, outermost first: `0: [rank3]:[E...`, `[default3]:[rank139]:[E...`.
PREFIX = (
    r"^(?:(?P<pdsh>[A-Za-z][\w-]*\d[\w.-]*): )?"
    r"(?:\s*(?P<srun>\d+): )?"
    r"(?:[^\[\n]{0,30}\[1,(?:mpirank:)?(?P<mpi>\d+)[^\]]*\]<std(?:out|err)>:)?"
    r"(?:\[(?:default|[\w.-]+:)(?P<local>\d+)\]:)?"
    r"(?:\[rank(?P<rank>\d+)\]:)?"
)
PREFIX_RE = re.compile(PREFIX)
# A line that has a launcher prefix at all: PREFIX's first part, required (PREFIX itself matches
# the empty string on every line). A block none of whose lines match needs no extraction, which
# costs several times this one anchored test on every line.
ANY_PREFIX = (
    r"^(?:[A-Za-z][\w-]*\d[\w.-]*: |\s*\d+: |"
    r"[^\[\n]{0,30}\[1,(?:mpirank:)?\d+[^\]]*\]<std(?:out|err)>:|"
    r"\[(?:default|[\w.-]+:)\d+\]:|\[rank\d+\]:)"
)
_DARKNET = re.compile(DARKNET_PATTERN)


def prefixes(text: pl.Expr) -> list[pl.Expr]:
    """`p_rank` (a global rank: `[rankN]:`, `N: `, MPI's `[1,N]`), `p_local` (`[defaultL]:`) and
    `p_host` (pdsh's `host: `) of each line."""
    groups = text.str.extract_groups(PREFIX)
    field = groups.struct.field
    # darknet's ` 74: ` is its batch number, not `srun -l`'s task
    srun = pl.when(field("srun").is_not_null() & ~text.str.contains(DARKNET_PATTERN))
    rank = pl.coalesce(field("rank"), field("mpi"), srun.then(field("srun")))
    rank = rank.cast(pl.Int64, strict=False)
    return [
        rank.alias("p_rank"),
        field("local").cast(pl.Int64, strict=False).alias("p_local"),
        field("pdsh").alias("p_host"),
    ]


# Literals one of which every `ANY_PREFIX` match holds: pdsh's and `srun -l`'s `: `, Open MPI's
# `]<std`, the `]:` after `[default3]` or `[rank3]`.
PREFIX_WORDS = r": |\]:|\]<std"
_SAMPLE_ROWS = 256  # a block's first lines, telling whether most of its lines hold those


def has_prefix(frame: pl.DataFrame) -> bool:
    """Whether a line of `frame` (with `text`) has a launcher prefix (`ANY_PREFIX`). The
    anchored test costs a regex call per line; where most lines lack `PREFIX_WORDS` (a DFlash
    log: a tenth hold `: `), it runs only on the lines a literal pass leaves."""
    text = pl.col("text")
    lines = frame.select("text")
    head = lines.head(_SAMPLE_ROWS)
    if head.height and head.select(text.str.contains(PREFIX_WORDS).mean()).item() <= 0.5:
        lines = lines.filter(text.str.contains(PREFIX_WORDS))
    return bool(lines.select(text.str.contains(ANY_PREFIX).any()).item())


def with_prefixes(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` (with `text`) and `prefixes`' columns: extracted only when a line of it has a
    prefix (a launcher's log), else null (a single trainer's log, the common case)."""
    if has_prefix(frame):
        return frame.with_columns(*prefixes(pl.col("text")))
    return frame.with_columns(
        pl.lit(None, dtype=pl.Int64).alias("p_rank"),
        pl.lit(None, dtype=pl.Int64).alias("p_local"),
        pl.lit(None, dtype=pl.String).alias("p_host"),
    )


def line_writer(text: str) -> tuple[int | None, int | None, str | None]:
    """One line's (`p_rank`, `p_local`, `p_host`), as `prefixes` gives them for a column (for
    the few lines an alert is about)."""
    found = PREFIX_RE.match(text)
    if found is None:
        return None, None, None
    named = found.groupdict()
    srun = named["srun"] if not _DARKNET.match(text) else None
    digits = named["rank"] or named["mpi"] or srun
    local = named["local"]
    return (int(digits) if digits else None, int(local) if local else None, named["pdsh"])
