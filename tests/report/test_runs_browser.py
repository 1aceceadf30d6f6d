"""A report of several runs as a user opens it in a real headless Chromium: three runs a day
apart (one resumed from the other's checkpoint) overlay by step, each its own named series,
with 1-2-5 ticks and every alert in a place."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

from browser import first_pixel, keep_artefact, screenshot
from runs import three_runs
from test_report_browser import render, report

from logwatch.report.svg import LEFT, PLOT_W

RUNS = {"train_a.log", "train_b.log · r2", "train_b.log · r3 · restart 1"}
_SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def value(label: str) -> float:
    """A tick label's number (`12k` is 12,000; `2e-05`; `0.25`)."""
    label = label.replace(",", "")
    if label[-1:] in _SI:
        return float(label[:-1]) * _SI[label[-1]]
    return float(label)


def one_two_five(x: float) -> bool:
    """Whether `x` is 1, 2 or 5 times a power of ten."""
    mantissa = abs(x) / 10 ** math.floor(math.log10(abs(x)))
    return any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 5, 10))


def assert_nice(labels: list[str], where: str) -> None:
    """Equally spaced multiples of a 1-2-5 step (as `0.2 0.4 0.6`, never `0.7312`)."""
    values = [value(t) for t in labels]
    assert len(values) >= 2, (where, labels)
    step = values[1] - values[0]
    assert one_two_five(step), (where, labels)
    for a, b in itertools.pairwise(values):
        assert math.isclose(b - a, step, rel_tol=1e-6), (where, labels)
    for v in values:
        assert math.isclose(v / step, round(v / step), abs_tol=1e-6), (where, labels)


def spans(elements: list[tuple[str, dict[str, str]]]) -> dict[str, tuple[float, float]]:
    """Per series: the leftmost and rightmost pixel it draws."""
    out: dict[str, tuple[float, float]] = {}
    for tag, attrs in elements:
        if tag in ("polyline", "polygon") and "points" in attrs:
            xs = [float(p.split(",")[0]) for p in attrs["points"].split()]
            name = attrs.get("data-series", "")
            lo, hi = out.get(name, (math.inf, -math.inf))
            out[name] = (min(lo, *xs), max(hi, *xs))
    return out


def test_three_runs_a_day_apart_overlay_by_step(tmp_path: Path) -> None:
    """Runs r1 (day 1, steps 0..14k), r2 (day 2, resumed at step 12k) and r3 (day 3, in the
    same file as r2): on the default step axis each is a series of its own, named in the
    legend, spanning at least half of every chart's width (on one wall-clock axis each was a
    sliver); the per-run queue and GPU charts come once per run; every tick label is a 1-2-5
    value; no cell says `rank ?` or `-` for time, and the crash found at the end of r1's file
    carries r1's last time, marked. A screenshot is kept as an artefact."""
    logs = three_runs(tmp_path)
    shot = tmp_path / "three_runs.png"
    page, dom = render(tmp_path, *logs, shot=shot, width=1280)
    charts = dom.charts()
    for chart_id in ("loss", "grad-norm", "lr", "throughput"):
        legend = {
            a["data-series"] for t, a in charts[chart_id] if "legend-entry" in a.get("class", "")
        }
        assert legend >= RUNS, (chart_id, legend)
        drawn = spans(charts[chart_id])
        assert set(drawn) >= RUNS, (chart_id, drawn)
    per_run = [c for c in charts if re.fullmatch(r"(q-hs|q-hsb|gpu-\w+)-r[123]", c)]
    assert {c.rsplit("-", 1)[0] for c in per_run} == {
        "q-hs",
        "q-hsb",
        "gpu-util",
        "gpu-mem",
        "gpu-power",
        "gpu-temp",
    }
    assert len(per_run) == 6 * 3
    for chart_id, elements in charts.items():
        if chart_id == "alerts":
            continue
        for name, (lo, hi) in spans(elements).items():
            assert hi - lo >= PLOT_W / 2, (chart_id, name, lo, hi)
        assert_nice(dom.chart_texts(chart_id, "xt"), f"{chart_id} x")
        linear = dom.chart_texts(chart_id, "ylin")
        if linear:
            assert_nice(linear, f"{chart_id} y")
        for label in dom.chart_texts(chart_id, "ylog"):
            assert one_two_five(value(label)), (chart_id, label)
    assert min(lo for lo, _ in spans(charts["loss"]).values()) >= LEFT - 0.5
    html = page.read_text(encoding="utf-8")
    assert "rank ?" not in html and "step ?" not in html
    assert dom.rows and all(r["ts"].strip() not in ("", "-") for r in dom.rows)
    crashed = next(r for r in dom.rows if r["rule"] == "run-crashed")
    assert crashed["ts"].startswith("2026-11-26 09:18:45")
    assert "at end of file" in crashed["ts"]
    keep_artefact(shot)
    assert shot.stat().st_size > 50_000
    assert first_pixel(shot) == (255, 255, 255)


def test_dark_mode_follows_the_system(tmp_path: Path) -> None:
    """With the system in dark mode (`prefers-color-scheme: dark`), the page is dark; the
    screenshot is kept as an artefact."""
    page = report(tmp_path / "report.html", *three_runs(tmp_path))  # no DOM needed: no dump
    shot = screenshot(page, tmp_path / "three_runs_dark.png", tmp_path / "profile", dark=True)
    keep_artefact(shot)
    assert sum(first_pixel(shot)) < 3 * 40
