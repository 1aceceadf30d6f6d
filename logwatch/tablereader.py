"""The config file's line-aware reader: where a key or table is, typed values, durations, and
`file:line: what is wrong` errors. `config.py` reads the file's tables with it, and so does
`cluster_config.py` for `[alertmanager]` and `[prometheus]`; neither imports the other for it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from logwatch.durations import parse_duration
from logwatch.errors import ConfigError
from logwatch.redact import redact


class TableReader:
    """Reads the tables of one parsed TOML file, turning each problem into `file:line: what is
    wrong`: the part of the config reader every table's reader shares."""

    def __init__(self, file: Path, text: str, env: Mapping[str, str]) -> None:
        self.file, self.lines, self.env = file, text.splitlines(), env

    def header_line(self, table: str) -> int:
        """Line of `[table]` (dotted names allowed, quoted parts too)."""
        parts = [re.escape(p) for p in table.split(".")]
        pattern = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(rf'"?{p}"?' for p in parts) + r"\s*\]")
        for number, line in enumerate(self.lines, 1):
            if pattern.match(line):
                return number
        return 1

    def key_line(self, table: str | None, key: str) -> int:
        """Line of `key =` inside `[table]` (or at top level)."""
        start = self.header_line(table) if table else 0
        pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
        for number in range(start + 1, len(self.lines) + 1):
            line = self.lines[number - 1]
            if number > start + 1 and line.lstrip().startswith("[") and table:
                break
            if table is None and line.lstrip().startswith("["):
                break
            if pattern.match(line):
                return number
        return start or 1

    def entry_key_line(self, header: int, key: str) -> int:
        """The line of `key` in the table entry whose header is at line `header` (an
        `[[action]]`, a `[[webhook]]`), searched up to the next table; the header when absent."""
        pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
        for number in range(header + 1, len(self.lines) + 1):
            line = self.lines[number - 1]
            if line.lstrip().startswith("["):
                break
            if pattern.match(line):
                return number
        return header

    def fail(self, line: int, message: str) -> ConfigError:
        return ConfigError(redact(f"{self.file}:{line}: {message}"))

    def check_keys(self, table: str | None, data: Mapping[str, Any], allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                where = (
                    self.key_line(table, key)
                    if table or not isinstance(data[key], dict)
                    else self.header_line(key)
                )
                name = f"[{table}]" if table else "the top level"
                raise self.fail(
                    where,
                    f"unknown key {key!r} in {name} (expected one of: {', '.join(sorted(allowed))})",
                )

    def typed(
        self, table: str | None, data: Mapping[str, Any], key: str, kind: type, default: Any
    ) -> Any:
        if key not in data:
            return default
        value = data[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise self.fail(
                self.key_line(table, key),
                f"{key!r} must be a {_TYPE_NAMES.get(kind, kind.__name__)}, got {show(value)}",
            )
        return value

    def duration(self, table: str, data: Mapping[str, Any], key: str, default: float) -> float:
        text = self.typed(table, data, key, str, None)
        if text is None:
            return default
        try:
            return parse_duration(text)
        except ValueError as exc:
            raise self.fail(self.key_line(table, key), f"{key!r}: {exc}") from None

    def table(self, data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(self.key_line(None, key), f"{key!r} must be a table ([{key}])")
        return value


_TYPE_NAMES = {
    dict: "table",
    str: "string",
    bool: "boolean (true/false)",
    list: "list",
    int: "integer",
    float: "number",
}


def show(value: Any) -> str:
    return redact(repr(value))[:80]
