"""Timestamps in every common form, and the year of those printed without one.

glog (`E1130 06:31:02.118`), syslog (`Nov 28 14:09:05`) and detectron2 (`[06/09 11:05:25]`)
print no year: such a line takes the year of the last dated line before it in the same source
(`2026-11-28 ...`, `dmesg -T`'s `[Mon Nov 30 06:31:40 2026]`), carried from block to block by
the driver (`YearCarry`), so any split of a file gives the same timestamps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from logwatch.parse.sparse import _fill, _sparse

_TS_HEAD_CHARS = 96
_CLOCK = r"\d{2}:\d{2}:\d{2}"
"""What every timestamp form below holds (hours, minutes, seconds) in a line's head."""
_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}


_MONTH_NAMES = "(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_TS_PARSE = "%Y-%m-%d %H:%M:%S%.6f"


def _month(name: pl.Expr) -> pl.Expr:
    return name.replace_strict({k: f"{v:02d}" for k, v in _MONTHS.items()}, default=None)


def dated_timestamp() -> pl.Expr:
    """A timestamp with its year near the line's start: ISO-like, or `dmesg -T`'s
    `[Mon Nov 30 06:31:40 2026]`; null when the line has none."""
    head = pl.col("text").str.slice(0, _TS_HEAD_CHARS)
    iso = head.str.extract_groups(
        r"(\d{4})[-/](\d{2})[-/](\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?"
    )
    ctime = head.str.extract_groups(
        r"^\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) " + _MONTH_NAMES + r" +(\d{1,2}) "
        r"(\d{2}):(\d{2}):(\d{2}) (\d{4})\]"
    )
    frac = iso.struct.field("7").fill_null("0").str.pad_end(6, "0").str.slice(0, 6)
    iso_text = pl.format(
        "{}-{}-{} {}:{}:{}.{}", *(iso.struct.field(str(i)) for i in range(1, 7)), frac
    )
    ctime_text = pl.format(
        "{}-{}-{} {}:{}:{}.000000",
        ctime.struct.field("6"),
        _month(ctime.struct.field("1")),
        ctime.struct.field("2").str.pad_start(2, "0"),
        *(ctime.struct.field(str(i)) for i in range(3, 6)),
    )
    return pl.coalesce(iso_text, ctime_text).str.to_datetime(
        _TS_PARSE, time_unit="us", strict=False, cache=False
    )


def yearless_timestamp() -> pl.Expr:
    """A timestamp without a year, in the year column `_year`: detectron2 `[06/09 11:05:25 d2.utils.events]`,
    syslog `Nov 28 14:09:05`, glog `E1130 06:31:02.118` (torch's c10 prints `E626`)."""
    head = pl.col("text").str.slice(0, _TS_HEAD_CHARS)
    year = pl.col("_year").cast(pl.String)
    short = head.str.extract_groups(r"\[(\d{2})/(\d{2}) (\d{2}):(\d{2}):(\d{2})[\] ]")
    syslog = head.str.extract_groups(
        r"^(?:<\d+>)?" + _MONTH_NAMES + r" +(\d{1,2}) (\d{2}):(\d{2}):(\d{2})\b"
    )
    glog = head.str.extract_groups(
        r"(?:^|[\[:\]]\s*)[IWEF](\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))? "
    )
    short_text = pl.format(
        "{}-{}-{} {}:{}:{}.000000", year, *(short.struct.field(str(i)) for i in range(1, 6))
    )
    syslog_text = pl.format(
        "{}-{}-{} {}:{}:{}.000000",
        year,
        _month(syslog.struct.field("1")),
        syslog.struct.field("2").str.pad_start(2, "0"),
        *(syslog.struct.field(str(i)) for i in range(3, 6)),
    )
    glog_frac = glog.struct.field("6").fill_null("0").str.pad_end(6, "0").str.slice(0, 6)
    glog_text = pl.format(
        "{}-{}-{} {}:{}:{}.{}",
        year,
        glog.struct.field("1").str.pad_start(2, "0"),
        *(glog.struct.field(str(i)) for i in range(2, 6)),
        glog_frac,
    )
    return pl.coalesce(short_text, syslog_text, glog_text).str.to_datetime(
        _TS_PARSE, time_unit="us", strict=False, cache=False
    )


@dataclass(frozen=True, slots=True)
class ParsedBlock:
    """A parsed block and where its timestamps without a year got theirs."""

    frame: pl.DataFrame
    default_year: int  # given to yearless lines before the block's first dated line
    head_rows: int  # the rows before that first dated line
    last_year: int | None  # the year of the block's last dated line
    segment_years: tuple[int | None, ...] = ()  # of each segment's (`parse_block(segments=)`)
    # per row, the shape its line was cut by (its index in `shapes.SHAPES`, Int8; null: the
    # general path); None when the parse did not look for shapes (a live batch, or no column a
    # shape cuts wanted) or found none
    shapes: pl.Series | None = None

    def in_year(self, year: int) -> pl.DataFrame:
        """The frame with its head's yearless timestamps moved to `year`."""
        if year == self.default_year or self.head_rows == 0:
            return self.frame
        ts = pl.col("ts")
        head = pl.int_range(pl.len()) < self.head_rows
        moved = ts.dt.offset_by(f"{year - self.default_year}y")
        return self.frame.with_columns(pl.when(head).then(moved).otherwise(ts).alias("ts"))


@dataclass(slots=True)
class YearCarry:
    """The year of the last dated line of one source, carried across its blocks."""

    year: int  # until a dated line is seen: the year the file was last written

    def frame(self, block: ParsedBlock) -> pl.DataFrame:
        """`block`'s frame with its head in the carried year; then carry the block's own."""
        frame = block.in_year(self.year)
        if block.last_year is not None:
            self.year = block.last_year
        return frame


def _timestamps(
    frame: pl.DataFrame, year: int, segments: Sequence[tuple[int, int]] | None = None
) -> tuple[pl.DataFrame, int, int | None, tuple[int | None, ...]]:
    """`ts` from every form (logging's default was read densely), the rows before the block's
    first full date, the year of its last one, and each segment's last one."""
    ts = frame.get_column("ts")
    if not ts.has_nulls():  # every line in logging's default form (most blocks, live ones too)
        last = None if ts.is_empty() else int(ts[-1].year)
        ends = _segment_ends(segments)
        return frame, 0, last, tuple(ts.dt.year().gather(ends).to_list()) if ends else ()
    # every form holds a clock (`12:34:56`) in the head: the others hold no timestamp
    clock = pl.col("text").str.slice(0, _TS_HEAD_CHARS).str.contains(_CLOCK)
    timed = _sparse(frame, ts.is_null(), clock, "_clock").fill_null(False)
    dated = _fill(frame, "ts", _sparse(frame, timed, dated_timestamp(), "ts"))
    years = dated.dt.year()
    found = years.drop_nulls()
    head_rows = int(years.is_not_null().arg_max() or 0) if found.len() else frame.height
    last_year = int(found[-1]) if found.len() else None
    segment_years: tuple[int | None, ...] = ()
    if segments is None:
        carried = years.forward_fill().fill_null(year)
    else:  # carried within each file only, from its own default year
        sizes, defaults = [n for n, _ in segments], [d for _, d in segments]
        spans = pl.DataFrame({"_s": range(len(segments)), "_n": sizes, "_d": defaults})
        own = (
            spans.select(pl.col("_s", "_d").repeat_by("_n").explode())
            .with_columns(pl.lit(years).alias("_y"))
            .select(pl.col("_y").forward_fill().over("_s"), "_d")
        )
        carried = own.select(pl.col("_y").fill_null(pl.col("_d"))).to_series()
        segment_years = tuple(own.get_column("_y").gather(_segment_ends(segments)).to_list())
    frame = frame.with_columns(dated, carried.alias("_year"))
    rows = dated.is_null() & timed
    yearless = _sparse(frame, rows, yearless_timestamp(), "ts", columns=("text", "_year"))
    return frame.with_columns(_fill(frame, "ts", yearless)), head_rows, last_year, segment_years


def _segment_ends(segments: Sequence[tuple[int, int]] | None) -> list[int]:
    """The row of each segment's last line."""
    ends, row = [], -1
    for size, _ in segments or ():  # one step per file, not per line
        row += size
        ends.append(row)
    return ends
