"""Axis ticks people read at a glance: steps of 1, 2 or 5 times a power of ten, SI suffixes
(`12k`, `1.2M`), and times that drop what does not change across the axis.

Tick values are multiples of the step, so labels read `0.2 0.4 0.6`, never `0.7312`.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_TIME_STEPS_S = (
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    2 * 3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    2 * 86400,
    7 * 86400,
    14 * 86400,
    28 * 86400,
)
"""Time steps in seconds: round minutes, hours and days (a clock's 1-2-5)."""


def nice_step(span: float, most: int) -> float:
    """The smallest step of 1, 2 or 5 times a power of ten that cuts `span` into at most
    `most` intervals."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / max(most, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    for mantissa in (1.0, 2.0, 5.0, 10.0):
        if mantissa * power >= raw * (1 - 1e-9):
            return mantissa * power
    return 10.0 * power  # pragma: no cover  # 10 always fits


def linear_ticks(lo: float, hi: float, most: int = 6, *, least: float = 0.0) -> list[float]:
    """The multiples of a 1-2-5 step inside [lo, hi], at most `most` + 1 of them; `least`:
    the smallest step (1 for steps and line numbers, which have no fractions)."""
    step = max(nice_step(hi - lo, most), least)
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [_clean(k * step, step) for k in range(first, last + 1)]


def _clean(value: float, step: float) -> float:
    """`k * step` without floating-point dust (0.30000000000000004 is 0.3)."""
    digits = max(0, -math.floor(math.log10(step))) + 1 if step > 0 else 0
    return round(value, digits) + 0.0


def log_ticks(lo_exp: float, hi_exp: float, most: int = 6) -> list[float]:
    """Ticks for a log axis between 10**lo_exp and 10**hi_exp: 1, 2, 5 x 10^k while they
    fit, else every power of ten (or every second, fifth ... one)."""
    first, last = math.floor(lo_exp), math.ceil(hi_exp)
    for mantissas in ((1.0, 2.0, 5.0), (1.0,)):
        values = [
            m * 10.0**k
            for k in range(first, last + 1)
            for m in mantissas
            if lo_exp - 1e-9 <= math.log10(m * 10.0**k) <= hi_exp + 1e-9
        ]
        if len(values) <= most + 1 and len(values) >= 2:
            return values
    decades = list(range(math.ceil(lo_exp - 1e-9), math.floor(hi_exp + 1e-9) + 1))
    every = max(1, int(nice_step(len(decades) - 1, most)))
    return [10.0**k for k in decades if k % every == 0]


def si_label(value: float, step: float | None = None) -> str:
    """A number as few characters as its step needs: `12k`, `1.2M`, `0.25`, `2e-05`."""
    if value == 0:
        return "0"
    size = abs(value)
    for scale, suffix in _SI:
        if size >= scale:
            return _short(value / scale, None if step is None else step / scale) + suffix
    if size < 1e-3:
        return f"{value:.0e}" if _is_round(value) else f"{value:.1e}"
    return _short(value, step)


def _short(value: float, step: float | None) -> str:
    """A value with the decimals its step has (or up to 3 significant ones)."""
    if step is not None and step > 0:
        decimals = max(0, -math.floor(math.log10(step) + 1e-9))
        text = f"{value:.{decimals}f}"
    else:
        text = f"{value:.3g}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _is_round(value: float) -> bool:
    mantissa = abs(value) / 10.0 ** math.floor(math.log10(abs(value)))
    return abs(mantissa - round(mantissa)) < 1e-6


def time_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """Epoch seconds in [lo, hi] at round times: the smallest clock step giving at most
    `most` + 1 ticks."""
    span = hi - lo
    step = float(next((s for s in _TIME_STEPS_S if span / s <= most), 0))
    if not step:
        step = 86400 * nice_step(span / 86400, most)
    first = math.ceil(lo / step - 1e-9)
    last = math.floor(hi / step + 1e-9)
    return [k * step for k in range(first, last + 1)]


def time_labels(ticks: list[float]) -> list[str]:
    """Labels that say only what changes: `14:20` beside `14:30`; the date on the first tick
    and where it changes (`12-08 00:00`); the year only when the axis crosses one; seconds
    only when the step has them."""
    if not ticks:
        return []
    when = [datetime.fromtimestamp(t, UTC) for t in ticks]
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 60.0
    years = len({w.year for w in when}) > 1
    date_fmt = "%Y-%m-%d" if years else "%m-%d"
    if step >= 86400:
        return [w.strftime(date_fmt) for w in when]
    clock = "%H:%M:%S" if step % 60 else "%H:%M"
    out, day = [], None
    for w in when:
        text = w.strftime(clock)
        if w.date() != day:
            text = w.strftime(date_fmt) + " " + text
            day = w.date()
        out.append(text)
    return out
