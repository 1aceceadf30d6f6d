"""Human-readable output: the alert timeline and the per-file summary."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime

from logwatch.alerts import FIRING, AlertEvent, Severity, still_firing
from logwatch.durations import format_duration
from logwatch.engine import SourceStats, format_value
from logwatch.redact import visible

_SEVERITY_TAG = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO"}
_COLOUR = {Severity.CRITICAL: "\x1b[1;31m", Severity.WARNING: "\x1b[33m", Severity.INFO: "\x1b[36m"}
_GREEN, _DIM, _RESET = "\x1b[32m", "\x1b[2m", "\x1b[0m"
ENDED_TAG = "ENDED (run restarted)"
"""The tag of an alert ended by a restart: not `OK`, nothing was fixed."""
FIX_INDENT = " " * 27
"""Where a row's continuation lines (its wrapped summary, its `fix:`) start."""


def timeline_line(
    event: AlertEvent,
    *,
    colour: bool = False,
    width: int | None = None,
    arrived: datetime | None = None,
    silenced: bool = False,
) -> str:
    """One event as a timeline row (time, severity, rule, file:line, summary), plus its fix;
    `width`: wrapped at word boundaries to fit; `arrived`: the time column of a line without a
    timestamp; `silenced`: marked so."""
    when = event.ts.isoformat(sep=" ", timespec="seconds") if event.ts else "-" * 19
    if event.ts is None and arrived is not None:
        when = f"{arrived:%H:%M:%S} (arrived) "
    tag = _SEVERITY_TAG[event.severity] if event.status == FIRING else "OK  "
    tag = ENDED_TAG if event.restarted else tag
    summary = visible(event.summary) + (" (silenced)" if silenced else "")
    rule, source = visible(event.rule), visible(event.source)
    head = f"{when}  {tag}  {rule:<20} {source}:{event.line}  "
    rows = _wrap(head, summary, FIX_INDENT, width)
    if event.status == FIRING and event.fix:
        rows += _wrap(FIX_INDENT + "fix: ", visible(event.fix), FIX_INDENT + "     ", width)
    if colour:
        done = _DIM if event.restarted else _GREEN
        shade = _COLOUR[event.severity] if event.status == FIRING else done
        rows[0] = rows[0].replace(f"  {tag}  ", f"  {shade}{tag}{_RESET}  ", 1)
    return "\n".join(rows)


def _wrap(head: str, text: str, indent: str, width: int | None) -> list[str]:
    """`head + text` as one line, or wrapped at spaces to `width` (words are never split)."""
    if width is None or len(head) + len(text) <= width:
        return [head + text]
    if len(head) > width - 20:  # a long path: the text goes under it
        return [head.rstrip(), *_wrap(indent, text, indent, width)]
    return textwrap.wrap(
        text,
        width,
        initial_indent=head,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def summary_lines(stats: Mapping[str, SourceStats], events: Sequence[AlertEvent] = ()) -> list[str]:
    """A short post-mortem summary per file (a header line per file when there are several):
    counts, the last loss, the time span, restarts, throughput, the alerts still firing."""
    firing = still_firing(events)
    out: list[str] = []
    for source, s in stats.items():
        if len(stats) > 1:
            out.append(f"== {visible(source)} ==")
        steps = (
            f"{s.steps_seen} step lines ({s.first_step}..{s.last_step})"
            if s.steps_seen
            else "no step lines"
        )
        loss = "no loss" if s.last_loss is None else f"last loss {format_value(s.last_loss)}"
        queue = f", q_hs {s.q_hs_min}..{s.q_hs_max}" if s.q_hs_min is not None else ""
        fired = ", ".join(f"{rule} x{n}" for rule, n in sorted(s.fired.items())) or "none"
        out.append(
            f"{visible(source)}: {s.lines} lines, {steps}, {loss}{queue}; alerts: {visible(fired)}"
        )
        out.append(f"  {_span(s)}, {_restarts(s)}, {_rate(s)}")
        left = [f"{visible(e.rule)} (line {e.line})" for e in firing if e.source == source]
        out.append(f"  still firing: {', '.join(left) or 'none'}")
    return out


def _span(s: SourceStats) -> str:
    if s.first_ts is None or s.last_ts is None:
        return "no timestamps"
    first, last = datetime.fromisoformat(s.first_ts), datetime.fromisoformat(s.last_ts)
    took = format_duration(max((last - first).total_seconds(), 0.0))
    return f"{first:%Y-%m-%d %H:%M:%S} .. {last:%Y-%m-%d %H:%M:%S} ({took})"


def _restarts(s: SourceStats) -> str:
    restarts = max(s.runs - 1, 0)
    return {0: "no restarts", 1: "restarted once"}.get(restarts, f"restarted {restarts} times")


def _rate(s: SourceStats) -> str:
    if s.throughput_median is None:
        return "no throughput"
    rate = s.throughput_median
    return f"throughput median {rate:,.0f}/s" if rate >= 100 else f"throughput median {rate:.3g}/s"
