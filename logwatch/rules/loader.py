"""Rule packs: TOML files of `[[rule]]` tables, validated with `file:line:` errors."""

from __future__ import annotations

import re
import string
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from logwatch.alerts import Severity
from logwatch.errors import ConfigError, LogwatchError, RulesError
from logwatch.parse import SCHEMA
from logwatch.redact import redact
from logwatch.rules.base import Rule, Templates
from logwatch.rules.params import (
    Kind,
    Param,
    ParamError,
    WrongType,
    polars_accepts,
    polars_regex_checks_later,
)
from logwatch.rules.registry import RULE_TYPES
from logwatch.template import COUNT, pieces

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
    params: Mapping[str, Any]  # as the pack (or config) wrote them: summaries show them so
    rule: Rule
    origin: str
    enabled: bool = True
    template_fields: frozenset[str] = field(default_factory=frozenset)
    replaces: str | None = None  # where the rule of the same id that this one replaced was
    replace: bool = False  # the pack says `replace = true`: it may replace a rule of its id
    runbook_url: str = ""  # where its runbook lives (Alertmanager's `runbook_url` annotation)


PACKS_PACKAGE, PACKS_FOLDER = "logwatch.rules", "packs"
"""Where a wheel puts the repository's `rules/` folder (pyproject.toml's force-include)."""

TEST_SUFFIX = ".test.toml"
"""A pack's `logwatch test` file sits beside it (`rules/training.test.toml`): not a pack."""


def builtin_rules_dir() -> Path:
    """The rule packs shipped with logwatch: `logwatch/rules/packs/` inside an installed wheel,
    else, in a checkout or an editable install, the repository's `rules/` folder."""
    shipped = resources.files(PACKS_PACKAGE) / PACKS_FOLDER
    if isinstance(shipped, Path) and shipped.is_dir():
        return shipped
    root = Path(__file__).resolve().parents[2]
    checkout = root / "rules"
    if (root / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    raise RulesError(
        f"{shipped}: the built-in rule packs are missing (and {checkout} is not a checkout's "
        "rules/ folder); reinstall logwatch"
    )


def pack_files(path: Path) -> list[Path]:
    """The `.toml` files of a rule-pack path (a file, or a folder's packs, not its
    `*.test.toml` files), sorted."""
    if path.is_dir():
        return sorted(
            p for p in path.glob("*.toml") if p.is_file() and not p.name.endswith(TEST_SUFFIX)
        )
    if path.is_file():
        return [path]
    raise RulesError(f"{path}: no such rule pack file or folder")


@dataclass(frozen=True, slots=True)
class Overrides:
    """The config's `[rules.<id>]` tables, and `where(rule_id, key)`: the `file:line` of a table
    (key None) or of one key in it, for errors that point at the config."""

    tables: Mapping[str, Mapping[str, Any]]
    where: Callable[[str, str | None], str]


@dataclass(frozen=True, slots=True)
class CompiledPack:
    """One rule-pack file compiled: the rules that compile, one problem per broken rule table
    (or the file's own problem)."""

    file: Path
    specs: tuple[RuleSpec, ...]
    problems: tuple[LogwatchError, ...]


def load_rules(paths: Iterable[Path], overrides: Overrides | None = None) -> list[RuleSpec]:
    """Load and compile rule packs in order; a later rule with the id of an earlier one replaces
    it when it says `replace = true`, else RulesError (a pack named twice is read once)."""
    by_id: dict[str, RuleSpec] = {}
    for path in paths:
        for file in pack_files(path):
            for spec in load_pack(file, overrides):
                earlier = by_id.get(spec.id)
                if earlier is not None and earlier.origin == spec.origin:
                    continue
                if earlier is not None:
                    check_replace(spec, earlier)
                    spec = replace(spec, replaces=earlier.origin)
                by_id[spec.id] = spec
    if overrides is not None:
        for rule_id in overrides.tables:
            if rule_id not in by_id:
                raise ConfigError(
                    f"{overrides.where(rule_id, None)}: unknown rule {rule_id!r} in [rules.{rule_id}] (known: {', '.join(sorted(by_id))})"
                )
    return [spec for spec in by_id.values() if spec.enabled]


def check_replace(spec: RuleSpec, earlier: RuleSpec) -> None:
    """RulesError unless `spec`, which has the id of `earlier`, says `replace = true`."""
    if not spec.replace:
        raise RulesError(
            f"{spec.origin}: rule id {spec.id!r} is already taken by {describe_origin(earlier.origin)}; "
            "add `replace = true` to this [[rule]] to replace it, or give it another id"
        )


def describe_origin(origin: str) -> str:
    """The rule at `origin` (`file:line`): `the built-in rule at rules/training.toml:6`, or
    `the rule at my.toml:3`."""
    builtin = Path(origin.rpartition(":")[0]).parent == _builtin_dir_or_none()
    return f"the {'built-in ' if builtin else ''}rule at {origin}"


def _builtin_dir_or_none() -> Path | None:
    try:
        return builtin_rules_dir()
    except RulesError:
        return None


def load_pack(file: Path, overrides: Overrides | None = None) -> list[RuleSpec]:
    """Parse one rule-pack file; its first problem is raised."""
    pack = compile_pack(file, overrides)
    if pack.problems:
        raise pack.problems[0]
    return list(pack.specs)


def compile_pack(file: Path, overrides: Overrides | None = None) -> CompiledPack:
    """Compile every `[[rule]]` of one file, going on past broken ones to find all problems.
    A pack without overrides that compiled clean is compiled once per process for its name and
    bytes (`_compiled`): rules are stateless, and every test module loading the built-in packs
    again paid ~25 ms a load."""
    try:
        raw = file.read_bytes()
    except OSError as exc:
        return CompiledPack(
            file, (), (RulesError(f"{file}: cannot read rule pack: {exc.strerror}"),)
        )
    if overrides is not None:
        return _checked_pack(file, raw, overrides)
    pack = _COMPILED.get((file, raw))
    if pack is None:
        pack = _checked_pack(file, raw, None)
        if not pack.problems:  # a broken pack's problems are found afresh each time
            if len(_COMPILED) >= 64:
                _COMPILED.clear()
            _COMPILED[file, raw] = pack
    return pack


_COMPILED: dict[tuple[Path, bytes], CompiledPack] = {}
"""The packs `compile_pack` compiled clean without overrides, by their name and bytes."""


def _checked_pack(file: Path, raw: bytes, overrides: Overrides | None) -> CompiledPack:
    with polars_regex_checks_later() as regexes:
        try:
            pack: CompiledPack | None = _compile_pack(file, raw, overrides)
        except Exception:  # a builder given a regex polars refuses: said below, where it is
            pack = None
    if pack is not None and not pack.problems and polars_accepts(regexes):
        return pack
    # A problem, or a regex polars refuses: compiled again checking each regex where it is,
    # so the problems are those, in the order, that checking each one at once finds.
    return _compile_pack(file, raw, overrides)


def _compile_pack(file: Path, raw: bytes, overrides: Overrides | None) -> CompiledPack:
    try:
        text, tables, problems = _read_tables(file, raw)
    except RulesError as exc:
        return CompiledPack(file, (), (exc,))
    starts = _rule_starts(text)
    specs: list[RuleSpec] = []
    seen: set[str] = set()
    for index, table in enumerate(tables):
        locate = _Locator(file, text, starts[index] if index < len(starts) else 1)
        try:
            spec = _compile(table, locate, overrides)
            if spec.id in seen:
                raise RulesError(f"{locate('id')}: duplicate rule id {spec.id!r} in this pack")
        except LogwatchError as exc:
            problems.append(exc)
            continue
        seen.add(spec.id)
        specs.append(spec)
    return CompiledPack(file, tuple(specs), tuple(problems))


def _read_tables(file: Path, raw: bytes) -> tuple[str, list[Any], list[LogwatchError]]:
    """The text and `[[rule]]` tables of a pack (its bytes `raw`), with a problem for unknown
    top-level keys; RulesError when there are no tables to read."""
    text = raw.decode("utf-8", "replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = match.group(1) if match else "1"
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise RulesError(f"{file}:{line}: invalid TOML: {reason}") from None
    tables = data.get("rule", [])
    if not isinstance(tables, list):
        raise RulesError(
            f"{file}:{_line_of(text, 'rule')}: 'rule' must be an array of tables ([[rule]])"
        )
    problems: list[LogwatchError] = [
        RulesError(
            f"{file}:{_line_of(text, key)}: unknown top-level key {key!r} (expected [[rule]] tables)"
        )
        for key in sorted(set(data) - {"rule"})
    ]
    return text, tables, problems


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


COMMON_PARAMS = {
    p.name: p
    for p in (
        Param("id", Kind.STRING, required=True),
        Param("type", Kind.STRING, required=True),
        Param("severity", Kind.STRING, required=True),
        Param("summary", Kind.STRING, required=True),
        Param("resolved_summary", Kind.STRING),
        Param("fix", Kind.STRING, default=""),
        Param("enabled", Kind.BOOL, default=True),
        Param("description", Kind.STRING),
        Param("runbook_url", Kind.STRING, default=""),
        Param("replace", Kind.BOOL, default=False),
    )
}
"""Keys every rule takes, whatever its type."""


def _compile(table: Any, at: _Locator, overrides: Overrides | None) -> RuleSpec:
    if not isinstance(table, dict):
        raise RulesError(f"{at()}: each 'rule' must be a table ([[rule]])")
    rule_id, kind = _identity(table, at)
    rule_type = RULE_TYPES[kind]
    override = overrides.tables.get(rule_id, {}) if overrides else {}
    blame = _Blame(at, rule_id, kind, override, overrides)
    merged = {**table, **override}
    values = _typed({**COMMON_PARAMS, **{p.name: p for p in rule_type.params}}, merged, blame)
    for param in rule_type.params:
        if param.required and values[param.name] is None:
            raise RulesError(f"{at()}: {kind} rule {rule_id!r} needs parameter {param.name!r}")
    try:
        severity = Severity.parse(values["severity"])
    except ValueError as exc:
        raise blame.rule("severity", str(exc)) from None
    runbook: str = values["runbook_url"]
    if runbook and not runbook.startswith(("https://", "http://")):
        raise blame.rule("runbook_url", f"runbook_url {runbook!r} is not an http(s) URL")
    typed = {p.name: values[p.name] for p in rule_type.params}
    try:
        rule = rule_type.build(typed)
    except ParamError as exc:
        raise blame.rule(exc.name or "type", str(exc)) from None
    given = {p.name: merged[p.name] for p in rule_type.params if p.name in merged}
    summary: str = values["summary"]
    given_resolved: str | None = values["resolved_summary"]
    resolved = "resolved: " + summary if given_resolved is None else given_resolved
    extra = rule_type.templates(typed) if rule_type.templates else Templates()
    allowed = set(given) | rule_type.fields | extra.fields
    fields = blame.template("summary", summary, allowed)
    fields |= blame.template("resolved_summary", resolved, allowed)
    for where, template in extra.summaries:
        fields |= blame.template(where, template, allowed, context=f"{where}: ")
    return RuleSpec(
        id=rule_id,
        type=kind,
        severity=severity,
        summary=summary,
        resolved_summary=resolved,
        fix=values["fix"],
        params=given,
        rule=rule,
        origin=at(),
        enabled=values["enabled"],
        template_fields=fields,
        runbook_url=runbook,
        replace=values["replace"],
    )


def _typed(
    declared: Mapping[str, Param], merged: Mapping[str, Any], blame: _Blame
) -> dict[str, Any]:
    """Every declared key's typed value (its default when not given); unknown keys refused."""
    for key in merged:
        if key not in declared:
            raise blame.unknown(key, sorted(declared))
    return {
        name: blame.validate(param, merged.get(name, param.default))
        for name, param in declared.items()
    }


def _identity(table: Mapping[str, Any], at: _Locator) -> tuple[str, str]:
    """The id and type of a rule table, once the keys every rule needs are there."""
    for key in ("id", "type", "severity", "summary"):
        if key not in table:
            raise RulesError(f"{at()}: rule is missing required key {key!r}")
        if not isinstance(table[key], str):
            raise RulesError(f"{at(key)}: {key!r} must be a string")
    rule_id, kind = table["id"], table["type"]
    if not _ID.match(rule_id):
        raise RulesError(
            f"{at('id')}: rule id {rule_id!r} must be lower-case letters, digits and '-'"
        )
    if kind not in RULE_TYPES:
        raise RulesError(
            f"{at('type')}: unknown rule type {kind!r} (expected one of: {', '.join(sorted(RULE_TYPES))})"
        )
    return rule_id, kind


class _Blame:
    """Errors about one rule's keys: at the pack's line, or, for a key the config overrides, at
    the config's line (with the rule's pack line after it)."""

    def __init__(
        self,
        at: _Locator,
        rule_id: str,
        kind: str,
        override: Mapping[str, Any],
        overrides: Overrides | None,
    ) -> None:
        self.at, self.rule_id, self.kind = at, rule_id, kind
        self.override, self.overrides = override, overrides

    def _config(self, key: str) -> str | None:
        if self.overrides is None or key not in self.override:
            return None
        return self.overrides.where(self.rule_id, key)

    def unknown(self, key: str, allowed: list[str]) -> LogwatchError:
        where = self._config(key)
        if where is not None:
            return ConfigError(
                f"{where}: unknown parameter {key!r} for rule {self.rule_id!r} (a {self.kind} rule takes: {', '.join(allowed)})"
            )
        return RulesError(
            f"{self.at(key)}: unknown key {key!r} for a {self.kind} rule (expected: {', '.join(allowed)})"
        )

    def validate(self, param: Param, raw: Any) -> Any:
        """The typed value of one key, or the error naming it."""
        try:
            return param.validate(raw)
        except WrongType as exc:
            where = self._config(param.name)
            if where is None:
                raise RulesError(f"{self.at(param.name)}: {exc}") from None
            raise ConfigError(
                f"{where}: {param.name!r} of rule {self.rule_id!r} must be {param.kind.noun}, got {redact(repr(raw))[:80]}"
            ) from None
        except ParamError as exc:
            raise self.rule(param.name, str(exc)) from None

    def rule(self, key: str, message: str) -> LogwatchError:
        """A problem with a key's value, reported at the rule (as the pack states it)."""
        where = self._config(key)
        if where is None:
            return RulesError(f"{self.at()}: rule {self.rule_id!r}: {message}")
        return ConfigError(
            f"{where}: with the [rules] overrides: {self.at()}: rule {self.rule_id!r}: {message}"
        )

    def template(
        self, key: str, template: str, params: set[str], context: str = ""
    ) -> frozenset[str]:
        """The placeholders of a summary template, or the error at its line (`context` says
        which template when it is not the key's own: `cases item 3: `)."""
        try:
            return _template_fields(template, params)
        except ValueError as exc:
            where = self._config(key)
            if where is None:
                raise RulesError(f"{self.at(key)}: {context}{exc}") from None
            raise ConfigError(
                f"{where}: with the [rules] overrides: {self.at()}: rule {self.rule_id!r}: {context}{exc}"
            ) from None


def _template_fields(template: str, params: set[str]) -> frozenset[str]:
    """The placeholders of a summary template; ValueError for one logwatch cannot fill."""
    names = set()
    pieces(template)  # a ValueError that says what is wrong with a clause
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"bad summary template: {exc}") from None
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if (spec and not spec.startswith(COUNT)) or spec == COUNT or conversion:
            raise ValueError(
                f"{{{name}{'!' + conversion if conversion else ''}"
                f"{':' + spec if spec else ''}}} in summary: placeholders take no format or "
                f"conversion (values come formatted, e.g. nan, 2.41e-05) but a count's noun, "
                f"{{{name}:count iteration}}; write {{{name}}}"
            )
        names.add(name)
    allowed = TEMPLATE_FIELDS | params
    for name in names:
        if name not in allowed and not name.startswith("labels."):
            raise ValueError(
                f"unknown placeholder {{{name}}} in summary (expected one of: {', '.join(sorted(allowed))})"
            )
    return frozenset(names)
