"""Build a report: one replay with a collecting hook, then charts and the page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from logwatch.drivers.replay import ReplayOptions, ReplayResult, replay
from logwatch.drivers.window import Window
from logwatch.engine import ErrorHandler, WarningHandler
from logwatch.errors import InputError
from logwatch.report.charts import all_charts, axis_for, left_out, place
from logwatch.report.collect import Collector
from logwatch.report.page import page, run_header
from logwatch.rules.loader import RuleSpec


@dataclass(frozen=True, slots=True)
class Report:
    """A rendered report: the page, its charts (for `--png`), and the replay behind it."""

    html: str
    charts: list[str]
    result: ReplayResult
    sources: list[str]  # in time order

    def write(self, path: str) -> int:
        """Write the page; its size in bytes."""
        data = self.html.encode("utf-8")
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(data)
        except OSError as exc:
            raise InputError(
                f"-o {path}: cannot write the report: {exc.strerror or exc} (choose a writable path)"
            ) from None
        return len(data)


def build_report(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    *,
    options: ReplayOptions | None = None,
    window: Window | None = None,
    on_error: ErrorHandler | None = None,
    on_warning: WarningHandler | None = None,
) -> Report:
    """Replay `paths` once and draw what they say; several files share one time axis, ordered
    by their first timestamp (argument order where a file has none)."""
    collector = Collector()
    result = replay(
        paths,
        rules,
        options=options or ReplayOptions(),
        window=window,
        on_frame=collector,
        on_error=on_error,
        on_warning=on_warning,
    )
    names = [p for p in dict.fromkeys(paths) if p in result.stats]
    time = all(result.stats[p].first_ts is not None for p in names) and bool(names)
    if time:
        names.sort(key=lambda p: result.stats[p].first_ts or "")
    data = [(p, collector.sources[p]) for p in names if p in collector.sources]
    placed = place(data, time=time)
    axis = axis_for(placed, time=time)
    events = sorted(
        result.events, key=lambda e: (names.index(e.source) if e.source in names else 0, e.line)
    )
    charts = all_charts(placed, axis, events)
    headers = [run_header(p, result.stats[p], _starts(collector, p), events) for p in names]
    missing = left_out(placed, events, axis)
    title = "logwatch report: " + ", ".join(Path(p).name for p in names)
    note = (
        f"{len(names)} log file(s) on one {'time' if time else 'line-number'} axis"
        + (", ordered by time" if time and len(names) > 1 else "")
        + f"; {len(events)} alert events."
        + (f" Not drawn (past the caps): {'; '.join(missing)}." if missing else "")
    )
    return Report(page(title, headers, charts, events, note), charts, result, names)


def _starts(collector: Collector, source: str) -> list[str]:
    return collector.sources[source].starts() if source in collector.sources else []
