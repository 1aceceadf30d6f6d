"""The `[[action]]` config tables, checked like every table: `file:line: what is wrong`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from logwatch.alerts import AlertEvent, Severity, Status
from logwatch.tablereader import TableReader, show

ACTION_KEYS = {"name", "on", "min_severity", "when", "after", "run", "timeout", "max_per_hour"}
ACTION_KEYS |= {"dry_run", "button"}
PLACEHOLDERS = ("rule", "severity", "source", "line", "step", "run", "pid", "fingerprint")
"""`{name}` in a `run` element; plus `{env:NAME}`."""
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
"""A doubled brace (a literal one), a placeholder, or a lone brace (an error)."""
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
ACTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """One `[[action]]`: which alerts run which argv, when, how often, how long."""

    name: str
    on: tuple[str, ...]  # rule ids, or "*" for every rule
    run: tuple[str, ...]
    min_severity: Severity = Severity.INFO
    when: Status = Status.FIRING
    after_s: float = 0.0
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_per_hour: int | None = None
    dry_run: bool = False
    line: int = 0  # of its `[[action]]` header in the config
    button: bool = False  # a "Stop run" button on Slack alert messages runs it once

    def matches(self, event: AlertEvent) -> bool:
        """Whether this event (its rule, severity and status) calls for this action."""
        return (
            event.status == self.when
            and event.severity >= self.min_severity
            and ("*" in self.on or event.rule in self.on)
        )


def placeholder_names(element: str) -> list[str]:
    """The placeholders in one argv element (`env:NAME` included), in order; ValueError on a
    lone brace or an unknown name."""
    names = []
    for match in PLACEHOLDER.finditer(element):
        text = match.group()
        if text in ("{{", "}}"):
            continue
        name = match.group(1)
        if name is None:
            raise ValueError(
                f"a lone {text!r} in {element!r} (write {text * 2} for a literal brace)"
            )
        if name.startswith("env:"):
            if not ENV_NAME.match(name[4:]):
                raise ValueError(f"{{{name}}}: {name[4:]!r} is not an environment variable name")
        elif name not in PLACEHOLDERS:
            known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            raise ValueError(
                f"unknown placeholder {{{name}}} (expected one of: {known}, {{env:NAME}})"
            )
        names.append(name)
    return names


def read_actions(reader: TableReader, items: Any) -> tuple[ActionSpec, ...]:
    """Every `[[action]]` table of a config, checked."""
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise reader.fail(
            reader.key_line(None, "action"), "'action' must be [[action]] tables (an array)"
        )
    lines = _headers(reader.lines)
    specs = [
        _Action(reader, lines[i] if i < len(lines) else 1).read(t) for i, t in enumerate(items)
    ]
    seen: dict[str, int] = {}
    for spec in specs:
        if spec.name in seen:
            raise reader.fail(
                spec.line,
                f"[[action]] name {spec.name!r} is already used at line {seen[spec.name]} "
                "(each action needs its own name: its runs are counted and journaled by it)",
            )
        seen[spec.name] = spec.line
    return tuple(specs)


def _headers(lines: Sequence[str]) -> list[int]:
    """The line of each `[[action]]` header, in order."""
    header = re.compile(r"^\s*\[\[\s*\"?action\"?\s*\]\]")
    return [number for number, line in enumerate(lines, 1) if header.match(line)]


class _Action:
    """Reads one `[[action]]` table; its key lines are searched from its header on."""

    def __init__(self, reader: TableReader, header: int) -> None:
        self.reader, self.header = reader, header

    def at(self, key: str) -> int:
        return self.reader.entry_key_line(self.header, key)

    def fail(self, key: str | None, message: str) -> Exception:
        return self.reader.fail(self.at(key) if key else self.header, f"[[action]] {message}")

    def typed(self, data: Mapping[str, Any], key: str, kind: type, default: Any) -> Any:
        if key not in data:
            return default
        value = data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(key, f"{key!r} must be a {kind.__name__}, got {show(value)}")
        return value

    def strings(self, data: Mapping[str, Any], key: str, example: str) -> tuple[str, ...]:
        value = data.get(key)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            got = "nothing" if value is None else show(value)
            raise self.fail(
                key, f"{key!r} must be a non-empty list of strings, e.g. {example}; got {got}"
            )
        return tuple(value)

    def duration(self, data: Mapping[str, Any], key: str, default: float) -> float:
        from logwatch.durations import parse_duration

        text = self.typed(data, key, str, None)
        if text is None:
            return default
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise self.fail(key, f"{key!r}: {exc}") from None

    def read(self, data: Mapping[str, Any]) -> ActionSpec:
        for key in data:
            if key not in ACTION_KEYS:
                raise self.fail(
                    key, f"unknown key {key!r} (expected one of: {', '.join(sorted(ACTION_KEYS))})"
                )
        name = self.typed(data, "name", str, None)
        if name is None or not ACTION_NAME.match(name):
            raise self.fail(
                "name" if name is not None else None,
                "needs a 'name' of letters, digits, '.', '_' or '-' (e.g. \"stop-diverged-run\"), "
                f"got {show(name)}",
            )
        on = self.strings(data, "on", '["nan-loss"] or ["*"]')
        run = self.strings(data, "run", '["scancel", "{env:SLURM_JOB_ID}"]')
        for element in run:
            try:
                placeholder_names(element)
            except ValueError as exc:
                raise self.fail("run", f"{name}: 'run': {exc}") from None
        severity = self.typed(data, "min_severity", str, "info")
        try:
            min_severity = Severity.parse(severity)
        except ValueError as exc:
            raise self.fail("min_severity", f"{name}: {exc}") from None
        when = self.typed(data, "when", str, "firing")
        if when not in set(Status):
            raise self.fail("when", f"{name}: 'when' must be firing or resolved, got {when!r}")
        timeout = self.duration(data, "timeout", DEFAULT_TIMEOUT_S)
        if timeout <= 0:
            raise self.fail("timeout", f"{name}: 'timeout' must be more than 0s")
        cap = self.typed(data, "max_per_hour", int, None)
        if cap is not None and cap < 1:
            raise self.fail(
                "max_per_hour",
                f"{name}: 'max_per_hour' must be 1 or more (remove the action to turn it off)",
            )
        return ActionSpec(
            name=name,
            on=on,
            run=run,
            min_severity=min_severity,
            when=Status(when),
            after_s=self.duration(data, "after", 0.0),
            timeout_s=timeout,
            max_per_hour=cap,
            dry_run=self.typed(data, "dry_run", bool, False),
            line=self.header,
            button=self.typed(data, "button", bool, False),
        )
