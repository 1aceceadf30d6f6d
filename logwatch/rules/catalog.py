"""What `logwatch rules list` and `logwatch rules check` report: rows of loaded rules, and every
problem found in rule packs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logwatch.errors import RulesError
from logwatch.rules.loader import (
    RuleSpec,
    builtin_rules_dir,
    check_replace,
    compile_pack,
    describe_origin,
    load_rules,
    pack_files,
)

_COLUMNS = ("ID", "TYPE", "SEVERITY", "ORIGIN", "SUMMARY")


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One loaded rule as `rules list` shows it."""

    id: str
    type: str
    severity: str
    pack: str
    line: int
    summary: str

    def as_json(self) -> dict[str, Any]:
        """The row as a JSON object."""
        return {
            "id": self.id,
            "type": self.type,
            "severity": self.severity,
            "pack": self.pack,
            "line": self.line,
            "summary": self.summary,
        }


def rule_rows(specs: Sequence[RuleSpec]) -> list[RuleRow]:
    """One row per rule, in load order."""
    rows = []
    for spec in specs:
        # The loader writes origins as `file:line`; the line is after the last colon.
        pack, _, line = spec.origin.rpartition(":")
        rows.append(RuleRow(spec.id, spec.type, spec.severity.label, pack, int(line), spec.summary))
    return rows


def rule_table(rows: Sequence[RuleRow]) -> list[str]:
    """An aligned table of rows under a header."""
    cells = [_COLUMNS] + [(r.id, r.type, r.severity, f"{r.pack}:{r.line}", r.summary) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(_COLUMNS) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
        for row in cells
    ]


@dataclass(frozen=True, slots=True)
class PackCheck:
    """The outcome of checking rule packs: how many rules compile, every problem found, and a
    note per rule that replaces a built-in one (or one of an earlier pack)."""

    rules: int
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()


def check_packs(paths: Iterable[Path]) -> PackCheck:
    """Compile rule packs (files or folders of them), going on past problems to list them all:
    one per file that cannot be read, one per broken rule table, one per rule that takes the id
    of a built-in (or earlier) rule without `replace = true`; a note per rule that replaces one."""
    count, problems, notes = 0, [], []
    by_id = {spec.id: spec for spec in load_rules([builtin_rules_dir()])}
    for path in paths:
        try:
            files = pack_files(path)
        except RulesError as exc:
            problems.append(str(exc))
            continue
        for file in files:
            pack = compile_pack(file)
            count += len(pack.specs)
            problems += [str(problem) for problem in pack.problems]
            for spec in pack.specs:
                earlier = by_id.get(spec.id)
                by_id[spec.id] = spec
                if earlier is None and spec.replace:
                    problems.append(
                        f"{spec.origin}: rule {spec.id!r} says replace = true but no built-in "
                        "or earlier rule has that id (a typo?); fix the id or drop replace"
                    )
                if earlier is None or earlier.origin == spec.origin:
                    continue
                try:
                    check_replace(spec, earlier)
                except RulesError as exc:
                    problems.append(str(exc))
                    continue
                notes.append(
                    f"{spec.origin}: rule {spec.id!r} replaces {describe_origin(earlier.origin)}"
                )
    return PackCheck(count, tuple(problems), tuple(notes))
