"""ARCHITECTURE.md stays true: every folder and file it names exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import ROOT

# `logwatch/parse/`, `rules/*.toml`, `block.py` (in a row that names its folder), `tests/support/golden.py`
_NAMED = re.compile(r"`([\w./*-]+(?:/|\.py|\.toml|\.md))`")


def _named_paths(text: str) -> list[str]:
    return [name for name in _NAMED.findall(text) if "*" not in name]


def _exists(name: str, folders: list[Path]) -> bool:
    """A path from the root, or from a folder named on the same line (a table row's folder)."""
    return (ROOT / name).exists() or any((folder / name).exists() for folder in folders)


def test_every_path_architecture_names_exists() -> None:
    """Each backticked folder or file in ARCHITECTURE.md is in the checkout; a bare file name
    is looked up in the folders its own line names (a table row: its folder column)."""
    missing: list[str] = []
    for number, line in enumerate((ROOT / "ARCHITECTURE.md").read_text("utf-8").splitlines(), 1):
        names = _named_paths(line)
        folders = [ROOT / n for n in names if n.endswith("/")]
        folders += [ROOT / "logwatch" / n for n in names if n.endswith("/")]
        missing += [f"ARCHITECTURE.md:{number}: {n}" for n in names if not _exists(n, folders)]
    assert not missing, "\n".join(missing)


def test_the_check_sees_a_wrong_path() -> None:
    """The path reader finds folders, files and bare names, so a moved module would be seen."""
    line = "| lines | `logwatch/parse/` | `block.py`, `nowhere.py`, `rules/`, `no/such/dir/` |"
    names = _named_paths(line)
    assert names == ["logwatch/parse/", "block.py", "nowhere.py", "rules/", "no/such/dir/"]
    folders = [ROOT / "logwatch/parse/"]
    assert [n for n in names if not _exists(n, folders)] == ["nowhere.py", "no/such/dir/"]
