"""Durations as Prometheus writes them: "500ms", "30s", "10m", "1h", "1h30m", "2d"."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(text: str) -> float:
    """Seconds in a duration string; ValueError (saying what is accepted) otherwise."""
    body = text.strip()
    pos, total = 0, 0.0
    for match in _PART.finditer(body):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(
            f"invalid duration {text!r} (expected a number with a unit: ms, s, m, h, d, w; e.g. '30s', '10m', '1h30m')"
        )
    return total


def format_duration(seconds: float) -> str:
    """A short human form: 45s, 12m05s, 3h07m."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
