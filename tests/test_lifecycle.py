"""The alert lifecycle shared by the engine and the GPU monitor."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import pytest

from logwatch.alerts import FIRING, RESOLVED, AlertEvent, Severity
from logwatch.engine.lifecycle import Lifecycle
from logwatch.rules.loader import RuleSpec
from logwatch.rules.log import StallRule

T0 = datetime(2025, 1, 1, 12, 0, 0)
SPEC = RuleSpec(
    id="loss-nan",
    type="non-finite",
    severity=Severity.CRITICAL,
    summary="loss went {value} at line {line}",
    resolved_summary="loss is finite again",
    fix="lower the learning rate",
    params={},
    rule=StallRule(stall_after_s=1.0),
    origin="test",
)


def render(event: AlertEvent, spec: RuleSpec, row: Mapping[str, Any]) -> str:
    """A renderer that shows which template and row it was given."""
    template = spec.resolved_summary if event.status == RESOLVED else spec.summary
    return f"{template.format(value=event.value, line=event.line)} [{row['tag']}]"


def candidate(status: str, line: int, *, gpu: str = "0", ts: datetime | None = None) -> AlertEvent:
    """An unrendered transition of SPEC's alert on one GPU label."""
    return AlertEvent(
        rule=SPEC.id,
        severity=SPEC.severity,
        status=status,
        source="s.log",
        line=line,
        ts=T0 + timedelta(seconds=line) if ts is None else ts,
        step=line * 10,
        value=float(line),
        summary="",
        labels={"gpu": gpu},
    )


def test_fires_once_and_does_not_repeat_while_firing() -> None:
    """The first FIRING is emitted with a rendered summary; further FIRINGs give None."""
    alerts = Lifecycle(render)
    fired = alerts.step(candidate(FIRING, 3), SPEC, {"tag": "a"})
    assert fired is not None
    assert fired.summary == "loss went 3.0 at line 3 [a]"
    assert alerts.step(candidate(FIRING, 4), SPEC, {"tag": "b"}) is None
    assert list(alerts) == [fired]


def test_resolves_only_what_fires() -> None:
    """A RESOLVED with nothing firing is dropped; one that matches a firing alert ends it."""
    alerts = Lifecycle(render)
    assert alerts.step(candidate(RESOLVED, 1), SPEC, {"tag": "a"}) is None
    alerts.step(candidate(FIRING, 2, gpu="0"), SPEC, {"tag": "a"})
    assert alerts.step(candidate(RESOLVED, 3, gpu="1"), SPEC, {"tag": "a"}) is None
    resolved = alerts.step(candidate(RESOLVED, 727, gpu="0"), SPEC, {"tag": "b"})
    assert resolved is not None
    assert (resolved.status, resolved.line, resolved.step) == (RESOLVED, 727, 7270)
    assert resolved.summary == "loss is finite again [b] (firing for 12m05s, since line 2)"
    assert len(alerts) == 0
    assert alerts.step(candidate(RESOLVED, 728), SPEC, {"tag": "c"}) is None


def test_resolve_without_since_note_and_with_clocks_that_disagree() -> None:
    """note_since=False keeps the rendered summary; a resolve before its fire gives no duration."""
    quiet = Lifecycle(render, note_since=False)
    quiet.step(candidate(FIRING, 2), SPEC, {"tag": "a"})
    resolved = quiet.step(candidate(RESOLVED, 9), SPEC, {"tag": "b"})
    assert resolved is not None and resolved.summary == "loss is finite again [b]"
    noted = Lifecycle(render)
    noted.step(candidate(FIRING, 5), SPEC, {"tag": "a"})
    early = noted.step(candidate(RESOLVED, 6, ts=T0), SPEC, {"tag": "b"})
    assert early is not None and early.summary == "loss is finite again [b] (firing since line 5)"


def test_end_all_resolves_everything_firing_in_firing_order() -> None:
    """A restart ends every firing alert at its line, step cleared, and re-arms them."""
    alerts = Lifecycle(render)
    for gpu, line in (("1", 2), ("0", 3)):
        alerts.step(candidate(FIRING, line, gpu=gpu), SPEC, {"tag": "a"})
    ended = alerts.end_all(line=50, ts=T0, why="the run restarted at line 50")
    assert [(e.labels["gpu"], e.status, e.line, e.ts, e.step) for e in ended] == [
        ("1", RESOLVED, 50, T0, None),
        ("0", RESOLVED, 50, T0, None),
    ]
    assert {e.summary for e in ended} == {"loss-nan: ended, the run restarted at line 50"}
    assert len(alerts) == 0
    assert alerts.step(candidate(FIRING, 51), SPEC, {"tag": "a"}) is not None


def test_export_import_round_trip() -> None:
    """Firing alerts survive export -> JSON text -> import, and resolve afterwards as before."""
    alerts = Lifecycle(render)
    for gpu, line in (("1", 2), ("0", 3)):
        alerts.step(candidate(FIRING, line, gpu=gpu), SPEC, {"tag": "a"})
    saved = json.loads(json.dumps(alerts.export_json()))
    assert [item["labels"] for item in saved] == [{"gpu": "1"}, {"gpu": "0"}]
    restored = Lifecycle(render)
    restored.import_json(saved)
    assert list(restored) == list(alerts)
    assert restored.step(candidate(FIRING, 4, gpu="1"), SPEC, {"tag": "a"}) is None
    resolved = restored.step(candidate(RESOLVED, 5, gpu="0"), SPEC, {"tag": "b"})
    assert resolved is not None and resolved.summary.endswith("(firing for 2s, since line 3)")


def test_malformed_import_changes_nothing() -> None:
    """An import that fails leaves the firing alerts as they were."""
    alerts = Lifecycle(render)
    fired = alerts.step(candidate(FIRING, 2), SPEC, {"tag": "a"})
    good = alerts.export_json()
    bad = [good[0], {**good[0], "severity": "dire"}]
    with pytest.raises(ValueError, match="severity"):
        alerts.import_json(bad)
    assert list(alerts) == [fired]
