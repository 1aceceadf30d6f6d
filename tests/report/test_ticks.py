"""Axis ticks a reader takes in at a glance: 1-2-5 steps, SI suffixes, times without what
does not change."""

from __future__ import annotations

from datetime import UTC, datetime

from logwatch.report.ticks import (
    linear_ticks,
    log_ticks,
    nice_step,
    si_label,
    time_labels,
    time_ticks,
)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_linear_ticks_are_multiples_of_a_one_two_five_step() -> None:
    """Raw data bounds (0.7312 .. 1843.6) give round ticks, never the bounds themselves."""
    assert nice_step(1842.9, 6) == 500
    assert linear_ticks(0.7312, 1843.6) == [500.0, 1000.0, 1500.0]
    assert linear_ticks(0.7312, 1.0431, 5) == [0.8, 0.9, 1.0]
    assert linear_ticks(2.1e-5, 2.4e-5, 3) == [2.1e-5, 2.2e-5, 2.3e-5, 2.4e-5]
    assert linear_ticks(1403, 1404, 8, least=1.0) == [1403.0, 1404.0]  # steps: no fractions


def test_labels_use_si_suffixes_and_the_step_s_decimals() -> None:
    """`12k`, `1.2M`, `0.25`, `2e-05`; a tick says no more digits than its step has."""
    assert si_label(12_000, 2_000) == "12k"
    assert si_label(1_200_000, 200_000) == "1.2M"
    assert si_label(3_500_000_000) == "3.5G"
    assert si_label(0.25, 0.05) == "0.25"
    assert si_label(0.3, 0.1) == "0.3"
    assert si_label(2e-5, 1e-5) == "2e-05"
    assert si_label(0) == "0"
    assert [si_label(v, 5000) for v in linear_ticks(0, 26_000, 8)] == [
        "0", "5k", "10k", "15k", "20k", "25k"
    ]  # fmt: skip


def test_log_ticks_are_one_two_five_times_powers_of_ten() -> None:
    """Over a decade and a half: 1, 2, 5, 10, 20; over twelve decades: every other power."""
    assert log_ticks(0.0, 1.4) == [1.0, 2.0, 5.0, 10.0, 20.0]
    wide = log_ticks(-6.0, 6.0)
    assert wide == [1e-6, 1e-4, 1e-2, 1.0, 1e2, 1e4, 1e6]


def test_times_drop_what_does_not_change() -> None:
    """Within a day: the date once, then only the clock; across days: the date where it
    changes; a week: dates only; seconds only when the step has them."""
    ticks = time_ticks(_epoch("2026-11-26 09:03:10"), _epoch("2026-11-26 09:58:00"))
    assert time_labels(ticks) == [
        "11-26 09:10", "09:20", "09:30", "09:40", "09:50"
    ]  # fmt: skip
    two_days = time_ticks(_epoch("2026-11-26 20:00:00"), _epoch("2026-11-27 07:00:00"))
    labels = time_labels(two_days)
    assert labels[0] == "11-26 20:00" and "11-27 00:00" in labels
    assert all(len(label) == 5 for label in labels if label[:5] not in ("11-26", "11-27"))
    week = time_ticks(_epoch("2026-11-20 00:00:00"), _epoch("2026-11-28 00:00:00"))
    assert time_labels(week) == ["11-21", "11-23", "11-25", "11-27"]  # every 2 days
    short = time_ticks(_epoch("2026-11-26 09:00:01"), _epoch("2026-11-26 09:00:40"))
    assert time_labels(short) == ["11-26 09:00:10", "09:00:20", "09:00:30", "09:00:40"]
    year = time_labels(time_ticks(_epoch("2026-12-31 12:00:00"), _epoch("2027-01-01 12:00:00")))
    assert year[0].startswith("2026-12-31") and any(t.startswith("2027-01-01") for t in year)
