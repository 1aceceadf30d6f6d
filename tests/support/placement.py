"""Replay's events as `tail` must give them. Both drivers place each event after the engine found
it (`logwatch/drivers/ranks.py`, `logwatch/drivers/tail_place.py`): rank and host labels from the
path, prefixes and NCCL lines, and an untimed line's event takes the time of the last timed line
before it (`labels.ts_from_line`). The `root-cause` verdict is the whole replay's
(`logwatch/drivers/verdict.py`), not a rule's: tail has none, so the tests that hold tail equal
to replay compare everything else.

One thing tail cannot know: a writer named only by a line after the alert. Replay places a
file's events at its end; tail sends an alert at once. Two samples name their host that way
(`LATE_HOST`); for them the host label, and so the fingerprint, is left out of the comparison
when the file was written in pieces."""

from __future__ import annotations

from typing import Any

from logwatch.alerts import AlertEvent

LATE_HOST = {
    "torchtitan.log": "the kernel's Xid lines at the end name gpu-node-17",
    "failures.log": "an NCCL line after the nvml-disabled alert names node17-2",
}
"""Samples whose host is named only after some of their alerts, and by what."""


def comparable(events: list[AlertEvent], *, late_host: bool = False) -> list[dict[str, Any]]:
    """Each event's JSON (fingerprint included), without replay's `root-cause` verdicts;
    `late_host`: without the host label and the fingerprint (see `LATE_HOST`)."""
    out = []
    for event in events:
        if event.rule == "root-cause":
            continue
        doc = event.to_json()
        if late_host:
            doc["labels"] = {k: v for k, v in doc["labels"].items() if k != "host"}
            doc.pop("fingerprint")
        out.append(doc)
    return out
