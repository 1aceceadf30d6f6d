"""Streaming reduction for the report: each block is folded in as it passes, so what a report
holds is bounded by what its charts draw, not by the log's length.

A reducer keeps rows with a series `key` and an `x`. Per key it keeps every row until the key
has more than its raw cap (a small log's report is drawn from every row, as before), then one
aggregate per x cell of width `2**exp`. Cells sit at multiples of their width, so doubling the
width merges pairs of cells exactly: the result is what one pass over all the rows at the
wider width would give, whatever the block boundaries were.
"""

from __future__ import annotations

import math

import polars as pl

MAX_CELLS = 4096
"""Cells across a reducer's x range while streaming: more than 2 per pixel column of the plot
(1020 px), so the cells drawn (one pixel column or narrower) are unions of streamed cells."""
RAW_ROWS = 4096
"""Rows per key kept as they are: up to this many, a series is drawn point for point."""
RAW_MARKERS = 1000
"""Non-finite values per key each drawn as its own marker; past this, one marker per pixel
column and kind (NaN, +Inf, -Inf), with the count and the step and line range it covers."""
_PENDING_ROWS = 1 << 16


def cell_of(exp: int) -> pl.Expr:
    """The cell of `x` at width `2**exp`."""
    return (pl.col("x") / 2.0**exp).floor().cast(pl.Int64)


def exp_for(span: float, cells: int) -> int:
    """The smallest width exponent that cuts `span` into at most `cells` cells."""
    return math.ceil(math.log2(span / cells)) if span > 0 else 0


class CellReducer:
    """Rows with `key` and `x`, per key either all kept or merged per x cell (see the module)."""

    raw_rows = RAW_ROWS

    def __init__(self) -> None:
        self.kept: pl.DataFrame | None = None
        self.pending: list[pl.DataFrame] = []
        self.pending_rows = 0
        self.counts: dict[int, int] = {}
        self.reduced: set[int] = set()
        self.exp: int | None = None
        self.lo = math.inf
        self.hi = -math.inf
        self._by_key: dict[int, pl.DataFrame] | None = None  # `kept` cut per key, when drawn

    def add(self, rows: pl.DataFrame) -> None:
        """Fold in one block's rows."""
        if rows.is_empty():
            return
        for key, n in rows.group_by("key").len().iter_rows():
            self.counts[key] = self.counts.get(key, 0) + n
        lo, hi = rows.select(pl.col("x").min(), pl.col("x").max().alias("hi")).row(0)
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        over = {k for k, n in self.counts.items() if n > self.raw_rows} - self.reduced
        self.reduced |= over
        # The width keeps every key's cells under MAX_CELLS whatever its density: it follows
        # the x range, and grows by doubling (which merges whole cells: nothing is lost).
        exp = exp_for(self.hi - self.lo, MAX_CELLS - 1) if self.reduced else None
        rows = self.prepare(rows)
        if over or exp != self.exp:
            self.exp = exp
            self.pending.append(rows)
            self._compact(everything=True)
            return
        self.pending.append(rows)
        self.pending_rows += rows.height
        if self.pending_rows > _PENDING_ROWS:
            self._compact(everything=False)

    def _compact(self, *, everything: bool) -> None:
        """Merge what is pending into what is kept; only the kept cells that pending rows can
        share (at or after the first pending x) unless `everything` (a new width)."""
        rows = pl.concat(self.pending, how="diagonal_relaxed")
        self.pending, self.pending_rows = [], 0
        settled = None
        if self.kept is not None and not everything and self.exp is not None:
            first = float(rows.get_column("x").min())  # type: ignore[arg-type]  # Float64
            start = math.floor(first / 2.0**self.exp) * 2.0**self.exp
            settled = self.kept.filter(pl.col("x") < start)
            rows = pl.concat([self.kept.filter(pl.col("x") >= start), rows], how="diagonal_relaxed")
        elif self.kept is not None:
            rows = pl.concat([self.kept, rows], how="diagonal_relaxed")
        if self.exp is not None:
            rows = self._cells(rows, self.exp)
        self.kept = rows if settled is None else pl.concat([settled, rows], how="diagonal_relaxed")
        self._by_key = None

    def _cells(self, rows: pl.DataFrame, exp: int) -> pl.DataFrame:
        """The rows of reduced keys merged per cell; the others as they are."""
        if self.reduced.issuperset(self.counts):  # every key (a long log's usual case)
            return self.merge(rows, exp)
        mine = pl.col("key").is_in(self.reduced)
        merged = self.merge(rows.filter(mine), exp)
        return pl.concat([rows.filter(~mine), merged], how="diagonal_relaxed")

    def rows(self, key: int, exp: int, *, always: bool = False) -> pl.DataFrame:
        """The rows of `key` to draw at cell width `2**exp` (or this reducer's own width, if
        wider), sorted by x; every row when the key stayed under its raw cap, unless
        `always` (a chart among many, drawn coarser)."""
        rows = self._kept_of(key)
        if rows is None:
            return self.prepare(self.empty())
        if always or (key in self.reduced and self.exp is not None):
            rows = self.merge(rows, exp if self.exp is None else max(exp, self.exp))
        return rows.sort("x", maintain_order=True)

    def all_rows(self, key: int) -> pl.DataFrame:
        """Every row kept of `key`, as streamed (no further merge)."""
        rows = self._kept_of(key)
        return self.prepare(self.empty()) if rows is None else rows

    def _kept_of(self, key: int) -> pl.DataFrame | None:
        """The rows kept of `key` in the order kept (None: nothing kept at all). Drawing asks
        for each key's rows, so `kept` is cut per key once (it changes no more by then)."""
        if self.pending:
            self._compact(everything=False)
        if self.kept is None:
            return None
        if self._by_key is None:
            parts = self.kept.partition_by("key", as_dict=True, maintain_order=True)
            self._by_key = {int(k[0]): part for k, part in parts.items()}
        return self._by_key.get(key, self.kept.clear())

    def on_lines(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Rows of this reducer with their x in line numbers (for a line-number axis)."""
        return rows.with_columns(pl.col("line").cast(pl.Float64).alias("x"))

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        """A block's rows in this reducer's columns."""
        return rows

    def merge(self, rows: pl.DataFrame, exp: int) -> pl.DataFrame:
        """Rows of reduced keys, merged per (key, cell)."""
        raise NotImplementedError

    def empty(self) -> pl.DataFrame:
        """No rows, with the input columns."""
        return pl.DataFrame(schema=POINT_SCHEMA)


POINT_SCHEMA = {
    "key": pl.Int32,
    "x": pl.Float64,
    "y": pl.Float64,
    "line": pl.Int64,
    "step": pl.Int64,
}


class PointReducer(CellReducer):
    """Finite points (`key`, `x`, `y`, `line`, `step`): per cell the first, last, lowest and
    highest point (M4), so every spike and every extreme survives where it was."""

    def merge(self, rows: pl.DataFrame, exp: int) -> pl.DataFrame:
        if rows.is_empty():
            return rows
        picked = (
            rows.with_row_index("_i")
            .group_by(_cell_ids(rows, exp))
            .agg(
                pl.col("_i").min_by("x").alias("a"),
                pl.col("_i").max_by("x").alias("b"),
                pl.col("_i").min_by("y").alias("c"),
                pl.col("_i").max_by("y").alias("d"),
            )
        )
        keep = pl.concat([picked.get_column(c) for c in "abcd"]).unique().sort()
        return rows.gather(keep)


def _cell_ids(rows: pl.DataFrame, exp: int) -> pl.Expr | list[pl.Expr]:
    """Each row's (`key`, cell) as one Int64 (one group key hashes faster than two): the cells
    counted from the first, in strides of their span; two keys past what an Int64 holds."""
    cell = cell_of(exp)
    span = rows.select(cell.max() - cell.min() + 1).item()
    if span is None or span >= 1 << 31:  # `key` is an Int32: the ids stay under 2**62
        return [pl.col("key"), cell.alias("_c")]
    return (pl.col("key").cast(pl.Int64) * int(span) + cell - cell.min()).alias("_c")


_KIND = (
    pl.when(pl.col("y").is_nan()).then(pl.lit("nan")).when(pl.col("y") > 0).then(pl.lit("inf"))
).otherwise(pl.lit("ninf"))


class MarkerReducer(CellReducer):
    """NaN and ±Inf values: each kept exactly up to `RAW_MARKERS` per key; past that, per cell
    and kind the first one's `x`, `line` and `step`, the last one's (`line_last`,
    `step_last`) and how many (`n`)."""

    raw_rows = RAW_MARKERS

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        if "n" in rows.columns:
            return rows
        return rows.with_columns(
            pl.lit(1, pl.Int64).alias("n"),
            pl.col("line").alias("line_last"),
            pl.col("step").alias("step_last"),
        )

    def merge(self, rows: pl.DataFrame, exp: int) -> pl.DataFrame:
        if rows.is_empty():
            return rows
        return (
            rows.group_by("key", _KIND.alias("_k"), cell_of(exp).alias("_c"))
            .agg(
                pl.col("x").min(),
                *(pl.col(c).min_by("x") for c in ("y", "line", "step")),
                pl.col("n").sum(),
                *(pl.col(c).max_by("x") for c in ("line_last", "step_last")),
            )
            .drop("_k", "_c")
        )


class MixReducer(CellReducer):
    """Queue bucket shares (`key`, `x`, `line`, `b0`..): per cell the sums, with `n`, `sx` and
    `sl` (the sums of x and of line), so the drawn value is the mean share at the cells' mean x."""

    raw_rows = 1024

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        if "n" in rows.columns:
            return rows
        return rows.with_columns(
            pl.lit(1, pl.Int64).alias("n"), pl.col("x").alias("sx"), pl.col("line").alias("sl")
        ).drop("line")

    def on_lines(self, rows: pl.DataFrame) -> pl.DataFrame:
        mean = pl.col("sl") / pl.col("n")
        return rows.with_columns(mean.alias("x"), pl.col("sl").cast(pl.Float64).alias("sx"))

    def merge(self, rows: pl.DataFrame, exp: int) -> pl.DataFrame:
        if rows.is_empty():
            return rows
        sums = [c for c in rows.columns if c not in ("key", "x")]
        return (
            rows.group_by("key", cell_of(exp).alias("_c"))
            .agg(pl.col("x").min(), *(pl.col(c).fill_null(0).sum() for c in sums))
            .drop("_c")
        )

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema={"key": pl.Int32, "x": pl.Float64, "line": pl.Int64})


class MedianReducer(CellReducer):
    """Values (`key`, `x`, `y`, `line`) for a median per cell: kept as they are up to the raw
    cap, then per cell the count-weighted median of the merged cells' medians (`med`), with `n`,
    `sx` and `sl` (the sums of x and of line)."""

    def prepare(self, rows: pl.DataFrame) -> pl.DataFrame:
        if "n" in rows.columns:
            return rows
        return rows.select(
            "key",
            "x",
            pl.col("y").alias("med"),
            pl.lit(1, pl.Int64).alias("n"),
            pl.col("x").alias("sx"),
            pl.col("line").cast(pl.Float64).alias("sl"),
        )

    def on_lines(self, rows: pl.DataFrame) -> pl.DataFrame:
        mean = pl.col("sl") / pl.col("n")
        return rows.with_columns(mean.alias("x"), pl.col("sl").alias("sx"))

    def merge(self, rows: pl.DataFrame, exp: int) -> pl.DataFrame:
        if rows.is_empty():
            return rows
        by_med = pl.col("n").sort_by("med").cum_sum()
        half = (by_med >= pl.col("n").sum() / 2).arg_max()
        return (
            rows.group_by("key", cell_of(exp).alias("_c"))
            .agg(
                pl.col("x").min(),
                pl.col("med").sort().get(half),
                pl.col("n").sum(),
                pl.col("sx").sum(),
                pl.col("sl").sum(),
            )
            .drop("_c")
        )

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(
            schema={"key": pl.Int32, "x": pl.Float64, "y": pl.Float64, "line": pl.Int64}
        )


class Capped:
    """The first `cap` items of something a pathological log has millions of, and how many
    there were."""

    def __init__(self, cap: int = 1000) -> None:
        self.cap = cap
        self.items: list[pl.DataFrame] = []
        self.held = 0
        self.total = 0

    def add(self, rows: pl.DataFrame) -> None:
        """Keep what fits of `rows`; count all of them."""
        self.total += rows.height
        room = self.cap - self.held
        if room > 0 and rows.height:
            self.items.append(_owned(rows.head(room)))
            self.held += min(room, rows.height)

    def frame(self, schema: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
        """What was kept, as one frame."""
        if not self.items:
            return pl.DataFrame(schema=schema)
        return pl.concat(self.items)

    @property
    def dropped(self) -> int:
        """How many were not kept."""
        return self.total - self.held


def _owned(rows: pl.DataFrame) -> pl.DataFrame:
    """`rows` with their strings in buffers of their own: a string column cut from a block
    (polars' string views) holds the whole block's text, so a few lines kept to the end of a
    file would hold every block they came from (the file's size, on a log with a restart in
    each block)."""
    strings = [name for name, dtype in rows.schema.items() if dtype == pl.String]
    return rows.with_columns(pl.col(strings) + pl.lit("")) if strings else rows
