"""A fleet's ranks x time strip: one row per rank (past `STRIP_ROWS` ranks, one row per bin of
consecutive ranks), each rank's first failure line coloured by its class, the last line of the
ranks that printed none, the culprit's row marked and labelled. One inline SVG, bounded by its
rows and pixel columns, not by the ranks' lines."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from html import escape

import polars as pl

from logwatch.alerts import AlertEvent
from logwatch.drivers.lineinfo import PRIMARY, SYMPTOM
from logwatch.drivers.verdict import RULE, Fleet
from logwatch.redact import redact
from logwatch.report.svg import LEFT, WIDTH, Geo, Line, XAxis, frame, legend_layout, x_ticks
from logwatch.report.ticks import linear_ticks, time_labels, time_ticks

STRIP_ROWS = 256
"""Rows drawn at most: past this many ranks, each row is a bin of consecutive ranks."""
OTHER = "other"
CLASS_COLOUR = {PRIMARY: "#d62728", SYMPTOM: "#ff7f0e", OTHER: "#1f77b4"}
SILENT_COLOUR = "#7f7f7f"
_ORDER = {PRIMARY: 0, SYMPTOM: 1, OTHER: 2}
_FIRSTS: dict[str, pl.DataType] = {
    "rank": pl.Int64(),
    "ts": pl.Datetime("us"),
    "cls": pl.String(),
    "kind": pl.String(),
}
_OTHERS: dict[str, pl.DataType] = {"source": pl.String(), "line": pl.Int64(), **_FIRSTS}


def firsts(fleet: Fleet, events: Sequence[AlertEvent]) -> pl.DataFrame:
    """Each rank's first failure line (`rank`, `ts`, `cls`, `kind`): its first primary or
    symptom line, else (a rank that printed neither) its first other alert."""
    records = fleet.records.filter(pl.col("rank").is_not_null())
    labelled = [
        (e.source, e.line, int(e.labels["rank"]), e.ts, OTHER, e.rule)
        for e in events
        if e.rule != RULE and e.labels.get("rank", "").isdigit()
    ]
    others = pl.DataFrame(labelled, schema=_OTHERS, orient="row").join(
        records.select("source", "line"), on=["source", "line"], how="anti"
    )
    classed = records.select(list(_FIRSTS))
    others = others.join(classed.select("rank"), on="rank", how="anti").select(list(_FIRSTS))
    return (
        pl.concat([classed, others])
        .sort("ts", "rank", nulls_last=True)
        .group_by("rank", maintain_order=True)
        .first()
        .sort("rank")
    )


def strip_chart(fleet: Fleet, events: Sequence[AlertEvent]) -> str:
    """The strip as inline SVG (empty when no rank is known)."""
    world = max([fleet.world, *(r + 1 for r in fleet.ranks)])
    if world == 0:
        return ""
    size = math.ceil(world / STRIP_ROWS)  # ranks per row
    rows = math.ceil(world / size)
    first = firsts(fleet, events).with_columns((pl.col("rank") // size).alias("row"))
    seen = pl.DataFrame(
        {"rank": list(fleet.last_seen), "last": list(fleet.last_seen.values())},
        schema={"rank": pl.Int64, "last": pl.Datetime("us")},
    ).with_columns((pl.col("rank") // size).alias("row"))
    silent = seen.join(first.select("rank"), on="rank", how="anti").drop_nulls("last")
    axis = _axis(first, silent, seen)
    if axis is None:
        return ""
    row_h = max(2, min(12, 600 // rows))
    binned = f" ({size} ranks per row)" if size > 1 else ""
    title = f"ranks x time: each rank's first failure line{binned}"
    geo, legend = legend_layout(title, _legend(), rows * row_h)
    marks = _marks(first, silent, axis, geo, row_h, size)
    ends = dict(seen.group_by("row").agg(pl.col("last").max()).drop_nulls().iter_rows())
    culprits = _culprits(fleet)
    band = max(row_h, 6)  # the culprit's row, visible however thin the rows
    body = [x_ticks(axis, geo), _rank_ticks(world, size, geo, row_h)]
    for row in range(rows):
        lo, hi = row * size, min(world, (row + 1) * size) - 1
        mine = [r for r in culprits if lo <= r <= hi]
        y = geo.top + row * row_h
        end = axis.px(_epoch(ends[row])) if row in ends else LEFT
        who = f'data-rank="{lo}"' if size == 1 else f'data-ranks="{lo}-{hi}"'
        body.append(
            f'<g class="strip-row{" culprit" if mine else ""}" {who}>'
            + (
                f'<rect class="culprit-row" x="{LEFT}" y="{y + row_h / 2 - band / 2:.1f}" '
                f'width="{WIDTH - LEFT - 16}" height="{band}"/>'
                if mine
                else ""
            )
            + f'<line class="alive" x1="{LEFT}" x2="{end:.1f}" y1="{y + row_h / 2:.1f}" '
            f'y2="{y + row_h / 2:.1f}" stroke-width="{min(1.0, row_h / 4):g}"/>'
            + "".join(marks.get(row, []))
            + "</g>"
        )
    body.extend(_culprit_label(v, axis, geo, row_h, size) for v in fleet.verdicts)
    return frame("ranks", title, legend, geo, "".join(body))


def _axis(first: pl.DataFrame, silent: pl.DataFrame, seen: pl.DataFrame) -> XAxis | None:
    """From a little before the first failure line (or a silent rank's last line) to the
    last line of any rank."""
    early = pl.concat([first.get_column("ts"), silent.get_column("last")]).drop_nulls()
    late = pl.concat([first.get_column("ts"), seen.get_column("last")]).drop_nulls()
    if not early.len():
        return None
    lo, hi = _epoch(early.min()), _epoch(late.max())  # type: ignore[arg-type]  # Datetime
    pad = max((hi - lo) * 0.04, 30.0)
    lo, hi = lo - pad, hi + pad
    found = time_ticks(lo, hi)
    return XAxis(lo, hi, "time", tuple(zip(found, time_labels(found), strict=True)))


def _marks(
    first: pl.DataFrame, silent: pl.DataFrame, axis: XAxis, geo: Geo, row_h: int, size: int
) -> dict[int, list[str]]:
    """Per row, its marks: one per class and pixel column (a bin's ranks that fall on one
    column are one mark), and the silent ranks' last lines."""
    px = axis.px_expr(pl.col("ts").dt.epoch("us").cast(pl.Float64) / 1e6).round(0)
    cells = (
        first.drop_nulls("ts")
        .group_by("row", "cls", px.alias("px"))
        .agg(
            pl.len().alias("n"),
            pl.col("rank").min().alias("lo"),
            pl.col("rank").max().alias("hi"),
            pl.col("kind").first(),
            pl.col("ts").min(),
        )
        .with_columns(pl.col("cls").replace_strict(_ORDER, return_dtype=pl.Int32).alias("o"))
        .sort("row", "o", "px", descending=[False, True, False])  # primaries drawn last, on top
    )
    out: dict[int, list[str]] = defaultdict(list)
    for row, cls, x, n, lo, hi, kind, ts, _ in cells.iter_rows():
        who = f"rank {lo}" if n == 1 else f"{n} ranks of {lo}-{hi}"
        tip = f"{who}: {kind} ({cls}) at {ts:%Y-%m-%d %H:%M:%S}"
        out[row].append(
            f'<rect class="first {cls}" data-n="{n}" x="{x - 1.5:.1f}" '
            f'y="{geo.top + row * row_h}" width="3" height="{max(row_h, 2)}" '
            f'fill="{CLASS_COLOUR[cls]}"><title>{escape(redact(tip))}</title></rect>'
        )
    quiet = silent.with_columns(_px_last(axis)).sort("rank")
    for row, rank, last, x in quiet.select("row", "rank", "last", "px").iter_rows():
        tip = f"rank {rank}: printed no failure; its last line at {last:%Y-%m-%d %H:%M:%S}"
        y = geo.top + row * row_h
        out[row].append(
            f'<path class="silent" data-rank="{rank}" d="M{x:.1f},{y} v{max(row_h, 2)}" '
            f'stroke="{SILENT_COLOUR}" stroke-width="2"><title>{escape(tip)}</title></path>'
        )
    return out


def _px_last(axis: XAxis) -> pl.Expr:
    return axis.px_expr(pl.col("last").dt.epoch("us").cast(pl.Float64) / 1e6).alias("px")


def _culprits(fleet: Fleet) -> list[int]:
    return [int(v.labels["rank"]) for v in fleet.verdicts if v.labels.get("rank", "").isdigit()]


def _culprit_label(verdict: AlertEvent, axis: XAxis, geo: Geo, row_h: int, size: int) -> str:
    """A ring at the verdict's time on the culprit's row, and its words beside it."""
    rank = verdict.labels.get("rank", "")
    if not rank.isdigit() or verdict.ts is None:
        return ""
    x = axis.px(_epoch(verdict.ts))
    y = geo.top + (int(rank) // size) * row_h + row_h / 2
    host = verdict.labels.get("host")
    words = f"rank {rank}" + (f" ({host})" if host else "") + f": {verdict.labels.get('cause')}"
    left = x > WIDTH - 260
    anchor, tx = ("end", x - 9) if left else ("start", x + 9)
    return (
        f'<g class="culprit-mark" data-rank="{rank}"><circle cx="{x:.1f}" cy="{y:.1f}" r="6" '
        f'fill="none" stroke="{CLASS_COLOUR[PRIMARY]}" stroke-width="2"/>'
        f'<text class="culprit-label" x="{tx:.1f}" y="{y + 4:.1f}" text-anchor="{anchor}">'
        f"{escape(redact(words))}</text></g>"
    )


def _rank_ticks(world: int, size: int, geo: Geo, row_h: int) -> str:
    """Rank numbers down the left side, at 1-2-5 steps."""
    out = []
    for rank in linear_ticks(0, max(world - 1, 1), 8, least=1.0):
        y = geo.top + (int(rank) // size) * row_h + row_h / 2
        out.append(
            f'<text class="tick yr" x="{LEFT - 4}" y="{y + 4:.1f}" text-anchor="end">'
            f"{int(rank)}</text>"
        )
    return "".join(out)


def _legend() -> list[Line]:
    return [
        Line("primary (the failure)", (), CLASS_COLOUR[PRIMARY]),
        Line("symptom (waited on it)", (), CLASS_COLOUR[SYMPTOM]),
        Line("other alert", (), CLASS_COLOUR[OTHER]),
        Line("last line (no failure printed)", (), SILENT_COLOUR),
    ]


def _epoch(when: datetime) -> float:
    """Naive log times as polars counts them (as UTC), whatever this host's zone."""
    return when.replace(tzinfo=UTC).timestamp()


__all__ = ["STRIP_ROWS", "firsts", "strip_chart"]
