"""The report of a fleet (every rank's log of one run): the verdict at the top, the ranks x
time strip, the alerts in time order with each symptom many ranks printed as one row (the
folding of `logwatch.fleet.render`, as the terminal's timeline has it), and the charts of a
few ranks' files only (the culprit's and the lowest rank's), not one block per file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

from logwatch.drivers.layout import layout_pattern, path_identity
from logwatch.drivers.replay import ReplayResult
from logwatch.drivers.verdict import Fleet
from logwatch.fleet.render import Entry, entries
from logwatch.redact import redact
from logwatch.report.collect import Place
from logwatch.report.page import TABLE_CAP, alert_row, row, table
from logwatch.words import counted

CHARTED_FILES = 4
"""A fleet's files whose charts are drawn: the culprit's and the lowest rank's, at most this many."""


def by_path(paths: Sequence[str], layout: str | None) -> bool:
    """Whether `paths` are a fleet's files by their names alone: two or more files whose paths
    name two or more writers (ranks, local ranks or hosts) of a known layout or `layout`."""
    if len(paths) < 2:
        return False
    pattern = layout_pattern(layout) if layout else None
    writers = set()
    for path in paths:
        found = path_identity(path, pattern)
        if (found.host, found.rank, found.local) != (None, None, None):
            writers.add((found.host, found.rank, found.local))
            if len(writers) >= 2:
                return True
    return False


def title(names: Sequence[str], fleet: Fleet) -> str:
    """`logwatch report: /logs/run-1234: 256 ranks on 32 hosts`."""
    try:  # as given (`run/`), unless relative and absolute paths are mixed
        folder = os.path.commonpath(names) if len(names) > 1 else "".join(names)
    except ValueError:
        folder = os.path.commonpath([os.path.abspath(p) for p in names])
    size = f"{counted(len(fleet.ranks), 'rank')} on {counted(len(fleet.hosts), 'host')}"
    return f"logwatch report: {redact(folder)}: {size}"


def verdict_html(fleet: Fleet) -> str:
    """Each verdict (one per failure) as a box: its summary, then rank, host, cause, basis and
    victims; or a line saying that no rank's failure took the others down."""
    if not fleet.verdicts:
        return (
            '<section class="verdict-box" id="verdict"><p class="root-cause">No root cause named: '
            "the ranks did not fail as a crowd (each alert is in the table).</p></section>"
        )
    out = []
    for n, verdict in enumerate(fleet.verdicts, 1):
        anchor = "verdict" if n == 1 else f"verdict-{n}"  # one per torchrun attempt
        items = "".join(
            f"<dt>{key}</dt><dd>{escape(verdict.labels.get(key, '-'))}</dd>"
            for key in ("rank", "host", "cause", "basis", "victims")
        )
        out.append(
            f'<section class="verdict-box" id="{anchor}"><p class="root-cause">Root cause: '
            f"{escape(verdict.summary)}</p><dl>{items}</dl></section>"
        )
    return "".join(out)


def charted(result: ReplayResult, fleet: Fleet, cap: int = CHARTED_FILES) -> dict[str, str]:
    """The files whose charts a fleet's report draws, in file order, with their legend names:
    those with step lines of the culprit's rank, then of the lowest rank (where only rank 0
    logs the loss, its file)."""
    if result.facts is None:
        return {}
    who = result.facts.who()
    stepped = {s: who.rank_of(s, None, None) for s, st in result.stats.items() if st.steps_seen}
    culprits = {int(v.labels["rank"]) for v in fleet.verdicts if v.labels.get("rank", "").isdigit()}
    ranked = [r for r in stepped.values() if r is not None]
    lowest = min(ranked) if ranked else None
    hosts = {v.labels.get("host") for v in fleet.verdicts} - {None}
    picked = [s for s, r in stepped.items() if r is not None and r in culprits]
    # a node's file of several ranks (SLURM's): the culprit's host's
    picked += [s for s, r in stepped.items() if r is None and who.host_of(s, None, None) in hosts]
    picked += [s for s, r in stepped.items() if lowest is not None and r == lowest]
    if not picked and stepped:  # neither rank nor host known from the files: the first
        picked = [next(iter(stepped))]
    out = {}
    for source in list(dict.fromkeys(picked))[:cap]:
        rank = stepped[source]
        host = who.host_of(source, rank, None)
        words = [f"rank {rank}" if rank is not None else "ranks"]
        words[0] += f" on {host}" if host else ""
        words.append(Path(source).name)
        if rank in culprits or (rank is None and host in hosts):
            words.append("culprit's" if rank is None else "culprit")
        out[source] = redact(" · ".join(words))
    return out


def fleet_table(result: ReplayResult, fleet: Fleet, places: Mapping[int, Place]) -> tuple[str, int]:
    """The alerts in time order, the verdicts first, each symptom many ranks printed one row;
    and how many rows that is (before the cap)."""
    rows: list[str] = []
    for entry in entries(result, fleet):
        if entry.folded is None:
            rows.extend(alert_row(e, places.get(id(e))) for e in entry.events)
        else:
            rows.append(_folded_row(entry))
    if not rows:
        return '<p id="no-alerts">No alerts.</p>', 0
    more = f"{len(rows) - TABLE_CAP:,} more rows are not listed" if len(rows) > TABLE_CAP else ""
    return table(rows[:TABLE_CAP], more), len(rows)


def _folded_row(entry: Entry) -> str:
    """One row for a symptom many ranks printed: when it began, its text, the first one's
    fix and line."""
    first = entry.events[0]
    files = len({e.source for e in entry.events})
    when = entry.ts.isoformat(sep=" ", timespec="seconds") if entry.ts is not None else ""
    how = "" if entry.ts is not None else "no timestamp in these lines"
    cells = (
        when,
        first.severity.label,
        str(first.status),
        first.rule,
        f"{counted(len(entry.events), 'alert')} in {counted(files, 'file')}",
        entry.folded or "",
        first.fix or "",
        f"{Path(first.source).name}:{first.line}: {first.text}",
    )
    attrs = f' data-folded="{len(entry.events)}"'
    return row(cells, how, f"alert folded {first.severity.label} {first.status}", attrs)
