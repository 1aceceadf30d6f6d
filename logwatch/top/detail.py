"""`logwatch top`'s Enter: the selected source's firing alerts in full, each with its summary,
its fix and the log line that fired it (log text masked and escaped, as everywhere)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from logwatch.alerts import AlertEvent
from logwatch.redact import redact, visible

if TYPE_CHECKING:
    from rich.console import RenderableType


def detail_view(
    alerts: Sequence[AlertEvent], name: str, silenced: frozenset[str], height: int
) -> RenderableType:
    """Each alert: `rule · severity · since HH:MM:SS (line N)`, then summary, fix, log line;
    cut to `height` lines (the rest counted)."""
    from rich.console import Group
    from rich.text import Text

    lines: list[Text] = [Text(f"firing on {name} (any key goes back)", style="bold")]
    for event in alerts:
        since = f"since {event.ts:%H:%M:%S} " if event.ts is not None else ""
        head = f"{_safe(event.rule)} · {event.severity.label} · {since}(line {event.line})"
        if event.fingerprint in silenced:
            head += " · silenced"
        lines.append(Text(head, style="bold"))
        lines.append(Text(f"  summary: {_safe(event.summary)}"))
        lines.append(Text(f"  fix: {_safe(event.fix) or '-'}"))
        lines.append(Text(f"  line {event.line}: {_safe(event.text) or '-'}", style="dim"))
    room = max(2, height)
    if len(lines) > room:
        hidden = len(lines) - room + 1
        lines = [*lines[: room - 1], Text(f"… {hidden} more lines", style="dim")]
    return Group(*lines)


def _safe(text: str) -> str:
    return visible(redact(text))
