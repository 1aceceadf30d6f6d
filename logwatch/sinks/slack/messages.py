"""Slack messages for alerts: Block Kit blocks plus a plain-text fallback, inside Slack's limits."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import PurePath
from typing import Any

from logwatch.alerts import AlertEvent, Severity
from logwatch.durations import format_duration

HEADER_MAX = 150
SECTION_MAX = 3000
TEXT_MAX = 4000
BLOCKS_MAX = 50
MARK = "…(truncated, full text in logwatch log)"
_ICON = {Severity.CRITICAL: "🔴", Severity.WARNING: "🟠", Severity.INFO: "🔵"}
Block = dict[str, Any]
ENDED = "⏹️ ENDED (run restarted)"
"""How a group ended by a restart is shown: nothing was fixed, so no ✅."""


def icon(severity: Severity) -> str:
    """The coloured dot a severity is shown with."""
    return _ICON[severity]


def escape(text: str) -> str:
    """Log- or config-derived text made inert in mrkdwn: `&`, `<`, `>` as Slack's entities.

    Without it a log line's `<!channel>` pings a whole channel and `<http://evil|click>` shows a
    disguised link. logwatch's own markup (`*`, `_`, `~`, backticks) is added around the escaped
    pieces; header blocks are plain_text, which Slack does not parse, and stay unescaped.
    """
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(text: str, limit: int, mark: str = MARK) -> str:
    """The text, cut to `limit` characters with a visible marker when it was longer."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(mark), 0)] + mark[:limit]


def header(text: str) -> Block:
    """A header block (plain text, at most 150 characters)."""
    return {
        "type": "header",
        "text": {"type": "plain_text", "text": cut(text, HEADER_MAX, "…"), "emoji": True},
    }


def section(text: str) -> Block:
    """A mrkdwn section (at most 3000 characters)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": cut(text, SECTION_MAX)}}


def context(text: str) -> Block:
    """A small grey context line."""
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(text, SECTION_MAX)}]}


def when(ts: datetime | None) -> str:
    """A log timestamp as messages show it."""
    return ts.isoformat(sep=" ", timespec="seconds") if ts is not None else "?"


def rule_names(events: Sequence[AlertEvent]) -> str:
    """The rules of a group, in firing order, each once: `nan-loss + nan-grad`."""
    return " + ".join(dict.fromkeys(e.rule for e in events))


def member_line(
    event: AlertEvent,
    *,
    with_rule: bool = False,
    headline: str = "",
    ended: AlertEvent | None = None,
) -> str:
    """One alert of a group as a list item (naming its rule when the group has several; its
    summary left out when it is the `headline` the message already shows); `ended`, the event
    that resolved it while others of the group still fire, marks it as such."""
    step = f" step {event.step}" if event.step is not None else ""
    source = escape(event.source)
    summary = f" — {escape(event.summary)}" if event.summary != headline else ""
    rule = f"*{escape(event.rule)}* " if with_rule else ""
    mark = ""
    if ended is not None:
        mark = (
            "⏹️ ended (run restarted): "
            if ended.restarted
            else f"✅ resolved at line {ended.line}: "
        )
    return cut(f"• {mark}{rule}`{source}`:{event.line}{step}{summary}", 600, "…")


def member_lines(
    events: Sequence[AlertEvent], ended: Mapping[str, AlertEvent] | None = None
) -> list[str]:
    """A group's alerts as list items; each names its rule when the group has several, none
    repeats the headline summary (the first alert's), and those in `ended` (by fingerprint:
    resolved while the rest still fire) say so."""
    several = len({e.rule for e in events}) > 1
    headline = events[0].summary
    done = ended or {}
    return [
        member_line(e, with_rule=several, headline=headline, ended=done.get(e.fingerprint))
        for e in events
    ]


def _where(events: Sequence[AlertEvent]) -> str:
    sources = list(dict.fromkeys(e.source for e in events))
    return sources[0] if len(sources) == 1 else f"{len(sources)} sources"


def list_sections(lines: Sequence[str], max_blocks: int) -> list[Block]:
    """Pack list lines into sections of <= 3000 chars; beyond `max_blocks`, say "+N more"."""
    blocks: list[Block] = []
    chunk: list[str] = []
    size = 0
    budget = SECTION_MAX - 40  # room for the "+N more" line
    for index, line in enumerate(lines):
        if size + len(line) + 1 > budget:
            if len(blocks) + 1 == max_blocks:
                chunk.append(f"_+{len(lines) - index} more_")
                break
            blocks.append(section("\n".join(chunk)))
            chunk, size = [], 0
        chunk.append(line)
        size += len(line) + 1
    if chunk:
        blocks.append(section("\n".join(chunk)))
    return blocks


def fix_sections(events: Sequence[AlertEvent]) -> list[Block]:
    """Each distinct fix of a group's alerts, once, as a `*Fix:*` section."""
    fixes = dict.fromkeys(e.fix for e in events if e.fix)
    return [section(f"*Fix:* {escape(fix)}") for fix in list(fixes)[:3]]


def run_label(events: Sequence[AlertEvent], host: str | None = None) -> str:
    """Where a group happened, for its header: `host · run slammed4 (train.log)` when the log
    announced its run id, else `host · train.log` (or `host · N sources`)."""
    sources = list(dict.fromkeys(e.source for e in events))
    runs = list(dict.fromkeys(e.run for e in events if e.run))
    one = len(sources) == 1
    where = (PurePath(sources[0]).name or sources[0]) if one else f"{len(sources)} sources"
    if len(runs) == 1:
        where = f"run {runs[0]} ({where})"
    return f"{host if host is not None else socket.gethostname()} · {where}"


def firing_message(
    severity: Severity,
    events: Sequence[AlertEvent],
    *,
    host: str | None = None,
    ended: Mapping[str, AlertEvent] | None = None,
) -> tuple[str, list[Block]]:
    """The top-level message for a group of alerts (one rule, or several rules on one line);
    its header names the host (default: this one) and the run. `ended`: members that resolved
    while others still fire (the message is edited to show them; by fingerprint)."""
    first = events[0]
    icon = _ICON[severity]
    rule, where = rule_names(events), _where(events)
    title = f"{icon} FIRING {rule} ({severity.label}) — {run_label(events, host)}"
    blocks = [header(title), section(f"*{escape(first.summary)}*")]
    if first.text:
        blocks.append(section("```" + cut(escape(first.text), SECTION_MAX - 6) + "```"))
    blocks += list_sections(member_lines(events, ended), BLOCKS_MAX - len(blocks) - 2)
    blocks += fix_sections(events)
    still = len(events) - len(ended or {})
    partly = f" · {still} of {len(events)} still firing" if ended else ""
    blocks.append(context(f"first seen {when(first.ts)}{partly} · logwatch"))
    # The fallback text is mrkdwn too (notifications, old clients): escaped like the blocks.
    text = f"{icon} FIRING {escape(rule)} ({severity.label}) on {escape(where)}: {escape(first.summary)}"
    return cut(text, TEXT_MAX), blocks[:BLOCKS_MAX]


def resolved_message(
    events: Sequence[AlertEvent],
    firing_s: float,
    first_seen: datetime | None,
    *,
    restarted: bool = False,
    host: str | None = None,
    moved: Mapping[str, str] | None = None,
) -> tuple[str, list[Block]]:
    """What the firing message becomes once every alert of its group resolved, or (`restarted`)
    ended because the run restarted: that is no recovery, so it is not shown as one. `moved`:
    the sources renamed since it was posted (new name -> posted name), said in a context line."""
    rule, where = rule_names(events), _where(events)
    took = format_duration(firing_s)
    head = ENDED if restarted else "✅ RESOLVED"
    title = f"{head} {rule} — {run_label(events, host)} (after {took})"
    blocks = [header(title), section(f"~{escape(events[0].summary)}~")]
    fixes = fix_sections(events)
    blocks += list_sections(member_lines(events), BLOCKS_MAX - 3 - len(fixes))
    blocks += fixes
    blocks += [context(moved_line(moved))] if moved else []
    blocks.append(context(f"first seen {when(first_seen)} · logwatch"))
    text = f"{head} {escape(rule)} on {escape(where)} after {took} (first seen {when(first_seen)})"
    return cut(text, TEXT_MAX), blocks[:BLOCKS_MAX]


def moved_line(moved: Mapping[str, str]) -> str:
    """Where renamed sources went: `📁 log rotated: `train.log` is now `train.log.1``."""
    went = ", ".join(f"`{escape(old)}` is now `{escape(new)}`" for new, old in moved.items())
    return f"📁 log rotated: {went}"


def reply_message(text: str) -> tuple[str, list[Block]]:
    """A thread reply."""
    return cut(text, TEXT_MAX), [section(text)]


def digest_message(title: str, lines: Sequence[str]) -> tuple[str, list[Block]]:
    """One message summarising a replay."""
    blocks = [header(title), *list_sections(lines, BLOCKS_MAX - 1)]
    return cut(title + "\n" + "\n".join(lines), TEXT_MAX), blocks
