"""The report page: a header per run, the charts, the alert table; one self-contained HTML file.

Everything a log said is HTML-escaped; nothing is fetched (no script, style, font or image comes
from anywhere but this file).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape

from logwatch.alerts import FIRING, AlertEvent, Severity, still_firing
from logwatch.durations import format_duration
from logwatch.engine import SourceStats, run_id
from logwatch.redact import redact
from logwatch.report.collect import Place

_HOST = re.compile(r"\bhost(?:name)?\s*[=:]\s*['\"]?([\w.-]{1,80})")
_PHRASE = {
    "nan-loss": "NaN loss",
    "nan-grad": "non-finite gradient norm",
    "nan-iterations": "NaN iterations",
    "cuda-oom": "CUDA out of memory",
    "cuda-error": "CUDA error",
    "nccl-timeout": "NCCL timeout",
    "gpu-lost": "GPU lost",
    "loss-scale-collapse": "loss scale collapsed",
    "bucket-starvation": "HS queue starved",
    "nvml-disabled": "NVML off",
    "gpu-metrics-missing": "GPU metrics missing",
    "gpu-idle": "GPUs idle",
    "gpu-memory-high": "GPU memory high",
    "gpu-hot": "GPU hot",
    "log-stalled": "log stalled",
}
CSS = """
:root{color-scheme:light dark}
body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px} h2{font-size:16px;margin:20px 0 6px}
.run{border:1px solid #ddd;border-radius:6px;padding:8px 12px;margin:8px 0;max-width:1076px}
.run dl{display:grid;grid-template-columns:150px 1fr;margin:4px 0;gap:2px 8px} .run dt{color:#666}
.verdict{font-weight:600} .controls{margin:8px 0}
svg.chart{display:block;margin:6px 0;background:#fafafa;border:1px solid #eee;max-width:100%;height:auto}
svg .title{font-weight:600;font-size:13px;fill:#222}
svg .tick,svg .legend,svg .rule{font-size:11px;fill:#444}
svg .grid{stroke:#e4e4e4} svg .axis,svg .tickmark{stroke:#999} svg polyline{stroke-width:1.3}
svg .divider{stroke:#555;stroke-dasharray:2 3} svg .divider-label{font-size:11px;fill:#555}
.swatch{display:inline-block;width:14px;height:4px;margin:0 4px 3px 0;vertical-align:middle}
svg .band.restart{fill:#555;opacity:.35} svg .band.stall{fill:#f0c040;opacity:.3}
svg .band.starved{fill:#ff7f0e;opacity:.18}
svg .nf{fill:#d62728;stroke:#fff;stroke-width:1}
.log-y{display:none} body.log .log-y{display:inline} body.log .lin-y{display:none}
table.alerts{border-collapse:collapse;font-size:12px;max-width:100%}
table.alerts td,table.alerts th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
table.alerts td.text{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
tr.critical td.sev{color:#d62728;font-weight:600} tr.warning td.sev{color:#c86400}
tr.resolved td{color:#666} td.ts small{display:block;color:#777}
.verdict-box{border:2px solid #d62728;border-radius:6px;padding:8px 12px;margin:8px 0;max-width:1076px}
.verdict-box .root-cause{font-weight:600;margin:0 0 4px}
.verdict-box dl{display:grid;grid-template-columns:150px 1fr;margin:4px 0;gap:2px 8px}
.verdict-box dt{color:#666} tr.folded td{background:#fff4e5}
svg .alive{stroke:#ccc} svg .culprit-row{fill:#d62728;opacity:.15}
svg .culprit-label{font-size:12px;font-weight:600;fill:#d62728} svg .yr{font-size:11px;fill:#444}
@media (prefers-color-scheme:dark){
body{color:#ddd;background:#121212} .run{border-color:#444} .run dt{color:#999}
svg.chart{background:#1b1b1b;border-color:#333}
svg .title{fill:#eee} svg .tick,svg .legend,svg .rule,svg .divider-label{fill:#bbb}
svg .grid{stroke:#2e2e2e} svg .axis,svg .tickmark{stroke:#777} svg .divider{stroke:#aaa}
svg .nf{stroke:#121212} svg .band.restart{fill:#bbb;opacity:.3}
table.alerts td,table.alerts th{border-color:#444} tr.resolved td{color:#999}
tr.critical td.sev{color:#ff6b6b} tr.warning td.sev{color:#ffa94d} td.ts small{color:#999}
.verdict-box dt{color:#999} tr.folded td{background:#2a2116} svg .alive{stroke:#444}
svg .yr{fill:#bbb} svg .culprit-label{fill:#ff6b6b}
}
"""
TABLE_CAP = 2000
"""Alert events listed in the page's table (in file order); the rest are counted."""
SCRIPT = (
    "document.getElementById('logscale').addEventListener('change',"
    "function(e){document.body.classList.toggle('log',e.target.checked);});"
)


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What the top of the report says about one source."""

    source: str
    host: str
    run: str
    span: str
    steps: str
    lines: int
    restarts: int
    alerts: str
    firing: str
    verdict: str
    runs: Sequence[tuple[str, str]] = field(default=())  # (legend label, colour) per run


def run_header(
    source: str,
    stats: SourceStats,
    starts: Sequence[str],
    events: Sequence[AlertEvent],
    drawn: Sequence[tuple[str, str]] = (),
) -> RunHeader:
    """The header of one source: identity, span, counts and a one-sentence verdict."""
    hosts = [m[1] for m in (_HOST.search(t) for t in starts) if m]
    runs = [r for r in (run_id(t) for t in starts) if r]
    mine = [e for e in events if e.source == source]
    firing = [e for e in still_firing(mine)]
    counts = Counter(e.severity for e in mine if e.status == FIRING)
    alerts = ", ".join(f"{counts[s]} {s.label}" for s in sorted(counts, reverse=True))
    steps = f"{stats.first_step}..{stats.last_step}" if stats.steps_seen else "no step"
    return RunHeader(
        source=redact(source),
        host=redact(hosts[-1]) if hosts else "not in the log",
        run=redact(runs[-1]) if runs else "not in the log",
        span=_span(stats),
        steps=steps,
        lines=stats.lines,
        restarts=max(stats.runs - 1, 0),
        alerts=alerts or "none",
        firing=", ".join(f"{e.rule} (line {e.line})" for e in firing) or "none",
        verdict=verdict(stats, mine),
        runs=drawn,
    )


def _span(stats: SourceStats) -> str:
    if stats.first_ts is None or stats.last_ts is None:
        return "no timestamps in the log"
    first, last = datetime.fromisoformat(stats.first_ts), datetime.fromisoformat(stats.last_ts)
    took = format_duration(max((last - first).total_seconds(), 0.0))
    return f"{first:%Y-%m-%d %H:%M:%S} .. {last:%Y-%m-%d %H:%M:%S} ({took})"


def verdict(stats: SourceStats, events: Sequence[AlertEvent]) -> str:
    """One sentence: the first critical alert and when, restarts, and every rule still firing
    at the end (the header's list, in its order)."""
    parts = []
    fired = [e for e in events if e.status == FIRING]
    critical = [e for e in fired if e.severity == Severity.CRITICAL]
    first = critical[0] if critical else (fired[0] if fired else None)
    if first is not None:
        what = _PHRASE.get(first.rule, first.rule)
        where = f"at step {first.step}" if first.step is not None else f"at line {first.line}"
        after = ""
        if first.ts is not None and stats.first_ts is not None:
            took = (first.ts - datetime.fromisoformat(stats.first_ts)).total_seconds()
            after = f" after {format_duration(max(took, 0.0))}"
        parts.append(f"{what} {where}{after}")
    restarts = max(stats.runs - 1, 0)
    if restarts:
        parts.append(
            {1: "restarted once", 2: "restarted twice"}.get(restarts, f"restarted {restarts} times")
        )
    left = list(dict.fromkeys(e.rule for e in still_firing(events)))
    if left:
        named = [r + (" (NVML off)" if r == "nvml-disabled" else "") for r in left]
        parts.append("still firing at the end: " + ", ".join(named))
    if not parts:
        steps = f" over steps {stats.first_step}..{stats.last_step}" if stats.steps_seen else ""
        return f"No alerts{steps}."
    sentence = "; ".join(parts)
    return sentence[0].upper() + sentence[1:] + "."


def header_html(h: RunHeader) -> str:
    """One run's header block."""
    rows = [
        ("host", h.host),
        ("run id", h.run),
        ("time", h.span),
        ("steps", h.steps),
        ("lines", f"{h.lines:,}"),
        ("restarts", str(h.restarts)),
        ("alerts fired", h.alerts),
        ("still firing", h.firing),
    ]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    if h.runs:
        swatches = " · ".join(
            f'<span class="swatch" style="background:{colour}"></span>{escape(label)}'
            for label, colour in h.runs
        )
        items += f"<dt>{'runs' if len(h.runs) > 1 else 'drawn as'}</dt><dd>{swatches}</dd>"
    return (
        f'<section class="run"><h2>{escape(h.source)}</h2>'
        f'<p class="verdict">{escape(h.verdict)}</p><dl>{items}</dl></section>'
    )


def when_cell(event: AlertEvent, where: Place | None) -> tuple[str, str]:
    """An event's time and how it is known: its line's own, else the last timestamp before
    it (the engine's `ts_from_line` label, else the report's own carry), marked; at the end
    of a file, said so."""
    carried = event.labels.get("ts_from_line")
    ts, line = event.ts, int(carried) if carried and carried.isdigit() else None
    if ts is None and where is not None:
        ts, line = where.ts, where.ts_line
    if ts is None and where is not None and not where.looked_up:
        return "", "its line came too long before the alert to look up the time before it"
    if ts is None:
        return "", "no timestamp in the log before this line"
    text = ts.isoformat(sep=" ", timespec="seconds")
    if event.ts is not None and carried is None:
        return text, ""
    at_end = where is not None and where.at_end
    note = f"time of line {line}" if line is not None else "the last time before it"
    return text, ("at end of file, " if at_end else "") + note


TABLE_HEAD = ("time", "severity", "status", "rule", "where", "summary", "fix", "log line")
_CELLS = ("ts", "sev", "status", "rule", "where", "summary", "fix", "text")


def alert_table(events: Sequence[AlertEvent], places: Mapping[int, Place] | None = None) -> str:
    """Every alert event: when, severity, status, rule, where, summary, fix and the log line."""
    if not events:
        return '<p id="no-alerts">No alerts.</p>'
    rows = [alert_row(e, (places or {}).get(id(e))) for e in events[:TABLE_CAP]]
    more = ""
    if len(events) > TABLE_CAP:
        more = f"{len(events) - TABLE_CAP:,} more alert events are not listed"
    return table(rows, more)


def alert_row(event: AlertEvent, where: Place | None) -> str:
    """One event's row of the alert table."""
    when, how = when_cell(event, where)
    status = f"{event.status} ({event.reason})" if event.reason else str(event.status)
    cells = (
        when,
        event.severity.label,
        status,
        event.rule,
        f"{event.source}:{event.line}",
        event.summary,
        event.fix or "",
        event.text,
    )
    return row(cells, how, f"alert {event.severity.label} {event.status}")


def row(cells: Sequence[str], how: str, classes: str, attrs: str = "") -> str:
    """A table row of `cells` (in `TABLE_HEAD`'s order); `how`: the time cell's note."""
    tds = "".join(
        f'<td class="{c}">{escape(str(v))}'
        + (f"<small>{escape(how)}</small>" if c == "ts" and how else "")
        + "</td>"
        for c, v in zip(_CELLS, cells, strict=True)
    )
    return f'<tr class="{escape(classes)}"{attrs}>{tds}</tr>'


def table(rows: Sequence[str], more: str = "") -> str:
    """The alert table of `rows`; `more`: what is left out, said under it."""
    head = "".join(f"<th>{c}</th>" for c in TABLE_HEAD)
    note = (
        f'<p id="more-alerts">{escape(more)}: '
        "<code>logwatch replay --format jsonl</code> prints them all.</p>"
        if more
        else ""
    )
    return (
        f'<table class="alerts"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
        + note
    )


def page(
    title: str,
    headers: Sequence[RunHeader],
    charts: Sequence[str],
    events: Sequence[AlertEvent],
    note: str,
    places: Mapping[int, Place] | None = None,
    actions_html: str = "",
    *,
    top: str = "",
    table_html: str | None = None,
) -> str:
    """The whole report as one HTML document (`actions_html`: the action rows, if any; `top`:
    what comes under the title, before the headers; `table_html`: the alert table, when not
    one row per event)."""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        f"<h1>{escape(title)}</h1>{top}<p>{escape(note)}</p>"
        + "".join(header_html(h) for h in headers)
        + '<h2>Plots</h2><p class="controls"><label><input type="checkbox" id="logscale"> '
        "log scale (loss, gradient norm, learning rate, throughput)</label> · "
        "each run its own colour, named in the legend · "
        "NaN: red dot on the bottom axis · +Inf: red triangle at the top · grey bands: restarts · "
        "yellow: stalls · orange: queue starvation</p>"
        + "".join(charts)
        + "<h2>Alerts</h2>"
        + (alert_table(events, places) if table_html is None else table_html)
        + actions_html
        + f"<script>{SCRIPT}</script></body></html>"
    )
