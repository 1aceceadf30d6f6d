"""Duration strings as in Prometheus."""

from __future__ import annotations

import pytest

from logwatch.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("500ms", 0.5), ("30s", 30), ("10m", 600), ("1h", 3600), ("1h30m", 5400), ("2d", 172800)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    """Each unit and a compound form parse to seconds."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "10 m", "m10", "1x", "1h 30m", "-5s"])
def test_parse_duration_rejects_with_hint(text: str) -> None:
    """Malformed durations fail with a message naming the accepted units."""
    with pytest.raises(ValueError, match="expected a number with a unit"):
        parse_duration(text)


def test_format_duration() -> None:
    """Short human forms."""
    assert [format_duration(s) for s in (45, 725, 11220)] == ["45s", "12m05s", "3h07m"]
