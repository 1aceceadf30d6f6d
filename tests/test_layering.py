"""The layering contract (`[tool.importlinter]` in pyproject.toml) holds, breaks on a violation,
and no two modules import each other, even only for type checking or inside a function."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200"},  # one contract per line, however long its name
        capture_output=True,
        text=True,
        check=False,
    )


def _circles(graph: grimp.ImportGraph) -> list[frozenset[str]]:
    """The groups of modules that import each other (strongly connected, more than one)."""
    found: list[frozenset[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(module: str) -> None:  # Tarjan's algorithm; the graph is a few hundred modules
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in graph.modules or graph.is_module_squashed(imported):
                continue  # an external package
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(frozenset(group))

    for module in sorted(m for m in graph.modules if m.startswith("logwatch")):
        if module not in index:
            visit(module)
    return found


def test_lint_imports_keeps_every_contract() -> None:
    """`lint-imports` on the checkout: every contract kept, exit 0."""
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_violation_of_each_kind_breaks_its_contract(tmp_path: Path) -> None:
    """In a copy of the package, sources importing parse, parse importing the engine, the
    engine importing a driver, the engine importing click, a driver importing a sink, sources
    importing pynvml, a parse dialect importing a parse stage and the engine's state importing
    its batch planning each break their contract, and lint-imports exits 1."""
    shutil.copytree(ROOT / "logwatch", tmp_path / "logwatch")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    violations = {
        "sources/framing.py": "import logwatch.parse",
        "parse/general.py": "import logwatch.engine",
        "engine/evaluate.py": "import click\nimport logwatch.drivers.replay",
        "parse/dialects/generic.py": "import logwatch.parse.sparse",
        "engine/state.py": "import logwatch.engine.batch",
        "drivers/window.py": "import logwatch.sinks.render",
        "sources/sniff.py": "import pynvml",
    }
    for name, lines in violations.items():
        path = tmp_path / "logwatch" / name
        path.write_text(path.read_text() + "\n" + lines + "\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    broken = {
        line.removesuffix(" BROKEN").strip()
        for line in done.stdout.splitlines()
        if line.endswith(" BROKEN")
    }
    assert broken == {
        "the pipeline imports one way: sources <- parse <- engine + rules <- drivers <- sinks",
        "sources import nothing of parse",
        "parse imports nothing of the engine or the rules",
        "nothing below the drivers imports the drivers",
        "only the command line imports click",
        "only gpu/ imports pynvml",
        "parse's stages: block <- framing, general, shaped, timestamps <- ... <- dialects",
        "the engine's stages: core <- evaluate <- plan, gpu_rows <- batch <- state <- summary, lifecycle",
    }


def test_no_two_modules_import_each_other() -> None:
    """No import circle in logwatch/, counting imports made only for type checking and inside
    functions (each of those once hid a pair that must be read together)."""
    graph = grimp.build_graph("logwatch", include_external_packages=False)
    circles = _circles(graph)
    assert [sorted(c) for c in circles] == []
