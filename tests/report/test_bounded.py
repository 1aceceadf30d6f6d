"""A report's size is bounded by its charts, not by its log: long logs are reduced, past the
caps things are counted (never silently dropped), and a small log is drawn whole."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import logwatch
from logwatch.alerts import AlertEvent, Severity, Status
from logwatch.report import collect
from logwatch.report.build import build_report
from logwatch.report.page import TABLE_CAP, alert_table
from logwatch.report.svg import PLOT_W
from logwatch.rules.loader import builtin_rules_dir, load_rules, pack_files
from tests.support.paths import SAMPLES

RULES = load_rules(pack_files(builtin_rules_dir()))
START = datetime(2026, 11, 28, 14, 0, 0)


def _stamp(seconds: float) -> str:
    when = START + timedelta(seconds=seconds)
    return when.strftime("%Y-%m-%d %H:%M:%S,") + f"{when.microsecond // 1000:03d}"


def _chart(html: str, chart_id: str) -> str:
    found = re.search(rf'<svg class="chart" id="{chart_id}".*?</svg>', html, re.S)
    assert found is not None, f"no {chart_id} chart"
    return found[0]


def _drawn(svg: str) -> list[int]:
    return [int(n) for n in re.findall(r'data-points="(\d+)"', svg)]


def test_small_log_draws_every_loss_value() -> None:
    """train_nan.log: the loss line holds every finite loss of the log (nothing reduced), in
    both the linear and the log version, and each NaN / Inf is its own marker."""
    log = SAMPLES / "dflash" / "train_nan.log"
    frame = logwatch.read_log(log)
    finite = frame.filter(pl.col("loss").is_finite()).height
    html = build_report([str(log)], RULES).html
    loss = _chart(html, "loss")
    assert _drawn(loss) == [finite, finite]
    assert loss.count('class="nf ') == frame.filter(~pl.col("loss").is_finite()).height == 4


def test_long_log_is_drawn_in_a_few_thousand_points_per_series(tmp_path: Path) -> None:
    """120,000 step lines with a 20,000-step NaN stretch: each series is at most 4 points per
    pixel cell, the NaN stretch is one marker per pixel cell (not 20,000), and the page stays
    small; the alerts still say where the NaN stretch began."""
    log = tmp_path / "long.log"
    lines = []
    for i in range(120_000):
        loss = "nan" if 50_000 <= i < 70_000 else f"{2 + (i % 97) / 100:.4f}"
        lines.append(
            f"{_stamp(i * 0.5)} INFO [train] step {i} | loss {loss} | lr 2.40e-05 | "
            f"grad_norm {1 + (i % 13) / 10:.2f} | tok/s {50000 + i % 1000}\n"
        )
    log.write_text("".join(lines), encoding="utf-8")
    report = build_report([str(log)], RULES)
    for chart_id in ("loss", "grad-norm", "throughput"):
        drawn = _drawn(_chart(report.html, chart_id))
        assert drawn and max(drawn) <= 4 * (2 * PLOT_W + 1), (chart_id, drawn)
    loss = _chart(report.html, "loss")
    assert 0 < loss.count('class="nf ') <= 2 * PLOT_W + 1
    counts = [int(n.replace(",", "")) for n in re.findall(r"NaN x([\d,]+) from step", loss)]
    assert sum(counts) == 20_000
    assert "from step 50000 to" in loss and "to 69999 (lines" in loss
    assert len(report.html) < 2_000_000
    first = next(e for e in report.result.events if e.rule == "nan-loss")
    assert first.step == 50_000


def test_restarts_past_the_cap_are_counted_not_dropped_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """120 `run start:` lines on a time axis, the band cap set to 100 (it is 1,000: the same
    code path at a tenth of the lines, as each restart is a segment the engine evaluates on
    its own): the first 100 are drawn as bands (the one on line 1 is the run's start, not a
    restart) and the page says how many more there were; the first 7 runs are series of
    their own, the rest share the 8th, which says so."""
    assert collect.BAND_CAP == 1000
    monkeypatch.setattr(collect, "BAND_CAP", 100)
    log = tmp_path / "restarts.log"
    rows = []
    for k in range(120):
        rows.append(f"{_stamp(2 * k)} INFO [train] run start: run_id=r{k} gpus=8\n")
        rows.append(f"{_stamp(2 * k + 1)} INFO [train] step {k} | loss 2.0 | grad_norm 1.0\n")
    log.write_text("".join(rows), encoding="utf-8")
    html = build_report([str(log)], RULES, x="time").html
    loss = _chart(html, "loss")
    assert loss.count('class="band restart"') == 99
    assert loss.count('class="legend-entry"') == 8
    assert "restarts.log · r7 · restart 7 (and the 112 restarts after it)" in loss
    assert f"Not drawn (past the caps): 20 more restarts in {log}." in html
    assert "<dt>restarts</dt><dd>119</dd>" in html


def test_alert_table_lists_the_first_events_and_counts_the_rest() -> None:
    """2,500 alert events: the table has TABLE_CAP rows, in file order, and says how many more
    there were and where to get them all."""
    events = [
        AlertEvent(
            rule="nan-loss",
            severity=Severity.CRITICAL,
            status=Status.FIRING if i % 2 == 0 else Status.RESOLVED,
            source="train.log",
            line=i + 1,
            ts=None,
            step=i,
            value=None,
            summary=f"event {i}",
        )
        for i in range(2500)
    ]
    html = alert_table(events)
    assert html.count('<tr class="alert ') == TABLE_CAP == 2000
    assert "train.log:2000<" in html and "train.log:2001<" not in html
    assert "500 more alert events are not listed" in html
    assert "more alert events" not in alert_table(events[:TABLE_CAP])


def test_many_runs_keep_the_page_bounded(tmp_path: Path) -> None:
    """Twelve files of 6,000 steps each: the loss chart overlays 12 series and there are 12
    per-run q_hs charts, yet the points drawn stay within what two runs at full detail would
    draw (each run is drawn in wider cells), and every run is still drawn."""
    logs = []
    for k in range(12):
        log = tmp_path / f"run{k:02d}.log"
        log.write_text(
            "".join(
                f"{_stamp(k * 86400 + i)} INFO [train] step {i} | loss {2 + (i * (k + 3)) % 17 / 10}"
                f" | q_hs={20 + (i * (k + 5)) % 23} q_hsb=[1,2,3,4,5,6]\n"
                for i in range(6000)
            ),
            encoding="utf-8",
        )
        logs.append(str(log))
    html = build_report(logs, RULES).html
    per_run = [_chart(html, f"q-hs-r{n}") for n in range(1, 13)]
    assert all(_drawn(svg) for svg in per_run)
    assert sum(max(_drawn(svg)) for svg in per_run) <= 2 * 4 * (2 * PLOT_W + 1)
    loss = _drawn(_chart(html, "loss"))
    assert len(loss) == 2 * 12 and sum(loss) <= 2 * 8 * 4 * (2 * PLOT_W + 1)
    assert len(html) < 3_000_000
