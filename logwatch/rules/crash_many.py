"""The crash rule's reading of lines (`rules.crash`), on one source's batch or on many sources'
batches at once (`CrashRule.evaluate_many`): every line classed (progress, a traceback's
header, body or exception line, a deciding line, a line saying the process ended) in one
query for all parts, each source's ranks kept apart (`over` its part and rank), and what each
part's step reads of them (its first deciding line, the traceback each rank is left in, each
rank's first progress, its exception lines) taken in a few queries for all. The state each
part steps from is the rule's business (`crash.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from logwatch.rules.base import Part
from logwatch.rules.exits import DECIDING, ENDED

CRASH_HINT = (
    r"most recent call last|File \"|Error|Exception|Interrupt|ChildFailedError|exitcode|SIGKILL"
    r"|exits with return code|(?i:killed|segmentation fault|aborted|bus error|terminated)"
    r"|Floating point exception|Illegal instruction|exit code|Exited with|\(local_rank"
)
_PREFIX = r"^\s*(?:\[(?:rank|default)\d+\]:\s?|\[\d+,mpirank:\d+[^\]]*\]<std(?:out|err)>:\s?|\d+: )"
_HEADER = "Traceback (most recent call last)"
_STACK = "Stack (most recent call last)"  # logging's stack_info: a stack, no exception
_GLUED_HEADER = r"\[rank(\d+)\]:\s?Traceback \(most recent"
# A frame (`  File "x.py", line 3, in f`; loguru marks the failing one `> File`), or a line of a
# rich traceback box: the body of a traceback, however indented.
_FRAME = r'^\s*(?:>\s*)?File "[^"]*", line \d+'
_BODY = r"^(?:\s|$|[\u2500-\u257f])|" + _FRAME
# The last line of a Python traceback: `RuntimeError: ...`, `torch.OutOfMemoryError: ...`,
# `KeyboardInterrupt`. A progress line (`steps: 80 loss: 1.2`) is not one.
_EXCEPTION = r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::|$)"
# An exception named as such (`RuntimeError:`, `torch.OutOfMemoryError:`, `KeyboardInterrupt`),
# anywhere in a line a logger or a user decorated: `ERROR ... RuntimeError: ...`, `**...**`.
_NAMED = r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)\b(?::|\s*$)"
_NAMED_IN = r"(?:^|[^\w.])" + _NAMED
MARKUP = r"^[\s>*_`]+"  # markdown quoting, bold, code around a pasted line
_LOGGED_ERROR = r"\b(?:ERROR|CRITICAL|FATAL)\b|^E\d{4} "
# Traceback markers per line: the state a line leaves its rank's stream in (null: unchanged).
CLOSED, OPEN, IN_STACK, HEADLESS = 0, 1, 2, 3
READ = ("line", "ts", "step", "text", "rank", "loss", "grad_norm", "throughput")
_KEY = ("_part", "_rk")  # a rank's stream: its source's part and its rank


@dataclass(slots=True)
class Facts:
    """What one part's step reads of its classified rows: its first deciding line (or None),
    the last traceback marker of each rank that has one (in the order ranks first show one),
    each rank's first progress row, its exception lines in order, and its rows themselves
    (`rows`, cut from every part's when asked: few steps read them)."""

    classified: pl.DataFrame
    number: int
    alone: bool
    deciding: dict[str, Any] | None = None
    markers: dict[str, int] = field(default_factory=dict)
    first_progress: dict[str, int] = field(default_factory=dict)
    exceptions: list[dict[str, Any]] = field(default_factory=list)

    def rows(self) -> pl.DataFrame:
        """The part's classified rows."""
        if self.alone:
            return self.classified
        return self.classified.filter(pl.col("_part") == self.number)


def facts_of(frame: pl.DataFrame, open_before: Mapping[str, int]) -> Facts:
    """The facts of one source's batch."""
    row = pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row")
    rows = frame.select(row, *READ, pl.lit(0, pl.UInt32).alias("_part"))
    known = _known([open_before])
    return _facts(classified(rows, known, alone=True), [0])[0]


def facts_many(frame: pl.DataFrame, parts: Sequence[Part], chosen: Sequence[int]) -> list[Facts]:
    """The facts of each `chosen` part of `frame` (parts in order, not overlapping), in a few
    queries for all."""
    if not chosen:
        return []
    picked = [parts[n] for n in chosen]
    shift = picked[0].begin
    frame = frame.slice(shift, picked[-1].end - shift)
    begins = pl.Series([p.begin - shift for p in picked], dtype=pl.Int64)
    ends = pl.Series([p.end - shift for p in picked], dtype=pl.Int64)
    index = pl.int_range(frame.height, dtype=pl.Int64, eager=True)
    number = (begins.search_sorted(index, side="right") - 1).cast(pl.UInt32)
    inside = (index >= begins.gather(number)) & (index < ends.gather(number))
    rows = (
        frame.select(*READ)
        .hstack([(index - begins.gather(number)).alias("_row"), number.alias("_part")])
        .filter(inside)
        .with_columns(pl.col("_row").cast(pl.UInt32))
    )
    known = _known([p.state["open"] for p in picked])
    return _facts(classified(rows, known, alone=len(picked) == 1), range(len(picked)))


def _known(open_before: Sequence[Mapping[str, int]]) -> pl.Expr:
    """Each row's marker of its rank's stream before the batch (the part's carried state)."""
    if not any(open_before):
        return pl.lit(CLOSED, dtype=pl.Int8)
    mapping = {
        f"{n}\x00{rank}": int(marker)
        for n, markers in enumerate(open_before)
        for rank, marker in markers.items()
    }
    key = pl.concat_str(pl.col("_part").cast(pl.String), pl.lit("\x00"), pl.col("_rk"))
    return key.replace_strict(mapping, default=CLOSED, return_dtype=pl.Int8)


def _facts(rows: pl.DataFrame, numbers: Sequence[int]) -> list[Facts]:
    """Each part's facts from its classified rows (`rows` ordered by part)."""
    out = {n: Facts(rows, n, len(numbers) == 1) for n in numbers}
    deciding = rows.filter(pl.col("_deciding") | pl.col("_ended"))
    if len(numbers) == 1 and deciding.height:
        out[numbers[0]].deciding = deciding.row(0, named=True)
    elif deciding.height:
        for row in deciding.group_by("_part", maintain_order=True).first().iter_rows(named=True):
            out[row["_part"]].deciding = row
    alone = len(numbers) == 1  # one part: its ranks alone, a cheaper key
    keys = ["_rk"] if alone else ["_part", "_rk"]
    marked = rows.filter(pl.col("_marker").is_not_null())
    last = marked.group_by(keys, maintain_order=True).agg(pl.col("_marker").last())
    for *key, marker in last.iter_rows():
        n, rank = (numbers[0], key[0]) if alone else key
        out[n].markers[rank] = marker
    progress = rows.filter(pl.col("_progress"))
    first = progress.group_by(keys, maintain_order=True).agg(pl.col("_row").min())
    for *key, row in first.iter_rows():
        n, rank = (numbers[0], key[0]) if alone else key
        out[n].first_progress[rank] = row
    for row in rows.filter(pl.col("_exception")).iter_rows(named=True):
        out[row["_part"]].exceptions.append(row)
    return [out[n] for n in numbers]


def classified(rows: pl.DataFrame, known: pl.Expr, *, alone: bool) -> pl.DataFrame:
    """Every row (`READ`, `_row` within its part, `_part`) with its rank key, whether it is
    progress, a deciding line, a line saying the process ended, or an exception line: a
    traceback's last line (its first unindented line), or a line a logger or a user decorated
    that names an exception. `alone`: the rows are one part's (no need to keep parts apart)."""
    stream = ["_rk"] if alone else list(_KEY)

    def within(expr: pl.Expr) -> pl.Expr:  # over the part
        return expr if alone else expr.over("_part")

    msg = (
        pl.col("text")
        .str.replace(_PREFIX, "")
        .str.replace(r"^.*\[rank\d+\]:\s?(Traceback \(most)", "$1")
    )
    plain = pl.col("_msg").str.replace(MARKUP, "")
    first_pass = (
        pl.when(pl.col("_header"))
        .then(OPEN)
        .when(pl.col("_msg").str.contains(_STACK, literal=True))
        .then(IN_STACK)
        .when(pl.col("_body"))
        .then(None)
        .otherwise(CLOSED)
    )

    def before(marker: str) -> pl.Expr:
        return pl.col(marker).shift(1).forward_fill().over(stream).fill_null(known)

    progress = pl.any_horizontal(
        pl.col(name).is_not_null() for name in ("loss", "grad_norm", "throughput")
    )
    named = pl.col("_msg").str.contains(_NAMED_IN)
    in_traceback = pl.col("_before").is_in([OPEN, HEADLESS]) & (
        (pl.col("_before") == OPEN) & plain.str.contains(_EXCEPTION) | named
    )
    decorated = named & (
        pl.col("_msg").str.contains(_LOGGED_ERROR) | pl.col("_msg").str.contains(r"^\s*[*_`]")
    )
    return (
        rows.with_columns(
            # `...4.12s/it][rank1]: Traceback`: a header glued onto a progress bar has its rank.
            pl.coalesce(
                pl.col("text").str.extract(_GLUED_HEADER, 1), pl.col("rank").cast(pl.String)
            )
            .fill_null("-1")
            .alias("_rk"),
            msg.alias("_msg"),
            progress.alias("_progress"),
        )
        .with_columns(
            pl.col("_msg").str.contains(_HEADER, literal=True).alias("_header"),
            pl.col("_msg").str.contains(_BODY).alias("_body"),
            pl.col("_msg").str.contains(_FRAME).alias("_frame"),
            pl.any_horizontal(pl.col("text").str.contains(p) for p, _, _ in DECIDING).alias(
                "_deciding"
            ),
            pl.any_horizontal(_unmarked().str.contains(p) for p in ENDED).alias("_ended"),
        )
        .with_columns(first_pass.cast(pl.Int8).alias("_first"))
        .with_columns(
            # frames with no header before them (an excerpt that starts at its frames)
            pl.when(pl.col("_frame") & (before("_first") == CLOSED))
            .then(pl.lit(HEADLESS, dtype=pl.Int8))
            .otherwise(pl.col("_first"))
            .alias("_marker")
        )
        .with_columns(before("_marker").alias("_before"))
        .with_columns(
            (
                ~pl.col("_header")
                & ~pl.col("_body")
                & ~pl.col("_progress")
                & (in_traceback | decorated)
            ).alias("_exception"),
            pl.when(named & ~plain.str.contains(_EXCEPTION))
            .then(pl.col("_msg").str.extract("(" + _NAMED + ".*)", 1))
            .otherwise(plain)
            .str.replace_all("**", "", literal=True)
            .alias("_exception_text"),
            _next(pl.col("_progress")).over(stream).alias("_next_same"),
            within(_next(pl.col("_progress") & pl.col("rank").is_null())).alias("_next_unranked"),
            within(_next(pl.col("_progress"))).alias("_next_any"),
        )
    )


def _unmarked() -> pl.Expr:
    """The line without its rank prefix and the markdown a paste wraps it in (`**Killed**`)."""
    return pl.col("_msg").str.replace(MARKUP, "").str.replace(r"[\s*_`]+$", "")


def _next(condition: pl.Expr) -> pl.Expr:
    """The index of the first later row meeting `condition` (null when none in the batch)."""
    return pl.when(condition).then(pl.col("_row")).shift(-1).backward_fill()
