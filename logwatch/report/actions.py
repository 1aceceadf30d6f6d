"""The report's action rows: what the config's `[[action]]` would have done for the alerts of
the report's logs (the same plan as `replay --actions dry-run`; nothing is run)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logwatch.actions.sink import ActionOutcome


def action_table(actions: Sequence[ActionOutcome]) -> str:
    """One `action` row per outcome, under a heading that says nothing was run; empty without."""
    if not actions:
        return ""
    head = "".join(f"<th>{c}</th>" for c in ("time", "action", "outcome", "where", "what"))
    rows = []
    for a in actions:
        when = datetime.fromtimestamp(a.at).isoformat(sep=" ", timespec="seconds")
        cells = (when, a.action, a.outcome, f"{a.source}:{a.line}", a.message)
        tds = "".join(f"<td>{escape(str(v))}</td>" for v in cells)
        rows.append(f'<tr class="action {escape(a.outcome)}">{tds}</tr>')
    return (
        "<h2>Actions (dry run: nothing was run)</h2>"
        f'<table class="alerts actions"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
