"""Slack messages for alerts: Block Kit blocks plus a plain-text fallback, inside Slack's limits."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import PurePath
from typing import Any

from logwatch.alerts import AlertEvent, Severity
from logwatch.durations import format_duration
from logwatch.redact import redact

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


def member_line(event: AlertEvent, *, with_rule: bool = False, headline: str = "") -> str:
    """One alert of a group as a list item (naming its rule when the group has several; its
    summary left out when it is the `headline` the message already shows)."""
    step = f" step {event.step}" if event.step is not None else ""
    source = escape(event.source)
    summary = f" — {escape(event.summary)}" if event.summary != headline else ""
    rule = f"*{escape(event.rule)}* " if with_rule else ""
    return cut(f"• {rule}`{source}`:{event.line}{step}{summary}", 600, "…")


def member_lines(events: Sequence[AlertEvent]) -> list[str]:
    """A group's alerts as list items; each names its rule when the group has several, none
    repeats the headline summary (the first alert's)."""
    several = len({e.rule for e in events}) > 1
    headline = events[0].summary
    return [member_line(e, with_rule=several, headline=headline) for e in events]


def ended_line(event: AlertEvent, ended: AlertEvent, *, with_rule: bool) -> str:
    """A member that stopped firing while others of its group still fire, struck through:
    `• ✅ ~nan-grad train.log:42 step 1200~ resolved at line 57`."""
    step = f" step {event.step}" if event.step is not None else ""
    rule = f"{event.rule} " if with_rule else ""
    # Plain text inside the strike: no markup nested in it to depend on. A `~` of a file name
    # would end the strike early, so it is shown as the look-alike U+223C.
    struck = escape(f"{rule}{event.source}:{event.line}{step}").replace("~", "\u223c")
    why = "⏹️ ~{}~ ended (run restarted)" if ended.restarted else "✅ ~{}~ resolved at line {}"
    return cut("• " + why.format(struck, ended.line), 600, "…")


def partly_lines(events: Sequence[AlertEvent], ended: Mapping[str, AlertEvent]) -> list[str]:
    """A group some of whose alerts ended (by fingerprint): those still firing, then those that
    no longer fire, struck through, each list under its own heading."""
    live = [e for e in events if e.fingerprint not in ended]
    done = [e for e in events if e.fingerprint in ended]
    several = len({e.rule for e in events}) > 1
    headline = live[0].summary if live else ""
    return [
        f"*Still firing ({len(live)} of {len(events)}):*",
        *(member_line(e, with_rule=several, headline=headline) for e in live),
        f"*No longer firing ({len(done)}):*",
        *(ended_line(e, ended[e.fingerprint], with_rule=several) for e in done),
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


def where_parts(
    events: Sequence[AlertEvent], host: str | None = None, env_run: str | None = None
) -> tuple[str, str, str]:
    """Where a group happened, for its header, as (before, file, after) so the file part can be
    cut first: `host · run slammed4 (` `train.log` `)` when the log announced its run id (else
    `env_run`, the run the environment of this process names), else `host · ` `train.log` ``
    (or `N sources`). The host is the log's where placement named one for every event
    (`labels.host`, a fleet's rank log; `N hosts` for several), else `host` (default: this one).
    Run ids are redacted like log text."""
    sources = list(dict.fromkeys(e.source for e in events))
    one = len(sources) == 1
    where = (PurePath(sources[0]).name or sources[0]) if one else f"{len(sources)} sources"
    place = f"{event_host(events) or (host if host is not None else socket.gethostname())} · "
    run = group_run(events, env_run)
    return (f"{place}run {run} (", where, ")") if run is not None else (place, where, "")


def event_host(events: Sequence[AlertEvent]) -> str | None:
    """Where a group's events happened as their logs say (`labels.host`): the host, `N hosts`,
    or None when an event's log named none."""
    hosts = [e.labels.get("host") for e in events]
    if not hosts or None in hosts or "" in hosts:
        return None
    named = list(dict.fromkeys(hosts))
    return redact(str(named[0])) if len(named) == 1 else f"{len(named)} hosts"


def group_run(events: Sequence[AlertEvent], env_run: str | None) -> str | None:
    """The one run a group's alerts belong to (the log's, else `env_run`), redacted; None when
    there is none or several."""
    runs = list(dict.fromkeys(run for e in events if (run := e.run or env_run)))
    return redact(runs[0]) if len(runs) == 1 else None


def title(
    lead: str,
    events: Sequence[AlertEvent],
    *,
    host: str | None,
    env_run: str | None,
    trail: str = "",
) -> str:
    """A header: `lead`, where the group happened, `trail`; within Slack's 150 characters by
    cutting the file name first (the rule, host and run say more), then the end."""
    before, file, after = where_parts(events, host, env_run)
    before, after = lead + before, after + trail
    room = HEADER_MAX - len(before) - len(after)
    if len(file) > room:
        file = cut(file, max(room, 1), "…")
    return cut(before + file + after, HEADER_MAX, "…")


def firing_message(
    severity: Severity,
    events: Sequence[AlertEvent],
    *,
    host: str | None = None,
    env_run: str | None = None,
    ended: Mapping[str, AlertEvent] | None = None,
) -> tuple[str, list[Block]]:
    """The top-level message for a group of alerts (one rule, or several rules on one line);
    its header names the host (default: this one) and the run (`env_run` when the log named
    none). `ended`: members that resolved while others still fire (by fingerprint): the edited
    message names only the rules still firing and lists the others struck through."""
    done = ended or {}
    live = [e for e in events if e.fingerprint not in done] or list(events)
    first = live[0]
    icon = _ICON[severity]
    rule, where = rule_names(live), _where(events)
    lead = f"{icon} FIRING {rule} ({severity.label}) — "
    blocks = [header(title(lead, events, host=host, env_run=env_run))]
    blocks.append(section(f"*{escape(first.summary)}*"))
    if first.text:
        blocks.append(section("```" + cut(escape(first.text), SECTION_MAX - 6) + "```"))
    lines = partly_lines(events, done) if done else member_lines(events)
    blocks += list_sections(lines, BLOCKS_MAX - len(blocks) - 2)
    blocks += fix_sections(events)
    partly = f" · {len(live)} of {len(events)} still firing" if done else ""
    blocks.append(context(f"first seen {when(events[0].ts)}{partly} · logwatch"))
    # The fallback text is mrkdwn too (notifications, old clients): escaped like the blocks.
    text = (
        f"{icon} FIRING {escape(rule)} ({severity.label}) on {escape(where)}"
        f"{_run_note(events, env_run)}: {escape(first.summary)}"
    )
    return cut(text, TEXT_MAX), blocks[:BLOCKS_MAX]


def resolved_message(
    events: Sequence[AlertEvent],
    firing_s: float,
    first_seen: datetime | None,
    *,
    restarted: bool = False,
    host: str | None = None,
    env_run: str | None = None,
    moved: Mapping[str, str] | None = None,
) -> tuple[str, list[Block]]:
    """What the firing message becomes once every alert of its group resolved, or (`restarted`)
    ended because the run restarted: that is no recovery, so it is not shown as one. `moved`:
    the sources renamed since it was posted (new name -> posted name), said in a context line."""
    rule, where = rule_names(events), _where(events)
    took = format_duration(firing_s)
    head = ENDED if restarted else "✅ RESOLVED"
    trail = f" (after {took})"
    blocks = [header(title(f"{head} {rule} — ", events, host=host, env_run=env_run, trail=trail))]
    blocks.append(section(f"~{escape(events[0].summary)}~"))
    fixes = fix_sections(events)
    blocks += list_sections(member_lines(events), BLOCKS_MAX - 3 - len(fixes))
    blocks += fixes
    blocks += [context(moved_line(moved))] if moved else []
    blocks.append(context(f"first seen {when(first_seen)} · logwatch"))
    text = (
        f"{head} {escape(rule)} on {escape(where)}{_run_note(events, env_run)} after {took} "
        f"(first seen {when(first_seen)})"
    )
    return cut(text, TEXT_MAX), blocks[:BLOCKS_MAX]


def _run_note(events: Sequence[AlertEvent], env_run: str | None) -> str:
    """` (run slammed4)` for a fallback text when the group has one run, else nothing."""
    run = group_run(events, env_run)
    return f" (run {escape(run)})" if run is not None else ""


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
