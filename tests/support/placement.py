"""Replay's events as `tail` gives them today. Replay places each event after the engine found
it (`logwatch/drivers/ranks.py`): rank and host labels from the path, prefixes and NCCL lines, and
an untimed line's event takes the time of the last timed line before it (`labels.ts_from_line`);
the fingerprint follows those labels. The live driver does not place yet, so tests that hold tail
equal to replay compare what the engine decides, on both sides: rule, severity, status, line,
step, value, summary, fix, text and the rule's own labels. The `root-cause` verdict is the whole
replay's (`logwatch/drivers/verdict.py`), not a rule's: tail has none."""

from __future__ import annotations

from typing import Any

from logwatch.alerts import AlertEvent

PLACED = frozenset({"rank", "host", "local_rank", "ts_from_line"})


def unplaced(events: list[AlertEvent]) -> list[dict[str, Any]]:
    """Each event's JSON without what placement adds or moves (see the module's docstring)."""
    out = []
    for event in events:
        if event.rule == "root-cause":
            continue
        doc = event.to_json()
        labels = doc["labels"]
        if "ts_from_line" in labels:
            doc["ts"] = None
        doc["labels"] = {k: v for k, v in labels.items() if k not in PLACED}
        doc.pop("fingerprint", None)
        out.append(doc)
    return out
