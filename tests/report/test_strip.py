"""The ranks x time strip of a fleet's report: a row per rank up to `STRIP_ROWS`, bins of
consecutive ranks above, each rank's first failure line in its class's colour, the silent
ranks' last line, the culprit's row marked; its size bounded by rows and pixel columns."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import polars as pl

from logwatch.alerts import AlertEvent, Severity, Status
from logwatch.drivers.lineinfo import PRIMARY, RECORD_SCHEMA, SYMPTOM
from logwatch.drivers.verdict import RULE, Cascade, Fleet
from logwatch.report.strip import STRIP_ROWS, firsts, strip_chart

START = datetime(2026, 12, 7, 2, 0, 0)


def _fleet(world: int, culprit: int, silent: int | None = None) -> Fleet:
    """`world` ranks: the culprit's Xid at 02:00:50, every other rank but `silent` timing out
    from 02:10:52 (a second apart per 64 ranks), each rank's last line a minute later."""
    rows = [
        {"source": f"r{culprit}.log", "line": 3, "ts": START + timedelta(seconds=50),
         "cls": PRIMARY, "kind": "gpu-lost", "rank": culprit, "host": "node-x"}
    ]  # fmt: skip
    for rank in range(world):
        if rank not in (culprit, silent):
            rows.append(
                {"source": f"r{rank}.log", "line": 9, "kind": "nccl-timeout", "cls": SYMPTOM,
                 "ts": START + timedelta(seconds=652 + rank // 64), "rank": rank, "host": "h"}
            )  # fmt: skip
    schema = {**RECORD_SCHEMA, "rank": pl.Int64(), "host": pl.String()}
    records = pl.DataFrame(rows, schema=schema)
    last = {r: START + timedelta(seconds=700) for r in range(world)}
    if silent is not None:
        last[silent] = START + timedelta(seconds=20)
    verdict = AlertEvent(
        rule=RULE,
        severity=Severity.CRITICAL,
        status=Status.FIRING,
        source=f"r{culprit}.log",
        line=3,
        ts=START + timedelta(seconds=50),
        step=None,
        value=None,
        summary="rank 9: GPU fell off the bus",
        labels={"rank": str(culprit), "host": "node-x", "cause": "gpu-lost"},
    )
    cascade = Cascade(frozenset(range(world)) - {culprit}, None, None, 88811, "ALLREDUCE", 600_000)
    return Fleet(frozenset(range(world)), frozenset({"h", "node-x"}), world, records, last,
                 [cascade], [verdict])  # fmt: skip


def _rows(svg: str) -> list[str]:
    return re.findall(r'<g class="strip-row[^"]*" data-ranks?="[^"]*"', svg)


def test_each_rank_a_row_the_culprit_marked_and_labelled() -> None:
    """32 ranks: 32 rows in rank order; the culprit's row (rank 9) alone is marked, its first
    line is a primary, the others' a symptom; its label names rank, host and cause; the rank
    that printed nothing (rank 4) has its last line marked."""
    svg = strip_chart(_fleet(32, culprit=9, silent=4), [])
    rows = _rows(svg)
    assert [re.search(r'data-rank="(\d+)"', r)[1] for r in rows] == [str(r) for r in range(32)]  # type: ignore[index]
    assert [r for r in rows if "culprit" in r] == ['<g class="strip-row culprit" data-rank="9"']
    assert len(re.findall(r'class="first primary"', svg)) == 1
    assert len(re.findall(r'class="first symptom"', svg)) == 30
    assert re.findall(r'class="silent" data-rank="(\d+)"', svg) == ["4"]
    assert ">rank 9 (node-x): gpu-lost</text>" in svg


def test_above_the_row_cap_ranks_are_binned_and_the_page_stays_small() -> None:
    """2 048 ranks: 256 rows of 8 ranks (`0-7` .. `2040-2047`), the culprit's bin marked; a
    bin's ranks on one pixel column are one mark counting them; under 200 kB."""
    svg = strip_chart(_fleet(2048, culprit=1326), [])
    rows = _rows(svg)
    assert len(rows) == STRIP_ROWS == 256
    assert rows[0].endswith('data-ranks="0-7"') and rows[-1].endswith('data-ranks="2040-2047"')
    assert [r for r in rows if "culprit" in r] == [
        '<g class="strip-row culprit" data-ranks="1320-1327"'
    ]
    counts = [int(n) for n in re.findall(r'class="first symptom" data-n="(\d+)"', svg)]
    assert sum(counts) == 2047 and len(counts) < 2047
    assert "(8 ranks per row)" in svg
    assert len(svg.encode()) < 200_000


def test_a_rank_with_only_other_alerts_is_other_and_classed_lines_come_first() -> None:
    """A rank whose only event is an alert that is no fleet line (a loss spike) is `other`;
    a rank with a classed line keeps its class even when an other alert came earlier."""
    fleet = _fleet(4, culprit=1, silent=3)
    spike = AlertEvent("loss-spike", Severity.WARNING, Status.FIRING, "r3.log", 2,
                       START, None, 9.0, "loss spiked", labels={"rank": "3"})  # fmt: skip
    early = AlertEvent("loss-spike", Severity.WARNING, Status.FIRING, "r0.log", 2,
                       START, None, 9.0, "loss spiked", labels={"rank": "0"})  # fmt: skip
    got = firsts(fleet, [spike, early]).select("rank", "cls", "kind").rows()
    assert got == [
        (0, SYMPTOM, "nccl-timeout"),
        (1, PRIMARY, "gpu-lost"),
        (2, SYMPTOM, "nccl-timeout"),
        (3, "other", "loss-spike"),
    ]
