"""An action's argv and environment for one alert: placeholders filled one element each, log
text only in `LOGWATCH_*` variables, every value masked by `redact`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from logwatch.actions.spec import PLACEHOLDER, ActionSpec
from logwatch.alerts import AlertEvent
from logwatch.redact import redact

WHY_NO_PID = "no `run start:` line with pid= in {source} so far"


@dataclass(frozen=True, slots=True)
class Filled:
    """The argv to run and the variables to add to its environment."""

    argv: tuple[str, ...]
    env: dict[str, str]


@dataclass(frozen=True, slots=True)
class Unfilled:
    """Why the action cannot run for this alert (a placeholder without a value)."""

    reason: str


def placeholder_values(
    event: AlertEvent, pid: int | None, env: Mapping[str, str]
) -> dict[str, str | None]:
    """Each placeholder's value for this alert (None: it has none); what came from the log
    (source, run) masked."""
    values: dict[str, str | None] = {
        "rule": event.rule,
        "severity": event.severity.label,
        "source": event.source,
        "line": str(event.line) if event.line else None,
        "step": None if event.step is None else str(event.step),
        "run": event.run,
        "pid": None if pid is None else str(pid),
        "fingerprint": event.fingerprint,
    }
    masked = {k: None if v is None else redact(v) for k, v in values.items()}
    # the operator's own environment, not log text: passed as set (the shown line is masked)
    masked.update({f"env:{name}": value for name, value in env.items()})
    return masked


def fill(
    spec: ActionSpec, event: AlertEvent, pid: int | None, env: Mapping[str, str]
) -> Filled | Unfilled:
    """The command for this alert, or why there is none: a placeholder with no value, or one
    that would make an element read as an option (a value starting with '-')."""
    values = placeholder_values(event, pid, env)
    argv = []
    for element in spec.run:
        filled = _fill_element(element, values, event)
        if isinstance(filled, Unfilled):
            return filled
        if filled.startswith("-") and not element.startswith("-"):
            return Unfilled(f"{element!r} would be {filled!r}, which reads as an option")
        argv.append(filled)
    return Filled(tuple(argv), action_env(event, pid))


def _fill_element(
    element: str, values: Mapping[str, str | None], event: AlertEvent
) -> str | Unfilled:
    """One argv element with its placeholders filled (never split, never parsed again)."""
    out, pos = [], 0
    for match in PLACEHOLDER.finditer(element):
        out.append(element[pos : match.start()])
        pos = match.end()
        if match.group() in ("{{", "}}"):
            out.append(match.group()[0])
            continue
        name = match.group(1)
        got = values.get(name)
        if not got:
            return Unfilled(_why_none(name, event))
        out.append(got)
    out.append(element[pos:])
    return "".join(out)


def _why_none(name: str, event: AlertEvent) -> str:
    if name == "pid":
        return "{pid} has no value: " + WHY_NO_PID.format(source=event.source)
    if name.startswith("env:"):
        return f"{{{name}}} has no value: ${name[4:]} is not set (or empty) for logwatch"
    if name == "run":
        return "{run} has no value: the log named no run (`run start: run_id=...`)"
    return f"{{{name}}} has no value for this alert"


def action_env(event: AlertEvent, pid: int | None) -> dict[str, str]:
    """The `LOGWATCH_*` variables: the alert, log text included, masked; absent values empty."""
    raw = {
        "LOGWATCH_RULE": event.rule,
        "LOGWATCH_SEVERITY": event.severity.label,
        "LOGWATCH_STATUS": str(event.status),
        "LOGWATCH_SOURCE": event.source,
        "LOGWATCH_LINE": str(event.line) if event.line else "",
        "LOGWATCH_STEP": "" if event.step is None else str(event.step),
        "LOGWATCH_RUN": event.run or "",
        "LOGWATCH_PID": "" if pid is None else str(pid),
        "LOGWATCH_SUMMARY": event.summary,
        "LOGWATCH_TEXT": event.text,
        "LOGWATCH_FINGERPRINT": event.fingerprint,
    }
    # An environment value cannot hold NUL; everything else reaches the command as it was.
    return {k: redact(v).replace("\x00", "\\x00") for k, v in raw.items()}
