"""Rule packs: TOML files of `[[rule]]` tables, validated with `file:line:` errors."""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from logwatch.alerts import Severity
from logwatch.errors import RulesError
from logwatch.parse import SCHEMA
from logwatch.rules.log import RULE_TYPES, Rule, StreakRule

COMMON_KEYS = {
    "id",
    "type",
    "severity",
    "summary",
    "resolved_summary",
    "fix",
    "enabled",
    "description",
}
_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TEMPLATE_FIELDS = frozenset(
    {"rule", "severity", "source", "line", "step", "value", "text", "message", "ts", "labels"}
    | {name for name, dtype in SCHEMA.items() if name not in {"telemetry", "text"}}
)


@dataclass(frozen=True, slots=True)
class RuleSpec:
    """One rule as its pack defines it, compiled."""

    id: str
    type: str
    severity: Severity
    summary: str
    resolved_summary: str
    fix: str
    params: Mapping[str, Any]
    rule: Rule
    origin: str
    enabled: bool = True
    template_fields: frozenset[str] = field(default_factory=frozenset)
    replaces: str | None = None  # where the rule of the same id that this one replaced was


def builtin_rules_dir() -> Path:
    """The rule packs shipped with logwatch (`logwatch/rules/packs/`)."""
    packs = Path(__file__).resolve().parent / "packs"
    if not packs.is_dir():
        raise RulesError(f"{packs}: the built-in rule packs are missing; reinstall logwatch")
    return packs


def pack_files(path: Path) -> list[Path]:
    """The `.toml` files of a rule-pack path (a file or a folder), sorted."""
    if path.is_dir():
        return sorted(p for p in path.glob("*.toml") if p.is_file())
    if path.is_file():
        return [path]
    raise RulesError(f"{path}: no such rule pack file or folder")


def load_rules(
    paths: Iterable[Path], overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> list[RuleSpec]:
    """Load and compile rule packs in order; a later rule with the same id replaces an earlier one."""
    by_id: dict[str, RuleSpec] = {}
    for path in paths:
        for file in pack_files(path):
            for spec in load_pack(file, overrides or {}):
                earlier = by_id.get(spec.id)
                by_id[spec.id] = replace(spec, replaces=earlier.origin) if earlier else spec
    return [spec for spec in by_id.values() if spec.enabled]


def load_pack(file: Path, overrides: Mapping[str, Mapping[str, Any]]) -> list[RuleSpec]:
    """Parse one rule-pack file."""
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise RulesError(f"{file}: cannot read rule pack: {exc.strerror}") from None
    text = raw.decode("utf-8", "replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = match.group(1) if match else "1"
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise RulesError(f"{file}:{line}: invalid TOML: {reason}") from None
    unknown = set(data) - {"rule"}
    if unknown:
        key = sorted(unknown)[0]
        raise RulesError(
            f"{file}:{_line_of(text, key)}: unknown top-level key {key!r} (expected [[rule]] tables)"
        )
    tables = data.get("rule", [])
    if not isinstance(tables, list):
        raise RulesError(
            f"{file}:{_line_of(text, 'rule')}: 'rule' must be an array of tables ([[rule]])"
        )
    starts = _rule_starts(text)
    specs = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        start = starts[index] if index < len(starts) else 1
        locate = _Locator(file, text, start)
        spec = _compile(table, locate, overrides)
        if spec.id in seen:
            raise RulesError(f"{locate('id')}: duplicate rule id {spec.id!r} in this pack")
        seen.add(spec.id)
        specs.append(spec)
    return specs


class _Locator:
    """Turns a key of one `[[rule]]` table into `file:line` for error messages."""

    def __init__(self, file: Path, text: str, start: int) -> None:
        self.file, self.lines, self.start = file, text.splitlines(), start

    def __call__(self, key: str | None = None) -> str:
        if key is not None:
            pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
            for number in range(self.start, len(self.lines) + 1):
                line = self.lines[number - 1]
                if number > self.start and line.strip().startswith("["):
                    break
                if pattern.match(line):
                    return f"{self.file}:{number}"
        return f"{self.file}:{self.start}"


def _rule_starts(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1) if line.strip().startswith("[[rule]]")]


def _line_of(text: str, key: str) -> int:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"^\s*\[*\s*{re.escape(key)}\b", line):
            return i
    return 1


def _compile(
    table: Mapping[str, Any], at: _Locator, overrides: Mapping[str, Mapping[str, Any]]
) -> RuleSpec:
    for key in ("id", "type", "severity", "summary"):
        if key not in table:
            raise RulesError(f"{at()}: rule is missing required key {key!r}")
        if not isinstance(table[key], str):
            raise RulesError(f"{at(key)}: {key!r} must be a string")
    rule_id = table["id"]
    if not _ID.match(rule_id):
        raise RulesError(
            f"{at('id')}: rule id {rule_id!r} must be lower-case letters, digits and '-'"
        )
    kind = table["type"]
    if kind not in RULE_TYPES:
        raise RulesError(
            f"{at('type')}: unknown rule type {kind!r} (expected one of: {', '.join(sorted(RULE_TYPES))})"
        )
    rule_type = RULE_TYPES[kind]
    merged = {**table, **overrides.get(rule_id, {})}
    allowed = COMMON_KEYS | set(rule_type.params)
    for key in merged:
        if key not in allowed:
            raise RulesError(
                f"{at(key)}: unknown key {key!r} for a {kind} rule (expected: {', '.join(sorted(allowed))})"
            )
    params: dict[str, Any] = {}
    for name, (expected, required) in rule_type.params.items():
        if name not in merged:
            if required:
                raise RulesError(f"{at()}: {kind} rule {rule_id!r} needs parameter {name!r}")
            continue
        value = merged[name]
        if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
            raise RulesError(
                f"{at(name)}: {name!r} must be of type {expected.__name__}, got {value!r}"
            )
        params[name] = value
    try:
        severity = Severity.parse(merged["severity"])
        rule = rule_type.build(params)
        _check_columns(rule)
    except ValueError as exc:
        raise RulesError(f"{at()}: rule {rule_id!r}: {exc}") from None
    summary = str(merged["summary"])
    fields = _template_fields(summary, at("summary"), set(params))
    resolved = merged.get("resolved_summary", "resolved: " + summary)
    if not isinstance(resolved, str):
        raise RulesError(f"{at('resolved_summary')}: 'resolved_summary' must be a string")
    fields |= _template_fields(resolved, at("resolved_summary"), set(params))
    enabled = merged.get("enabled", True)
    if not isinstance(enabled, bool):
        raise RulesError(f"{at('enabled')}: 'enabled' must be true or false")
    return RuleSpec(
        id=rule_id,
        type=kind,
        severity=severity,
        summary=summary,
        resolved_summary=resolved,
        fix=str(merged.get("fix", "")),
        params=params,
        rule=rule,
        origin=at(),
        enabled=enabled,
        template_fields=fields,
    )


def _template_fields(template: str, where: str, params: set[str]) -> frozenset[str]:
    names = set()
    try:
        for _, name, spec, conversion in string.Formatter().parse(template):
            if name is None:
                continue
            if spec or conversion:
                raise RulesError(
                    f"{where}: {{{name}{'!' + conversion if conversion else ''}"
                    f"{':' + spec if spec else ''}}} in summary: placeholders take no format or "
                    f"conversion (values come formatted, e.g. nan, 2.41e-05); write {{{name}}}"
                )
            names.add(name)
    except ValueError as exc:
        raise RulesError(f"{where}: bad summary template: {exc}") from None
    allowed = TEMPLATE_FIELDS | params
    for name in names:
        if name not in allowed and not name.startswith("labels."):
            raise RulesError(
                f"{where}: unknown placeholder {{{name}}} in summary (expected one of: {', '.join(sorted(allowed))})"
            )
    return frozenset(names)


def _check_columns(rule: Rule) -> None:
    if isinstance(rule, StreakRule):
        try:
            columns = [rule.applies.alias("_applies"), rule.condition.alias("_condition")]
            if rule.value_column is not None:
                columns.append(pl.col(rule.value_column).alias("_value"))
            pl.DataFrame(schema=SCHEMA).select(columns)
        except pl.exceptions.PolarsError as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(f"expression refers to something the frame lacks: {first}") from None


def describe(specs: Sequence[RuleSpec]) -> list[str]:
    """One line per rule, for `logwatch rules`-style listings."""
    return [f"{s.id:24} {s.severity.label:8} {s.type:10} {s.origin}" for s in specs]
