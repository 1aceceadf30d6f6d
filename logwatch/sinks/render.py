"""Human-readable output: the alert timeline and the per-file summary."""

from __future__ import annotations

from collections.abc import Mapping

from logwatch.alerts import FIRING, AlertEvent, Severity
from logwatch.engine import SourceStats, format_value

_SEVERITY_TAG = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO"}
_COLOUR = {Severity.CRITICAL: "\x1b[1;31m", Severity.WARNING: "\x1b[33m", Severity.INFO: "\x1b[36m"}
_GREEN, _DIM, _RESET = "\x1b[32m", "\x1b[2m", "\x1b[0m"
ENDED_TAG = "ENDED (run restarted)"
"""The tag of an alert ended by a restart: not `OK`, nothing was fixed."""


def timeline_line(event: AlertEvent, *, colour: bool = False) -> str:
    """One event as a timeline row (time, severity, rule, file:line, summary), plus its fix."""
    when = event.ts.isoformat(sep=" ", timespec="seconds") if event.ts else "-" * 19
    tag = _SEVERITY_TAG[event.severity] if event.status == FIRING else "OK  "
    tag = ENDED_TAG if event.restarted else tag
    if colour:
        tint = _DIM if event.restarted else _GREEN
        tag = (_COLOUR[event.severity] if event.status == FIRING else tint) + tag + _RESET
    row = f"{when}  {tag}  {event.rule:<20} {event.source}:{event.line}  {event.summary}"
    if event.status == FIRING and event.fix:
        row += f"\n{'':21}      fix: {event.fix}"
    return row


def summary_lines(stats: Mapping[str, SourceStats]) -> list[str]:
    """A short post-mortem summary per file."""
    out: list[str] = []
    for source, s in stats.items():
        steps = (
            f"{s.steps_seen} step lines ({format_value(s.first_step)}..{format_value(s.last_step)})"
            if s.steps_seen
            else "no step lines"
        )
        queue = f", q_hs {s.q_hs_min}..{s.q_hs_max}" if s.q_hs_min is not None else ""
        fired = ", ".join(f"{rule} x{n}" for rule, n in sorted(s.fired.items())) or "none"
        out.append(
            f"{source}: {s.lines} lines, {steps}, last loss {format_value(s.last_loss)}{queue}; "
            f"alerts: {fired}"
        )
    return out
