"""What an alert says: its summary, from the rule's template and the row it happened at, and
the log message without its prefix."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from logwatch.alerts import RESOLVED, AlertEvent
from logwatch.redact import redact
from logwatch.rules.loader import RuleSpec
from logwatch.template import fill


def format_value(value: Any) -> str:
    """A value as summaries show it."""
    if value is None:
        return "?"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.6g}"
    if isinstance(value, list):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    return str(value)


class LabelText(str):
    """`{labels}` in a summary renders every label (`{labels.gpu}` is one of them)."""

    def __new__(cls, labels: Mapping[str, str]) -> LabelText:
        return super().__new__(cls, ", ".join(f"{k}={v}" for k, v in labels.items()))


def render_summary(
    event: AlertEvent,
    spec: RuleSpec,
    row: Mapping[str, Any],
    *,
    value_format: Callable[[Any], str] = format_value,
) -> str:
    """The rule's summary template (or its resolved one) filled from the event and its row; a
    placeholder with no value shows `?`, or leaves out the `[?...]` clause it is in."""
    fields: dict[str, Any] = {name: _shown(value) for name, value in row.items()}
    fields.update({name: _shown(value) for name, value in spec.params.items()})
    fields.update(
        rule=spec.id,
        severity=spec.severity.label,
        source=event.source,
        line=str(event.line),
        step=_shown(event.step),
        value=None if event.value is None else value_format(event.value),
        labels=LabelText(event.labels),
        message=log_message(str(row.get("text") or "")),
    )
    template = spec.resolved_summary if event.status == RESOLVED else spec.summary
    return fill(template, fields, event.labels)


def _shown(value: Any) -> str | None:
    return None if value is None else format_value(value)


_LOG_PREFIX = re.compile(
    r"^\s*(?:\[[^\]]{1,40}\]:?\s*)*"  # [rank3]: [titan] ...
    r"(?:\[?\d{4}[-/]\d{2}[-/]\d{2}[ T][\d:.,]+(?:Z|[+-]\d{2}:?\d{2})?\]?\s*)?"  # a timestamp
    r"(?:[-|:]\s*)?(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b\s*)?"  # a level
    r"(?:[-|:]\s*)?(?:\[[\w.:-]{1,40}\]\s*)?"  # a logger tag: [telemetry]
)


def log_message(text: str, limit: int = 300) -> str:
    """A log line without its timestamp / level / logger prefix, cut to `limit` characters."""
    message = _LOG_PREFIX.sub("", text, count=1).strip() or text.strip()
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _summary(event: AlertEvent, spec: RuleSpec, row: Mapping[str, Any]) -> str:
    """The engine's summaries: the rule's template, redacted."""
    return redact(render_summary(event, spec, row))
