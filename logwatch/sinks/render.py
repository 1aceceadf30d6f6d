"""Human-readable output: the alert timeline and the per-file summary."""

from __future__ import annotations

import re
from collections.abc import Mapping

from logwatch.alerts import FIRING, AlertEvent, Severity
from logwatch.engine import SourceStats, format_value

_SEVERITY_TAG = {Severity.CRITICAL: "CRIT", Severity.WARNING: "WARN", Severity.INFO: "INFO"}
_COLOUR = {Severity.CRITICAL: "\x1b[1;31m", Severity.WARNING: "\x1b[33m", Severity.INFO: "\x1b[36m"}
_GREEN, _RESET = "\x1b[32m", "\x1b[0m"
# C0 controls but tab, DEL, the C1 block (U+0080-U+009F: 8-bit CSI, OSC, DCS) and the bidi
# overrides/isolates that reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """Text from a log or a file name made safe for a terminal: every non-printing control as
    `\\xNN` (`\\uNNNN` for bidi controls), so ESC, BEL, BS, CR, LF and C1 never reach it raw.

    Tabs stay. Line breaks in output are only the ones logwatch writes itself (the `fix:` line).
    """
    return _CONTROL.sub(_escaped, text)


def timeline_line(event: AlertEvent, *, colour: bool = False) -> str:
    """One event as a timeline row (time, severity, rule, file:line, summary), plus its fix."""
    when = event.ts.isoformat(sep=" ", timespec="seconds") if event.ts else "-" * 19
    tag = _SEVERITY_TAG[event.severity] if event.status == FIRING else "OK  "
    if colour:
        tag = (_COLOUR[event.severity] if event.status == FIRING else _GREEN) + tag + _RESET
    rule, source, summary = visible(event.rule), visible(event.source), visible(event.summary)
    row = f"{when}  {tag}  {rule:<20} {source}:{event.line}  {summary}"
    if event.status == FIRING and event.fix:
        row += f"\n{'':21}      fix: {visible(event.fix)}"
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
            f"{visible(source)}: {s.lines} lines, {steps}, last loss {format_value(s.last_loss)}{queue}; "
            f"alerts: {visible(fired)}"
        )
    return out
