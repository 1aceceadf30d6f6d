"""A wheel built from the checkout carries the built-in rule packs and their tests (the top-level
`rules/`), and logwatch run from that wheel's files lists the same rules as from the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from logwatch.cli import cli

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"

_LIST = "from logwatch.cli import main; main(['rules', 'list', '--format', 'json'])"


def _rows(output: str, packs: Path) -> list[dict[str, Any]]:
    """`rules list --format json` rows, each pack named relative to the folder it came from."""
    rows = json.loads(output)
    for row in rows:
        pack = Path(row["pack"])
        assert pack.parent == packs, row  # loaded from there, not from somewhere else
        row["pack"] = pack.name
    return list(rows)


def test_a_wheel_carries_the_packs_and_lists_the_same_rules(tmp_path: Path) -> None:
    """`pip wheel .` puts every file of `rules/` under `logwatch/rules/packs/`; logwatch
    imported from the unpacked wheel (the checkout out of reach) loads its packs from there,
    and `rules list` gives the same rows as in the checkout."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("logwatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.startswith("logwatch/rules/packs/")}
        archive.extractall(tmp_path / "site")
    expected = {f"logwatch/rules/packs/{p.name}" for p in RULES.iterdir() if p.is_file()}
    assert shipped == expected
    assert any(name.endswith(".test.toml") for name in shipped)

    # A fresh interpreter in an empty folder, the unpacked wheel first on its path: the
    # checkout's own `logwatch` (an editable install) is not the one imported.
    env = {k: v for k, v in os.environ.items() if k not in {"LOGWATCH_CONFIG", "PYTHONPATH"}}
    env |= {"PYTHONPATH": str(tmp_path / "site"), "XDG_CONFIG_HOME": str(tmp_path)}
    listed = subprocess.run(
        [sys.executable, "-c", _LIST],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    installed = _rows(listed.stdout, tmp_path / "site" / "logwatch" / "rules" / "packs")

    here = CliRunner().invoke(cli, ["rules", "list", "--format", "json"], env=env)
    assert here.exit_code == 0, here.output
    assert installed == _rows(here.output, RULES)
    assert len(installed) > 20
