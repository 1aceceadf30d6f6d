"""`logwatch test` files: TOML that states what alerts a log must give, read with `file:line`
errors (an unknown key is an error: a typo must not make a test pass)."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logwatch.alerts import Status
from logwatch.errors import LogwatchError, RuleTestError
from logwatch.rules.loader import TEST_SUFFIX, RuleSpec, builtin_rules_dir, load_rules

_KEY = re.compile(r"^\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")
_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?")
_TOP_KEYS = ("rule_packs", "test")
_TEST_KEYS = ("name", "input", "input_file", "blocks", "strict", "expect")
_EXPECT_KEYS = ("rule", "status", "line", "summary_contains", "labels")


@dataclass(frozen=True, slots=True)
class Expectation:
    """One alert event a test expects: rule, status and line, maybe a summary part and labels."""

    rule: str
    status: Status
    line: int
    summary_contains: str | None
    labels: Mapping[str, str]
    where: str  # file:line of its [[test.expect]] table


@dataclass(frozen=True, slots=True)
class RuleTest:
    """One `[[test]]`: an input log (inline or a file), its expected events, how to replay it."""

    name: str
    where: str  # file:line of its [[test]] table
    input_text: str | None
    input_file: Path | None
    expect: tuple[Expectation, ...]
    blocks: tuple[int, ...] = ()
    strict: bool = False


@dataclass(frozen=True, slots=True)
class RuleTestFile:
    """A test file: its tests and the rules they run against (its `rule_packs`, else built-in)."""

    path: Path
    rules: tuple[RuleSpec, ...]
    tests: tuple[RuleTest, ...]


def load_test_files(paths: Sequence[Path]) -> list[RuleTestFile]:
    """Read and check every test file before anything runs (a folder stands for its
    `*.test.toml` files, its subfolders' too); RuleTestError on the first problem."""
    return [load_test_file(path) for path in find_test_files(paths)]


def find_test_files(paths: Sequence[Path]) -> list[Path]:
    """The test files `paths` name: a file itself, a folder its `*.test.toml` files, sorted
    (`logwatch test rules/` runs every built-in pack's tests); RuleTestError for a folder
    without any."""
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            files.append(path)  # a missing file is said by load_test_file
            continue
        found = sorted(p for p in path.rglob(f"*{TEST_SUFFIX}") if p.is_file())
        if not found:
            raise RuleTestError(
                f"{path}: no *{TEST_SUFFIX} test files in this folder; name a test file, or "
                f"put each pack's tests beside it as PACK{TEST_SUFFIX}"
            )
        files += found
    return files


def load_test_file(path: Path) -> RuleTestFile:
    """Read one test file, load its rule packs, and check every key, path and rule id in it."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise RuleTestError(f"{path}: cannot read test file: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        line = match.group(1) if match else "1"
        raise RuleTestError(f"{path}:{line}: invalid TOML: {reason} (fix the syntax)") from None
    where = _Lines(path, text)
    _known_keys(data, _TOP_KEYS, where.top, "at the top of a test file")
    rules = _rules(path, data.get("rule_packs"), where)
    tables = data.get("test")
    if not isinstance(tables, list) or not tables:
        raise RuleTestError(
            f"{where.top(None)}: no [[test]] tables; add one with a name, an input and [[test.expect]] tables"
        )
    known = {spec.id for spec in rules}
    tests = [_test(path, table, _TestLines(where, i), known) for i, table in enumerate(tables)]
    seen: set[str] = set()
    for test in tests:
        if test.name in seen:
            raise RuleTestError(f"{test.where}: a second test named {test.name!r}; rename one")
        seen.add(test.name)
    return RuleTestFile(path, tuple(rules), tuple(tests))


def _rules(path: Path, raw: Any, where: _Lines) -> list[RuleSpec]:
    if raw is None:
        return load_rules([builtin_rules_dir()])
    at = where.top("rule_packs")
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw) or not raw:
        raise RuleTestError(f'{at}: rule_packs must be a list of paths, e.g. ["my-rules.toml"]')
    packs = []
    for name in raw:
        pack = path.parent / name
        if not pack.exists():
            raise RuleTestError(
                f"{at}: rule pack {name!r} not found ({pack}); paths are relative to this test file"
            )
        packs.append(pack)
    try:
        return load_rules(packs)
    except LogwatchError as exc:
        raise RuleTestError(f"{at}: {exc}") from None


def _test(path: Path, table: Any, at: _TestLines, known: set[str]) -> RuleTest:
    if not isinstance(table, dict):
        raise RuleTestError(f"{at.test(None)}: each test must be a table ([[test]])")
    _known_keys(table, _TEST_KEYS, at.test, "in a [[test]]")
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        raise RuleTestError(f'{at.test("name")}: a test needs a name (name = "...")')
    text, file = _input(path, table, at)
    blocks = table.get("blocks", [])
    if not isinstance(blocks, list) or not all(_positive_int(b) for b in blocks):
        raise RuleTestError(
            f"{at.test('blocks')}: blocks must be a list of block sizes in bytes, each 1 or more, e.g. [1, 7, 4096]"
        )
    strict = table.get("strict", False)
    if not isinstance(strict, bool):
        raise RuleTestError(f"{at.test('strict')}: strict must be true or false")
    raw_expect = table.get("expect", [])
    if not isinstance(raw_expect, list):
        raise RuleTestError(f"{at.test('expect')}: expect must be [[test.expect]] tables")
    expect = tuple(_expectation(e, at, j, known) for j, e in enumerate(raw_expect))
    if not expect and not strict:
        raise RuleTestError(
            f"{at.test(None)}: test {name!r} checks nothing; add [[test.expect]] tables, "
            "or strict = true to require that no rule fires"
        )
    return RuleTest(name, at.test(None), text, file, expect, tuple(blocks), strict)


def _input(path: Path, table: Mapping[str, Any], at: _TestLines) -> tuple[str | None, Path | None]:
    text, file = table.get("input"), table.get("input_file")
    if (text is None) == (file is None):
        raise RuleTestError(
            f'{at.test(None)}: a test needs exactly one of input = """...""" or input_file = "PATH"'
        )
    if text is not None:
        if not isinstance(text, str):
            raise RuleTestError(f"{at.test('input')}: input must be a string of log lines")
        return text, None
    if not isinstance(file, str):
        raise RuleTestError(f"{at.test('input_file')}: input_file must be a path (a string)")
    resolved = path.parent / file
    if not resolved.is_file():
        raise RuleTestError(
            f"{at.test('input_file')}: input_file {file!r} not found ({resolved}); "
            "the path is relative to this test file"
        )
    return None, resolved


def _expectation(table: Any, at: _TestLines, index: int, known: set[str]) -> Expectation:
    def where(key: str | None) -> str:
        return at.expect(index, key)

    if not isinstance(table, dict):
        raise RuleTestError(f"{where(None)}: each expectation must be a table ([[test.expect]])")
    _known_keys(table, _EXPECT_KEYS, where, "in a [[test.expect]]")
    for key in ("rule", "status", "line"):
        if key not in table:
            raise RuleTestError(f"{where(None)}: expectation is missing required key {key!r}")
    rule, status, line = table["rule"], table["status"], table["line"]
    if not isinstance(rule, str) or rule not in known:
        raise RuleTestError(
            f"{where('rule')}: unknown rule {rule!r} (loaded: {', '.join(sorted(known))}); "
            "check the id, or add its pack to rule_packs"
        )
    if status not in ("firing", "resolved"):
        raise RuleTestError(
            f'{where("status")}: status must be "firing" or "resolved", not {status!r}'
        )
    if not _positive_int(line):
        raise RuleTestError(f"{where('line')}: line must be a line number (1 or more)")
    summary = table.get("summary_contains")
    if summary is not None and not isinstance(summary, str):
        raise RuleTestError(f"{where('summary_contains')}: summary_contains must be a string")
    labels = table.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise RuleTestError(
            f'{where("labels")}: labels must be a table of strings, e.g. labels = {{ rank = "3" }}'
        )
    return Expectation(rule, Status(status), line, summary, dict(labels), where(None))


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _known_keys(table: Mapping[str, Any], allowed: Sequence[str], where: Any, context: str) -> None:
    for key in table:
        if key not in allowed:
            raise RuleTestError(
                f"{where(key)}: unknown key {key!r} {context} (expected: {', '.join(allowed)})"
            )


class _Lines:
    """Where the tables and keys of a test file are, for `file:line` errors.

    tomllib keeps no positions, so the text is scanned: table headers and `key =` lines outside
    multi-line strings (a log line in `input = \"\"\"...\"\"\"` is never taken for a key).
    """

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.headers: list[tuple[int, str]] = []  # (line, table name) in file order
        self.keys: list[tuple[int, str, int]] = []  # (line, key, index of its header or -1)
        for number, line in _code_lines(text):
            header = _HEADER.match(line)
            if header and not _KEY.match(line):
                self.headers.append((number, header.group(1)))
                continue
            key = _KEY.match(line)
            if key:
                self.keys.append((number, key.group(1).strip('"'), len(self.headers) - 1))

    def top(self, key: str | None) -> str:
        """`file:line` of a top-level key (of the first line when not found)."""
        return self.find(-1, key) or f"{self.path}:1"

    def find(self, header: int, key: str | None) -> str | None:
        """`file:line` of `key` under header number `header` (the header itself when key is None
        or not found there); None when nothing is known."""
        for number, name, owner in self.keys:
            if key is not None and owner == header and name == key:
                return f"{self.path}:{number}"
        if 0 <= header < len(self.headers):
            return f"{self.path}:{self.headers[header][0]}"
        return None


class _TestLines:
    """`file:line` for the keys of test number `index` and of its expectations."""

    def __init__(self, lines: _Lines, index: int) -> None:
        self.lines = lines
        tests = [i for i, (_, name) in enumerate(lines.headers) if name == "test"]
        self.header = tests[index] if index < len(tests) else -1
        end = tests[index + 1] if index + 1 < len(tests) else len(lines.headers)
        self.expects = [
            i
            for i in range(self.header + 1, end)
            if self.header >= 0 and lines.headers[i][1] == "test.expect"
        ]

    def test(self, key: str | None) -> str:
        return self.lines.find(self.header, key) or self.lines.top("test")

    def expect(self, index: int, key: str | None) -> str:
        header = self.expects[index] if index < len(self.expects) else -1
        return self.lines.find(header, key) or self.test("expect")


def _code_lines(text: str) -> list[tuple[int, str]]:
    """(number, line) of the lines that start outside a multi-line string."""
    out: list[tuple[int, str]] = []
    inside: str | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if inside is None:
            out.append((number, line))
        rest = line
        while True:
            if inside is None:
                found = [(rest.find(q), q) for q in ('"""', "'''") if q in rest]
                if not found:
                    break
                at, inside = min(found)
            else:
                at = rest.find(inside)
                if at < 0:
                    break
                inside = None
            rest = rest[at + 3 :]
    return out
