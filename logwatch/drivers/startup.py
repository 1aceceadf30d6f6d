"""The block `logwatch tail` prints on stderr when it starts: what it watches, with which rules,
where its state is, where alerts go. (The GPU side's NVML line follows it.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from logwatch.alerts import AlertEvent
from logwatch.config import Config
from logwatch.durations import format_duration
from logwatch.rules.loader import RuleSpec, builtin_rules_dir
from logwatch.sources.fileset import FileSet

SHOWN_FILES = 2
"""File names listed in the `watching` line before `+N`."""


def startup_lines(
    patterns: Sequence[str], specs: Sequence[RuleSpec], state_dir: Path, config: Config
) -> list[str]:
    """The block's lines, without the `logwatch: ` prefix."""
    return [
        watching_line(patterns),
        f"{rules_phrase(specs)}; state in {state_dir}",
        sinks_line(config),
    ]


def watching_line(patterns: Sequence[str]) -> str:
    """`watching 'glob' (3 files: a, b, +1)`; standard input by name."""
    if list(patterns) == ["-"]:
        return "watching standard input"
    shown = ", ".join("standard input" if p == "-" else repr(p) for p in patterns)
    files = FileSet([p for p in patterns if p != "-"]).expand()
    if not files:
        return f"watching {shown} (no files yet)"
    listed = ", ".join(files[:SHOWN_FILES])
    if len(files) > SHOWN_FILES:
        listed += f", +{len(files) - SHOWN_FILES}"
    return f"watching {shown} ({_count(len(files), 'file')}: {listed})"


def rules_phrase(specs: Sequence[RuleSpec]) -> str:
    """`16 rules from 4 packs (built-in)`, naming packs that are not built in."""
    packs = sorted({spec.origin.rsplit(":", 1)[0] for spec in specs})
    builtin = builtin_rules_dir()
    # The pack's folder, not a prefix: `rules-mine/` beside a checkout's `rules/` is the user's.
    own = [p for p in packs if Path(p).parent != builtin]
    where = ", ".join((["built-in"] if len(own) < len(packs) else []) + own) or "none"
    return f"{_count(len(specs), 'rule')} from {_count(len(packs), 'pack')} ({where})"


def sinks_line(config: Config) -> str:
    """`alerts to the terminal, Slack #C0123 (bot)`: every sink that is on."""
    sinks = ["the terminal"]
    if config.slack is not None:
        where = "" if config.slack.mode == "webhook" else f" #{config.slack.channel}"
        buttons = ", buttons" if config.slack.buttons is not None else ""
        sinks.append(f"Slack{where} ({config.slack.mode}{buttons})")
    if config.alertmanager is not None:
        sinks.append(f"Alertmanager {', '.join(config.alertmanager.urls)}")
    if config.webhooks:
        sinks.append(_count(len(config.webhooks), "webhook"))
    sinks += sorted(config.sink_tables - {"slack", "alertmanager", "webhook"})
    return "alerts to " + ", ".join(sinks)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def metrics_line(endpoint: str | None, textfile: Path | None) -> str:
    """`metrics on http://127.0.0.1:9808/metrics` and / or `metrics to DIR/logwatch.prom`."""
    where = [f"on {endpoint}"] if endpoint else []
    where += [f"to {textfile} (node-exporter textfile)"] if textfile else []
    return "metrics " + " and ".join(where)


def still_firing_line(firing: Sequence[AlertEvent], now: datetime) -> str:
    """`still firing: nan-loss since line 6 (16 s), ...`: what a resumed file left firing, with
    how long ago its line was written (when the line had a time)."""
    parts = []
    for event in firing:
        part = f"{event.rule} since line {event.line}"
        if event.ts is not None:
            ago = max(0.0, (now - event.ts).total_seconds())
            part += f" ({int(ago)} s)" if ago < 60 else f" ({format_duration(ago)})"
        parts.append(part)
    return "still firing: " + ", ".join(parts)
