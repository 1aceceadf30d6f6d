"""Human-readable output: the alert timeline and the per-file summary."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from datetime import datetime

from logwatch.alerts import FIRING, AlertEvent, Severity, still_firing
from logwatch.durations import format_duration
from logwatch.engine import SourceStats, format_value
from logwatch.redact import visible
from logwatch.words import counted

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
    return timeline_entry(
        [event],
        colour=colour,
        width=width,
        arrived=arrived,
        silenced=frozenset({0} if silenced else ()),
    )


def same_incident(a: AlertEvent, b: AlertEvent) -> bool:
    """Two events of one incident: the same source and line, firing (or resolving, or ended by a
    restart) together. The timeline shows them as one entry, as Slack does."""
    return (a.source, a.line, a.status, a.restarted) == (b.source, b.line, b.status, b.restarted)


def timeline_entry(
    events: Sequence[AlertEvent],
    *,
    colour: bool = False,
    width: int | None = None,
    arrived: datetime | None = None,
    silenced: frozenset[int] = frozenset(),
) -> str:
    """One incident (events of one line, `same_incident`) as a timeline entry: its time, the
    highest severity, every rule, file:line and the first summary on one row, the other rules'
    summaries under it, then each distinct fix; `silenced`: the indexes of silenced events."""
    first = events[0]
    when = first.ts.isoformat(sep=" ", timespec="seconds") if first.ts else "-" * 19
    if first.ts is None and arrived is not None:
        when = f"{arrived:%H:%M:%S} (arrived) "
    severity = max(e.severity for e in events)
    tag = _SEVERITY_TAG[severity] if first.status == FIRING else "OK  "
    tag = ENDED_TAG if first.restarted else tag
    said = [
        visible(e.summary) + (" (silenced)" if i in silenced else "") for i, e in enumerate(events)
    ]
    rule, source = ", ".join(visible(e.rule) for e in events), visible(first.source)
    head = f"{when}  {tag}  {rule:<20} {source}:{first.line}  "
    rows = _wrap(head, said[0], FIX_INDENT, width)
    for event, summary in zip(events[1:], said[1:], strict=True):
        rows += _wrap(f"{FIX_INDENT}{visible(event.rule)}: ", summary, FIX_INDENT + "  ", width)
    if first.status == FIRING:
        for fix in dict.fromkeys(visible(e.fix) for e in events if e.fix):
            rows += _wrap(FIX_INDENT + "fix: ", fix, FIX_INDENT + "     ", width)
    if colour:
        done = _DIM if first.restarted else _GREEN
        shade = _COLOUR[severity] if first.status == FIRING else done
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
            f"{counted(s.steps_seen, 'step line')} ({s.first_step}..{s.last_step})"
            if s.steps_seen
            else "no step lines"
        )
        loss = "no loss" if s.last_loss is None else f"last loss {format_value(s.last_loss)}"
        queue = f", q_hs {s.q_hs_min}..{s.q_hs_max}" if s.q_hs_min is not None else ""
        fired = ", ".join(f"{rule} x{n}" for rule, n in sorted(s.fired.items())) or "none"
        out.append(
            f"{visible(source)}: {counted(s.lines, 'line')}, {steps}, {loss}{queue}; alerts: {visible(fired)}"
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
