"""The README's promises: its Python example runs as written, from the checkout."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.conftest import ROOT


def test_readme_python_example_runs() -> None:
    """The block after `<!-- python-example -->` runs and prints the first NaN alert."""
    text = (ROOT / "README.md").read_text("utf-8")
    match = re.search(r"<!-- python-example -->\n```python\n(.*?)```", text, re.S)
    assert match is not None, "README has no python example"
    out = subprocess.run(
        [sys.executable, "-c", match.group(1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("nan-loss firing 111 loss is nan at step 1403 (line 111)\n")
