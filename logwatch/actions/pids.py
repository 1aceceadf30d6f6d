"""The `{pid}` of an action: the `pid=` of each log's last `run start:` line, folded from the
parsed batches (a tail plugin live, replay's frame hook after the fact)."""

from __future__ import annotations

import threading
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import polars as pl

from logwatch.alerts import AlertEvent

KEEP_STARTS = 1000
"""Run starts kept per log (replay looks up the one before an alert's line)."""


class RunPids:
    """Each log's run starts: (line, pid or None); a run start without `pid=` makes the pid
    unknown again (the old pid is another process now, never one to signal)."""

    name = "actions"
    columns: frozenset[str] | None = frozenset({"source", "line", "run_start", "pid"})

    def __init__(self) -> None:
        self._starts: dict[str, list[tuple[int, int | None]]] = {}
        self._lock = threading.Lock()  # read from the actions' threads

    def observe(self, frame: pl.DataFrame) -> None:
        """Fold parsed lines in (one source's or many's: each run start names its source)."""
        if frame.is_empty() or "run_start" not in frame.columns:
            return
        starts = frame.filter(pl.col("run_start").fill_null(False)).select("source", "line", "pid")
        if starts.is_empty():
            return
        with self._lock:
            for source, line, pid in starts.iter_rows():  # the few run-start rows only
                kept = self._starts.setdefault(source, [])
                kept.append((line, pid))
                del kept[:-KEEP_STARTS]

    def pid(self, source: str, line: int | None = None) -> int | None:
        """The pid of the run the log is in (before `line`, when given)."""
        with self._lock:
            starts = self._starts.get(source, [])
            if line is None:
                return starts[-1][1] if starts else None
            at = bisect_right([start for start, _ in starts], line)
            return starts[at - 1][1] if at else None

    # The rest of the tail plugin protocol: nothing to add, filter, keep or release.

    def filter(self, event: AlertEvent) -> AlertEvent | None:
        return event

    def round(self, driver: Any) -> Sequence[AlertEvent]:
        return []

    def start_events(self) -> Sequence[AlertEvent]:
        return []

    def export_state(self) -> Any:
        with self._lock:
            return {source: starts[-1:] for source, starts in self._starts.items()} or None

    def import_state(self, data: Any) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"actions: must be an object of run starts, got {type(data).__name__}")
        for source, starts in data.items():
            for item in starts:
                if not (
                    isinstance(item, list)
                    and len(item) == 2
                    and isinstance(item[0], int)
                    and (item[1] is None or isinstance(item[1], int))
                ):
                    raise ValueError(f"actions: {source!r}: a run start must be [line, pid]")
        with self._lock:
            self._starts = {s: [(i[0], i[1]) for i in starts] for s, starts in data.items()}

    def close(self) -> None:
        pass
